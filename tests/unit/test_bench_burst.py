"""The burst benchmark's helpers (benchmarks/burst.py), with tiny numbers; no processes start."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from rungar.config.loader import parse_scale_sets

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "burst.py"


@pytest.fixture(scope="module")
def burst() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_burst", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_burst"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("jobs", [100, 300, 500, 2000])
def test_the_providers_that_take_runners_have_limits_for_the_whole_burst(
    burst: ModuleType, jobs: int
) -> None:
    plans = burst.fleet_plan(jobs)
    assert len(plans) == 5
    taking = [p for p in plans if not p.refuse_full]
    assert sum(p.max_runners for p in taking) >= jobs
    assert [p.name for p in plans if p.refuse_full] == ["full"]
    assert [p.latency for p in plans if p.latency] == [0.05]
    # Each has room beyond its limit, so an overshot limit shows as machines, not refusals.
    assert all(p.room >= 2 * p.max_runners for p in plans)
    # One limit is small enough to be reached before the burst is placed.
    assert min(p.max_runners for p in taking) < jobs / len(taking)


def test_the_generated_scale_sets_file_is_valid_and_carries_the_plan(
    burst: ModuleType, tmp_path: Path
) -> None:
    plans = burst.fleet_plan(10)
    config = parse_scale_sets(burst.scale_sets_yaml(10, plans, tmp_path), "burst.yaml")
    (scale_set,) = config.scale_sets
    assert scale_set.max_runners == 10
    assert scale_set.provider_names == tuple(p.name for p in plans)
    limits = {p.name: p.max_runners for p in config.providers}
    assert limits == {p.name: p.max_runners for p in plans}
    assert limits["full"] == 0  # no limit of Rungar's own
    full = config.provider("full")
    assert full.address == f"unix://{tmp_path / 'full'}.sock"
    assert dict(scale_set.providers[0].runner) == {"vcpus": 2, "memory": "4GiB"}


def test_a_limit_is_exceeded_only_when_a_peak_passes_it(burst: ModuleType) -> None:
    watch = burst.LimitWatch({"provider:a": 3, "provider:full": 0, "scale_set:s": 5})
    watch.observe({"provider:a": 3, "provider:full": 50, "scale_set:s": 5})
    assert watch.exceeded() == []
    watch.observe({"provider:a": 2, "scale_set:s": 6})
    watch.observe({"provider:a": 1})
    assert watch.exceeded() == ["scale_set:s: 6 > 5"]
    assert watch.peaks["provider:a"] == 3
    assert watch.samples == 3


def measured(burst: ModuleType, **changes: Any) -> Any:
    values: dict[str, Any] = {
        "jobs": 4,
        "params": {"jobs": 4},
        "elapsed": 2.0,
        "created": 4,
        "machines": 4,
        "demand_seen": 0.1,
        "first_runner": 0.2,
        "emulator_queue": 0.01,
        "calls_total": 10,
        "calls_in_burst": 6,
        "mq_calls": 2,
        "routes": {"A13": 4, "MQ_GET": 1, "MQ_DELETE": 1},
        "by_code": {"200": 10},
        "refused": {"full": 1},
        "cpu": {"daemon": 0.02},
        "peak_rss_mib": 80.0,
        "rss_before_mib": 78.0,
        "exceeded": [],
        "samples": 9,
        "peaks": {},
    }
    values.update(changes)
    return burst.Measured(**values)


def test_the_report_divides_calls_by_runners_and_tells_mq_traffic_apart(
    burst: ModuleType,
) -> None:
    lines = {metric: value for metric, value, _, _ in burst.report(measured(burst))}
    assert lines["creates_per_s"] == 2.0
    assert lines["github_calls_per_runner"] == 2.5
    assert lines["github_calls_per_runner_in_burst"] == 1.5
    assert lines["github_calls_per_runner_without_mq"] == 2.0
    assert lines["daemon_cpu_ms_per_runner"] == 5.0
    assert lines["provider_refusals"] == 1
    assert lines["limit_exceeded"] == 0


def test_a_burst_that_did_not_finish_reports_no_time_and_a_broken_limit_reports_one(
    burst: ModuleType,
) -> None:
    report = burst.report(measured(burst, elapsed=None, created=0, exceeded=["provider:a"]))
    lines = {metric: value for metric, value, _, _ in report}
    assert lines["seconds_to_all_created"] is None
    assert lines["creates_per_s"] is None
    assert lines["github_calls_per_runner"] is None
    assert lines["limit_exceeded"] == 1
