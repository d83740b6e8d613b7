"""The provider channel's security, over real loopback TLS (docs/operating.md).

Every rejection the protocol promises is a test: no client certificate, a client certificate
from a foreign CA, plaintext to a TLS port, an expired certificate (either side), a wrong
server name, a missing or wrong token; and plaintext TCP is refused by both ends at start.
A rejected caller never reaches the provider: the fake counts no calls.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import pytest
import trustme

from rungar.errors import ConfigError, ProviderError, ProviderUnavailable
from rungar.rpc.client import GrpcProvider
from rungar.rpc.server import ProviderServer, serve
from rungar.rpc.tls import ClientTls, ServerTls
from rungar.testing.fake_provider import FakeProvider
from tests.waiting import WAIT

SERVER_NAME = "provider.test"
PAST = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: trustme.CA
    ca_file: str

    def issue(
        self, name: str, ca: trustme.CA | None = None, expired: bool = False
    ) -> tuple[str, str]:
        """Write a certificate and key for ``name``; returns (cert_file, key_file)."""
        issuer = ca or self.ca
        if expired:
            cert = issuer.issue_cert(
                name, not_before=PAST, not_after=PAST + datetime.timedelta(days=1)
            )
        else:
            cert = issuer.issue_cert(name)
        stem = self.dir / f"{name}-{id(cert)}"
        cert.cert_chain_pems[0].write_to_path(f"{stem}.pem")
        cert.private_key_pem.write_to_path(f"{stem}.key")
        return f"{stem}.pem", f"{stem}.key"

    def client(self, **kwargs: object) -> ClientTls:
        # why the ignore[arg-type] below: kwargs forwards issue()'s typed options
        cert, key = self.issue("rungar.client", **kwargs)  # type: ignore[arg-type]
        return ClientTls(self.ca_file, cert, key, SERVER_NAME)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    tmp = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    return Pki(tmp, ca, str(tmp / "ca.pem"))


@pytest.fixture
def fake() -> FakeProvider:
    return FakeProvider("secure-fake")


@pytest.fixture
async def mtls_server(pki: Pki, fake: FakeProvider) -> AsyncIterator[ProviderServer]:
    cert, key = pki.issue(SERVER_NAME)
    server = await serve(fake, "127.0.0.1:0", tls=ServerTls(cert, key, pki.ca_file))
    yield server
    await server.stop(None)


@pytest.fixture
async def token_server(pki: Pki, fake: FakeProvider) -> AsyncIterator[ProviderServer]:
    cert, key = pki.issue(SERVER_NAME)
    server = await serve(fake, "127.0.0.1:0", tls=ServerTls(cert, key), token="right-token")
    yield server
    await server.stop(None)


async def _list_with(address: str, tls: ClientTls, token: str = "") -> None:
    client = GrpcProvider("p", address, tls=tls, token=token, timeout=WAIT)
    try:
        await client.list({})
    finally:
        await client.close()


async def test_a_client_with_the_right_certificate_is_served(
    mtls_server: ProviderServer, pki: Pki, fake: FakeProvider
) -> None:
    await _list_with(mtls_server.address, pki.client())
    assert fake.calls["list"] == 1


async def test_a_client_without_a_certificate_is_rejected(
    mtls_server: ProviderServer, pki: Pki, fake: FakeProvider
) -> None:
    with pytest.raises(ProviderUnavailable):
        await _list_with(mtls_server.address, ClientTls(pki.ca_file, server_name=SERVER_NAME))
    assert fake.calls["list"] == 0


async def test_a_client_certificate_from_a_foreign_ca_is_rejected(
    mtls_server: ProviderServer, pki: Pki, fake: FakeProvider
) -> None:
    foreign = trustme.CA()
    cert, key = pki.issue("rungar.client", ca=foreign)
    with pytest.raises(ProviderUnavailable):
        await _list_with(mtls_server.address, ClientTls(pki.ca_file, cert, key, SERVER_NAME))
    assert fake.calls["list"] == 0


async def test_an_expired_client_certificate_is_rejected(
    mtls_server: ProviderServer, pki: Pki, fake: FakeProvider
) -> None:
    with pytest.raises(ProviderUnavailable):
        await _list_with(mtls_server.address, pki.client(expired=True))
    assert fake.calls["list"] == 0


async def test_an_expired_server_certificate_is_rejected_by_the_client(
    pki: Pki, fake: FakeProvider
) -> None:
    cert, key = pki.issue(SERVER_NAME, expired=True)
    server = await serve(fake, "127.0.0.1:0", tls=ServerTls(cert, key, pki.ca_file))
    try:
        with pytest.raises(ProviderUnavailable):
            await _list_with(server.address, pki.client())
    finally:
        await server.stop(None)
    assert fake.calls["list"] == 0


async def test_a_server_certificate_for_another_name_is_rejected(
    mtls_server: ProviderServer, pki: Pki, fake: FakeProvider
) -> None:
    right = pki.client()
    wrong = ClientTls(right.ca_file, right.cert_file, right.key_file, "other.test")
    with pytest.raises(ProviderUnavailable):
        await _list_with(mtls_server.address, wrong)
    assert fake.calls["list"] == 0


async def test_plaintext_to_a_tls_port_is_rejected(
    mtls_server: ProviderServer, fake: FakeProvider
) -> None:
    # GrpcProvider refuses plaintext TCP outright, so speak raw gRPC as a careless client would.
    async with grpc.aio.insecure_channel(mtls_server.address) as channel:
        call = channel.unary_unary("/rungar.provider.v1.Provider/List", None, None)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(b"", timeout=3)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert fake.calls["list"] == 0


async def test_a_missing_token_is_rejected(
    token_server: ProviderServer, pki: Pki, fake: FakeProvider
) -> None:
    with pytest.raises(ProviderError, match="UNAUTHENTICATED") as caught:
        await _list_with(token_server.address, ClientTls(pki.ca_file, server_name=SERVER_NAME))
    assert not isinstance(caught.value, ProviderUnavailable)  # an answer: refused, not silent
    assert fake.calls["list"] == 0


async def test_a_wrong_token_is_rejected(
    token_server: ProviderServer, pki: Pki, fake: FakeProvider
) -> None:
    tls = ClientTls(pki.ca_file, server_name=SERVER_NAME)
    with pytest.raises(ProviderError, match="UNAUTHENTICATED"):
        await _list_with(token_server.address, tls, token="wrong-token")
    assert fake.calls["list"] == 0


async def test_the_right_token_is_served_and_health_needs_none(
    token_server: ProviderServer, pki: Pki, fake: FakeProvider
) -> None:
    tls = ClientTls(pki.ca_file, server_name=SERVER_NAME)
    await _list_with(token_server.address, tls, token="right-token")
    assert fake.calls["list"] == 1
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    credentials = grpc.ssl_channel_credentials(Path(pki.ca_file).read_bytes())
    options = [("grpc.ssl_target_name_override", SERVER_NAME)]
    async with grpc.aio.secure_channel(token_server.address, credentials, options) as channel:
        answer = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service="rungar.provider.v1.Provider"), timeout=3
        )
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


async def test_a_server_refuses_to_start_in_plaintext_on_tcp(fake: FakeProvider) -> None:
    with pytest.raises(ConfigError, match="plaintext is only allowed on unix"):
        await serve(fake, "127.0.0.1:0")


async def test_a_server_refuses_a_token_without_tls(fake: FakeProvider, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="token"):
        await serve(fake, f"unix://{tmp_path}/p.sock", token="t")


def test_a_client_refuses_a_tcp_address_without_tls() -> None:
    with pytest.raises(ConfigError, match="needs TLS"):
        GrpcProvider("p", "10.0.0.5:7443")


def test_a_client_refuses_to_send_a_token_without_tls(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="token"):
        GrpcProvider("p", f"unix://{tmp_path}/p.sock", token="t")
