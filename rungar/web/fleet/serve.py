"""Starting the fleet page: bound before the daemon starts anything (a port in use stops it
with its reason), served on a listener thread of its own with the limits every listener keeps.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rungar.clock import Clock
from rungar.config.model import DashboardConfig
from rungar.errors import ConfigError
from rungar.web.bounded import BoundedHttpServer, Limits, bind, engine_caller
from rungar.web.fleet.app import FleetApp
from rungar.web.fleet.feed import Feed, engine_read


@dataclass(frozen=True)
class Prepared:
    """The fleet page's socket, TLS and token, made before the daemon starts anything: a port
    in use or a certificate that does not load stops it with its reason."""

    sock: socket.socket
    tls: ssl.SSLContext | None
    token: str


def prepare_dashboard(config: DashboardConfig) -> Prepared | None:
    if not config.listen:
        return None
    tls, token = tls_context(config), read_token(config)
    return Prepared(bind(config.listen, key="dashboard.listen"), tls, token)


def tls_context(config: DashboardConfig) -> ssl.SSLContext | None:
    """The server's TLS, or None on loopback without a certificate (plain HTTP)."""
    if not config.cert_file:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.cert_file, config.key_file)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError([f"dashboard.tls.cert_file: cannot load {config.cert_file}: {e}"]) from e
    if config.client_ca_file:
        try:
            context.load_verify_locations(config.client_ca_file)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(
                [f"dashboard.tls.client_ca_file: cannot load {config.client_ca_file}: {e}"]
            ) from e
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def read_token(config: DashboardConfig) -> str:
    if not config.token_file:
        return ""
    try:
        token = Path(config.token_file).read_text().strip()
    except OSError as e:
        raise ConfigError(
            [f"dashboard.token_file: cannot read {config.token_file}: {e.strerror or e}"]
        ) from e
    if not token:
        raise ConfigError([f"dashboard.token_file: {config.token_file} is empty"])
    return token


def serve_dashboard(
    prepared: Prepared,
    config: DashboardConfig,
    control: Any,
    clock: Clock,
    *,
    limits: Limits | None = None,
) -> BoundedHttpServer:
    """Serve the fleet page on ``sock``; call on the engine's loop (it is the one the page's
    sampler asks). ``control`` is the daemon's Control, whose ``usage`` the Usage tab reads on
    a worker thread."""

    tls, token = prepared.tls, prepared.token
    feed = Feed(
        engine_read(control),
        engine_caller(asyncio.get_running_loop()),
        refresh=config.refresh,
        history=config.history,
        max_streams=config.max_streams,
    )

    app = FleetApp(feed, control.usage, token=token, secure=tls is not None, now=clock.now)
    server = BoundedHttpServer(
        app,
        prepared.sock,
        limits or Limits(max_connections=config.max_connections, max_body_bytes=16 * 1024),
        name="dashboard",
        tls=tls,
        background=feed.run,
    )
    server.start()
    return server


def dashboard_url(config: DashboardConfig, address: str) -> str:
    """The page's address, as a person would open it."""
    scheme = "https" if config.cert_file else "http"
    host, _, port = address.rpartition(":")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}/"
