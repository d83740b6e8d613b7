"""Which proxy a GitHub URL goes through and why, the trust, and the keys' errors
(rungar/github/network.py, rungar/daemon/settings.py). The real proxy and TLS are in
tests/integration/test_github_network.py and tests/e2e/test_daemon_proxy.py."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest
import trustme

from rungar.daemon.settings import load_settings
from rungar.errors import ConfigError
from rungar.github.exceptions import GitHubUnreachable
from rungar.github.http import github_http
from rungar.github.network import Network, NetworkError, Trust

API = "https://api.github.com/orgs/o/actions/runners"


def env_network(**environ: str) -> Network:
    return Network.from_settings("", "", "", False, environ)


def test_without_key_or_variable_github_is_reached_directly_and_says_why() -> None:
    route = env_network().route(API)
    assert route.proxy is None
    assert route.shown() == "none (no github.proxy, no HTTPS_PROXY in the environment)"


def test_https_urls_take_https_proxy_and_http_urls_http_proxy_with_no_fallback() -> None:
    network = env_network(HTTPS_PROXY="secure.corp:3128")
    assert network.route(API).shown() == "http://secure.corp:3128 (HTTPS_PROXY)"
    assert network.route("http://ghe.corp/api/v3").proxy is None
    network = env_network(HTTP_PROXY="http://plain.corp:8080")
    assert network.route(API).proxy is None
    assert network.route("http://ghe.corp/api/v3").shown() == "http://plain.corp:8080 (HTTP_PROXY)"


def test_the_upper_case_variable_is_read_before_the_lower_case_one() -> None:
    both = env_network(HTTPS_PROXY="http://upper:1", https_proxy="http://lower:2")
    assert both.route(API).shown() == "http://upper:1 (HTTPS_PROXY)"
    lower = env_network(https_proxy="http://lower:2")
    assert lower.route(API).shown() == "http://lower:2 (https_proxy)"


def test_the_github_proxy_key_wins_over_the_environment_for_both_schemes() -> None:
    network = Network.from_settings(
        "http://key.corp:3128", "", "", False, {"HTTPS_PROXY": "http://env:1"}
    )
    assert network.route(API).shown() == "http://key.corp:3128 (github.proxy in rungar.yaml)"
    assert network.route("http://ghe.corp/").proxy == network.route(API).proxy


@pytest.mark.parametrize(
    ("no_proxy", "host", "direct"),
    [
        ("*", "api.github.com", True),
        ("github.com", "github.com", True),
        ("github.com", "api.github.com", True),
        ("github.com", "notgithub.com", False),
        (".github.com", "github.com", False),
        (".github.com", "api.github.com", True),
        ("*.github.com", "api.github.com", True),
        ("*.github.com", "github.com", False),
        ("GHE.Corp", "ghe.corp", True),
        (" other.corp , ghe.corp ", "ghe.corp", True),
        ("10.0.0.0/8", "10.1.2.3", True),
        ("10.0.0.0/8", "11.1.2.3", False),
        ("10.1.2.3", "10.1.2.3", True),
        ("ghe.corp:443", "ghe.corp", True),
        ("ghe.corp:8443", "ghe.corp", False),
        ("[::1]:443", "::1", True),
        ("::1", "::1", True),
        ("", "api.github.com", False),
    ],
)
def test_no_proxy_entries_match_as_documented(no_proxy: str, host: str, direct: bool) -> None:
    network = env_network(HTTPS_PROXY="http://proxy:3128", NO_PROXY=no_proxy)
    url = f"https://[{host}]/" if ":" in host else f"https://{host}/"
    route = network.route(url)
    assert (route.proxy is None) is direct, route


def test_no_proxy_applies_to_the_github_proxy_key_too_and_names_its_entry() -> None:
    network = Network.from_settings("http://p:3128", "", "", False, {"no_proxy": "ghe.corp"})
    route = network.route("https://api.ghe.corp/")
    assert route.shown() == "none (api.ghe.corp matches no_proxy entry ghe.corp)"


def test_proxy_credentials_come_from_their_file_and_are_never_shown(tmp_path: Path) -> None:
    secret = tmp_path / "proxy-credentials"
    secret.write_text("svc-rungar:s3cr:et\n")
    network = Network.from_settings("http://p.corp:3128", str(secret), "", False, {})
    proxy = network.route(API).proxy
    assert proxy is not None and proxy.auth == ("svc-rungar", "s3cr:et")
    shown = network.route(API).shown()
    assert shown == f"http://p.corp:3128 (github.proxy in rungar.yaml, credentials from {secret})"
    assert "s3cr" not in repr(network) and "s3cr" not in shown


def test_credentials_in_an_environment_url_are_used_and_not_shown() -> None:
    network = env_network(HTTPS_PROXY="http://user:p%40ss@p.corp:3128")
    proxy = network.route(API).proxy
    assert proxy is not None and proxy.auth == ("user", "p@ss")
    assert proxy.shown() == "http://p.corp:3128 (HTTPS_PROXY, credentials from the URL)"


@pytest.mark.parametrize(
    ("proxy", "credentials", "message"),
    [
        ("socks5://p:1080", "", "github.proxy: a socks5:// proxy is not supported"),
        ("http://u:pw@p:3128", "", "github.proxy: the URL holds credentials"),
        ("http://p:3128/path", "", "github.proxy: a proxy URL is scheme://HOST:PORT"),
        ("http://p:notaport", "", "github.proxy: not a proxy URL"),
        ("", "creds", "github.proxy_credentials_path: set without github.proxy"),
    ],
)
def test_unusable_proxy_keys_are_refused_with_the_key(
    proxy: str, credentials: str, message: str
) -> None:
    with pytest.raises(NetworkError, match="^" + message.replace(".", r"\.")):
        Network.from_settings(proxy, credentials, "", False, {})


def test_a_bad_environment_proxy_is_refused_with_the_variables_name_for_its_scheme() -> None:
    network = env_network(https_proxy="ftp://p:21", HTTP_PROXY="socks5://p:1080")
    with pytest.raises(NetworkError, match=r"^https_proxy: a ftp:// proxy is not supported"):
        network.route(API)
    with pytest.raises(NetworkError, match=r"^HTTP_PROXY: a socks5:// proxy is not supported"):
        network.route("http://ghe.corp/api/v3")


def test_an_unusable_variable_of_the_other_scheme_stops_nothing() -> None:
    network = env_network(HTTPS_PROXY="http://p.corp:3128", HTTP_PROXY="socks5://p:1080")
    assert network.route(API).shown() == "http://p.corp:3128 (HTTPS_PROXY)"


def test_the_trust_is_shown_as_configured(tmp_path: Path) -> None:
    assert Trust().shown() == "the system's certificate authorities"
    pem = str(tmp_path / "ca.pem")
    assert Trust(pem).shown() == f"the system's certificate authorities and {pem}"
    assert Trust(pem, True).shown() == f"{pem} only (github.ca_file_only)"


def test_a_ca_file_that_is_missing_or_not_pem_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NetworkError, match=r"^github\.ca_file: .* does not exist"):
        Trust(str(tmp_path / "nothere.pem")).context()
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(NetworkError, match=r"^github\.ca_file: .* holds no PEM certificate"):
        Trust(str(junk)).context()


def test_ca_file_only_trusts_that_file_alone(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    alone = Trust(str(tmp_path / "ca.pem"), True).context()
    added = Trust(str(tmp_path / "ca.pem")).context()
    assert len(alone.get_ca_certs()) == 1
    assert len(added.get_ca_certs()) > 1


def _settings(tmp_path: Path, github_extra: str) -> Path:
    (tmp_path / "token").write_text("t")
    path = tmp_path / "rungar.yaml"
    path.write_text(
        "github:\n"
        "  url: https://github.com/o\n"
        "  token_path: token\n"
        f"{github_extra}"
        "scale_sets: scale_sets.yaml\n"
    )
    return path


def test_settings_errors_of_the_new_keys_name_file_line_and_column(tmp_path: Path) -> None:
    path = _settings(
        tmp_path,
        "  proxy: socks5://p:1080\n  ca_file: missing.pem\n  ca_file_only: true\n",
    )
    with pytest.raises(ConfigError) as failed:
        load_settings(str(path))
    assert failed.value.problems == [
        f"{path}:4:10: github.proxy: a socks5:// proxy is not supported; name an HTTP proxy "
        "(http://HOST:PORT, or https:// for TLS to the proxy)",
        f"{path}:5:12: github.ca_file: {tmp_path}/missing.pem does not exist",
    ]


def test_ca_file_only_without_ca_file_is_refused_at_its_line(tmp_path: Path) -> None:
    path = _settings(tmp_path, "  ca_file_only: true\n")
    with pytest.raises(ConfigError) as failed:
        load_settings(str(path))
    assert failed.value.problems == [f"{path}:4:17: github.ca_file_only: needs github.ca_file"]


def test_relative_credentials_and_ca_paths_are_next_to_rungar_yaml(tmp_path: Path) -> None:
    trustme.CA().cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    (tmp_path / "creds").write_text("u:p\n")
    path = _settings(
        tmp_path, "  proxy: http://p:3128\n  proxy_credentials_path: creds\n  ca_file: ca.pem\n"
    )
    github = load_settings(str(path)).github
    assert (github.proxy_credentials_path, github.ca_file) == (
        str(tmp_path / "creds"),
        str(tmp_path / "ca.pem"),
    )


async def test_the_proxy_is_sent_the_files_credentials_and_errors_never_hold_them(
    tmp_path: Path,
) -> None:
    """A listener standing in for a proxy that refuses: what the client sent it, and what the
    error says."""
    heads: list[bytes] = []

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(refuse, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    (tmp_path / "creds").write_text("svc:hunter2\n")
    network = Network.from_settings(
        f"http://127.0.0.1:{port}", str(tmp_path / "creds"), "", False, {}
    )
    http = github_http(network, timeout=10)
    try:
        with pytest.raises(GitHubUnreachable) as failed:
            await http.send("GET", API, {})
    finally:
        await http.aclose()
        server.close()
        await server.wait_closed()
    assert heads and heads[0].startswith(b"CONNECT api.github.com:443 HTTP/1.1\r\n")
    expected = base64.b64encode(b"svc:hunter2")
    assert b"Proxy-Authorization: Basic " + expected in heads[0]
    assert str(failed.value).startswith(
        f"the proxy http://127.0.0.1:{port} (github.proxy in rungar.yaml, credentials from "
        f"{tmp_path}/creds) refused the tunnel to api.github.com: "
    )
    assert "hunter2" not in str(failed.value)
