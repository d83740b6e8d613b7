"""The scale benchmark's helpers (benchmarks/scale.py), with tiny numbers; no processes start."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rungar.config.loader import parse_scale_sets

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scale.py"


@pytest.fixture(scope="module")
def scale() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scale", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_the_generated_config_loads_and_every_provider_serves_some_scale_set(
    scale: ModuleType, tmp_path: Path
) -> None:
    size = scale.Size(12, 7, 120, 10.0, 5.0, 5.0, 10.0)
    config = parse_scale_sets(scale.scale_sets_yaml(size, tmp_path), "scale_sets.yaml")

    assert len(config.scale_sets) == 12 and len(config.providers) == 7
    used = {p.name for s in config.scale_sets for p in s.providers}
    assert used == {p.name for p in config.providers}
    assert all(len(s.providers) == 5 for s in config.scale_sets)
    assert config.timing.reconcile_interval == 10.0


def test_latency_pairs_the_nth_job_queued_with_the_nth_runner_created(
    scale: ModuleType,
) -> None:
    queued = {"a": [10.0, 11.0, 12.0], "b": [10.5]}
    created = {"a": [10.2, 13.0], "b": [11.5]}

    # a's third job has no runner yet; the window leaves out jobs queued before 10.1
    assert sorted(scale.match_latencies(queued, created, 10.1, 20.0)) == pytest.approx([1.0, 2.0])


def test_percentiles_are_taken_from_the_sorted_values(scale: ModuleType) -> None:
    values = [float(v) for v in range(100, 0, -1)]
    assert scale.percentile(values, 0.5) == 51.0
    assert scale.percentile(values, 0.99) == 100.0
    assert scale.percentile([], 0.5) is None


def test_the_idle_share_runs_from_the_first_pass_start_to_the_last(scale: ModuleType) -> None:
    passes = [scale.Pass(100.0, 0.5, 0.6, 10, 7.0), scale.Pass(130.0, 0.5, 0.6, 10, 8.5)]
    assert scale.pass_to_pass(passes) == pytest.approx(1.5 / 30)
    assert scale.pass_to_pass(passes[:1]) is None
