"""Serving the dashboard on ``[host] dashboard_listen``, bounded like every listener.

The listener is rungar/web/bounded.py's: its own thread and loop, header, body and idle
timeouts, a connection cap that evicts idle connections first, so a flood of connections to the
dashboard's port does not slow runnerd. Reach follows ``metrics_listen``'s rule: plain HTTP on
loopback; beyond it TLS (``tls_cert``, ``tls_key``), and then a client certificate from
``tls_ca`` or the bearer token of ``token_file`` (:class:`runnerd.dashboard.app.Access`). On
loopback the token is runnerd's own (:func:`login_token`), which ``runnerctl dashboard`` reads
to print the login link.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rungar.web.bounded import BoundedHttpServer, Limits, bind
from runnerd.config import HostConfig, is_loopback
from runnerd.dashboard.app import app
from runnerd.dashboard.login import token_path
from runnerd.dashboard.source import DaemonSource

if TYPE_CHECKING:
    from runnerd.running import Daemon


def bind_dashboard(host: HostConfig) -> socket.socket:
    """Bind ``dashboard_listen`` now, so a port in use stops runnerd with its reason."""
    return bind(host.dashboard_listen, key="host.dashboard_listen")


def server_tls(host: HostConfig) -> tuple[ssl.SSLContext | None, str]:
    """The listener's TLS context (None on loopback) and the token a request must carry
    ("" when client certificates decide instead)."""
    if is_loopback(host.dashboard_listen):
        return None, login_token(host)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(host.tls_cert, host.tls_key)
    if host.tls_ca:
        context.load_verify_locations(host.tls_ca)
        context.verify_mode = ssl.CERT_REQUIRED
        return context, ""
    return context, Path(host.token_file).read_text().strip()


def login_token(host: HostConfig) -> str:
    """The loopback dashboard's token: kept in ``state_dir/dashboard.token`` (0600, the daemon's
    user), made once. Every local user reaches a loopback port, and the dashboard can change
    runnerd.toml, which says what runs as runnerd's user: only who can read that file, as
    ``runnerctl dashboard`` does for its login link, may use it."""
    path = token_path(host)
    try:
        found = path.read_text().strip()
    except FileNotFoundError:
        found = ""
    if found:
        return found
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


@dataclass
class Dashboard:
    server: BoundedHttpServer
    source: DaemonSource
    observing: asyncio.Task[None]

    @property
    def url(self) -> str:
        """Its address, without the token (``runnerctl dashboard`` prints that)."""
        return f"http{'s' if self.server.tls else ''}://{self.server.address}/"

    @property
    def port(self) -> int:
        return int(self.server.address.rpartition(":")[2])

    async def stop(self) -> None:
        self.observing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.observing
        await asyncio.to_thread(self.server.stop)


async def serve_dashboard(
    daemon: Daemon,
    config_path: str,
    sock: socket.socket,
    limits: Limits | None = None,
) -> Dashboard:
    host = daemon.config.host
    tls, token = server_tls(host)
    source = DaemonSource(daemon, config_path, asyncio.get_running_loop())
    server = BoundedHttpServer(app(source, token), sock, limits, name="dashboard", tls=tls)
    server.start()

    async def observe() -> None:
        clock = daemon.provider.clock
        while True:
            source.observe()
            await clock.sleep(daemon.config.host.sample_interval)

    return Dashboard(server, source, asyncio.create_task(observe()))
