"""The daemon's predictor answers what the rules answer from a scan of the runs, also when it
gives back a prediction it made before (the profile's counts moved, the figures read did not)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from runnerd.admission.model import CANCELLED, FAILURE, SUCCESS, Margin, Run
from runnerd.admission.predict import PredictionRules, ProfileStats, predict, round_up
from runnerd.history import JobKey
from runnerd.predictor import Predictor

G = 1024**3
DAY = 86400.0
RULES = PredictionRules(Margin(15.0), min_jobs=4, hold_for=DAY)
KEY = JobKey("node", "acme/web", "ci", "build")

# Few values each, so the same figures come back with other counts, around min_jobs.
a_profile = st.builds(
    ProfileStats,
    runs=st.integers(2, 6),
    p95_peak=st.sampled_from([2 * G, 3 * G]),
    max_peak=st.sampled_from([4 * G, 5 * G]),
    cpu_runs=st.integers(2, 6),
    p95_cpu=st.sampled_from([0.5, 1.5]),
    max_cpu=st.sampled_from([2.0, 3.0]),
)
a_run = st.builds(
    lambda result, peak, cpu, hit: Run(0.0, result, peak * G // 2, 8 * G, cpu, hit),
    st.sampled_from([SUCCESS, SUCCESS, FAILURE, CANCELLED]),
    st.integers(1, 12),
    st.one_of(st.none(), st.none(), st.sampled_from([0.5, 1.0, 2.5])),
    st.integers(0, 8).map(lambda v: v == 0),
)
a_step = st.tuples(
    st.one_of(st.none(), st.none(), st.none(), a_run),  # a run of the job finishes first, or none
    a_profile,
    st.booleans(),  # beside another copy
    st.sampled_from([6 * G, 8 * G]),  # cap
    st.sampled_from([0.0, 0.0, 600.0, 0.6 * DAY]),  # time passing: the hold and the window move
)


@settings(max_examples=300, deadline=None)
@given(st.lists(a_step, min_size=1, max_size=40))
def test_predictions_equal_the_rules_over_a_scan_however_often_they_are_asked(
    steps: list[tuple[Run | None, ProfileStats, bool, int, float]],
) -> None:
    predictor = Predictor(RULES, window=2 * DAY)
    now = 10 * DAY
    for done, profile, beside, cap, later in steps:
        now += later
        if done is not None:
            predictor.add(KEY, Run(now, done.result, done.peak, done.cap, done.avg_cpu,
                                   done.met_cap))  # fmt: skip
        got = predictor.predict_with(KEY, profile, cap, 4.0, now, beside)
        assert got == predict(predictor.runs(KEY, now), profile, cap, 4.0, RULES, now, beside)


def test_a_new_p95_of_the_profile_is_read_and_a_new_count_past_min_jobs_changes_nothing() -> None:
    predictor = Predictor(RULES)
    now = 10 * DAY
    predictor.add(KEY, Run(now - 60, SUCCESS, 3 * G, 8 * G, 1.0))  # one run: the profile's p95
    profile = ProfileStats(runs=20, p95_peak=4 * G, max_peak=6 * G, cpu_runs=20, p95_cpu=1.5,
                           max_cpu=2.0)  # fmt: skip
    first = predictor.predict_with(KEY, profile, 8 * G, 4.0, now)
    more = ProfileStats(21, 4 * G, 6 * G, 21, 1.5, 2.0)
    assert predictor.predict_with(KEY, more, 8 * G, 4.0, now) == first
    higher = ProfileStats(21, 5 * G, 6 * G, 21, 1.5, 2.0)
    assert predictor.predict_with(KEY, higher, 8 * G, 4.0, now).memory > first.memory


def test_a_job_without_runs_in_the_window_reads_the_profiles_largest_peak_and_cpu() -> None:
    predictor = Predictor(RULES, window=DAY)
    predictor.add(KEY, Run(0.0, SUCCESS, 3 * G, 8 * G, None))  # no average CPU either
    now = 2 * DAY  # the run has left the window
    figures = [(4 * G, 2.0), (5 * G, 2.0), (5 * G, 3.0)]  # largest peak, largest average CPU
    answers = [
        predictor.predict_with(KEY, ProfileStats(20, 2 * G, peak, 20, 0.5, cpu), 8 * G, 4.0, now)
        for peak, cpu in figures
    ]
    assert [(p.memory, p.cpu) for p in answers] == [
        (round_up(Margin(15.0).add(4 * G)), 2.0),
        (round_up(Margin(15.0).add(5 * G)), 2.0),
        (round_up(Margin(15.0).add(5 * G)), 3.0),
    ]
