"""The conformance kit against the scripted fake provider served over real gRPC.

Over a unix socket (plaintext), over loopback TCP with mTLS, and over loopback TCP with a
bearer token: the kit must pass through every transport the protocol allows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import trustme

from rungar.errors import ProviderError
from rungar.model.machine import (
    Conclusion,
    Created,
    CreateRequest,
    JobHint,
    Refusal,
    RefusalKind,
    Removal,
    RoomExpected,
)
from rungar.model.provider import Provider
from rungar.model.runner import RemovalReason
from rungar.model.runner_block import RunnerBlock
from rungar.rpc.client import GrpcProvider
from rungar.rpc.server import ProviderServer, serve
from rungar.rpc.tls import ClientTls, ServerTls
from rungar.testing.conformance import ConformanceFailure, Run, check_provider
from rungar.testing.fake_provider import GIB, FakeProvider
from tests.waiting import WAIT

CAPACITY_RUNNER = RunnerBlock(vcpus=2, memory_bytes=2 * GIB)
IMPOSSIBLE_RUNNER = RunnerBlock(vcpus=64, memory_bytes=2 * GIB)


@dataclass(frozen=True)
class Certs:
    ca: str
    server: ServerTls
    client: ClientTls


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    tmp = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    server = ca.issue_cert("provider.test")
    server.private_key_pem.write_to_path(str(tmp / "server.key"))
    server.cert_chain_pems[0].write_to_path(str(tmp / "server.pem"))
    client = ca.issue_cert("rungar.client")
    client.private_key_pem.write_to_path(str(tmp / "client.key"))
    client.cert_chain_pems[0].write_to_path(str(tmp / "client.pem"))
    return Certs(
        ca=str(tmp / "ca.pem"),
        server=ServerTls(str(tmp / "server.pem"), str(tmp / "server.key"), str(tmp / "ca.pem")),
        client=ClientTls(
            str(tmp / "ca.pem"), str(tmp / "client.pem"), str(tmp / "client.key"), "provider.test"
        ),
    )


@pytest.fixture
def fake() -> FakeProvider:
    # 8 vCPUs and 16 GiB: four 2-vCPU runners fit; a 64-vCPU runner never does.
    return FakeProvider("conformance-fake", vcpus=8, memory_bytes=16 * GIB)


@pytest.fixture
async def unix_server(fake: FakeProvider, tmp_path: Path) -> AsyncIterator[ProviderServer]:
    server = await serve(fake, f"unix://{tmp_path}/provider.sock")
    yield server
    await server.stop(None)


async def test_the_fake_provider_conforms_over_a_unix_socket(unix_server: ProviderServer) -> None:
    async def make_client() -> Provider:
        return GrpcProvider("fake", unix_server.address, timeout=WAIT)

    passed = await check_provider(
        make_client, capacity_runner=CAPACITY_RUNNER, impossible_runner=IMPOSSIBLE_RUNNER
    )
    assert "concurrent_creates" in passed and "refusal_messages" in passed


async def test_the_fake_provider_conforms_over_loopback_mtls(
    fake: FakeProvider, certs: Certs
) -> None:
    server = await serve(fake, "127.0.0.1:0", tls=certs.server)
    try:

        async def make_client() -> Provider:
            return GrpcProvider("fake", server.address, tls=certs.client, timeout=WAIT)

        passed = await check_provider(
            make_client, capacity_runner=CAPACITY_RUNNER, impossible_runner=IMPOSSIBLE_RUNNER
        )
    finally:
        await server.stop(None)
    assert len(passed) == 10
    assert fake.machines == []  # every check cleaned up after itself


async def test_the_fake_provider_conforms_over_loopback_tls_with_a_token(
    fake: FakeProvider, certs: Certs
) -> None:
    server_tls = ServerTls(certs.server.cert_file, certs.server.key_file)  # no client certs
    server = await serve(fake, "127.0.0.1:0", tls=server_tls, token="s3cret-token")
    try:

        async def make_client() -> Provider:
            tls = ClientTls(certs.ca, server_name="provider.test")
            return GrpcProvider("fake", server.address, tls=tls, token="s3cret-token", timeout=WAIT)

        await check_provider(
            make_client, capacity_runner=CAPACITY_RUNNER, impossible_runner=IMPOSSIBLE_RUNNER
        )
    finally:
        await server.stop(None)


async def test_the_kit_reports_a_provider_that_ignores_the_idempotency_key() -> None:
    class ForgetfulProvider(FakeProvider):
        """Creates a new machine on every repeat: the bug the kit must catch."""

        def create_now(self, request, now):  # type: ignore[no-untyped-def]
            fresh = type(request)(
                f"{request.runner_name}-{self.calls['create']}",
                request.request_id,
                request.scale_set,
                request.labels,
                request.runner,
                request.jit_config,
            )
            return super().create_now(fresh, now)

    forgetful = ForgetfulProvider(vcpus=8, memory_bytes=16 * GIB)

    async def make_client() -> Provider:
        return forgetful

    with pytest.raises(ConformanceFailure, match="repeated_create"):
        await check_provider(
            make_client, capacity_runner=CAPACITY_RUNNER, impossible_runner=IMPOSSIBLE_RUNNER
        )


async def test_the_kit_reports_a_provider_that_overcommits_under_concurrency() -> None:
    class RacyProvider(FakeProvider):
        """Checks for room, yields to the loop, then creates regardless: a check-then-act race."""

        async def create(self, request: CreateRequest) -> Created | Refusal:
            full = self._out_of_room(request.runner)
            await asyncio.sleep(0)  # every concurrent create sees the same room here
            if full is not None:
                self.calls["create"] += 1
                return full
            limits = self.total_vcpus, self.total_memory
            self.total_vcpus, self.total_memory = float("inf"), 2**62  # act without re-checking
            try:
                return self.create_now(request, 0.0)
            finally:
                self.total_vcpus, self.total_memory = limits

    racy = RacyProvider(vcpus=8, memory_bytes=16 * GIB)

    async def make_client() -> Provider:
        return racy

    with pytest.raises(ConformanceFailure, match="concurrent_creates"):
        await check_provider(
            make_client, capacity_runner=CAPACITY_RUNNER, impossible_runner=IMPOSSIBLE_RUNNER
        )


async def test_the_kit_reports_a_full_refusal_whose_expected_room_is_negative_over_grpc(
    tmp_path: Path,
) -> None:
    class Hasty(FakeProvider):
        """Says room comes 30 s in the past: what the kit must catch, over the wire too."""

        async def create(self, request: CreateRequest) -> Created | Refusal:
            outcome = await super().create(request)
            if isinstance(outcome, Refusal) and outcome.kind is RefusalKind.FULL:
                return replace(outcome, room=RoomExpected(-30.0, 0.9))
            return outcome

    hasty = Hasty(vcpus=8, memory_bytes=16 * GIB)
    server = await serve(hasty, f"unix://{tmp_path}/hasty.sock")
    try:

        async def make_client() -> Provider:
            return GrpcProvider("hasty", server.address, timeout=WAIT)

        with pytest.raises(ConformanceFailure, match=r"expected_room: .* -30\.0 s is not 0"):
            await check_provider(
                make_client, capacity_runner=CAPACITY_RUNNER, impossible_runner=IMPOSSIBLE_RUNNER
            )
    finally:
        await server.stop(None)


async def test_a_full_refusal_may_say_when_room_comes_and_the_kit_passes_it() -> None:
    class Forthcoming(FakeProvider):
        async def create(self, request: CreateRequest) -> Created | Refusal:
            outcome = await super().create(request)
            if isinstance(outcome, Refusal) and outcome.kind is RefusalKind.FULL:
                return replace(outcome, room=RoomExpected(40.0, 0.8))
            return outcome

    forthcoming = Forthcoming(vcpus=8, memory_bytes=16 * GIB)

    async def make_client() -> Provider:
        return forthcoming

    passed = await check_provider(
        make_client, capacity_runner=CAPACITY_RUNNER, impossible_runner=IMPOSSIBLE_RUNNER
    )
    assert "expected_room" in passed


async def test_the_kit_reports_a_provider_that_fails_a_delete_that_says_why() -> None:
    class Picky(FakeProvider):
        """Refuses a Delete that carries a removal: what an old server kit must never do."""

        async def delete(self, name: str, removal: Removal | None = None) -> None:
            if removal is not None:
                raise ProviderError(f"{name}: cannot delete for {removal.describe()}")
            await super().delete(name)

    picky = Picky(vcpus=8, memory_bytes=16 * GIB)

    async def make_client() -> Provider:
        return picky

    with pytest.raises(ConformanceFailure, match="delete_with_removal"):
        await check_provider(
            make_client, capacity_runner=CAPACITY_RUNNER, impossible_runner=IMPOSSIBLE_RUNNER
        )


async def test_a_delete_carries_the_jobs_conclusion_and_hint_over_grpc(
    unix_server: ProviderServer, fake: FakeProvider
) -> None:
    client = GrpcProvider("fake", unix_server.address)
    try:
        request = Run(CAPACITY_RUNNER, IMPOSSIBLE_RUNNER).request()
        assert isinstance(await client.create(request), Created)
        hint = JobHint("o/r", ".github/workflows/ci.yml", "build", "9", "main", "77")
        removal = Removal(RemovalReason.JOB_COMPLETED, Conclusion.TIMED_OUT, hint)
        await client.delete(request.runner_name, removal)
        unknown = Removal(RemovalReason.DRAINED)
        await client.delete("never-made", unknown)
    finally:
        await client.close()
    assert fake.removals[request.runner_name] == removal
    assert "never-made" not in fake.removals
