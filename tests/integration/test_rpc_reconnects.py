"""A provider whose connection fails is connected to at most once a second, counted where the
connections arrive: one whose connection breaks once made (a valid HTTP/2 preface, then
garbage) is tried again after 1 s doubling to 30 s, one with which no connection can be made
(garbage during the handshake) a second later, and not once per call as gRPC alone would (one
connection per call, several for one call: hundreds a second under a daemon's load).
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Mapping
from pathlib import Path

import pytest
import trustme

from rungar.config.model import ProviderConfig, ScaleSetsFile, Timing
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.errors import ProviderUnavailable
from rungar.model.machine import Machine
from rungar.rpc.client import GrpcProvider
from rungar.rpc.reconnects import Reconnects
from rungar.rpc.server import serve
from rungar.rpc.tls import ClientTls
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import FakeProvider
from rungar.testing.hostile_provider import GarbageServer
from tests.waiting import WAIT, until_awaited

BROKE = re.compile(r"(its connection broke|no connection could be made) .*; trying again in ")


def test_the_wait_after_each_break_doubles_to_30_s_and_an_answer_resets_it() -> None:
    now = [0.0]
    reconnects = Reconnects(now=lambda: now[0])
    waits = []
    for _ in range(7):
        reconnects.broke("garbage")
        waits.append(reconnects.left())
        now[0] += waits[-1]
        assert reconnects.left() == 0.0 and reconnects.failing
    assert waits == [1, 2, 4, 8, 16, 30, 30]
    reconnects.answered()
    reconnects.broke("garbage")
    assert reconnects.left() == 1.0


async def hammer(client: GrpcProvider, seconds: float, callers: int = 4) -> tuple[list[str], float]:
    """``callers`` calling List every 10 ms each for ``seconds``, far more often than any
    daemon does: what they were told, and how long they called (from the first call's start to
    the last one's end)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    end = started + seconds
    errors = []

    async def calling() -> None:
        while loop.time() < end:
            try:
                await client.list({})
            except ProviderUnavailable as e:
                errors.append(str(e))
            await asyncio.sleep(0.01)

    await asyncio.gather(*(calling() for _ in range(callers)))
    return errors, loop.time() - started


# A second between connections, less 5 % for the two clocks that time it: the client's wait
# and the server's accept.
A_SECOND = 0.95


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ClientTls]:
    """A server context offering h2, and the client's settings trusting it."""
    ca = trustme.CA()
    folder = tmp_path_factory.mktemp("ca")
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("provider.test").configure_cert(server)
    server.set_alpn_protocols(["h2"])
    return server, ClientTls(str(folder / "ca.pem"), server_name="provider.test")


@pytest.mark.parametrize(
    ("transport", "preface"),
    [("unix", True), ("unix", False), ("tcp+tls", True)],
    ids=["preface-then-garbage", "garbage-in-the-handshake", "preface-then-garbage-over-tls"],
)
async def test_a_garbage_provider_is_connected_to_at_most_once_a_second(
    short_dir: Path, tls: tuple[ssl.SSLContext, ClientTls], transport: str, preface: bool
) -> None:
    secured = transport == "tcp+tls"
    address = "127.0.0.1:0" if secured else f"unix://{short_dir}/p.sock"
    garbage = GarbageServer(address, preface=preface, tls=tls[0] if secured else None)
    await garbage.start()
    client = GrpcProvider("g", garbage.address, timeout=2, tls=tls[1] if secured else None)
    try:
        errors, seconds = await hammer(client, 1.5)
        waited = [e for e in errors if BROKE.search(e)]
        assert len(errors) > 20 and len(waited) >= 0.8 * len(errors), errors[:3]
        assert garbage.connections >= 2, "connected again after the wait"
        assert garbage.connections <= int(seconds) + 1
        assert garbage.shortest_gap() >= A_SECOND, garbage.accepted_at
        assert client.reconnects.attempts == garbage.connections - 1, "every attempt counted"
        if not preface:  # never made, so tried again each second: never taken for a break
            assert all("no connection could be made" in e for e in waited), set(waited)
    finally:
        await client.close()
        await garbage.stop()


async def test_a_provider_answering_garbage_is_waited_on_then_reached_once_it_is_back(
    short_dir: Path,
) -> None:
    garbage = GarbageServer(f"unix://{short_dir}/p.sock")
    await garbage.start()
    client = GrpcProvider("g", garbage.address, timeout=2)
    try:
        for _ in range(2):  # the first breaks the connection; the second is told to wait
            with pytest.raises(ProviderUnavailable):
                await client.list({})
        assert client.reconnects.left() > 0
        await garbage.stop()
        # The real provider comes back on the same address: reached after the wait, which
        # the first answer resets.
        server = await serve(FakeProvider("g"), garbage.address)
        try:
            assert await until_awaited(lambda: answered(client), "reached again")
            assert client.reconnects.left() == 0.0 and not client.reconnects.why
        finally:
            await server.stop(None)
    finally:
        await client.close()
        await garbage.stop()


async def test_a_closed_client_leaves_no_channel_closing_behind(short_dir: Path) -> None:
    """A channel dropped (its connection failed) closes in the background; closing the client
    waits for it, so no channel outlives the client and the event loop it belongs to."""
    server = await serve(FakeProvider("g"), f"unix://{short_dir}/p.sock")
    client = GrpcProvider("g", server.address, timeout=WAIT)
    try:
        await client.list({})
        client._drop_channel()  # as a failed connection has it dropped
        await client.close()
        assert not client._closing, "a dropped channel was still closing"
    finally:
        await client.close()
        await server.stop(None)


async def answered(client: GrpcProvider) -> bool:
    try:
        await client.list({})
    except ProviderUnavailable:
        return False
    return True


async def test_a_daemon_probing_a_garbage_provider_says_so_once_and_counts_its_reconnects(
    short_dir: Path,
) -> None:
    garbage = GarbageServer(f"unix://{short_dir}/p.sock")
    await garbage.start()
    client = GrpcProvider("g", garbage.address, timeout=2)
    clock = FakeClock()
    config = ScaleSetsFile((ProviderConfig("g", "runnerd", address=garbage.address),), (), Timing())
    engine = Engine(
        config,
        {"g": client},
        FakeGitHub(),
        clock=clock,
        store=SqliteStore(short_dir / "state.db"),
        events=EventLog(clock, short_dir / "events.jsonl"),
        installation="gh-test",
    )
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        while loop.time() - started < 2.0:  # a pass and a probe every 20 ms
            await engine.reconcile()
            await engine.reconciler.probe_unreachable()
            await asyncio.sleep(0.02)
        unreachable = [e for e in engine.events.recent() if e.action == "unreachable"]
        assert len(unreachable) == 1, "one event per change of state"
        assert "did not answer List" in unreachable[0].message
        metric = engine.ctx.metrics.provider_reconnects.labels("g")._value.get()
        assert metric == client.reconnects.attempts >= 1
        assert BROKE.search(engine.ctx.findings.list_errors["g"])
    finally:
        await client.close()
        await garbage.stop()
        engine.store.close()


class HangingLister(FakeProvider):
    """A provider whose List never answers: a call stays in flight."""

    def __init__(self) -> None:
        super().__init__("h")
        self.asked = asyncio.Event()

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        self.asked.set()
        await asyncio.Event().wait()
        return []


async def test_a_call_cut_off_by_its_channel_closing_fails_as_unanswered_not_cancelled(
    short_dir: Path,
) -> None:
    """A call in flight when its channel is closed (another call found the connection broken,
    or the client closed) is a provider that did not answer, never a cancellation of the
    caller's task."""
    hanging = HangingLister()
    server = await serve(hanging, f"unix://{short_dir}/h.sock")
    client = GrpcProvider("h", f"unix://{short_dir}/h.sock", timeout=30)
    try:
        call = asyncio.ensure_future(client.list({}))
        await asyncio.wait_for(hanging.asked.wait(), WAIT)
        await client.close()
        with pytest.raises(ProviderUnavailable, match="provider h did not answer List"):
            await call
    finally:
        await client.close()
        await server.stop(None)
