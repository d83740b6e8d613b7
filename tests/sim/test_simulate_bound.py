"""The large-job bound of ``benchmarks/fleet.py`` (:mod:`rungar.simulate.bound`): the least
wait a job could have had from the replay's state as it is queued, counting booting runners
and the same scale set's jobs queued before it (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio

import pytest

from rungar.config.model import Placement
from rungar.model.machine import Created
from rungar.simulate.backends import RunnerdHost
from rungar.simulate.bound import BoundWatch, checked_bounds, place_in_turn, room_slots
from rungar.simulate.history import SimJob
from rungar.simulate.models import RUNNERD_BOOT
from rungar.simulate.run import world_for
from rungar.simulate.scenario import Scenario
from rungar.simulate.synthetic import START, fragmented_fleet
from rungar.simulate.world import _Runner

BOOT = RUNNERD_BOOT


def job(label: str, at: float, duration: float) -> SimJob:
    return SimJob(label, "acme/app", "ci", label, START + at, duration, 0, 0, None, "success",
                  label)  # fmt: skip


def watched(jobs: list[SimJob], hosts: int = 1, scenario: Scenario | None = None) -> BoundWatch:
    config, models, _ = fragmented_fleet(hosts=hosts, days=0.01)
    world, _ = world_for(scenario or Scenario(), config, models, jobs, BoundWatch)
    assert isinstance(world, BoundWatch)
    asyncio.run(world.run())
    return world


def test_small_runners_still_booting_keep_their_room_until_the_jobs_they_take_end() -> None:
    # Eight small jobs fill the 32G host; the large one is queued while their runners boot.
    jobs = [job("small", 0.0, 1000.0) for _ in range(8)] + [job("large", 1.0, 600.0)]
    world = watched(jobs)
    (large,) = [i for i, j in enumerate(world.jobs) if j.label == "large"]
    # The small runners connect at BOOT and run to BOOT + 1000; then the large one boots.
    assert world.bounds[large] == pytest.approx(BOOT + 1000.0 + BOOT - 1.0)
    assert world.starts[large] - world.jobs[large].queued_at >= world.bounds[large] - 1e-6


def test_large_jobs_queued_earlier_take_the_room_first() -> None:
    # Room for two large runners; the third waits for the first to end.
    jobs = [job("large", float(i), 600.0) for i in range(3)]
    world = watched(jobs)
    bounds = [world.bounds[i] for i in range(3)]
    assert bounds[0] == pytest.approx(BOOT)
    assert bounds[1] == pytest.approx(BOOT)
    assert bounds[2] == pytest.approx(BOOT + 600.0 + BOOT - 2.0)
    assert checked_bounds(world) == (3, 0)


def test_the_scale_sets_max_runners_counts_as_the_room_does() -> None:
    # Three hosts have room for six large runners; max_runners: 4 lets the fifth wait.
    jobs = [job("large", float(i), 600.0) for i in range(5)]
    world = watched(jobs, hosts=3)
    assert world.bounds[3] == pytest.approx(BOOT)
    assert world.bounds[4] == pytest.approx(BOOT + 600.0 + BOOT - 4.0)


def test_a_host_opens_a_slot_each_time_its_free_memory_passes_another_reservation() -> None:
    _, models, _ = fragmented_fleet(hosts=1, days=0.01)
    host = RunnerdHost(models.of("compute1"), START)
    runners = {}
    for i in range(6):  # 24G of 32G taken: no room for 16G now
        name = f"s{i}"
        assert isinstance(host.create(name, "small", {"profile": "small"}, (), START), Created)
        runners[name] = _Runner(name, "small", "compute1", START)
    ends = {f"s{i}": START + 100.0 * (i + 1) for i in range(6)}
    need = {"compute1": 16 * 2**30}
    # 16G free once two have ended, 32G once all six have.
    assert room_slots({"compute1": host}, runners, ends, need, START) == [START + 200, START + 600]
    assert room_slots({}, runners, ends, need, START) == []


def test_runners_are_placed_in_turn_each_as_early_as_room_and_places_allow() -> None:
    # Two slots (one open now, one at 50); places for two; three runners of 100 s each.
    assert place_in_turn([100.0, 100.0, 100.0], [0.0, 50.0], [0.0, 0.0], 0.0, 0.0) == 100.0
    # A single place: each waits for the one before it to end (boot 5 s counted).
    assert place_in_turn([100.0, 100.0], [0.0, 0.0], [0.0], 5.0, 0.0) == 105.0
    assert place_in_turn([100.0], [], [0.0], 5.0, 0.0) == float("inf")


@pytest.mark.parametrize(
    ("placement", "days"),
    [(Placement.PACK, 0.5), pytest.param(Placement.SPREAD, 3.0, marks=pytest.mark.long)],
)
def test_no_large_job_starts_before_its_bound_with_holds_or_without(
    placement: Placement, days: float
) -> None:
    config, models, jobs = fragmented_fleet(days=days, seed=2)
    for scenario in (Scenario(placement=placement), Scenario(placement=placement,
                                                             no_priority=True)):  # fmt: skip
        world, _ = world_for(scenario, config, models, jobs, BoundWatch)
        assert isinstance(world, BoundWatch)
        asyncio.run(world.run())
        checks, broken = checked_bounds(world)
        assert checks == len(world.waits["large"]) >= 10
        assert broken == 0
        # Not a bound of nothing: some large jobs could not start for minutes.
        assert max(world.bounds.values()) > 300.0
