"""Crash-loop backoff (docs/troubleshooting.md, "its runners exit before connecting"): a runner
that ends, or never connects within start_timeout, before it ever connected counts against its
(scale set, provider); from the second in a row (``crash_backoff_after``) the provider is
skipped, 30 s doubling to 10 min; only a runner that connects forgives it."""

from __future__ import annotations

from dataclasses import replace

from rungar.config.model import Timing
from rungar.model.sentences import EXITED, NEVER_CONNECTED
from rungar.placement import Fleet
from rungar.placement.plan import Placed
from tests.unit.placement_helpers import TIMING, Script, fleet, provider, scale_set, try_place

CRASH_TIMING = replace(TIMING, crash_backoff_first=30, crash_backoff_max=600)


def two_sets() -> Fleet:
    return fleet(
        [provider("compute1"), provider("compute2")],
        [scale_set("rungar-c4-m8", ["compute1", "compute2"]), scale_set("other", ["compute1"])],
        CRASH_TIMING,
    )


def test_the_default_crash_backoff_starts_at_the_second_failure_30s_doubling_to_10_minutes() -> (
    None
):
    f = fleet([provider("compute1")], [scale_set("s", ["compute1"])], Timing())
    timing = Timing()
    assert (timing.crash_backoff_after, timing.crash_backoff_first) == (2, 30)
    assert timing.crash_backoff_max == 600
    waits = []
    for n in range(8):
        backoff = f.record_crash("s", "compute1", EXITED, now=1000 * n)
        waits.append(backoff.until - 1000 * n)
    assert waits == [0, 30, 60, 120, 240, 480, 600, 600]


def test_one_failure_is_not_a_loop_the_provider_is_still_tried() -> None:
    f = two_sets()
    f.record_crash("rungar-c4-m8", "compute1", EXITED, now=0)
    assert f.skip_reason("rungar-c4-m8", "compute1", 0) is None
    assert f.active_crash_loops(0) == []


def test_crash_backoff_after_sets_the_failure_the_backoff_starts_at() -> None:
    at_once = fleet(
        [provider("compute1")],
        [scale_set("s", ["compute1"])],
        replace(CRASH_TIMING, crash_backoff_after=1),
    )
    assert at_once.record_crash("s", "compute1", EXITED, now=0).until == 30
    third = fleet(
        [provider("compute1")],
        [scale_set("s", ["compute1"])],
        replace(CRASH_TIMING, crash_backoff_after=3),
    )
    waits = [third.record_crash("s", "compute1", EXITED, now=0).until for _ in range(4)]
    assert waits == [0, 0, 30, 60]


def test_runners_that_exit_before_connecting_make_their_scale_set_skip_the_provider() -> None:
    f = two_sets()
    for _ in range(3):
        f.record_crash("rungar-c4-m8", "compute1", EXITED, now=0)
    reason = f.skip_reason("rungar-c4-m8", "compute1", 1)
    assert reason == "its runners exit before connecting (3 in a row)"
    assert f.candidates("rungar-c4-m8", 1).order == ("compute2",)


def test_a_crash_loop_is_per_scale_set_other_scale_sets_keep_trying() -> None:
    f = two_sets()
    f.record_crash("rungar-c4-m8", "compute1", EXITED, now=0)
    assert f.skip_reason("other", "compute1", 1) is None


def test_the_provider_is_tried_again_once_the_wait_is_over() -> None:
    f = two_sets()
    f.record_crash("rungar-c4-m8", "compute1", NEVER_CONNECTED, now=0)
    f.record_crash("rungar-c4-m8", "compute1", NEVER_CONNECTED, now=0)
    assert f.skip_reason("rungar-c4-m8", "compute1", 29.9) == (
        "its runners never connect within start_timeout (2 in a row)"
    )
    assert f.skip_reason("rungar-c4-m8", "compute1", 30) is None


async def test_a_created_runner_does_not_forgive_a_crash_loop_a_connected_one_does() -> None:
    f = two_sets()
    f.record_crash("rungar-c4-m8", "compute1", EXITED, now=0)
    f.record_crash("rungar-c4-m8", "compute1", EXITED, now=0)
    placed = await try_place(f, "rungar-c4-m8", Script(), now=200)
    assert isinstance(placed, Placed) and placed.provider == "compute1"
    loop = f.crash_loop("rungar-c4-m8", "compute1")
    assert loop is not None and loop.refusals == 2, "creating is not connecting"
    assert f.record_connected("rungar-c4-m8", "compute1") is True
    assert f.crash_loop("rungar-c4-m8", "compute1") is None
    third = f.record_crash("rungar-c4-m8", "compute1", EXITED, now=300)
    assert third.refusals == 1, "the streak starts again after a connect"


def test_a_crash_loop_never_places_a_priority_hold() -> None:
    f = fleet(
        [provider("compute1")],
        [scale_set("high", ["compute1"], priority=10), scale_set("low", ["compute1"])],
        CRASH_TIMING,
    )
    f.record_crash("high", "compute1", EXITED, now=0)
    assert f.hold_full_providers("high", 1) == ()
    assert f.skip_reason("low", "compute1", 1) is None


def test_crash_loops_are_exported_and_restored_with_their_time_left() -> None:
    f = two_sets()
    f.record_crash("rungar-c4-m8", "compute1", EXITED, now=0)
    f.record_crash("rungar-c4-m8", "compute1", EXITED, now=0)
    again = two_sets()
    again.restore_crash_loops(f.export_crash_loops())
    assert again.skip_reason("rungar-c4-m8", "compute1", 10) == (
        "its runners exit before connecting (2 in a row)"
    )
