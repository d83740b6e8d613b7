"""Sizing advice, rule by rule, with the documented numbers (docs/admission.md, "Sizing")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from runnerd.admission.model import Margin, Policy
from runnerd.sizing.advise import (
    Action,
    Budget,
    ProfileAdvice,
    SizingRules,
    advise,
    advise_profile,
    need,
)
from runnerd.sizing.runs import SizingRun

from tests.unit.sizing_fixtures import NOW, G, M, config, profile, run, series

RULES = SizingRules(Margin(15.0), min_jobs=10)


def advise_one(
    runs: Sequence[SizingRun],
    memory: float = 8,
    slots: int = 2,
    policy: Policy = Policy.CAPS,
    memory_max: float | None = 33,
    memory_since: float | None = None,
    margin: Margin | None = None,
) -> ProfileAdvice:
    budget = Budget(int(memory_max * G) if memory_max else None, 0, 0)
    node = profile(memory=memory, slots=slots)
    rules = RULES if margin is None else SizingRules(margin, RULES.min_jobs)
    return advise_profile(node, runs, rules, policy, budget, NOW, memory_since)


def test_the_need_is_the_largest_peak_plus_1g_when_the_margin_is_less_rounded_to_256m() -> None:
    assert need(3 * G, Margin(15.0)) == 4 * G  # 15% of 3G is 0.45G: 1G of page cache wins
    assert need(10 * G, Margin(15.0)) == int(11.5 * G)  # 15% of 10G is 1.5G
    assert need(int(3.1 * G), Margin(15.0)) % (256 * M) == 0


def test_the_need_follows_the_heaviest_run_not_a_percentile() -> None:
    runs = [*series(30, 1.5), run(NOW - 3600, 5.0, job="e2e"), *series(20, 1.0, job="e2e")]
    advice = advise_one(runs)
    assert advice.need == need(5 * G, Margin(15.0)) == 6 * G
    assert advice.p95 == int(1.5 * G) < advice.largest == 5 * G  # percentiles say how rare


def test_below_min_jobs_there_is_no_advice_only_the_peaks() -> None:
    advice = advise_one(series(9, 2.0))
    assert advice.action is Action.TOO_FEW
    assert advice.largest == 2 * G and advice.new_memory is None
    assert "fewer than min_jobs 10" in advice.line


def test_lowering_comes_when_the_need_is_a_tenth_or_more_under_memory() -> None:
    lowered = advise_one(series(20, 3.0))  # needs 4G of 8G
    assert lowered.action is Action.LOWER and lowered.new_memory == 4 * G
    kept = advise_one(series(20, 6.25))  # needs 7.25G of 8G: under a tenth less
    assert kept.action is Action.NONE and kept.new_memory is None


def test_a_run_at_a_larger_cap_counts_at_no_more_than_the_current_cap() -> None:
    runs = [*series(20, 3.0), run(NOW - 3600, 13.0, cap=14)]
    advice = advise_one(runs)
    assert advice.largest == 8 * G
    assert advice.jobs[0].largest == 8 * G


def test_a_job_that_needed_more_at_a_larger_cap_keeps_the_memory_and_says_so() -> None:
    runs = series(20, 3.0, cap=14, every=60) + series(20, 3.0, start=NOW - 86400)
    runs[0] = run(runs[0].finished_at, 11.0, cap=14)
    advice = advise_one(runs)
    assert advice.action is Action.NONE
    assert "needed 12.75G at a larger memory, and none ran out at 8G" in advice.line


def test_a_run_that_met_its_own_limit_counts_at_least_its_cap_and_raises() -> None:
    runs = [*series(20, 3.0), run(NOW - 60, 2.0, met_cap=True, result="failed")]
    advice = advise_one(runs, memory_max=None)
    assert advice.jobs[0].largest == 8 * G
    assert advice.action is Action.RAISE and advice.new_memory == need(8 * G, Margin(15.0))
    assert "1 run met the 8G cap since the profile had it" in advice.line


def test_a_raise_reads_only_runs_since_the_profile_got_its_memory() -> None:
    runs = [*series(20, 3.0), run(NOW - 5 * 86400, 2.0, met_cap=True, result="failed")]
    advice = advise_one(runs, memory_since=NOW - 86400)
    assert advice.action is not Action.RAISE


def test_a_job_on_its_cap_blocks_lowering_until_3_clean_runs_in_a_row() -> None:
    base = series(20, 3.0, start=NOW - 10 * 86400)
    hit = [run(NOW - 5 * 86400, 3.0, killed=True, result="failed")]
    two = [run(NOW - 4 * 86400 + i, 3.0) for i in range(2)]
    held = advise_one(base + hit + two)
    assert held.action is Action.NONE and held.on_cap == 1
    assert "1 job on its cap until 3 runs in a row succeed clear of it" in held.line
    three = [*two, run(NOW - 3 * 86400, 3.0)]
    assert advise_one(base + hit + three).action is Action.LOWER


def test_a_failure_between_clean_runs_restarts_the_count() -> None:
    runs = [
        *series(20, 3.0, start=NOW - 10 * 86400),
        run(NOW - 5 * 86400, 3.0, killed=True, result="failed"),
        run(NOW - 4 * 86400, 3.0),
        run(NOW - 4 * 86400 + 1, 3.0, result="failed"),
        run(NOW - 4 * 86400 + 2, 3.0),
        run(NOW - 4 * 86400 + 3, 3.0),
    ]
    assert advise_one(runs).on_cap == 1


def test_a_job_that_got_lighter_stops_holding_the_cap_after_60_runs() -> None:
    heavy = [run(NOW - 25 * 86400, 6.5)]
    light = series(60, 2.0, start=NOW - 20 * 86400)
    assert advise_one(heavy + light[:59]).need == need(int(6.5 * G), Margin(15.0))
    assert advise_one(heavy + light).need == 3 * G


def test_cancelled_runs_are_left_out_unless_one_met_its_cap() -> None:
    runs = [*series(20, 3.0), run(NOW - 60, 7.0, result="cancelled")]
    assert advise_one(runs).largest == 3 * G


def test_lowering_adds_the_slots_the_memory_holds_when_jobs_waited_a_minute() -> None:
    runs = series(20, 3.0, slot_wait=90.0)
    advice = advise_one(runs, slots=2)
    assert advice.action is Action.LOWER and advice.new_memory == 4 * G
    assert advice.new_slots == 4  # 2 × 8G now holds 4 × 4G, and no more


def test_time_waiting_for_the_host_does_not_add_slots() -> None:
    advice = advise_one(series(20, 3.0, host_wait=600.0))
    assert advice.new_slots == 2 and not advice.wants_slots


def test_slots_busy_half_the_time_add_slots() -> None:
    runs = series(20, 3.0, every=1200.0, duration=1200.0, start=NOW - 20 * 1200)
    advice = advise_one(runs, slots=1)
    assert advice.busy >= 0.5 and advice.new_slots == 2


def test_a_small_profile_whose_runs_never_met_it_is_kept_without_a_contradiction() -> None:
    # Peaks of 118M-135M under a 160M cap, none met it: the 1G room for page cache is what
    # makes the need larger than memory, and the line says so instead of "its jobs need 1.25G".
    runs = [run(NOW - 3600 - i * 60, (118 + i) / 1024, cap=160 / 1024) for i in range(18)]
    advice = advise_one(runs, memory=160 / 1024)
    assert advice.action is Action.NONE and advice.need == int(1.25 * G)
    assert advice.line.startswith("keep 160M: no run met it, its heaviest job peaked at 135M")
    assert "1G of room for page cache (page_cache_room) it would need 1.25G" in advice.line


def test_the_page_cache_room_is_a_setting_and_a_small_one_lets_small_profiles_be_advised() -> None:
    runs = [run(NOW - 3600 - i * 60, (118 + i) / 1024, cap=1) for i in range(18)]
    small = Margin(room=32 * M)
    advice = advise_one(runs, memory=1, margin=small)
    assert advice.action is Action.LOWER and advice.new_memory == 256 * M


def test_past_runs_are_busy_against_the_slots_they_ran_under_not_todays() -> None:
    # Every slot busy the whole time while the profile had 1 slot: today's 2 do not halve it.
    runs = [
        replace(r, slots=1)
        for r in series(20, 3.0, every=1200.0, duration=1200.0, start=NOW - 20 * 1200)
    ]
    advice = advise_one(runs, slots=2)
    assert 0.9 <= advice.busy <= 1.1 and advice.wants_slots


def test_a_raise_lowers_slots_only_when_memory_max_cannot_hold_them() -> None:
    runs = [*series(20, 3.0), run(NOW - 60, 8.0, met_cap=True, result="failed")]
    advice = advise_one(runs, slots=3, memory_max=33)  # 3 × 9.25G = 27.75G fits 33G
    assert (advice.new_memory, advice.new_slots) == (int(9.25 * G), 3)
    tight = advise_one(runs, slots=3, memory_max=20)
    assert tight.new_slots == 2
    assert "slots 3 → 2, as MemoryMax cannot hold 3" in tight.line


def test_when_memory_max_cannot_hold_one_the_advice_is_to_grow_the_slice() -> None:
    runs = [*series(20, 3.0), run(NOW - 60, 8.0, met_cap=True, result="failed")]
    advice = advise_one(runs, memory_max=9)
    assert advice.action is Action.GROW_SLICE and not advice.applicable
    assert advice.line.startswith("grow the slice first") and "nothing to apply" in advice.line


def test_under_measured_admission_advice_never_changes_slots() -> None:
    runs = series(20, 3.0, slot_wait=90.0)
    advice = advise_one(runs, policy=Policy.MEASURED)
    assert advice.new_slots == 2 and advice.action is Action.LOWER
    assert "more slots may fit" in advice.line and "runnerd simulate --slots node=3" in advice.line
    raised = advise_one(
        [*runs, run(NOW - 60, 8.0, met_cap=True, result="failed")],
        policy=Policy.MEASURED,
        memory_max=10,
        slots=4,
    )
    assert raised.action is Action.RAISE and raised.new_slots == 4  # one runner fits 10G


def test_advise_reads_every_profile_against_the_others_caps() -> None:
    cfg = config(profile("jvm", memory=10, slots=2), profile("node", memory=8, slots=1))
    runs = [run(NOW - 60, 8.0, met_cap=True, result="failed"), *series(20, 3.0)]
    result = {a.profile: a for a in advise(cfg, runs, 33 * G, NOW)}
    assert result["node"].new_slots == 1  # 33G - 20G for jvm holds one 9.25G node
    assert result["jvm"].action is Action.TOO_FEW
