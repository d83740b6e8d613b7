"""Predictions from job history, one test per rule of docs/admission.md, "Measured admission"."""

from __future__ import annotations

from dataclasses import replace

from runnerd.admission.job_runs import JobRuns
from runnerd.admission.model import CANCELLED, FAILURE, SUCCESS, Margin, OverRun, Run
from runnerd.admission.predict import (
    PredictionRules,
    ProfileStats,
    largest,
    on_cap_hold,
    p95,
    predict,
    predict_cpu,
    predict_memory,
    profile_stats,
    round_up,
)

G = 1024**3
M = 1024**2
DAY = 86400.0
NOW = 100 * DAY
CAP = 22 * G
RULES = PredictionRules(margin=Margin(0.0, 1 * G), min_jobs=10)
PROFILE = ProfileStats(
    runs=50, p95_peak=5 * G, max_peak=9 * G, cpu_runs=50, p95_cpu=2.0, max_cpu=6.0
)


def runs(peaks_g: list[float], result: str = SUCCESS, start: float = NOW - 20 * DAY) -> list[Run]:
    return [
        Run(finished_at=start + i * 60, result=result, peak=int(p * G), cap=CAP)
        for i, p in enumerate(peaks_g)
    ]


def test_p95_is_nearest_rank_so_twenty_runs_drop_the_single_heaviest() -> None:
    assert p95([float(v) for v in range(1, 21)]) == 19
    assert p95([1.0, 5.0, 3.0]) == 5


def test_a_job_with_twenty_successful_runs_reserves_its_p95_peak_plus_the_margin() -> None:
    memory, basis = predict_memory(runs([float(v) for v in range(1, 21)]), PROFILE, CAP, RULES, NOW)
    assert memory == 20 * G
    assert basis == "the p95 peak of its job's last 20 runs + the margin"


def test_a_percent_margin_is_added_and_rounded_up_to_256M() -> None:
    rules = PredictionRules(margin=Margin(15.0), min_jobs=10)
    memory, _ = predict_memory(runs([1.0] * 20), PROFILE, CAP, rules, NOW)
    assert memory == round_up(int(1.15 * G)) == 1280 * M


def test_the_p95_tier_starts_at_min_jobs_successful_runs_not_twenty() -> None:
    # 12 successes with min_jobs = 10: the p95 of those 12 (the largest, under 20 values),
    # not the larger of the job's own largest and its profile's p95 (5G) that 20 would ask for.
    history = runs([1.0] * 11 + [1.5])
    memory, basis = predict_memory(history, PROFILE, CAP, RULES, NOW)
    assert memory == round_up(int(2.5 * G))
    assert basis == "the p95 peak of its job's last 12 runs + the margin"


def test_the_p95_reads_only_the_last_twenty_successful_runs_once_there_are_more() -> None:
    history = runs([9.0] * 5 + [1.0] * 20)
    memory, basis = predict_memory(history, PROFILE, CAP, RULES, NOW)
    assert memory == 2 * G
    assert basis == "the p95 peak of its job's last 20 runs + the margin"


def test_min_jobs_above_twenty_raises_the_runs_a_p95_needs() -> None:
    rules = PredictionRules(margin=Margin(0.0, 1 * G), min_jobs=30)
    history = runs([1.0] * 25)
    memory, basis = predict_memory(history, PROFILE, CAP, rules, NOW)
    assert memory == 2 * G  # own largest (two succeeded), not a p95 of 25 runs
    assert "largest peak of its job's 25 runs" in basis


def test_failed_runs_among_the_last_twenty_successes_count_in_the_p95() -> None:
    history = (
        runs([1.0] * 10)
        + runs([8.0, 8.0], FAILURE, NOW - 19 * DAY)
        + runs([1.0] * 10, start=NOW - 18 * DAY)
    )
    memory, basis = predict_memory(history, PROFILE, CAP, RULES, NOW)
    assert memory == 9 * G
    assert "last 22 runs" in basis


def test_a_run_that_met_its_cap_counts_at_least_its_cap_in_the_profile() -> None:
    hit = Run(NOW - DAY, FAILURE, peak=3 * G, cap=8 * G, met_cap=True)
    assert hit.counted_peak == 8 * G
    assert profile_stats([hit]).max_peak == 8 * G


def test_two_successful_runs_let_one_copy_reserve_its_own_largest_peak() -> None:
    memory, _ = predict_memory(runs([2.0, 3.0]), PROFILE, CAP, RULES, NOW)
    assert memory == 4 * G


def test_a_copy_beside_another_takes_the_larger_of_its_own_and_the_profile_p95() -> None:
    memory, basis = predict_memory(runs([2.0, 3.0]), PROFILE, CAP, RULES, NOW, beside=True)
    assert memory == 6 * G
    assert "another copy runs beside it" in basis


def test_one_run_takes_the_larger_of_the_profile_p95_and_its_own_peak() -> None:
    assert predict_memory(runs([2.0]), PROFILE, CAP, RULES, NOW)[0] == 6 * G
    assert predict_memory(runs([7.0]), PROFILE, CAP, RULES, NOW)[0] == 8 * G


def test_a_job_with_no_runs_gets_its_profiles_largest_peak_plus_the_margin() -> None:
    memory, basis = predict_memory([], PROFILE, CAP, RULES, NOW)
    assert memory == 10 * G
    assert "no runs yet" in basis


def test_a_profile_without_min_jobs_runs_reserves_the_cap() -> None:
    thin = ProfileStats(runs=9, p95_peak=G, max_peak=G)
    assert predict_memory(runs([1.0] * 30), thin, CAP, RULES, NOW) == (
        CAP,
        "its cap, as its profile has fewer than 10 runs",
    )


def test_a_job_whose_every_run_was_cancelled_reserves_the_cap() -> None:
    memory, basis = predict_memory(runs([1.0, 1.0], CANCELLED), PROFILE, CAP, RULES, NOW)
    assert memory == CAP
    assert "cancelled" in basis


def test_a_run_that_met_its_cap_holds_the_job_at_its_cap_until_three_clean_runs() -> None:
    hit = Run(NOW - 2 * DAY, FAILURE, peak=21 * G, cap=CAP, met_cap=True)
    before = runs([1.0] * 20, start=NOW - 10 * DAY)
    after = runs([1.0, 1.0], start=NOW - DAY)
    assert predict_memory([*before, hit, *after], PROFILE, CAP, RULES, NOW)[0] == CAP
    third = runs([1.0, 1.0, 1.0], start=NOW - DAY)
    assert predict_memory([*before, hit, *third], PROFILE, CAP, RULES, NOW)[0] < CAP


def test_cancelled_runs_count_toward_the_three_clean_runs() -> None:
    hit = Run(NOW - 2 * DAY, FAILURE, peak=21 * G, cap=CAP, killed_for_memory=True)
    after = [*runs([1.0, 1.0], start=NOW - DAY), *runs([1.0], CANCELLED, NOW - DAY / 2)]
    assert not on_cap_hold([hit, *after], NOW, 7 * DAY)


def test_a_failure_breaks_the_clean_streak() -> None:
    hit = Run(NOW - 2 * DAY, FAILURE, peak=21 * G, cap=CAP, met_cap=True)
    after = [
        *runs([1.0, 1.0], start=NOW - DAY),
        *runs([1.0], FAILURE, NOW - DAY / 2),
        *runs([1.0], start=NOW - 1000),
    ]
    assert on_cap_hold([hit, *after], NOW, 7 * DAY)


def test_the_cap_hold_ends_after_seven_days() -> None:
    hit = Run(NOW - 8 * DAY, FAILURE, peak=21 * G, cap=CAP, met_cap=True)
    assert not on_cap_hold([hit], NOW, 7 * DAY)
    assert on_cap_hold([hit], NOW - 2 * DAY, 7 * DAY)


def test_a_run_past_what_it_reserved_has_its_job_reserve_the_larger_peak_for_seven_days() -> None:
    history = runs([1.0] * 20, start=NOW - 20 * DAY)
    over = Run(NOW - DAY, SUCCESS, peak=int(6.5 * G), cap=CAP, reserved=2 * G)
    memory, basis = predict_memory([*history, over], PROFILE, CAP, RULES, NOW)
    assert memory == int(6.5 * G)  # max(recent largest, that run's peak), in 256M steps
    assert "went past what it reserved" in basis
    later = NOW + 7 * DAY
    assert predict_memory([*history, over], PROFILE, CAP, RULES, later)[0] == 2 * G


def test_a_cancelled_run_past_what_it_reserved_counts_as_any_other_for_seven_days() -> None:
    from runnerd.admission.job_runs import JobRuns

    history = runs([1.0] * 20, start=NOW - 20 * DAY)
    over = Run(NOW - DAY, CANCELLED, peak=int(6.5 * G), cap=CAP, reserved=2 * G)
    memory, basis = predict_memory([*history, over], PROFILE, CAP, RULES, NOW)
    assert memory == int(6.5 * G) and "went past what it reserved" in basis
    # The index the daemon and the replay keep says the same.
    assert JobRuns([*history, over]).facts(0, RULES, NOW).over_peak == int(6.5 * G)
    assert predict_memory([*history, over], PROFILE, CAP, RULES, NOW + 7 * DAY)[0] == 2 * G


def test_a_prediction_never_exceeds_the_cap() -> None:
    memory, _ = predict_memory(runs([21.5] * 20), PROFILE, CAP, RULES, NOW)
    assert memory == CAP


def test_cpu_with_min_jobs_runs_reserves_the_p95_average_without_a_margin() -> None:
    history = [Run(NOW - i, SUCCESS, G, CAP, avg_cpu=0.5 + i / 100) for i in range(12)]
    cpu, basis = predict_cpu(history, PROFILE, 8.0, RULES)
    assert cpu == 0.7  # p95 of 0.5..0.61 is 0.61, rounded up to 0.1 CPU
    assert "p95 average CPU" in basis


def test_cpu_tiers_follow_memory_ones() -> None:
    two = [Run(NOW - i, SUCCESS, G, CAP, avg_cpu=1.0) for i in range(2)]
    assert predict_cpu(two, PROFILE, 8.0, RULES) == (1.0, "its job's largest average CPU")
    assert predict_cpu(two, PROFILE, 8.0, RULES, beside=True)[0] == 2.0
    assert predict_cpu([], PROFILE, 8.0, RULES)[0] == 6.0
    assert predict_cpu([], ProfileStats(runs=50), 8.0, RULES) == (8.0, "its profile's cpus")


def test_a_runner_before_its_job_is_known_reserves_the_largest_queued_prediction() -> None:
    light = predict(runs([1.0] * 20), PROFILE, CAP, 8.0, RULES, NOW)
    heavy = predict([], PROFILE, CAP, 8.0, RULES, NOW)
    top = largest([light, heavy], queued=2)
    assert top.memory == 10 * G
    assert top.basis.startswith("the largest prediction of its scale set's 2 queued jobs")


# "A run that went past what it reserved, cancelled or not, has its job reserve the larger of its
# recent runs' largest peak and that run's while that run is among its recent runs, 7 days at
# most." Its recent runs: its last 20 successful runs (or min_jobs when more), failed among them.
SEED_RULES = PredictionRules(margin=Margin(15.0), min_jobs=10)


def test_an_over_run_reserves_the_larger_of_its_recent_runs_peak_not_a_peak_25_days_old() -> None:
    old = Run(NOW - 25 * DAY, SUCCESS, peak=6 * G, cap=CAP)
    newer = runs([2.0] * 20, start=NOW - 20 * DAY)
    over = Run(NOW - DAY, SUCCESS, peak=int(2.6 * G), cap=CAP, reserved=int(2.5 * G))
    history = [old, *newer, over]
    memory, basis = predict_memory(history, PROFILE, CAP, SEED_RULES, NOW)
    assert memory == round_up(int(2.6 * G)) == int(2.75 * G)
    assert basis == "its job's largest recent peak, as a run went past what it reserved"
    # The index the daemon and the replay keep says the same.
    assert JobRuns(history).facts(0, SEED_RULES, NOW).over_own == int(2.6 * G)
    # over_run = "window": the largest peak of the whole window, the 6G run 25 days old.
    window = replace(SEED_RULES, over_run=OverRun.WINDOW)
    assert predict_memory(history, PROFILE, CAP, window, NOW)[0] == 6 * G


def test_an_over_run_no_longer_among_the_recent_runs_is_not_held_within_the_seven_days() -> None:
    over = Run(NOW - 3 * DAY, SUCCESS, peak=int(4.5 * G), cap=CAP, reserved=int(2.5 * G))
    newer = runs([2.0] * 65, start=NOW - 2 * DAY)
    history = [over, *newer]
    memory, basis = predict_memory(history, PROFILE, CAP, SEED_RULES, NOW)
    assert memory == round_up(int(2.0 * G * 1.15)) == int(2.5 * G)
    assert basis == "the p95 peak of its job's last 20 runs + the margin"
    assert JobRuns(history).facts(0, SEED_RULES, NOW).over_peak is None
    # While it is among the last 20 it is held: 19 newer runs.
    held = [over, *newer[:19]]
    assert predict_memory(held, PROFILE, CAP, SEED_RULES, NOW)[0] == int(4.5 * G)
    window = replace(SEED_RULES, over_run=OverRun.WINDOW)
    assert predict_memory(history, PROFILE, CAP, window, NOW)[0] == int(4.5 * G)
    assert JobRuns(history).facts(0, window, NOW).over_peak == int(4.5 * G)
