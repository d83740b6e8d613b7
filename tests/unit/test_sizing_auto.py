"""Auto sizing's planner, rule by rule, with the numbers of docs/admission.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from runnerd.admission.model import Policy
from runnerd.config import RunnerdConfig
from runnerd.sizing.auto import AutoPlan, ProfileHistory, failing_in_a_row, plan
from runnerd.sizing.changes import DONE, Change, Values
from runnerd.sizing.runs import SizingRun

from tests.unit.sizing_fixtures import HOUR, NOW, G, config, profile, run, series


def lowered(at: float, old: float = 8, new: float = 6, slots: int = 2) -> Change:
    return Change(
        profile="node",
        at=at,
        source="auto",
        kind="lower",
        reason="",
        old=Values(int(old * G), slots, 8.0),
        new=Values(int(new * G), slots, 8.0),
        state=DONE,
    )


def plan_one(
    cfg: RunnerdConfig,
    runs: Sequence[SizingRun],
    changes: Sequence[Change] = (),
    memory_max: float | None = 33,
    cpus: float | None = None,
    running: int = 0,
    cpus_since: float = 0.0,
) -> AutoPlan:
    histories = {
        "node": ProfileHistory(changes=tuple(changes), cpus_since=cpus_since, running=running)
    }
    mm = int(memory_max * G) if memory_max else None
    return plan(cfg, runs, mm, cpus, histories, NOW)


def test_a_lowering_moves_at_most_max_step_percent_in_256m_steps() -> None:
    cfg = config(profile(memory=8), max_step=25.0)
    result = plan_one(cfg, series(20, 1.0))  # needs 2G
    (change,) = result.changes
    assert change.kind == "lower" and change.new.memory == 6 * G  # 8G - 25% = 6G, not 2G


def test_a_lowering_waits_interval_after_the_last_change() -> None:
    cfg = config(profile(memory=6), max_step=25.0)
    recent = lowered(NOW - 0.5 * HOUR)
    assert plan_one(cfg, series(20, 1.0), [recent]).changes == ()
    change = plan_one(cfg, series(20, 1.0), [lowered(NOW - 1.5 * HOUR)]).changes[0]
    assert change.new.memory == int(4.5 * G)


def test_min_memory_bounds_a_lowering() -> None:
    cfg = config(profile(memory=8, min_memory=7 * G))
    assert plan_one(cfg, series(20, 1.0)).changes[0].new.memory == 7 * G


def test_a_lowering_waits_while_a_job_is_on_its_cap() -> None:
    runs = [*series(20, 1.0), run(NOW - 60, 1.0, killed=True, result="failed")]
    assert plan_one(config(profile(memory=8)), runs).changes == ()


def test_a_run_that_meets_the_lowered_cap_takes_the_lowering_back_at_once() -> None:
    cfg = config(profile(memory=6, slots=3))
    runs = [*series(20, 1.0), run(NOW - 60, 6.0, cap=6, met_cap=True, result="failed")]
    change = plan_one(cfg, runs, [lowered(NOW - 600, slots=2)]).changes[0]
    assert change.kind == "take_back"  # 10 minutes after the lowering: no raise_interval wait
    assert change.new == Values(8 * G, 2, 8.0)
    assert change.floor_memory == 8 * G and change.floor_until == NOW + 30 * 86400


def test_a_lowering_is_taken_back_even_after_another_auto_change_came_after_it() -> None:
    cfg = config(profile(memory=6, slots=2, cpus=10))
    runs = [*series(20, 1.0), run(NOW - 60, 6.0, cap=6, met_cap=True, result="failed")]
    cpus_up = Change(
        "node", NOW - 300, "auto", "cpus", "", Values(6 * G, 2, 8.0), Values(6 * G, 2, 10.0)
    )
    change = plan_one(cfg, runs, [lowered(NOW - 600, slots=2), cpus_up]).changes[0]
    assert change.kind == "take_back" and change.new == Values(8 * G, 2, 10.0)


def test_a_take_back_never_drops_a_slot_a_runner_is_in() -> None:
    # The lowering added a slot (2 → 3 under caps); three runners run when it is taken back.
    cfg = config(profile(memory=6, slots=3))
    runs = [*series(20, 1.0), run(NOW - 60, 6.0, cap=6, met_cap=True, result="failed")]
    lowering = replace(lowered(NOW - 600), new=Values(6 * G, 3, 8.0))
    change = plan_one(cfg, runs, [lowering], running=3).changes[0]
    assert change.kind == "take_back" and change.new == Values(8 * G, 3, 8.0)
    idle = plan_one(cfg, runs, [lowering], running=1).changes[0]
    assert idle.new == Values(8 * G, 2, 8.0)


def test_no_lowering_goes_under_a_taken_back_memory_for_30_days() -> None:
    cfg = config(profile(memory=8))
    back = Change(
        "node", NOW - 2 * HOUR, "auto", "take_back", "", Values(6 * G, 2, 8.0),
        Values(8 * G, 2, 8.0), floor_memory=8 * G, floor_until=NOW + 29 * 86400, state=DONE,
    )  # fmt: skip
    runs = series(20, 1.0, start=NOW - HOUR, every=60, duration=30)
    assert plan_one(cfg, runs, [back]).changes == ()


def test_a_memory_set_by_hand_is_not_taken_back_but_raised_to_the_need() -> None:
    cfg = config(profile(memory=5))  # by hand, after the auto lowering to 6G
    runs = [*series(20, 1.0), run(NOW - 60, 5.0, cap=5, met_cap=True, result="failed")]
    change = plan_one(cfg, runs, [lowered(NOW - 2 * HOUR)]).changes[0]
    assert change.kind == "raise" and change.new.memory == 6 * G  # 5G + 1G


def test_three_failures_in_a_row_on_two_branches_take_a_lowering_back() -> None:
    cfg = config(profile(memory=6))
    before = series(20, 1.0, cap=8, start=NOW - 5 * 86400)
    fails = [
        run(NOW - 300 + i, 1.0, cap=6, result="failed", branch=b, run_id=str(i))
        for i, b in enumerate(["main", "fix", "main"])
    ]
    change = plan_one(cfg, before + fails, [lowered(NOW - 600)]).changes[0]
    assert change.kind == "take_back" and "failed 3 times in a row at 6G" in change.reason


def test_failures_on_one_branch_or_of_one_workflow_run_do_not_take_it_back() -> None:
    one_branch = [
        run(NOW - 9 + i, 1.0, result="failed", branch="main", run_id=str(i)) for i in range(3)
    ]
    assert not failing_in_a_row(one_branch)
    retries = [
        run(NOW - 9 + i, 1.0, result="timed_out", branch=b, run_id="7") for i, b in enumerate("abc")
    ]
    assert not failing_in_a_row(retries)
    two = [
        run(NOW - 9 + i, 1.0, result="timed_out", branch=b, run_id=str(i))
        for i, b in enumerate("aab")
    ]
    assert failing_in_a_row(two)


def test_a_raise_goes_straight_to_the_need_and_waits_raise_interval() -> None:
    cfg = config(profile(memory=4))
    runs = [*series(20, 1.0, cap=4), run(NOW - 60, 4.0, cap=4, met_cap=True, result="failed")]
    assert plan_one(cfg, runs).changes[0].new.memory == 5 * G  # 4G + 1G, no max_step
    other = Change(
        "node", NOW - 0.5 * HOUR, "apply", "lower", "", Values(5 * G, 2, 8.0),
        Values(4 * G, 2, 8.0), state=DONE,
    )  # fmt: skip
    runs_since = [*runs[:-1], run(NOW - 60, 4.0, cap=4, met_cap=True, result="failed")]
    assert plan_one(cfg, runs_since, [other]).changes == ()


def test_max_memory_bounds_a_raise() -> None:
    cfg = config(profile(memory=4, max_memory=4 * G))
    runs = [*series(20, 1.0, cap=4), run(NOW - 60, 4.0, cap=4, met_cap=True, result="failed")]
    result = plan_one(cfg, runs)
    assert result.changes == () and "max_memory" in result.notes[0]


def test_jobs_that_waited_a_minute_get_one_more_slot_while_memory_max_holds_it() -> None:
    cfg = config(profile(memory=4, slots=2))
    runs = series(5, 3.5, cap=4, slot_wait=120.0, start=NOW - 5 * HOUR)
    change = plan_one(cfg, runs).changes[0]
    assert change.kind == "slots" and change.new.slots == 3
    assert (
        plan_one(
            config(profile(memory=16, slots=2)), series(5, 15.0, cap=16, slot_wait=120.0)
        ).changes
        == ()
    )


def test_without_max_slots_or_memory_max_no_slot_is_added() -> None:
    runs = series(5, 3.5, cap=4, slot_wait=120.0, start=NOW - 5 * HOUR)
    assert plan_one(config(profile(memory=4), memory_max=None), runs, memory_max=None).changes == ()
    capped = config(profile(memory=4, slots=2, max_slots=3), memory_max=None)
    assert plan_one(capped, runs, memory_max=None).changes[0].new.slots == 3


def test_changes_in_one_look_count_against_each_other() -> None:
    cfg = config(profile("a", memory=4, slots=2), profile("node", memory=4, slots=2), memory_max=20)
    runs = series(5, 3.5, cap=4, slot_wait=120.0, start=NOW - 5 * HOUR)
    runs += series(5, 3.5, cap=4, slot_wait=120.0, profile="a", start=NOW - 5 * HOUR)
    result = plan(cfg, runs, 20 * G, None, {}, NOW)
    assert [c.profile for c in result.changes] == ["a"]  # 4 × 4G + 4G = 20G: one slot fits


def test_cpus_go_up_when_one_job_averages_70_percent_at_the_median_of_3_runs() -> None:
    cfg = config(profile(memory=2.25, cpus=8), max_step=25.0)
    runs = series(3, 1.0, cap=2.25, avg_cpu=6.0, start=NOW - 3 * HOUR)
    change = plan_one(cfg, runs, cpus=32.0).changes[0]
    assert change.kind == "cpus" and change.new.cpus == 10.0
    slow = series(3, 1.0, cap=2.25, avg_cpu=5.0, start=NOW - 3 * HOUR)
    assert plan_one(cfg, slow, cpus=32.0).changes == ()


def test_cpu_evidence_starts_over_when_runnerd_starts_running_the_cpus() -> None:
    cfg = config(profile(memory=2.25, cpus=8))
    runs = series(3, 1.0, cap=2.25, avg_cpu=6.0, start=NOW - 3 * HOUR)
    assert plan_one(cfg, runs, cpus=32.0, cpus_since=NOW - HOUR).changes == ()


def test_no_cpu_raise_past_the_slice_and_sizing_says_why() -> None:
    cfg = config(profile(memory=2.25, cpus=8))
    runs = series(3, 1.0, cap=2.25, avg_cpu=7.0, start=NOW - 3 * HOUR)
    result = plan_one(cfg, runs, cpus=8.0)
    assert result.changes == ()
    assert result.notes[0].startswith("node: No CPU raise: acme/web build averages 7.0")


def test_cpus_go_down_toward_twice_the_heaviest_p95_average() -> None:
    cfg = config(profile(memory=2.25, cpus=8), max_step=50.0)
    runs = series(10, 1.25, cap=2.25, avg_cpu=1.2)
    assert plan_one(cfg, runs).changes[0].new.cpus == 4.0  # 8 - 50%, toward 3
    unmeasured = [*runs[:-1], run(NOW - 60, 1.25, cap=2.25, avg_cpu=None)]
    assert plan_one(cfg, unmeasured).changes == ()


def test_under_measured_slots_fit_at_the_jobs_p95_peaks() -> None:
    cfg = config(profile(memory=8, slots=4), policy=Policy.MEASURED, memory_max=20)
    runs = series(5, 2.0, slot_wait=120.0, start=NOW - 5 * HOUR)
    assert plan_one(cfg, runs, memory_max=20).changes[0].new.slots == 5  # 5 × 2.5G fits 20G
