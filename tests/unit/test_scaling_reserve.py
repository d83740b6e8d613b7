"""min_runners is an idle reserve, and real work comes before it (docs/scale-sets.md, "The idle
reserve").

desired = min(max_runners, min_runners in force + assigned jobs): the reserve is kept idle
*beyond* the assigned jobs, not a floor on the total.
A reserve refill never takes a priority hold, and skips a provider another scale set's assigned
jobs are waiting on, so a higher-priority reserve never starves lower-priority work.
"""

from __future__ import annotations

from rungar.config.model import ScaleSetConfig, ScaleSetProvider
from rungar.engine.create.placing import place
from rungar.placement import Fleet
from rungar.placement.plan import NotPlaced, Placed
from rungar.scaling import desired
from tests.unit.placement_helpers import FULL, Script, fleet, provider, scale_set, try_place

T0 = 1000.0


def config(min_runners: int, max_runners: int = 10) -> ScaleSetConfig:
    return ScaleSetConfig(
        "s", max_runners=max_runners, min_runners=min_runners, providers=(ScaleSetProvider("a"),)
    )


def test_the_reserve_comes_on_top_of_the_assigned_jobs() -> None:
    found = desired(config(2), 3, paused=False, now=T0)
    assert (found.total, found.work, found.reserve) == (5, 3, 2)


def test_a_queued_job_does_not_fill_the_reserve() -> None:
    # With a reserve of 1 and one job queued, two runners start: one for it, one kept idle.
    found = desired(config(1), 1, paused=False, now=T0)
    assert (found.total, found.work, found.reserve) == (2, 1, 1)


def test_a_busy_runner_covers_its_own_job_and_nothing_more() -> None:
    # GitHub counts running jobs as assigned: 2 running + 1 queued, reserve 1 -> 4 runners.
    assert desired(config(1), 3, paused=False, now=T0).total == 4


def test_the_ceiling_cuts_the_reserve_before_the_work() -> None:
    found = desired(config(2, max_runners=4), 3, paused=False, now=T0)
    assert (found.total, found.work, found.reserve) == (4, 3, 1)
    found = desired(config(2, max_runners=4), 6, paused=False, now=T0)
    assert (found.total, found.work, found.reserve) == (4, 4, 0)


def test_no_jobs_and_no_reserve_wants_no_runner_and_paused_wants_none() -> None:
    assert desired(config(0), 0, paused=False, now=T0).total == 0
    assert desired(config(3), 5, paused=True, now=T0).total == 0


def two_priorities() -> Fleet:
    return fleet(
        [provider("a"), provider("b")],
        [scale_set("high", ["a"], priority=10), scale_set("low", ["a", "b"])],
    )


async def reserve_place(f: Fleet, name: str, script: Script, now: float) -> Placed | NotPlaced:
    return await place(
        f,
        name,
        now=lambda: now,
        create=script.create,
        delete=script.delete,
        settle=script.settle,
        reserve=True,
    )


async def test_a_reserve_refill_that_finds_a_provider_full_holds_no_one_off() -> None:
    f = two_priorities()
    result = await reserve_place(f, "high", Script(answers={"a": FULL}), T0)
    assert isinstance(result, NotPlaced)
    assert f.hold_on("a", T0) is None
    assert not f.candidates("high", T0 + 1, reserve=True).any
    assert f.hold_on("a", T0 + 1) is None, "asking again for the reserve holds nothing either"
    assert f.skip_reason("low", "a", T0 + 1) is None


async def test_assigned_work_that_finds_a_provider_full_still_holds_lower_ones_off() -> None:
    f = two_priorities()
    await try_place(f, "high", Script(answers={"a": FULL}), T0)
    assert f.skip_reason("low", "a", T0 + 1) == "held for scale set high"


async def test_a_reserve_refill_yields_to_lower_priority_work_waiting_for_room() -> None:
    f = two_priorities()
    await try_place(f, "low", Script(answers={"a": FULL, "b": FULL}), T0)  # low's job waits
    assert f.waiting_for_room("a", T0 + 1) == ["low"]
    reason = f.skip_reason("high", "a", T0 + 1, reserve=True)
    assert reason == "kept for the assigned jobs of scale set low"
    assert f.skip_reason("high", "a", T0 + 1) is None, "high's own assigned work still tries"
    script = Script()
    result = await reserve_place(f, "high", script, T0 + 1)
    assert isinstance(result, NotPlaced) and script.created_on() == []


async def test_the_wait_ends_when_the_work_places_its_runner_or_stops_asking() -> None:
    f = two_priorities()
    await try_place(f, "low", Script(answers={"a": FULL, "b": FULL}), T0)
    duration = f.timing.hold_duration
    assert f.skip_reason("high", "a", T0 + duration + 1, reserve=True) is None, "lapsed"
    await try_place(f, "low", Script(answers={"a": FULL, "b": FULL}), T0 + 100)
    placed = await try_place(f, "low", Script(), T0 + 200)  # backoffs over: room on a
    assert isinstance(placed, Placed)
    assert f.waiting_for_room("a", T0 + 200) == []
