"""The cloud-hours bounds ``benchmarks/fleet.py`` compares the replayed cloud against."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from types import ModuleType

import pytest

from rungar.simulate.history import SimJob

HOUR = 3600.0


def load_bench() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "fleet.py"
    spec = importlib.util.spec_from_file_location("fleet_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = load_bench()


def job(at_h: float, hours: float, label: str = "jvm") -> SimJob:
    return SimJob(label, "acme/app", "ci", label, at_h * HOUR, hours * HOUR, 0, 0, None,
                  "success", label)  # fmt: skip


def test_the_longest_chain_of_jobs_is_kept_on_one_slot() -> None:
    assert BENCH.most_time_in_chains([(0.0, 1.0), (1.0, 2.0), (0.0, 1.5)], 1) == 2.0
    assert BENCH.most_time_in_chains([(0.0, 1.0), (0.5, 10.0)], 1) == 9.5
    assert BENCH.most_time_in_chains([(0.0, 3.0), (0.0, 2.0), (0.0, 1.0)], 2) == 5.0


def test_host_first_sends_a_later_long_job_to_the_cloud_where_knowing_durations_would_not() -> None:
    history = [job(0.0, 1.0), job(0.5, 10.0)]
    slots = {"jvm": 1}
    assert BENCH.host_first_cloud_hours(history, slots) == 10.0
    assert BENCH.least_unmoved_cloud_hours(history, slots) == 1.0
    assert BENCH.least_cloud_hours(history, slots) == 0.5  # the overlap alone


def test_a_slot_freed_at_a_jobs_queue_time_takes_it() -> None:
    history = [job(0.0, 1.0), job(1.0, 1.0), job(1.0, 2.0, "node")]
    assert BENCH.host_first_cloud_hours(history, {"jvm": 1, "node": 0}) == 2.0
    assert BENCH.least_unmoved_cloud_hours(history, {"jvm": 1, "node": 0}) == 2.0


def test_the_bounds_are_ordered_on_random_histories() -> None:
    rng = random.Random(7)
    for _ in range(20):
        history = [job(rng.uniform(0, 24), rng.uniform(0.1, 3), rng.choice(["jvm", "node"]))
                   for _ in range(60)]  # fmt: skip
        slots = {"jvm": rng.randint(1, 4), "node": rng.randint(1, 4)}
        least = BENCH.least_cloud_hours(history, slots)
        unmoved = BENCH.least_unmoved_cloud_hours(history, slots)
        greedy = BENCH.host_first_cloud_hours(history, slots)
        assert least <= unmoved + 1e-9 <= greedy + 2e-9


def test_a_p95_of_fewer_than_20_samples_is_not_quoted() -> None:
    assert BENCH.p95([float(i) for i in range(19)]) is None
    assert BENCH.p95([float(i) for i in range(20)]) == 18.0  # nearest rank: the 19th of 20
    assert BENCH.p99([1.0] * 99) is None
    assert BENCH.ratio(None, 3.0) is None


def test_each_seed_is_printed_then_the_median_and_range(capsys: pytest.CaptureFixture[str]) -> None:
    figures = BENCH.Seeds()
    for seed, value in ((1, 4.0), (2, 1.0), (3, 3.0), (4, 10.0)):
        figures.emit(seed, "cut_ratio", value, "x", placement="pack", jobs=100 + seed)
    figures.p95(1, "wait_s", [1.0] * 5, placement="pack")  # too few: null, with its count
    figures.p95(2, "wait_s", [2.0] * 30, placement="pack")
    figures.summarise()
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["params"]["seed"] for line in lines[:4]] == [1, 2, 3, 4]
    assert lines[4]["value"] is None and lines[4]["samples"] == 5
    median = next(line for line in lines if line.get("of") == "median" and
                  line["metric"] == "cut_ratio")  # fmt: skip
    assert median["value"] == 3.5 and median["range"] == [1.0, 10.0]
    assert median["seeds"] == [1, 2, 3, 4] and "jobs" not in median["params"]
    unknown = next(line for line in lines if line.get("of") == "median" and
                   line["metric"] == "wait_s")  # fmt: skip
    assert unknown["value"] is None and unknown["seeds_measured"] == 1
