"""A provider whose connection breaks once made (a valid HTTP/2 preface, then garbage) is tried
again at most about once a second, 1 s doubling to 30 s, and not once per call as gRPC alone
would (one connection per call: hundreds a second under a daemon's load).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rungar.config.model import ProviderConfig, ScaleSetsFile, Timing
from rungar.engine.engine import Engine
from rungar.engine.events import EventLog
from rungar.errors import ProviderUnavailable
from rungar.rpc.client import GrpcProvider
from rungar.rpc.reconnects import Reconnects
from rungar.rpc.server import serve
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import FakeProvider
from rungar.testing.hostile_provider import GarbageServer
from tests.waiting import until_awaited


def test_the_wait_after_each_break_doubles_to_30_s_and_an_answer_resets_it() -> None:
    now = [0.0]
    reconnects = Reconnects(now=lambda: now[0])
    waits = []
    for _ in range(7):
        reconnects.broke("garbage")
        waits.append(reconnects.left())
        now[0] += waits[-1]
        assert reconnects.left() == 0.0
    assert waits == [1, 2, 4, 8, 16, 30, 30]
    assert reconnects.attempts == 7
    reconnects.answered()
    reconnects.broke("garbage")
    assert reconnects.left() == 1.0


async def hammer(client: GrpcProvider, seconds: float) -> list[str]:
    """Call List every 10 ms for ``seconds``: far more often than any daemon does."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    errors = []
    while loop.time() < end:
        try:
            await client.list({})
        except ProviderUnavailable as e:
            errors.append(str(e))
        await asyncio.sleep(0.01)
    return errors


async def test_garbage_after_a_valid_preface_is_reconnected_with_backoff_not_per_call(
    short_dir: Path,
) -> None:
    garbage = GarbageServer(f"unix://{short_dir}/p.sock")
    await garbage.start()
    client = GrpcProvider("g", garbage.address, timeout=2)
    try:
        errors = await hammer(client, 4.0)
        assert len(errors) > 100
        # Waits of 1 s and 2 s: calls connect at 0, 1 and 3 s; gRPC's own attempts (1 s apart)
        # come on top while a break looks to it like a failed handshake. At most one a second.
        assert 2 <= garbage.connections <= 5, f"{garbage.connections} connections in 4 s"
        assert "its connection broke" in errors[-1] and "trying again in" in errors[-1]
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


async def answered(client: GrpcProvider) -> bool:
    try:
        await client.list({})
    except ProviderUnavailable:
        return False
    return True


async def test_a_daemon_probing_a_garbage_provider_connects_at_most_once_a_second_and_says_so(
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
        while loop.time() - started < 3.0:  # a pass and a probe every 20 ms
            await engine.reconcile()
            await engine.reconciler.probe_unreachable()
            await asyncio.sleep(0.02)
        took = loop.time() - started
        assert garbage.connections <= took + 1, f"{garbage.connections} in {took:.1f} s"
        unreachable = [e for e in engine.events.recent() if e.action == "unreachable"]
        assert len(unreachable) == 1, "one event per change of state"
        assert "did not answer List" in unreachable[0].message
        metric = engine.ctx.metrics.provider_reconnects.labels("g")._value.get()
        assert metric == client.reconnects.attempts >= 1
        assert "its connection broke" in engine.ctx.findings.list_errors["g"]
    finally:
        await client.close()
        await garbage.stop()
        engine.store.close()
