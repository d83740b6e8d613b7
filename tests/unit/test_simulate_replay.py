"""``runnerd simulate``: the replay through the daemon's admission code, and its table."""

from __future__ import annotations

import bisect
import re
from pathlib import Path

import pytest
import runnerd.simulate.replay as replay_module
from runnerd.admission import Limits, Policy, PredictionRules
from runnerd.admission.model import Run
from runnerd.admission.predict import profile_stats
from runnerd.config import parse_config
from runnerd.history import JobKey
from runnerd.history_generate import example_config, generate, write_history
from runnerd.simulate.command import SimulateRequest, simulate
from runnerd.simulate.replay import replay, replayable
from runnerd.simulate.rows import ProfileShape, Scenario
from runnerd.simulate.table import HEADER, row, wait_text
from runnerd.simulate.window import WindowPredictor

from tests.unit.simulate_reference import ScanPredictor
from tests.unit.sizing_fixtures import NOW, G, run

SHAPES = {"node": ProfileShape(4 * G, 4.0)}


def test_waits_read_in_seconds_minutes_and_hours() -> None:
    assert [wait_text(s) for s in (0, 57, 259, 128, 3720)] == [
        "0s",
        "57s",
        "4m19s",
        "2m08s",
        "1h02m",
    ]


def test_a_job_queued_behind_a_full_profile_waits_until_a_slot_frees() -> None:
    jobs = [run(NOW + 600, 1.0, cap=4, duration=600), run(NOW + 600, 1.0, cap=4, duration=600)]
    jobs = replayable(jobs, SHAPES)
    result = replay(
        Scenario("caps", Policy.CAPS, {"node": 1}), SHAPES, jobs, Limits(memory_max=33 * G),
        PredictionRules(),
    )  # fmt: skip
    assert (result.wait_p50, result.wait_max, result.at_once) == (0.0, 600.0, 1)
    assert result.peaks == 2 * G // 2


def test_caps_hold_slots_times_memory_to_memory_max() -> None:
    jobs = replayable([run(NOW + 600, 1.0, cap=4) for _ in range(3)], SHAPES)
    result = replay(
        Scenario("caps", Policy.CAPS, {"node": 3}), SHAPES, jobs, Limits(memory_max=9 * G),
        PredictionRules(),
    )  # fmt: skip
    assert result.at_once == 2 and result.wait_max == 600.0


def test_the_window_predictor_answers_what_profile_stats_computes() -> None:
    runs = [run(NOW + i, 0.5 + (i * 37 % 11) / 4,
                result=("cancelled" if i % 9 == 0 else "succeeded"),
                avg_cpu=(i % 5) or None) for i in range(200)]  # fmt: skip
    predictor = WindowPredictor(PredictionRules(), window=100.0)
    for r in runs:
        predictor.add(r.key, r.as_run())
    expected = profile_stats([r.as_run() for r in runs if r.finished_at >= NOW + 199 - 100])
    assert predictor.profile("node", NOW + 199) == expected


def test_the_window_predictor_follows_peaks_that_drift_up_and_down() -> None:
    # Thousands of runs in the window, of which only the top are kept sorted: as the peaks
    # climb the kept ones pile up, as they fall they run out, and either way it looks again.
    predictor = WindowPredictor(PredictionRules(), window=2000.0)
    done: list[Run] = []
    floors = set()
    for i in range(9000):
        climb = i % 6000 if i % 6000 < 3000 else 6000 - i % 6000
        level = 1 + climb / 300
        result = "failed" if i % 13 == 0 else "cancelled" if i % 17 == 0 else "succeeded"
        avg_cpu = None if i % 11 == 0 else level / 4 + (i * 31 % 7) / 8  # many ties
        finished = run(NOW + i, level + (i * 7919 % 101) / 100, cap=16, result=result,
                       met_cap=i % 19 == 0, avg_cpu=avg_cpu).as_run()  # fmt: skip
        predictor.add(JobKey("node", "acme/web", "ci", "build"), finished)
        done.append(finished)
        if i % 13 == 0:
            since = NOW + i - 2000
            window = done[bisect.bisect_left(done, since, key=lambda r: r.finished_at) :]
            assert predictor.profile("node", NOW + i) == profile_stats(window)
            tails = predictor._windows["node"]
            floors.add((tails.peaks.floor, tails.cpus.floor))
    assert len(floors) > 10  # the floors moved, up and down


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("sim")
    db = tmp / "history.db"
    write_history(db, generate(3000, 30, 4, NOW))
    return db, example_config(str(db), 3000, 30)


def test_shortcuts_change_nothing_decide_would_answer(generated: tuple[Path, str]) -> None:
    db, text = generated
    config = parse_config(text)
    from runnerd.simulate.command import limits_of, rules_of
    from runnerd.sizing.runs import open_read_only, read_runs

    with open_read_only(db) as conn:
        runs = read_runs(conn, NOW - 10 * 86400)
    shapes = {n: ProfileShape(p.memory, p.cpus) for n, p in config.profiles.items()}
    jobs = replayable(runs, shapes)
    for scenario in (
        Scenario("caps", Policy.CAPS, {"jvm": 3, "node": 8}),
        Scenario("measured", Policy.MEASURED, {"jvm": 3, "node": 8}),
        Scenario("cpu ×1", Policy.MEASURED, {"jvm": 3, "node": 8}, 1.0),
    ):
        fast = replay(scenario, shapes, jobs, limits_of(config, 33 * G), rules_of(config), 8.0)
        slow = replay(
            scenario, shapes, jobs, limits_of(config, 33 * G), rules_of(config), 8.0,
            shortcuts=False,
        )  # fmt: skip
        assert fast == slow


def test_measured_admission_cuts_the_p95_wait_of_a_generated_history_with_under_reported(
    generated: tuple[Path, str],
) -> None:
    db, text = generated
    config = parse_config(text)
    request = SimulateRequest(33 * G, 8.0, slots={"node": 8}, cpu_factors=(1.0, 1.5))
    report = simulate(config, str(db), request, NOW)
    rows = {r.scenario.name: r for r in report.results}
    assert list(rows) == ["caps", "caps*", "measured", "cpu ×1", "cpu ×1.5"]
    assert rows["caps"].scenario.slots == {"jvm": 2, "node": 6}
    assert rows["caps*"].scenario.slots == {"jvm": 3, "node": 8}  # 32G of 33G holds 3 jvm
    assert rows["measured"].wait_p95 < rows["caps"].wait_p95
    assert rows["measured"].under > 0 and rows["caps"].under == 0
    assert rows["cpu ×1"].cpu <= 8.0 + 1e-9 and rows["cpu ×1"].cpu_held
    assert rows["caps"].cpu_held is None
    lines = report.text.splitlines()
    assert lines[0] == (
        f"{report.jobs} finished jobs replayed against a MemoryMax of 33G, each queued when it was "
        "and running as long as it ran."
    )
    table = lines[lines.index(HEADER) :]
    assert all(len(line) == len(HEADER) for line in table[1:6])
    assert re.match(r"caps\*     jvm 3, node 8 +\d", table[2])
    assert any(line.startswith("* more slots than the caps fit in MemoryMax") for line in lines)
    assert any("of the slice's 8 CPUs times N" in line for line in lines)


def test_a_peaks_over_memory_max_is_marked() -> None:
    jobs = replayable([run(NOW + 600, 3.5, cap=4) for _ in range(3)], SHAPES)
    result = replay(
        Scenario("measured", Policy.MEASURED, {"node": 3}), SHAPES, jobs,
        Limits(policy=Policy.MEASURED, memory_max=10 * G), PredictionRules(min_jobs=1),
    )  # fmt: skip
    assert "!" not in row(result, 10 * G)
    assert result.peaks == 7 * G and row(result, 6 * G).split()[8] == "7G!"


def test_the_optimised_replay_prints_the_table_the_straightforward_reference_prints(
    generated: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, text = generated
    config = parse_config(text)
    request = SimulateRequest(33 * G, 8.0, slots={"node": 8}, cpu_factors=(1.0, 1.5))
    fast = simulate(config, str(db), request, NOW)
    monkeypatch.setattr(replay_module, "WindowPredictor", ScanPredictor)
    slow = simulate(config, str(db), request, NOW)
    assert fast.text == slow.text and fast.results == slow.results
