"""The GitHub client's HTTP through real parts: the emulator serving HTTPS with a certificate of
a throwaway CA, and Debian's squid as the forward proxy (tests/forward_proxy.py).

Each test asks the emulator's runner listing through :func:`rungar.github.http.github_http`,
the client every command uses, built from a :class:`Network` as rungar.yaml and the
environment make it. The emulator records each request's TCP peer; squid logs the local port
of each connection it made: a request went through the proxy exactly when its peer port is one
of squid's.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from rungar.github.exceptions import GitHubUnreachable
from rungar.github.http import github_http
from rungar.github.network import Network
from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator
from tests.forward_proxy import Squid, free_port

GITHUB = "github.test"  # resolved by the proxy only
PAT = {"Authorization": "Bearer emulator-pat"}


@dataclass
class Tls:
    ca: Path  # the CA that signed the emulator's certificate
    other_ca: Path  # a CA that did not


@pytest.fixture
def tls(tmp_path: Path) -> Tls:
    ca = trustme.CA()
    cert = ca.issue_cert(GITHUB, "127.0.0.1")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    trustme.CA().cert_pem.write_to_path(str(tmp_path / "other-ca.pem"))
    return Tls(tmp_path / "ca.pem", tmp_path / "other-ca.pem")


@pytest.fixture
async def emulator(tls: Tls) -> AsyncIterator[GitHubEmulator]:
    pem = str(tls.ca.parent / "server.pem")
    options = EmulatorOptions(tls_cert_file=pem, tls_key_file=pem, public_host=GITHUB)
    async with GitHubEmulator(options) as emu:
        yield emu


@pytest.fixture
def squid() -> Iterator[Squid]:
    proxy = Squid(hosts={GITHUB: "127.0.0.1"})
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


def runners_url(emu: GitHubEmulator, host: str) -> str:
    return f"{emu.url_for(host)}/api/v3/orgs/octo-org/actions/runners"


def peers(emu: GitHubEmulator) -> list[int]:
    return [int(r["peer"].rsplit(":", 1)[1]) for r in emu.state.requests]


async def ask(network: Network, url: str) -> int:
    http = github_http(network, timeout=10.0)
    try:
        return (await http.send("GET", url, PAT)).status
    finally:
        await http.aclose()


async def test_every_request_goes_through_the_environments_proxy_and_none_around_it(
    emulator: GitHubEmulator, squid: Squid, tls: Tls
) -> None:
    network = Network.from_settings("", "", str(tls.ca), False, {"HTTPS_PROXY": squid.url})
    assert network.route(runners_url(emulator, GITHUB)).proxy is not None
    for _ in range(3):
        assert await ask(network, runners_url(emulator, GITHUB)) == 200
    logged = squid.close_and_read()
    tunnels = [t for t in logged if t.method == "CONNECT"]
    assert {t.url for t in tunnels} == {f"{GITHUB}:{emulator.port}"}
    assert len(emulator.state.requests) == 3
    assert set(peers(emulator)) <= {t.local_port for t in tunnels}


async def test_the_github_proxy_key_wins_over_the_environment(
    emulator: GitHubEmulator, squid: Squid, tls: Tls
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    network = Network.from_settings(squid.url, "", str(tls.ca), False, {"HTTPS_PROXY": dead})
    assert await ask(network, runners_url(emulator, GITHUB)) == 200
    tunnels = [t for t in squid.close_and_read() if t.method == "CONNECT"]
    assert set(peers(emulator)) <= {t.local_port for t in tunnels}
    assert tunnels


async def test_a_host_in_no_proxy_is_reached_directly(
    emulator: GitHubEmulator, squid: Squid, tls: Tls
) -> None:
    environ = {"HTTPS_PROXY": squid.url, "NO_PROXY": "localhost,127.0.0.1"}
    network = Network.from_settings("", "", str(tls.ca), False, environ)
    assert await ask(network, runners_url(emulator, "127.0.0.1")) == 200
    logged = squid.close_and_read()
    assert logged == []
    assert len(emulator.state.requests) == 1


async def test_a_certificate_of_another_ca_names_the_host_the_ca_file_and_what_to_check(
    emulator: GitHubEmulator, squid: Squid, tls: Tls
) -> None:
    network = Network.from_settings("", "", str(tls.other_ca), True, {"HTTPS_PROXY": squid.url})
    with pytest.raises(GitHubUnreachable) as failed:
        await ask(network, runners_url(emulator, GITHUB))
    message = str(failed.value)
    assert message.startswith(f"{GITHUB}'s certificate is not trusted (")
    assert f"trusted: {tls.other_ca} only (github.ca_file_only)" in message
    assert f"check that {tls.other_ca} holds, in PEM, the CA that signed {GITHUB}'s" in message
    assert "if the proxy http://127.0.0.1" in message  # the proxy may be the one inspecting TLS
    assert emulator.state.requests == []
    assert isinstance(failed.value.__cause__, Exception)
    assert any(isinstance(c, ssl.SSLCertVerificationError) for c in _chain(failed.value))


async def test_the_system_trust_alone_refuses_the_private_ca_and_says_to_name_it(
    emulator: GitHubEmulator, tls: Tls
) -> None:
    environ = {"NO_PROXY": "*"}
    with pytest.raises(GitHubUnreachable, match=r"name a PEM bundle holding it in github\.ca_file"):
        await ask(
            Network.from_settings("", "", "", False, environ), runners_url(emulator, "127.0.0.1")
        )


async def test_a_dead_proxy_is_named_with_where_it_was_configured(
    emulator: GitHubEmulator, tls: Tls
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    network = Network.from_settings("", "", str(tls.ca), False, {"https_proxy": dead})
    with pytest.raises(GitHubUnreachable) as failed:
        await ask(network, runners_url(emulator, GITHUB))
    assert str(failed.value).startswith(
        f"cannot reach {GITHUB}:{emulator.port} through the proxy {dead} (https_proxy): "
    )
    assert "check that the proxy runs" in str(failed.value)


def _chain(e: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    current: BaseException | None = e
    while current is not None and current not in out:
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


async def test_a_proxy_that_asks_for_credentials_gets_those_of_the_credentials_file(
    emulator: GitHubEmulator, tls: Tls, tmp_path: Path
) -> None:
    squid = Squid(hosts={GITHUB: "127.0.0.1"}, auth=True)
    squid.start()
    try:
        (tmp_path / "proxy-credentials").write_text("svc-rungar:hunter2\n")
        with_file = Network.from_settings(
            squid.url, str(tmp_path / "proxy-credentials"), str(tls.ca), False, {}
        )
        without = Network.from_settings(squid.url, "", str(tls.ca), False, {})
        assert await ask(with_file, runners_url(emulator, GITHUB)) == 200
        with pytest.raises(GitHubUnreachable) as refused:
            await ask(without, runners_url(emulator, GITHUB))
        logged = squid.close_and_read()
    finally:
        squid.stop()
    assert str(refused.value).startswith(
        f"the proxy {squid.url} (github.proxy in rungar.yaml) refused the tunnel to "
        f"{GITHUB}:{emulator.port}: 407 Proxy Authentication Required; "
    )
    tunnels = [(t.status, t.user) for t in logged if t.method == "CONNECT"]
    assert (200, "svc-rungar") in tunnels and (407, "-") in tunnels
    assert len(emulator.state.requests) == 1
    assert "hunter2" not in str(refused.value)
