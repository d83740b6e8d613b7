"""GrpcProvider over a real unix socket: the answer mapping, deadlines, limits and logs.

A Refused answer is a value; no answer (nothing listening, a deadline) is ProviderUnavailable;
any other failure is ProviderError. Every field of a create crosses the wire intact, and the
server logs each call once, never with the JIT config.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from rungar.errors import ConfigError, ProviderError, ProviderUnavailable
from rungar.model.machine import (
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    Refusal,
    RefusalKind,
)
from rungar.model.runner_block import RunnerBlock
from rungar.rpc.client import GrpcProvider
from rungar.rpc.server import ProviderServer, serve
from rungar.testing.fake_provider import GIB, FakeProvider

SECRET = "jit-SECRET-do-not-log"


def request(name: str = "linux-0000abcd", key: str = "k1", **kwargs: Any) -> CreateRequest:
    fields: dict[str, Any] = {
        "runner_name": name,
        "request_id": key,
        "scale_set": "linux",
        "labels": {"rungar.sh/managed": "true", "rungar.sh/runner": name},
        "runner": RunnerBlock(vcpus=2, memory_bytes=4 * GIB),
        "jit_config": SECRET,
    }
    fields.update(kwargs)
    return CreateRequest(**fields)


class RecordingProvider(FakeProvider):
    """Remembers the last create request exactly as the server handed it over."""

    last: CreateRequest | None = None

    async def create(self, request: CreateRequest) -> Created | Refusal:
        self.last = request
        return await super().create(request)


class StuckProvider(FakeProvider):
    """Never answers create or list: only the caller's deadline ends the call."""

    async def create(self, request: CreateRequest) -> Created | Refusal:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class BrokenProvider(FakeProvider):
    async def create(self, request: CreateRequest) -> Created | Refusal:
        raise ProviderError("backend said no in an unexpected way")

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        raise KeyError("bug")


async def _served(provider: FakeProvider, tmp_path: Path) -> ProviderServer:
    return await serve(provider, f"unix://{tmp_path}/provider.sock")


@pytest.fixture
async def recording(tmp_path: Path) -> AsyncIterator[tuple[RecordingProvider, GrpcProvider]]:
    provider = RecordingProvider("rec", vcpus=4, memory_bytes=8 * GIB, extra_keys=("profile",))
    server = await _served(provider, tmp_path)
    client = GrpcProvider("rec", server.address, timeout=5)
    yield provider, client
    await client.close()
    await server.stop(None)


async def test_every_field_of_a_create_reaches_the_provider_intact(
    recording: tuple[RecordingProvider, GrpcProvider],
) -> None:
    provider, client = recording
    sent = request(
        runner=RunnerBlock(1.5, 3 * GIB, 20 * GIB, "ubuntu-24.04", {"profile": "big", "n": 3}),
        job_hints=(JobHint("acme/api", "ci", "test", "42"), JobHint(job="lint")),
        deadline=1_800_000_000.25,
    )
    answer = await client.create(sent)
    assert provider.last == sent
    assert provider.last.jit_config == SECRET
    assert isinstance(answer, Created)
    assert answer.machine.name == sent.runner_name
    assert answer.machine.labels == sent.labels
    assert answer.machine.provider == "rec"
    assert answer.machine.state is MachineState.RUNNING


async def test_a_refused_create_is_a_refusal_value(
    recording: tuple[RecordingProvider, GrpcProvider],
) -> None:
    _, client = recording
    await client.create(request("a-1", "k1"))
    await client.create(request("a-2", "k2"))
    answer = await client.create(request("a-3", "k3"))
    assert answer == Refusal(RefusalKind.FULL, "needs 4G of memory, 0B free", "memory")


async def test_every_other_call_crosses_the_wire(
    recording: tuple[RecordingProvider, GrpcProvider],
) -> None:
    provider, client = recording
    info = await client.info()
    assert (info.name, info.kind) == ("rec", "fake")
    assert "profile" in info.capabilities
    assert await client.validate_runner({"vcpus": 2, "profile": "x"}) == []
    assert await client.validate_runner({"vcpus": 2, "colour": "red"}) == [
        "colour: not a key provider rec understands"
    ]
    assert await client.validate_runner({"memory": "lots"}) != []
    await client.create(request())
    await client.update_runner("linux-0000abcd", JobHint("acme/api", "ci", "build", "7"))
    assert provider.jobs["linux-0000abcd"] == JobHint("acme/api", "ci", "build", "7")
    listed = await client.list({"rungar.sh/runner": "linux-0000abcd"})
    assert [m.name for m in listed] == ["linux-0000abcd"]
    assert await client.list({"rungar.sh/runner": "someone-else"}) == []
    await client.delete("linux-0000abcd")
    await client.delete("linux-0000abcd")  # unknown now: still success
    assert await client.list({}) == []


async def test_nothing_listening_is_no_answer(tmp_path: Path) -> None:
    client = GrpcProvider("gone", f"unix://{tmp_path}/nobody.sock", timeout=5)
    with pytest.raises(ProviderUnavailable, match="gone did not answer") as caught:
        await client.list({})
    assert "deadline" not in str(caught.value).lower(), "fails at once, not at the deadline"
    await client.close()


async def test_a_call_past_its_deadline_is_no_answer_saying_what_timed_out_and_when(
    tmp_path: Path,
) -> None:
    server = await _served(StuckProvider(), tmp_path)
    client = GrpcProvider("stuck", server.address, timeout=0.2)
    try:
        with pytest.raises(ProviderUnavailable) as caught:
            await client.list({})
        assert str(caught.value) == "provider stuck: List timed out after 0.2 s"
    finally:
        await client.close()
        await server.stop(None)


async def test_a_stuck_create_is_ended_by_its_caller_not_by_the_providers_timeout(
    tmp_path: Path,
) -> None:
    # The create timeout is the caller's (the engine's, on its clock): the client neither
    # refuses a small budget nor ends the call before the caller does. Before, a budget of
    # 0.2 s here ended the call in the client as "did not answer".
    server = await _served(StuckProvider(), tmp_path)
    client = GrpcProvider("stuck", server.address, timeout=0.05)
    try:
        call = asyncio.ensure_future(client.create(request(budget=0.2)))
        done, _ = await asyncio.wait({call}, timeout=0.5)
        assert not done, "the client gave up on the Create itself"
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    finally:
        await client.close()
        await server.stop(None)


async def test_a_provider_error_is_an_error_not_silence(tmp_path: Path) -> None:
    server = await _served(BrokenProvider(), tmp_path)
    client = GrpcProvider("broken", server.address, timeout=5)
    try:
        with pytest.raises(ProviderError, match="INTERNAL: backend said no") as caught:
            await client.create(request())
        assert not isinstance(caught.value, ProviderUnavailable)
        with pytest.raises(ProviderError, match="KeyError"):
            await client.list({})
    finally:
        await client.close()
        await server.stop(None)


async def test_a_scripted_unanswered_create_is_unavailable_over_the_wire(
    recording: tuple[RecordingProvider, GrpcProvider],
) -> None:
    provider, client = recording
    provider.unanswered(after_create=True)
    with pytest.raises(ProviderUnavailable):
        await client.create(request())
    assert [m.name for m in provider.machines] == ["linux-0000abcd"]
    assert isinstance(await client.create(request()), Created)  # same key: the same machine
    assert provider.created == 1


async def test_messages_over_one_mebibyte_are_refused(
    recording: tuple[RecordingProvider, GrpcProvider],
) -> None:
    provider, client = recording
    with pytest.raises(ProviderError, match="RESOURCE_EXHAUSTED"):
        await client.create(request(jit_config="x" * (1024 * 1024 + 1)))
    assert provider.calls["create"] == 0


async def test_each_call_is_logged_once_without_the_jit_config(
    recording: tuple[RecordingProvider, GrpcProvider],
) -> None:
    _, client = recording
    with capture_logs() as logs:
        await client.create(request())
        await client.create(request("other", "k2", runner=RunnerBlock(vcpus=99)))
    calls = [e for e in logs if e["event"] == "provider.call"]
    assert [(e["call"], e["runner"], e["result"]) for e in calls] == [
        ("Create", "linux-0000abcd", "created"),
        ("Create", "other", "refused invalid"),
    ]
    assert all(e["duration"] >= 0 for e in calls)
    assert SECRET not in repr(logs)


def test_a_socket_path_too_long_to_bind_is_a_configuration_error_not_a_bind_failure() -> None:
    address = "unix:///tmp/" + "s" * 100 + ".sock"
    with pytest.raises(ConfigError, match=r"provider far: .* is 110 bytes long; the kernel"):
        GrpcProvider("far", address)
