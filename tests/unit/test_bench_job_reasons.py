"""The job reasons benchmark's figures (benchmarks/job_reasons.py): the pace counted a second at
a time after the throttle's first window, and the most writes in any minute."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def load() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "job_reasons.py"
    spec = importlib.util.spec_from_file_location("bench_job_reasons", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_job_reasons"] = module
    spec.loader.exec_module(module)
    return module


def test_the_pace_counts_each_whole_second_after_the_start() -> None:
    bench = load()
    burst = [100.0 + i / 100 for i in range(29)] + [109.6]  # the first window's, before it
    paced = [110.0 + i / 3 for i in range(60)]  # 3 a second for 20 s
    late = [130.0, 130.2, 130.4, 130.6]  # four in the 21st second, none in the 22nd
    found = bench.pace(burst + paced + late, start=110.0, end=132.5)
    assert found["samples"] == 22
    assert found["per_s"] == pytest.approx(64 / 22)
    assert found["p50"] == 3
    assert found["p95"] == 3  # nearest rank: the 21st of 22 counts, not the one 4
    assert bench.pace([], start=0.0, end=0.5)["per_s"] == 0.0


def test_the_most_writes_in_a_minute_slide_with_the_window() -> None:
    bench = load()
    times = [0.0, 10.0, 59.0, 60.0, 61.0, 200.0]
    assert bench.most_in_window(times, 60.0) == 4  # 10, 59, 60 and 61
    assert bench.most_in_window([], 60.0) == 0
