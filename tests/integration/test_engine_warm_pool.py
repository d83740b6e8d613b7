"""The warm pool in the engine on a fake clock: the job history it predicts from is kept in the
state database across a restart, the pool's runners are created as idle reserve ahead of the
slot, `status` says why, and the pool empties when the slot is over."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from rungar.cli.scale_sets import inspect_lines
from rungar.cli.status import render_status
from rungar.config.model import WarmPool
from rungar.daemon.control import Control
from rungar.daemon.runloop import RunLoop
from rungar.daemon.status import snapshot
from rungar.github.interface import JobEvent, JobEventKind, JobTimes
from rungar.model.machine import JobHint, RefusalKind
from tests.integration.test_engine_scaling import World, scale_set

POOL = WarmPool(max=4)
# 2026-12-07 is a Monday; the five weekdays before it are Nov 30 .. Dec 4.
DAYS = (30, 1, 2, 3, 4)


def utc(month: int, day: int, hour: int, minute: int) -> float:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC).timestamp()


def assign_past_jobs(world: World, per_day: int) -> None:
    """``per_day`` jobs assigned at 08:16-08:20 on each of the last five weekdays."""
    for day in DAYS:
        month = 11 if day == 30 else 12
        for n in range(per_day):
            at = utc(month, day, 8, 16 + n)
            world.engine.on_job_assigned("ci", f"job-{month}-{day}-{n}", JobHint(), at)


async def test_the_history_survives_a_restart_and_fills_the_pool_ahead_of_the_slot(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("ci", min_runners=1, warm_pool=POOL), vcpus=16)
    world.clock.set(utc(12, 4, 9, 0))
    await world.start()
    assign_past_jobs(world, 3)
    world.engine.on_job_assigned("ci", "job-12-4-0", JobHint(), utc(12, 4, 8, 16))  # told twice
    assert len(world.engine.job_history.times["ci"]) == 15, "a job told twice is kept once"

    world.engine = world.new_engine()  # a restart: the history is read back from the store
    assert len(world.engine.job_history.times["ci"]) == 15
    await world.start()
    world.clock.set(utc(12, 7, 8, 5))
    await world.demand("ci", 0)
    assert world.runners_of("ci") == 1, "08:05: the 08:15 slot is more than 5 minutes away"

    world.clock.set(utc(12, 7, 8, 11))
    await world.demand("ci", 1)
    state = world.engine.sets["ci"]
    assert (state.desired, state.reserve, state.warm_runners) == (5, 4, 3)
    assert world.runners_of("ci") == 5
    document = snapshot(world.engine.ctx)
    assert document["scale_sets"][0]["warm"]["reason"] == (
        "p90 of 3 jobs at 08:15 on the last 5 weekdays"
    )
    text = render_status(document)
    assert "5 (1 reserve + 3 warm)" in text
    assert (
        "ci: desired 5 (1 reserve + 3 warm: p90 of 3 jobs at 08:15 on the last 5 weekdays)" in text
    )

    found = Control.of(world.engine).inspect_scale_set("ci")
    assert "Desired:" in (lines := "\n".join(inspect_lines(found)))
    assert "5 (1 reserve + 3 warm: p90 of 3 jobs at 08:15 on the last 5 weekdays)" in lines

    await world.connect_all()
    world.clock.set(utc(12, 7, 8, 31))
    await world.demand("ci", 0)
    assert world.runners_of("ci") == 1, "the slot is over: the idle warm runners go"


async def test_the_warm_pool_refills_with_reserve_runners_that_take_no_priority_hold(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("ci", warm_pool=POOL, priority=10))
    world.clock.set(utc(12, 4, 9, 0))
    await world.start()
    assign_past_jobs(world, 2)
    world.providers["compute1"].refuse(RefusalKind.FULL, always=True)
    world.clock.set(utc(12, 7, 8, 20))
    await world.demand("ci", 0)
    assert world.engine.sets["ci"].warm_runners == 2
    assert world.runners_of("ci") == 0, "compute1 is full"
    # A warm runner is reserve: a full provider it finds holds no lower priority off.
    assert world.engine.fleet.hold_on("compute1", world.clock.now()) is None


async def test_old_history_is_pruned_from_the_state_database(tmp_path: Path) -> None:
    world = World(tmp_path, scale_set("ci", warm_pool=WarmPool(max=4, lookback=1)))
    world.clock.set(utc(12, 4, 9, 0))
    await world.start()
    world.engine.on_job_assigned("ci", "old", JobHint(), utc(10, 1, 8, 0))
    world.engine.on_job_assigned("ci", "new", JobHint(), utc(12, 4, 8, 0))
    world.engine.job_history.prune(world.clock.now(), force=True)
    assert list(world.engine.store.job_history(0.0)) == ["ci"]
    assert world.engine.store.job_history(0.0)["ci"] == [utc(12, 4, 8, 0)]


async def test_the_history_keeps_githubs_assignment_time_of_each_job(tmp_path: Path) -> None:
    world = World(tmp_path, scale_set("ci", warm_pool=POOL))
    await world.start()
    told = utc(12, 1, 8, 16)
    event = JobEvent(
        JobEventKind.ASSIGNED, "ci", "job-1", JobHint(), at=told + 3, times=JobTimes(told, told)
    )
    RunLoop.of(world.engine)._dispatch(world.engine.sets["ci"], event)
    untimed = JobEvent(JobEventKind.ASSIGNED, "ci", "job-2", JobHint(), at=told + 60)
    RunLoop.of(world.engine)._dispatch(world.engine.sets["ci"], untimed)
    assert world.engine.store.job_history(0.0)["ci"] == [told, told + 60]
