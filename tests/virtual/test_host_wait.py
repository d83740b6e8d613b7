"""``overflow: when_host_is_later`` on the engine's virtual clock: a job that meets the host full,
when the host expects room in 40 s, waits for it (``rungar status`` says so) and is placed there
at the expected time, with nothing asked of the cloud; the default sends it to the cloud."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rungar.config.model import (
    Overflow,
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.daemon.status import skips_document
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.machine import Created, CreateRequest, Refusal, RefusalKind, RoomExpected
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

RUNNER = {"vcpus": 2, "memory": "4GiB"}
T0 = 1_800_000_000.0
ROOM_IN = 40.0


class ForetellingHost(FakeProvider):
    """A host whose FULL refusals say room comes ``ROOM_IN`` seconds from now."""

    async def create(self, request: CreateRequest) -> Created | Refusal:
        outcome = await super().create(request)
        if isinstance(outcome, Refusal) and outcome.kind is RefusalKind.FULL:
            return replace(outcome, room=RoomExpected(ROOM_IN, 0.9))
        return outcome


async def one_busy_runner_then_a_second_job(
    tmp_path: Path, overflow: Overflow
) -> tuple[Engine, FakeClock, dict[str, FakeProvider]]:
    clock = FakeClock(T0)
    github = FakeGitHub()
    providers: dict[str, FakeProvider] = {
        "host": ForetellingHost("host", vcpus=2, memory_bytes=16 * GIB, clock=clock),
        "cloud": FakeProvider("cloud", vcpus=64, memory_bytes=256 * GIB, clock=clock),
    }
    cloud = ProviderConfig("cloud", "fake", price_per_hour=0.4, overflow=overflow,
                           overflow_margin=30.0, typical_start=60.0)  # fmt: skip
    config = ScaleSetsFile(
        (ProviderConfig("host", "fake", weight=2), cloud),
        (
            ScaleSetConfig(
                "work",
                max_runners=4,
                placement=Placement.PACK,
                providers=(ScaleSetProvider("host", RUNNER), ScaleSetProvider("cloud", RUNNER)),
                start_timeout=600,
            ),
        ),
        Timing(reconcile_interval=300, backoff_first=10, left_grace=0),
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
    return engine, clock, providers


async def test_a_runner_waits_for_the_hosts_expected_room_and_is_placed_there_then(
    tmp_path: Path,
) -> None:
    engine, clock, providers = await one_busy_runner_then_a_second_job(
        tmp_path, Overflow.WHEN_HOST_IS_LATER
    )
    try:
        assert len(engine.runners.live("work")) == 1
        assert providers["cloud"].calls["create"] == 0
        (skip,) = [s for s in skips_document(engine.ctx, clock.now()) if "waits_for_host" in s]
        assert skip["sentence"] == (
            "work's runner is not sent to cloud: waits for host: room expected in 40s"
        )
        assert (skip["provider"], skip["waits_for_host"], skip["left"]) == ("cloud", "host", 40)
        assert engine.rooms.waking() == {"work": T0 + ROOM_IN}
        providers["host"].total_vcpus = 4  # the room comes when the host said it would
        await clock.run_for(ROOM_IN)
        await engine.drain_tasks()
        second = [r for r in engine.runners.live("work") if r.provider == "host"]
        assert len(second) == 2, "placed on the host at the expected time"
        assert providers["cloud"].calls["create"] == 0, "nothing asked of the cloud"
        assert skips_document(engine.ctx, clock.now()) == []
    finally:
        engine.rooms.cancel_wakes()


async def test_by_default_the_runner_goes_to_the_cloud_at_once(tmp_path: Path) -> None:
    engine, _, providers = await one_busy_runner_then_a_second_job(tmp_path, Overflow.AT_ONCE)
    assert sorted(r.provider for r in engine.runners.live("work")) == ["cloud", "host"]
    assert providers["cloud"].calls["create"] == 1
    assert engine.rooms.waking() == {}
