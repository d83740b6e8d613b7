"""A real forward proxy for the tests: Debian's squid, run with a configuration of its own.

``make test`` installs squid (tools/ensure_squid.py). Without one these tests fail with a line
saying how to install it rather than skip: a proxy test that silently does not run proves
nothing.

The proxy listens on a free loopback port and writes one access-log line per transaction
(a CONNECT tunnel is one transaction, logged when it closes) with the fields the tests check:
the client's address, the method and URL, the status, and the local port of squid's own
connection to the server, which is the peer port the GitHub emulator records for each request
(``peer`` in ``/_fake/requests``). Every request the emulator saw whose peer port is one of
squid's went through the proxy; any other went around it. ``hosts`` are names only the proxy
resolves (from a hosts file of its own), so a client that went around the proxy could not even
find them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.waiting import WAIT, until_sync

SEARCH = "/usr/sbin:/usr/local/sbin"
LOG_FORMAT = "%ts.%03tu %>a:%>p %rm %ru %>Hs %<a:%<p %<lp %un"
FAKE_AUTH = "/usr/lib/squid/basic_fake_auth"  # any password; the user name is logged


def squid_binary() -> str:
    given = os.environ.get("RUNGAR_SQUID", "")
    path = os.pathsep.join(p for p in (os.environ.get("PATH", ""), SEARCH) if p)
    found = shutil.which(given) if given else shutil.which("squid", path=path)
    if found is None:
        pytest.fail(
            "no squid found: the proxy tests run Debian's squid. `make test` installs it as root "
            "(tools/ensure_squid.py); or run: sudo apt-get install -y --no-install-recommends "
            "squid (or set RUNGAR_SQUID to a squid binary)"
        )
    return found


@dataclass(frozen=True, slots=True)
class Transaction:
    """One access-log line."""

    client: str  # host:port of the connection to the proxy
    method: str
    url: str  # CONNECT: host:port
    status: int
    server: str  # host:port squid connected to ("-" when none)
    local_port: int  # squid's own port of that connection (0 when none)
    user: str  # the proxy user the client authenticated as ("-" when none)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Squid:
    """``squid -N`` on 127.0.0.1:``port``, in a folder of its own (squid drops root to its
    ``proxy`` user, so the folder is open to it)."""

    def __init__(self, hosts: dict[str, str] | None = None, *, auth: bool = False) -> None:
        self.binary = squid_binary()
        self.folder = Path(tempfile.mkdtemp(prefix="rungar-squid-", dir="/tmp"))
        self.folder.chmod(0o777)
        self.port = free_port()
        self.hosts = hosts or {}
        # With auth, every request must carry a proxy user name (Basic; squid's fake helper
        # takes any password), and 407 answers any without.
        self.auth = auth
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def access_log(self) -> Path:
        return self.folder / "access.log"

    def config(self) -> str:
        f = self.folder
        return f"""\
http_port 127.0.0.1:{self.port}
pid_filename {f}/squid.pid
logformat rungar {LOG_FORMAT}
access_log stdio:{f}/access.log rungar
cache_log {f}/cache.log
cache_store_log none
cache deny all
coredump_dir {f}
hosts_file {f}/hosts
pinger_enable off
{self._access()}
http_access deny all
visible_hostname rungar-test-proxy
shutdown_lifetime 0 seconds
"""

    def _access(self) -> str:
        if not self.auth:
            return "http_access allow localhost"
        return (
            f"auth_param basic program {FAKE_AUTH}\n"
            "auth_param basic children 1 startup=1 idle=1\n"
            "acl authenticated proxy_auth REQUIRED\n"
            "http_access allow localhost authenticated"
        )

    def start(self) -> None:
        (self.folder / "hosts").write_text(
            "".join(f"{address} {name}\n" for name, address in self.hosts.items())
        )
        (self.folder / "squid.conf").write_text(self.config())
        self.process = subprocess.Popen(
            [self.binary, "-N", "-f", str(self.folder / "squid.conf")],
            stdout=(self.folder / "squid.out").open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def accepting() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"squid exited at start:\n{self.output()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            except OSError:
                return False
            return True

        until_sync(accepting, "squid to accept connections")

    def output(self) -> str:
        parts = []
        for name in ("squid.out", "cache.log"):
            path = self.folder / name
            if path.exists():
                parts.append(path.read_text(errors="replace")[-4000:])
        return "\n".join(parts)

    def transactions(self) -> list[Transaction]:
        """Every request squid logged (connections that sent none, such as the start-up
        probe's, left out)."""
        if not self.access_log.exists():
            return []
        out = []
        for line in self.access_log.read_text().splitlines():
            fields = line.split()
            if len(fields) != 8:
                continue
            _, client, method, url, status, server, local, user = fields
            if method == "-":
                continue
            out.append(
                Transaction(
                    client,
                    method,
                    url,
                    int(status) if status.isdigit() else 0,
                    server,
                    int(local) if local.isdigit() else 0,
                    user,
                )
            )
        return out

    def stop(self) -> None:
        """Stop squid (it logs the tunnels still open as it closes them) and remove its folder."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def close_and_read(self) -> list[Transaction]:
        """Stop squid and return every transaction it logged (the folder stays for reading)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.transactions()
