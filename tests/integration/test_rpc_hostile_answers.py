"""What a hostile provider answers over gRPC is bounded before the daemon keeps any of it: 200 KB
texts are cut to 1 KiB, a resource that is not one word is not believed, and a thousand such
refusals cost the daemon next to no memory (the hostile provider kit behind a real socket).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rungar.config.model import (
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model import bounded
from rungar.model import labels as L
from rungar.model.machine import Refusal, RefusalKind
from rungar.rpc.client import GrpcProvider
from rungar.rpc.server import ProviderServer, serve
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.hostile_provider import HUGE, HostileProvider
from tests.integration.test_rpc_client import request

RUNNER = {"vcpus": 1, "memory": "1GiB"}


@pytest.fixture
async def hostile(short_dir: Path) -> AsyncIterator[tuple[HostileProvider, GrpcProvider]]:
    provider = HostileProvider("b", scenarios={"huge_texts", "bad_names"})
    server: ProviderServer = await serve(provider, f"unix://{short_dir}/b.sock")
    client = GrpcProvider("b", server.address, timeout=5)
    yield provider, client
    await client.close()
    await server.stop(None)


async def test_a_refusal_with_200_kb_texts_is_cut_and_its_resource_not_believed(
    hostile: tuple[HostileProvider, GrpcProvider],
) -> None:
    _, client = hostile
    answer = await client.create(request())
    assert isinstance(answer, Refusal) and answer.kind is RefusalKind.FULL
    assert answer.resource == "", "200 KB is not one lowercase word"
    assert len(answer.message) <= bounded.TEXT_MAX and answer.message.endswith(bounded.CUT)
    assert answer.message.isprintable(), "no newline, no terminal escape"


async def test_a_listed_name_past_its_bound_is_cut_so_it_names_nothing_of_ours(
    hostile: tuple[HostileProvider, GrpcProvider],
) -> None:
    _, client = hostile
    [machine] = await client.list(L.installation_selector("gh-test"))
    assert len(machine.name) == bounded.NAME_MAX < HUGE
    assert not bounded.is_name(machine.name), "a cut name is not a machine's name"


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


async def refuse(engine: Engine, clock: FakeClock, times: int) -> None:
    for _ in range(times):
        clock.advance(600)  # past any backoff: every demand asks the provider again
        engine.on_demand("linux", 1)
        await engine.drain_tasks()


async def test_a_thousand_refusals_with_200_kb_texts_grow_the_daemon_by_at_most_10_mib(
    short_dir: Path,
) -> None:
    provider = HostileProvider("b", scenarios={"huge_texts"})
    server = await serve(provider, f"unix://{short_dir}/b.sock")
    client = GrpcProvider("b", server.address, timeout=5)
    clock = FakeClock()
    github = FakeGitHub()
    scale_set = ScaleSetConfig(
        "linux",
        max_runners=1,
        placement=Placement.PACK,
        providers=(ScaleSetProvider("b", RUNNER),),
        start_timeout=60,
    )
    config = ScaleSetsFile((ProviderConfig("b", "runnerd", runner=RUNNER),), (scale_set,), Timing())
    events = EventLog(clock, short_dir / "events.jsonl")
    engine = Engine(
        config,
        {"b": client},
        github,
        clock=clock,
        store=SqliteStore(short_dir / "state.db"),
        events=events,
        installation="gh-test",
    )
    engine.sets["linux"].id = await github.ensure_scale_set(scale_set)
    try:
        await refuse(engine, clock, 100)  # the daemon's own caches warm up
        before = rss_bytes()
        await refuse(engine, clock, 1000)
        grown = rss_bytes() - before
        refusals = [e for e in events.recent() if e.action == "full"]
        assert len(refusals) >= 1100
        assert max(len(e.message) for e in refusals) < 2 * bounded.TEXT_MAX
        assert grown <= 10 * 1024 * 1024, f"RSS grew {grown / 2**20:.1f} MiB"
        assert (short_dir / "events.jsonl").stat().st_size < 1100 * 4 * bounded.TEXT_MAX
    finally:
        await engine.drain_tasks()
        await client.close()
        await server.stop(None)
        engine.store.close()
