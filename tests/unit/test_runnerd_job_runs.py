"""The indexed job runs answer exactly what the scan of :func:`job_facts` answers."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from runnerd.admission.job_runs import JobRuns
from runnerd.admission.model import CANCELLED, FAILURE, SUCCESS, Margin, OverRun, Run
from runnerd.admission.predict import PredictionRules, job_facts

G = 1024**3
DAY = 86400.0
CAP = 8 * G
RULES = PredictionRules(Margin(15.0), min_jobs=5, hold_for=2 * DAY)
WINDOW_RULES = replace(RULES, over_run=OverRun.WINDOW)  # the over-run held over the window

a_run = st.builds(
    lambda gap, result, peak, cpu, hit, killed, reserved: (
        gap,
        Run(0.0, result, peak * G // 4, CAP, cpu, hit, killed, reserved and reserved * G // 4),
    ),
    st.sampled_from([0.0, 600.0, 3 * 3600.0, DAY]),  # ties included: the window test is >=
    st.sampled_from([SUCCESS, SUCCESS, SUCCESS, FAILURE, CANCELLED]),
    st.integers(1, 40),
    st.one_of(st.none(), st.floats(0.1, 8.0)),
    st.integers(0, 10).map(lambda v: v == 0),
    st.integers(0, 30).map(lambda v: v == 0),
    st.one_of(st.none(), st.integers(1, 40)),
)


def timed(pairs: list[tuple[float, Run]]) -> list[Run]:
    at, out = 0.0, []
    for gap, run in pairs:
        at += gap
        out.append(Run(at, run.result, run.peak, run.cap, run.avg_cpu, run.met_cap,
                       run.killed_for_memory, run.reserved))  # fmt: skip
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(a_run, max_size=80), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6))
def test_the_index_answers_the_scan_for_every_window_and_time(
    pairs: list[tuple[float, Run]], shares: list[float]
) -> None:
    runs = timed(pairs)
    index = JobRuns()
    for n, run in enumerate(runs, 1):
        index.append(run)
        end = runs[-1].finished_at if runs else 0.0
        for share in shares:  # windows and times moving both ways, as a clock may
            now = share * (end + 3 * DAY)
            start = index.window_start(now - 4 * DAY)
            for rules in (RULES, WINDOW_RULES):
                assert index.facts(start, rules, now) == job_facts(runs[start:n], rules, now)


def test_the_index_answers_the_scan_after_a_trim() -> None:
    runs = [Run(i * 600.0, SUCCESS if i % 4 else FAILURE, (i * 37 % 23) * G // 4, CAP,
                (i % 7) / 2, i == 30, False, G if i % 5 == 0 else None)
            for i in range(120)]  # fmt: skip
    index = JobRuns(runs)
    index.keep_last(50)
    now = runs[-1].finished_at + 60
    assert index.runs == runs[-50:]
    assert index.facts(0, RULES, now) == job_facts(runs[-50:], RULES, now)
    assert index.facts(10, RULES, now) == job_facts(runs[-40:], RULES, now)


def test_runs_out_of_finish_order_fall_back_to_the_scan() -> None:
    runs = [Run(t, SUCCESS, int(t) * G // 1000, CAP, 1.0) for t in (100.0, 300.0, 200.0)]
    index = JobRuns(runs)
    assert not index.ordered
    assert index.facts(0, RULES, 400.0) == job_facts(runs, RULES, 400.0)


def test_facts_asked_again_as_a_hold_and_an_overrun_age_answer_the_scan() -> None:
    runs = [Run(i * 3600.0, SUCCESS, (3 + i % 4) * G, CAP, 1.0 + i % 3, i == 10, False,
                G if i == 6 else None)
            for i in range(12)]  # fmt: skip
    index = JobRuns(runs)
    answers = []
    for now in (runs[-1].finished_at + 60, 10 * 3600.0 + RULES.hold_for + 1, 7 * DAY, 60.0):
        answers.append(index.facts(0, RULES, now))  # the same runs and start each time
        assert answers[-1] == job_facts(runs, RULES, now)
    assert answers[0].on_hold and not answers[1].on_hold
    assert answers[0].over_peak is not None and answers[2].over_peak is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(a_run, min_size=1, max_size=90),
    st.integers(0, 60),
    st.lists(a_run, max_size=20),
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4),
)
def test_a_trimmed_index_answers_as_one_built_from_the_runs_it_kept(
    pairs: list[tuple[float, Run]], keep: int, more: list[tuple[float, Run]], shares: list[float]
) -> None:
    runs = timed(pairs + more)  # ``more`` arrive after the trim
    before = len(pairs)
    trimmed = JobRuns(runs[:before])
    trimmed.keep_last(keep)
    kept = runs[max(0, before - keep) : before]
    built = JobRuns(kept)
    for run in runs[before:]:
        trimmed.append(run)
        built.append(run)
    assert trimmed.runs == built.runs
    end = runs[-1].finished_at
    for share in shares:
        now = share * (end + 3 * DAY)
        start = trimmed.window_start(now - 4 * DAY)
        for first in {0, start, len(built.runs) // 2}:
            assert trimmed.facts(first, RULES, now) == built.facts(first, RULES, now)
            assert trimmed.facts(first, RULES, now) == job_facts(built.runs[first:], RULES, now)


def test_a_trim_past_the_last_cap_hit_ends_its_hold() -> None:
    # Never 3 clean runs in a row after the hit: the hold lasts while the hit is kept.
    results = [SUCCESS, SUCCESS, SUCCESS, FAILURE, SUCCESS, FAILURE, SUCCESS, FAILURE, SUCCESS]
    runs = [Run(i * 600.0, result, 2 * G, CAP, 1.0, i == 2) for i, result in enumerate(results)]
    now = runs[-1].finished_at + 60
    index = JobRuns(runs)
    assert index.facts(0, RULES, now).on_hold
    index.keep_last(6)  # the hit was the third run
    assert not index.facts(0, RULES, now).on_hold
    assert index.facts(0, RULES, now) == job_facts(runs[-6:], RULES, now)


def test_the_index_answers_the_scan_for_an_over_run_leaving_the_recent_runs() -> None:
    # A heavy run past its reservation, then light ones: it leaves the last 20 successes (and
    # takes the largest peak held beside it along) at the 21st, while still within hold_for.
    heavy = Run(0.0, SUCCESS, 6 * G, CAP, 1.0, False, False, 2 * G)
    runs = [heavy, *(Run(600.0 * i, SUCCESS if i % 5 else FAILURE, G, CAP) for i in range(1, 40))]
    index = JobRuns()
    seen = set()
    for n, run in enumerate(runs, 1):
        index.append(run)
        now = run.finished_at + 60
        for rules in (RULES, WINDOW_RULES):
            facts = index.facts(0, rules, now)
            assert facts == job_facts(runs[:n], rules, now)
            seen.add((rules.over_run, facts.over_peak, facts.over_own))
    assert (OverRun.RECENT, None, G) in seen and (OverRun.WINDOW, 6 * G, 6 * G) in seen
