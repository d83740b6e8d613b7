"""A provider whose connection breaks once made (a valid HTTP/2 preface, then garbage) is tried
again at most about once a second, 1 s doubling to 30 s, and not once per call as gRPC alone
would (one connection per call: hundreds a second under a daemon's load).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from rungar.config.model import ProviderConfig, ScaleSetsFile, Timing
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
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

BROKE = re.compile(r"(its connection broke|no connection could be made) .*; trying again in ")


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


async def test_garbage_after_a_valid_preface_is_waited_on_not_called_again_at_once(
    short_dir: Path,
) -> None:
    garbage = GarbageServer(f"unix://{short_dir}/p.sock")
    await garbage.start()
    client = GrpcProvider("g", garbage.address, timeout=2)
    try:
        errors = await hammer(client, 2.0)
        waited = [e for e in errors if BROKE.search(e)]
        assert len(errors) > 20 and len(waited) >= 0.8 * len(errors), errors[:3]
        assert 1 <= client.reconnects.attempts <= 2, "one attempt a second at most"
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
