"""The throttled burst's figures, from the emulator's records (benchmarks/burst_throttled.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def load() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "burst_throttled.py"
    spec = importlib.util.spec_from_file_location("burst_throttled", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["burst_throttled"] = module
    spec.loader.exec_module(module)
    return module


def test_the_pace_counts_from_the_first_registration_after_the_429s_pause() -> None:
    bench = load()
    burst = [(0.1 * i, "low") for i in range(180)]  # the first minute's, at once
    high = [(60.0 + i / 3, "high") for i in range(30)]
    low = [(70.0 + i / 3, "low") for i in range(30)]
    found = bench.figures(
        burst + high + low, jit_calls=245, refused=5, first_refused_at=18.0, end=80.0, limit=180
    )
    assert found["registrations_per_minute"] == pytest.approx(60 / 20 * 60)
    assert found["pace_ratio"] == pytest.approx(1.0)
    assert found["throttled_share_after_first"] == pytest.approx(4 / 245)
    assert found["low_registered_among_high"] == 0
    assert found["high_registered"] == 30


def test_a_low_registration_between_the_high_ones_is_counted() -> None:
    bench = load()
    order = [(1.0, "high"), (2.0, "low"), (3.0, "high"), (4.0, "low")]
    found = bench.figures(order, jit_calls=4, refused=0, first_refused_at=None, end=5.0, limit=180)
    assert found["low_registered_among_high"] == 1
    assert found["registrations_per_minute"] is None, "no 429: no pace to measure"


def test_each_apps_pace_counts_from_its_own_first_registration_after_its_own_429() -> None:
    bench = load()
    first = [(0.1 * i, "installation:1", 201) for i in range(10)]
    first += [(1.0, "installation:1", 429)] + [(10.0 + i, "installation:1", 201) for i in range(10)]
    second = [(0.1 * i, "installation:2", 201) for i in range(5)]
    second += [(5.0, "installation:2", 429)] + [
        (12.0 + 2 * i, "installation:2", 201) for i in range(4)
    ]
    found = bench.figures_by_app(sorted(first + second), end=20.0, limit=6)
    assert found["installation:1"]["registrations_per_minute"] == pytest.approx(10 / 10 * 60)
    assert found["installation:1"]["pace_ratio"] == pytest.approx(10.0)
    assert found["installation:2"]["registrations_per_minute"] == pytest.approx(4 / 8 * 60)
    assert found["installation:2"]["registered"] == 9
    never = bench.figures_by_app([(1.0, "", 201)], end=2.0, limit=6)
    assert never[""]["registrations_per_minute"] is None, "no 429: no pace to measure"
