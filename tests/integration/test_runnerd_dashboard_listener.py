"""runnerd's dashboard listener: a connection flood leaves runnerd answering; beyond loopback
it is TLS with a client certificate or the bearer token, as metrics_listen is.

runnerd serves its dashboard on the bounded listener (its own thread, the listener limits).
Hundreds of connections are opened to the dashboard's port and held, sending nothing; while
they are held, runnerctl's local API, a runner's creation and the dashboard itself must each
answer within 1 s: idle connections are evicted for a newcomer, and the daemon's loop never
serves them.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trustme
from runnerd.api import serve_api
from runnerd.config import parse_config
from runnerd.daemon import open_daemon
from runnerd.dashboard.server import Dashboard, bind_dashboard, login_token, serve_dashboard
from runnerd.running import Daemon

from rungar.model.machine import Created, CreateRequest
from rungar.model.runner_block import RunnerBlock
from rungar.web.bounded import Limits
from tests.e2e.test_daemon_flood import hold_connections
from tests.unit.test_runnerd_provider import FakeRuntime
from tests.waiting import WAIT

ANSWER_WITHIN = 1.0  # seconds: a deadline on each call, not a measurement
CONFIG = """
[host]
memory_max = "8G"
cpus = 4
state_dir = "{state}"
dashboard_listen = "127.0.0.1:0"

[profiles.node]
command = ["true"]
cpus = 1
memory = "1G"
slots = 4
"""


@pytest.fixture
async def served(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Daemon, Dashboard, Path]]:
    path = tmp_path / "runnerd.toml"
    text = CONFIG.format(state=tmp_path / "state")
    auth = getattr(request, "param", "")
    if auth:  # beyond loopback: TLS, and a token or client certificates
        pki = request.getfixturevalue("pki")
        more = f'token_file = "{pki}/token"' if auth == "token" else f'tls_ca = "{pki}/ca.pem"'
        text = text.replace(
            'dashboard_listen = "127.0.0.1:0"',
            f'dashboard_listen = "0.0.0.0:0"\ntls_cert = "{pki}/server.pem"\n'
            f'tls_key = "{pki}/server.key"\n{more}',
        )
    path.write_text(text)
    config = parse_config(path.read_text(), str(path))
    daemon = await open_daemon(config, runtime=FakeRuntime(), config_text=path.read_text())
    api = await serve_api(daemon.provider, config.host.api_socket_path())
    dashboard = await serve_dashboard(
        daemon, str(path), bind_dashboard(config.host), Limits(max_connections=64)
    )
    try:
        yield daemon, dashboard, Path(config.host.api_socket_path())
    finally:
        await dashboard.stop()
        await api.stop()
        await daemon.close()


async def test_300_idle_connections_to_the_dashboard_leave_runnerd_and_the_dashboard_answering(
    served: tuple[Daemon, Dashboard, Path],
) -> None:
    daemon, dashboard, api_socket = served
    held = await asyncio.to_thread(hold_connections, dashboard.port, 300)
    try:
        for n in range(3):  # more than once: not a lucky first slot
            transport = httpx.AsyncHTTPTransport(uds=str(api_socket))
            async with httpx.AsyncClient(transport=transport, timeout=ANSWER_WITHIN) as api:
                status = await api.get("http://runnerd/status")
            assert status.status_code == 200 and status.json()["memory_max"] == 8 * 1024**3
            request = CreateRequest(f"r{n}", f"q{n}", "node", {}, RunnerBlock(), "jit")
            made = await asyncio.wait_for(daemon.provider.create(request), ANSWER_WITHIN)
            assert isinstance(made, Created)
            token = login_token(daemon.config.host)
            signed_in = {"authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(timeout=ANSWER_WITHIN, headers=signed_in) as http:
                page = await http.get(f"http://127.0.0.1:{dashboard.port}/api/status")
            assert page.status_code == 200
            assert f"r{n}" in [r["name"] for r in page.json()["runners"]]
        assert dashboard.server.connections <= 64
    finally:
        for sock in held:
            sock.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pki")
    authority = trustme.CA()
    authority.cert_pem.write_to_path(str(folder / "ca.pem"))
    for name in ("server", "browser"):
        cert = authority.issue_cert(name, "127.0.0.1")
        cert.cert_chain_pems[0].write_to_path(str(folder / f"{name}.pem"))
        cert.private_key_pem.write_to_path(str(folder / f"{name}.key"))
    (folder / "token").write_text("s3cret\n")
    return folder


@pytest.mark.parametrize("served", ["token"], indirect=True)
async def test_beyond_loopback_the_dashboard_is_tls_and_needs_the_bearer_token(
    served: tuple[Daemon, Dashboard, Path], pki: Path
) -> None:
    _, dashboard, _ = served
    url = f"https://127.0.0.1:{dashboard.port}/api/status"
    trust = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    async with httpx.AsyncClient(verify=trust, timeout=WAIT) as http:
        assert (await http.get(url)).status_code == 401
        good = await http.get(url, headers={"authorization": "Bearer s3cret"})
        assert good.status_code == 200 and good.json()["memory_max"] == 8 * 1024**3
    async with httpx.AsyncClient(timeout=WAIT) as plain:
        with pytest.raises(httpx.HTTPError):
            await plain.get(f"http://127.0.0.1:{dashboard.port}/api/status")


@pytest.mark.parametrize("served", ["ca"], indirect=True)
async def test_beyond_loopback_with_tls_ca_the_dashboard_needs_a_client_certificate(
    served: tuple[Daemon, Dashboard, Path], pki: Path
) -> None:
    _, dashboard, _ = served
    url = f"https://127.0.0.1:{dashboard.port}/api/status"
    without = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    async with httpx.AsyncClient(verify=without, timeout=WAIT) as http:
        with pytest.raises(httpx.HTTPError):
            await http.get(url)
    with_cert = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with_cert.load_cert_chain(str(pki / "browser.pem"), str(pki / "browser.key"))
    async with httpx.AsyncClient(verify=with_cert, timeout=WAIT) as http:
        assert (await http.get(url)).status_code == 200


async def test_on_loopback_the_dashboard_needs_runnerds_own_token_which_only_its_user_reads(
    served: tuple[Daemon, Dashboard, Path],
) -> None:
    daemon, dashboard, _ = served
    host = daemon.config.host
    token_file = Path(host.state_dir) / "dashboard.token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    url = f"http://127.0.0.1:{dashboard.port}"
    async with httpx.AsyncClient(timeout=WAIT) as http:
        refused = await http.get(f"{url}/api/status")
        # The status line says why, as curl -i and proxies' logs show it: "401 Unauthorized".
        assert (refused.status_code, refused.reason_phrase) == (401, "Unauthorized")
        assert (await http.get(f"{url}/")).status_code == 401
        login = await http.get(f"{url}/?token={token_file.read_text().strip()}")
        assert login.status_code == 303 and login.headers["location"] == "/"
        assert (await http.get(f"{url}/api/status")).status_code == 200  # its cookie now
    assert login_token(host) == token_file.read_text().strip()  # kept across starts
