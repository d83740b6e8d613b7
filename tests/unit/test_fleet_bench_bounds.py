"""The cloud-hours bounds ``benchmarks/fleet.py`` compares the replayed cloud against."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from types import ModuleType

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
