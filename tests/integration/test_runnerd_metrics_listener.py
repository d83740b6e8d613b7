"""runnerd's metrics listener: plain HTTP on loopback; beyond it, TLS with the provider
channel's rule (a client certificate from tls_ca, or the bearer token)."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest
import trustme
from runnerd.config import HostConfig, parse_config
from runnerd.metrics import RunnerdMetrics
from runnerd.metrics_http import serve_metrics

from rungar.errors import ConfigError


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[trustme.CA, Path]:
    tmp = tmp_path_factory.mktemp("pki")
    authority = trustme.CA()
    authority.cert_pem.write_to_path(str(tmp / "ca.pem"))
    return authority, tmp


def issue(ca: tuple[trustme.CA, Path], name: str) -> tuple[str, str]:
    authority, tmp = ca
    cert = authority.issue_cert(name, "127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp / f"{name}.pem"))
    cert.private_key_pem.write_to_path(str(tmp / f"{name}.key"))
    return str(tmp / f"{name}.pem"), str(tmp / f"{name}.key")


def metrics() -> RunnerdMetrics:
    m = RunnerdMetrics()
    m.admissions.labels("node", "caps").inc()
    return m


async def test_on_loopback_metrics_are_plain_http() -> None:
    server = await serve_metrics(metrics(), HostConfig(metrics_listen="127.0.0.1:0"))
    try:
        async with httpx.AsyncClient() as client:
            got = await client.get(f"http://127.0.0.1:{server.port}/metrics")
        assert got.status_code == 200
        assert 'runnerd_admissions_total{policy="caps",profile="node"} 1.0' in got.text
    finally:
        await server.stop()


def test_beyond_loopback_without_tls_is_refused_by_the_config_check() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config('[host]\nmetrics_listen = "0.0.0.0:9101"\n')
    assert (
        "runnerd.toml:2:1: host.metrics_listen: beyond loopback needs tls_cert and tls_key"
        in (e.value.problems[0])
    )
    assert parse_config('[host]\nmetrics_listen = "127.0.0.1:9101"\n').host.metrics_listen


async def test_beyond_loopback_a_bearer_token_is_required_over_tls(
    ca: tuple[trustme.CA, Path], tmp_path: Path
) -> None:
    cert, key = issue(ca, "runnerd.metrics")
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    host = HostConfig(metrics_listen="0.0.0.0:0", tls_cert=cert, tls_key=key, token_file=str(token))
    server = await serve_metrics(metrics(), host)
    trust = ssl.create_default_context(cafile=str(ca[1] / "ca.pem"))
    url = f"https://127.0.0.1:{server.port}/metrics"
    try:
        async with httpx.AsyncClient(verify=trust) as client:
            assert (await client.get(url)).status_code == 401
            wrong = {"authorization": "Bearer nope"}
            assert (await client.get(url, headers=wrong)).status_code == 401
            good = await client.get(url, headers={"authorization": "Bearer s3cret"})
            assert good.status_code == 200 and "runnerd_admissions_total" in good.text
        async with httpx.AsyncClient() as plain:
            with pytest.raises(httpx.HTTPError):
                await plain.get(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        await server.stop()


async def test_beyond_loopback_with_tls_ca_a_client_certificate_is_required(
    ca: tuple[trustme.CA, Path],
) -> None:
    cert, key = issue(ca, "runnerd.metrics")
    ca_file = str(ca[1] / "ca.pem")
    host = HostConfig(metrics_listen="0.0.0.0:0", tls_cert=cert, tls_key=key, tls_ca=ca_file)
    server = await serve_metrics(metrics(), host)
    url = f"https://127.0.0.1:{server.port}/metrics"
    try:
        without = ssl.create_default_context(cafile=ca_file)
        async with httpx.AsyncClient(verify=without) as client:
            with pytest.raises(httpx.HTTPError):
                await client.get(url)
        client_cert, client_key = issue(ca, "prometheus")
        with_cert = ssl.create_default_context(cafile=ca_file)
        with_cert.load_cert_chain(client_cert, client_key)
        async with httpx.AsyncClient(verify=with_cert) as client:
            assert (await client.get(url)).status_code == 200
    finally:
        await server.stop()
