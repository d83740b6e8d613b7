"""The CPU rows of ``runnerd simulate``: the fast waiter bookkeeping against straightforward walks.

On an overloaded host thousands of jobs wait for CPU; the replay counts them in bulk
(:mod:`runnerd.simulate.waiting`). These tests replay seeded overloaded histories three ways and
compare every figure: the fast walk, the walk that visits every waiting job at every event (the
replay before the bulk counting), and the one that asks decide() about every waiting job with
the whole admission state.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
import runnerd.simulate.replay as replay_module
from runnerd.admission import GuardState, Limits, Policy, PredictionRules, decide
from runnerd.admission.model import (
    Candidate,
    CpuWaiter,
    Prediction,
    Run,
    Running,
    SliceReading,
)
from runnerd.admission.predict import profile_stats
from runnerd.config import parse_config
from runnerd.history import JobKey
from runnerd.history_generate import example_config, generate, write_history
from runnerd.simulate.command import limits_of, rules_of
from runnerd.simulate.replay import replayable
from runnerd.simulate.rows import ProfileShape, ReplayResult, Scenario
from runnerd.simulate.waiting import CpuWaiters
from runnerd.simulate.window import WindowPredictor
from runnerd.sizing.runs import SizingRun, open_read_only, read_runs

from tests.unit.simulate_reference import ScanPredictor
from tests.unit.sizing_fixtures import NOW, G

SLOTS = {"jvm": 3, "node": 8}
History = tuple[dict[str, ProfileShape], list[SizingRun], Limits, PredictionRules]


def _history(tmp: Path, jobs: int, days: float, seed: int) -> History:
    db = tmp / "history.db"
    write_history(db, generate(jobs, days, seed, NOW))
    config = parse_config(example_config(str(db), jobs, days))
    with open_read_only(db) as conn:
        runs = read_runs(conn, NOW - 2 * days * 86400)
    shapes = {n: ProfileShape(p.memory, p.cpus) for n, p in config.profiles.items()}
    return shapes, replayable(runs, shapes), limits_of(config, 33 * G), rules_of(config)


@pytest.fixture(scope="module")
def overloaded(tmp_path_factory: pytest.TempPathFactory) -> History:
    """300 jobs in a day on 6 CPUs: hundreds wait for CPU, for hours."""
    return _history(tmp_path_factory.mktemp("overloaded"), 300, 1, 4)


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> History:
    """150 jobs in half a day on 6 CPUs: few enough waiters to ask decide() about each."""
    return _history(tmp_path_factory.mktemp("busy"), 150, 0.5, 3)


class _JobByJob(replay_module._Replay):
    """The straightforward walk: every waiting job at every event, in queue order."""

    def _walk(self, now: float) -> None:
        self._walk_each(now, self._all())


def _replay(
    history: History,
    factor: float,
    kind: type[replay_module._Replay] = replay_module._Replay,
    shortcuts: bool = True,
    high_water: float | None = None,
) -> ReplayResult:
    shapes, jobs, limits, rules = history
    limits = replace(
        limits,
        policy=Policy.MEASURED,
        cpu_budget=6.0 * factor,
        cpu_wait_forget=math.inf,  # as replay() sets it
        high_water=limits.high_water if high_water is None else high_water,
    )
    scenario = Scenario(f"cpu ×{factor:g}", Policy.MEASURED, SLOTS, factor)
    return kind(scenario, shapes, jobs, (), limits, rules, shortcuts).run()


@pytest.mark.parametrize("factor", [1.0, 1.5])
def test_the_bulk_count_of_cpu_waiters_equals_a_walk_over_every_waiting_job(
    overloaded: History, factor: float
) -> None:
    fast = _replay(overloaded, factor)
    assert fast.cpu_held is not None and fast.cpu_held > 100 * fast.jobs  # truly overloaded
    assert fast.wait_max > 2 * 3600
    assert fast == _replay(overloaded, factor, _JobByJob)


@pytest.mark.parametrize("factor", [1.0, 1.5])
def test_high_water_holds_among_cpu_waiters_count_as_the_walk_over_every_job_counts_them(
    overloaded: History, factor: float
) -> None:
    fast = _replay(overloaded, factor, high_water=0.5)
    assert fast.held > 1000 and fast.cpu_held  # the mark and the CPU both hold jobs back
    assert fast == _replay(overloaded, factor, _JobByJob, high_water=0.5)


@pytest.mark.parametrize("factor", [1.0, 1.5])
def test_the_cpu_rows_answer_what_asking_decide_about_every_waiting_job_answers(
    busy: History, factor: float
) -> None:
    fast = _replay(busy, factor)
    assert fast.cpu_held is not None and fast.cpu_held > 10 * fast.jobs
    assert fast == _replay(busy, factor, shortcuts=False)


@pytest.mark.parametrize("factor", [1.0, 1.5])
def test_a_cpu_waiter_held_at_the_high_water_mark_counts_as_held(
    overloaded: History, factor: float
) -> None:
    # decide() checks the mark before CPU: a job already waiting for CPU is HELD while the
    # slice reads at the mark, and so is every later job.
    fast = _replay(overloaded, factor, high_water=0.5)
    assert fast.held and fast.cpu_held
    assert fast == _replay(overloaded, factor, shortcuts=False, high_water=0.5)


def test_predictions_read_after_they_were_due_match_a_scan_of_the_runs(
    overloaded: History, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = [_replay(overloaded, f) for f in (1.0, 1.5)]
    monkeypatch.setattr(replay_module, "WindowPredictor", ScanPredictor)
    assert fast == [_replay(overloaded, f) for f in (1.0, 1.5)]


class _ShortWindow(WindowPredictor):
    def __init__(self, rules: PredictionRules, window: float = 3 * 3600.0) -> None:
        super().__init__(rules, window)


class _ShortWindowScan(ScanPredictor):
    def __init__(self, rules: PredictionRules, window: float = 3 * 3600.0) -> None:
        super().__init__(rules, window)


def test_figures_kept_between_events_follow_runs_leaving_the_window_as_a_scan_does(
    overloaded: History, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A day of jobs through a 3-hour window: runs leave it all the time, between events too.
    monkeypatch.setattr(replay_module, "WindowPredictor", _ShortWindow)
    fast = [_replay(overloaded, f) for f in (1.0, 1.5)]
    monkeypatch.setattr(replay_module, "WindowPredictor", _ShortWindowScan)
    assert fast == [_replay(overloaded, f) for f in (1.0, 1.5)]


def test_profile_figures_kept_between_finishes_drop_the_runs_that_left_the_window() -> None:
    rules = PredictionRules(min_jobs=2)
    key = JobKey("node", "acme/web", "ci", "build")
    peaks = [(1 + k % 7) * G for k in range(60)]
    warm = [
        SizingRun(key, "succeeded", peak, 8 * G, 4.0, 100.0 * k, 100.0 * k + 60, avg_cpu=k % 3)
        for k, peak in enumerate(peaks)
    ]
    limits = Limits(policy=Policy.MEASURED, memory_max=64 * G)
    scenario = Scenario("measured", Policy.MEASURED, SLOTS)
    replayer = replay_module._Replay(scenario, {"node": ProfileShape(8 * G, 4.0)}, [], warm,
                                     limits, rules)  # fmt: skip
    replayer.predictor.window = replayer.window = 1000.0  # runs leave it every 100 s
    runs = [r.as_run() for r in warm]
    for now in (5000.0, 5030.0, 5150.0, 5400.0, 5401.0, 6500.0, 9000.0):
        expected = profile_stats([r for r in runs if r.finished_at >= now - 1000.0])
        assert replayer._profile("node", now) == expected


def test_decide_answers_the_waiters_view_as_it_answers_the_whole_state() -> None:
    rng = random.Random(5)
    limits = Limits(policy=Policy.MEASURED, memory_max=64 * G, cpu_budget=8.0)
    running = [Running(f"r{k}", "node", f"r{k}", 4 * G, 4.0, G, 1.5, G, math.inf) for k in range(4)]
    for _ in range(300):
        waiters = CpuWaiters()
        times = sorted(
            rng.choice([0.0, 30.0, 60.0, 200.0, 290.0]) for _ in range(rng.randint(0, 6))
        )
        for j, since in enumerate(times):
            waiters.add(j, CpuWaiter(str(j), since, since))
        whole = GuardState(cpu_waiting=tuple(waiters.entries[j] for j in sorted(waiters.entries)))
        i = rng.randint(0, 7)  # held already, or not
        cpu = rng.choice([0.5, 1.0, 2.0, 3.0])
        candidate = Candidate(str(i), "node", str(i), 4 * G, 4.0, 0, 8,
                              Prediction(G, cpu, "its p95"))  # fmt: skip
        reading = SliceReading(300.0, 4 * G)
        full = decide(candidate, running, reading, None, None, limits, whole, 300.0)
        seen = decide(candidate, running, reading, None, None, limits,
                      waiters.view(i, GuardState()), 300.0)  # fmt: skip
        assert seen.decision == full.decision
        mine = [w for w in full.state.cpu_waiting if w.scale_set == str(i)]
        assert [w for w in seen.state.cpu_waiting if w.scale_set == str(i)] == mine


def test_a_prediction_read_later_is_the_one_due_then() -> None:
    rules = PredictionRules(min_jobs=2)
    predictor = WindowPredictor(rules, window=3000.0)
    key = JobKey("node", "acme/web", "ci", "build")
    cap = 8 * G
    for k in range(6):
        predictor.add(key, Run(1000.0 * k, "succeeded", (2 + k) * G, cap, 1.0 + k))
    then = 5500.0
    stats = predictor.profile("node", then)
    due = predictor.predict_job(key, cap, 4.0, then)
    predictor.profile("node", 9000.0)  # the window moves on: runs leave it
    assert predictor.predict_with(key, stats, cap, 4.0, then) == due
    assert predictor.predict_job(key, cap, 4.0, 9000.0) != due
