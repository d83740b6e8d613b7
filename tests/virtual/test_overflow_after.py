"""A cloud with ``overflow_after``, on the engine's virtual clock: a job that meets the host
full waits that long (asked again every pass) before its runner goes to the cloud."""

from __future__ import annotations

from pathlib import Path

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
from rungar.model.sentences import overflow_reason
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

SMALL = {"vcpus": 2, "memory": "4GiB"}
T0 = 1_800_000_000.0
PATIENCE = 120.0


async def test_a_job_meeting_a_full_host_goes_to_the_cloud_only_after_overflow_after(
    tmp_path: Path,
) -> None:
    clock = FakeClock(T0)
    github = FakeGitHub()
    providers = {
        "host": FakeProvider("host", vcpus=2, memory_bytes=16 * GIB, clock=clock),
        "cloud": FakeProvider("cloud", vcpus=64, memory_bytes=256 * GIB, clock=clock),
    }
    config = ScaleSetsFile(
        (
            ProviderConfig("host", "fake", weight=2),
            ProviderConfig("cloud", "fake", price_per_hour=0.4, overflow_after=PATIENCE),
        ),
        (
            ScaleSetConfig(
                "work",
                max_runners=4,
                placement=Placement.PACK,
                providers=(ScaleSetProvider("host", SMALL), ScaleSetProvider("cloud", SMALL)),
                start_timeout=600,
            ),
        ),
        Timing(reconcile_interval=30, left_grace=0),
    )
    engine = Engine(
        config,
        providers,
        github,
        clock=clock,
        store=SqliteStore(tmp_path / "state.db", now=clock.now),
        events=EventLog(clock, tmp_path / "events.jsonl"),
        installation="gh-test",
    )
    for state in engine.sets.values():
        state.id = await github.ensure_scale_set(state.config)
    engine.on_demand("work", 1)
    await engine.drain_tasks()
    (first,) = engine.runners.live("work")
    assert first.provider == "host"
    github.start_runner(first.name, busy=True)
    engine.on_demand("work", 2)  # a second job: the host (2 vCPUs) is full
    await engine.drain_tasks()
    assert len(engine.runners.live("work")) == 1
    assert engine.fleet.skip_reason("work", "cloud", clock.now()) == overflow_reason(PATIENCE)
    waited = 0.0
    while len(engine.runners.live("work")) == 1:
        assert waited < PATIENCE, "no cloud runner before overflow_after"
        clock.advance(30)
        waited += 30
        await engine.reconcile()
        await engine.drain_tasks()
    assert waited == PATIENCE
    cloud = [r for r in engine.runners.live("work") if r.provider == "cloud"]
    assert len(cloud) == 1 and [m.name for m in providers["cloud"].machines] == [cloud[0].name]
