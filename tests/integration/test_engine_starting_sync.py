"""The 5-second sync of starting runners, on a fake clock: a runner that connects between two
reconcile passes is seen idle, and its boot timed, at the next sync, not the next pass; one
whose machine stops before it connects ends then; a runner GitHub does not list yet is left to
the pass; nothing to ask about asks nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rungar.model.machine import MachineState
from rungar.model.runner import GitHubState, RunnerState
from tests.integration.test_engine_scaling import World, scale_set


def boot_observations(world: World, name: str) -> list[float]:
    histogram = world.engine.metrics.boot_duration.labels(name, "compute1")
    return [histogram._sum.get()]  # prometheus_client has no getter


async def test_a_runner_that_connects_is_seen_idle_at_the_next_sync_not_the_next_pass(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("ci"))
    await world.start()
    await world.demand("ci", 1)
    (record,) = world.engine.runners.live("ci")
    assert record.state is RunnerState.STARTING
    world.clock.advance(7)
    world.github.start_runner(record.name, busy=False)

    world.github.calls.clear()
    loop = asyncio.ensure_future(world.engine.starting.forever())
    await asyncio.sleep(0)
    world.clock.advance(5)  # the sync's interval: no reconcile pass runs in this test
    for _ in range(50):  # event-loop turns, not time: the clock stands still
        if record.state is not RunnerState.STARTING:
            break
        await asyncio.sleep(0)
    loop.cancel()

    assert (record.state, record.github) == (RunnerState.IDLE, GitHubState.IDLE)
    assert boot_observations(world, "ci") == [12.0], "created at 0, seen connected at 12 s"
    assert [c[0] for c in world.github.calls] == ["list_runners"], "one shared listing"


async def test_a_runner_github_does_not_list_yet_is_left_to_the_pass(tmp_path: Path) -> None:
    world = World(tmp_path, scale_set("ci"))
    await world.start()
    await world.demand("ci", 1)
    (record,) = world.engine.runners.live("ci")
    assert await world.engine.sync_starting() == []
    assert (record.state, record.github) == (RunnerState.STARTING, GitHubState.UNKNOWN)


async def test_with_no_runner_starting_the_sync_asks_github_nothing(tmp_path: Path) -> None:
    world = World(tmp_path, scale_set("ci"))
    await world.start()
    world.github.calls.clear()
    assert await world.engine.sync_starting() == []
    assert world.github.calls == []


async def test_a_runner_whose_machine_stops_before_connecting_ends_at_the_next_sync(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("ci"))
    await world.start()
    await world.demand("ci", 1)
    (record,) = world.engine.runners.live("ci")
    world.providers["compute1"].set_state(record.name, MachineState.STOPPED)  # exits at once
    await world.engine.sync_starting()
    await world.engine.drain_tasks()
    assert record.removal_reason == "ended"
    assert world.engine.fleet.crash_loop("ci", "compute1") is not None, "a crash loop starts"
    assert world.github.runners == {}, "its registration is removed"
    assert world.providers["compute1"].machines == [], "its machine is deleted"
