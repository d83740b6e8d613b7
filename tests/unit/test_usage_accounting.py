"""Per-repository accounting: each job Rungar served becomes one row, summed by ``rungar usage``.

Covers the pure sums (groups, conclusions, nearest-rank p50/p95, cost only where priced), the
rows in the state database (one per job, kept across a restart, deleted past the retention)
and which jobs count as served (one a runner of Rungar's took; not one cancelled before).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rungar.config.model import ProviderConfig, ScaleSetConfig, ScaleSetProvider, ScaleSetsFile
from rungar.engine.core.records import RunnerRecord
from rungar.engine.engine import Engine
from rungar.engine.jobs.accounting import Accounting, usage_document
from rungar.engine.report.events import EventLog
from rungar.github.interface import JobEvent, JobEventKind, JobTimes
from rungar.model.machine import Conclusion, JobHint
from rungar.model.runner import RemovalReason, RunnerState
from rungar.store.sqlite import SqliteStore
from rungar.store.usage import UsageBook, read_usage
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.usage.summary import JobUsage, percentile, summarize

DAY = 86400.0


def job(n: int, **fields: object) -> JobUsage:
    values: dict[str, object] = {
        "job_id": str(n),
        "finished_at": 1000.0 + n,
        "repository": "octo/app",
        "workflow": ".github/workflows/ci.yml",
        "job": "build",
        "scale_set": "linux",
        "provider": "host",
        "runner": f"linux-{n}",
        "runner_seconds": 60.0,
        "conclusion": "succeeded",
        "wait": float(n),
        "price_per_hour": None,
    }
    values.update(fields)
    return JobUsage(**values)  # type: ignore[arg-type]  # a table of fields, checked by the dataclass


def test_groups_sum_runner_seconds_count_conclusions_and_take_nearest_rank_waits() -> None:
    rows = [job(n) for n in range(1, 21)] + [
        job(21, repository="octo/web", conclusion="failed", runner_seconds=30.0)
    ]
    document = summarize(rows, "repository", since=0.0, now=2000.0)
    app, web = document["groups"]
    assert app["key"] == "octo/app" and app["jobs"] == 20
    assert app["runner_seconds"] == 1200.0
    assert app["conclusions"] == {"succeeded": 20}
    assert (app["wait_p50"], app["wait_p95"]) == (10.0, 19.0)
    assert web["conclusions"] == {"failed": 1}
    assert document["total"]["jobs"] == 21 and document["total"]["runner_seconds"] == 1230.0


def test_cost_is_runner_hours_times_the_price_and_none_where_nothing_was_priced() -> None:
    rows = [
        job(1, provider="cloud", runner_seconds=1800.0, price_per_hour=0.5),
        job(2, provider="cloud", runner_seconds=3600.0, price_per_hour=0.25),
        job(3, provider="host", runner_seconds=3600.0),
    ]
    groups = {g["key"]: g for g in summarize(rows, "provider", 0.0, 1.0)["groups"]}
    assert groups["cloud"]["cost"] == 0.5
    assert groups["host"]["cost"] is None


def test_a_workflow_is_named_with_its_repository_and_an_unknown_grouping_is_refused() -> None:
    document = summarize([job(1)], "workflow", 0.0, 1.0)
    assert document["groups"][0]["key"] == "octo/app: .github/workflows/ci.yml"
    with pytest.raises(ValueError, match="by: must be one of repository, workflow"):
        summarize([job(1)], "colour", 0.0, 1.0)


@pytest.mark.parametrize(
    ("values", "pct", "expected"),
    [
        ([], 50, None),
        ([3.0], 95, 3.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 50, 3.0),
        ([1.0, 2.0], 50, 1.0),
        ([1.0, 2.0, 3.0, 4.0], 95, 4.0),
    ],
)
def test_percentile_is_the_nearest_rank(values: list[float], pct: float, expected: float) -> None:
    assert percentile(values, pct) == expected


def test_rows_are_kept_one_per_job_across_a_restart_and_deleted_past_the_retention(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "state.db")
    book = UsageBook(store, retention=10 * DAY)
    book.record(job(1, finished_at=1 * DAY), now=1 * DAY)
    book.record(job(1, finished_at=1 * DAY, conclusion="failed"), now=1 * DAY)  # delivered twice
    book.record(job(2, finished_at=5 * DAY), now=5 * DAY)
    store.close()
    store = SqliteStore(tmp_path / "state.db")  # the daemon restarted
    book = UsageBook(store, retention=10 * DAY)
    assert [(r.job_id, r.conclusion) for r in read_usage(store.path, 0.0)] == [
        ("1", "failed"),
        ("2", "succeeded"),
    ]
    assert book.prune(now=12 * DAY) == 1  # job 1 ended 11 days before
    assert [r.job_id for r in read_usage(store.path, 0.0)] == ["2"]
    assert [r.job_id for r in read_usage(store.path, 6 * DAY)] == []


def test_a_database_without_usage_reads_as_no_jobs(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "state.db").close()
    assert read_usage(tmp_path / "state.db", 0.0) == []
    assert usage_document(tmp_path / "absent.db", "provider", 0.0, 1.0)["groups"] == []


def engine(tmp_path: Path, clock: FakeClock) -> Engine:
    config = ScaleSetsFile(
        (ProviderConfig("cloud", "fake", price_per_hour=0.4),),
        (ScaleSetConfig("linux", max_runners=4, providers=(ScaleSetProvider("cloud"),)),),
    )
    return Engine(
        config,
        {},
        FakeGitHub(),
        clock=clock,
        store=SqliteStore(tmp_path / "state.db"),
        events=EventLog(clock, None),
    )


HINT = JobHint(repository="octo/app", workflow=".github/workflows/ci.yml", job="build")


def event(kind: JobEventKind, runner: str = "", **fields: object) -> JobEvent:
    return JobEvent(kind, "linux", "job-1", HINT, runner_name=runner, **fields)  # type: ignore[arg-type]  # optional fields by name


def test_a_served_job_is_one_row_with_its_runners_life_price_and_githubs_wait(
    tmp_path: Path,
) -> None:
    clock = FakeClock(start=10_000.0)
    e = engine(tmp_path, clock)
    e.runners.add(RunnerRecord("linux-1", "linux", "cloud", "r1", 10_000.0, RunnerState.BUSY))
    accounting = Accounting(e.ctx)
    accounting.job_started("linux", event(JobEventKind.STARTED, "linux-1"))
    clock.advance(900.0)
    accounting.job_completed(
        "linux",
        event(
            JobEventKind.COMPLETED,
            "linux-1",
            conclusion=Conclusion.SUCCEEDED,
            times=JobTimes(assigned=9_990.0, started=10_002.5, finished=10_900.0),
        ),
    )
    [row] = read_usage(e.store.path, 0.0)
    assert (row.repository, row.workflow, row.job) == (
        "octo/app",
        ".github/workflows/ci.yml",
        "build",
    )
    assert (row.scale_set, row.provider, row.runner) == ("linux", "cloud", "linux-1")
    assert (row.runner_seconds, row.conclusion, row.wait) == (900.0, "succeeded", 12.5)
    assert row.price_per_hour == 0.4


def test_the_wait_rungar_saw_counts_when_github_gave_no_times(tmp_path: Path) -> None:
    clock = FakeClock(start=10_000.0)
    e = engine(tmp_path, clock)
    e.on_job_assigned("linux", "job-1", HINT)
    clock.advance(7.0)
    accounting = Accounting(e.ctx)
    accounting.job_started("linux", event(JobEventKind.STARTED, "linux-1"))
    accounting.job_completed("linux", event(JobEventKind.COMPLETED, "linux-1"))
    [row] = read_usage(e.store.path, 0.0)
    assert (row.wait, row.conclusion, row.provider) == (7.0, "unknown", "")


def test_a_job_cancelled_before_any_runner_took_it_is_not_served(tmp_path: Path) -> None:
    e = engine(tmp_path, FakeClock())
    Accounting(e.ctx).job_completed(
        "linux", event(JobEventKind.COMPLETED, conclusion=Conclusion.CANCELLED)
    )
    assert read_usage(e.store.path, 0.0) == []


def test_the_wait_is_on_rungars_clock_when_it_heard_the_job_assigned(tmp_path: Path) -> None:
    """GitHub's clock runs 20 times faster here (the demo's emulator): its times say the job
    waited 200 s, Rungar heard it wait 10 s, and its runner's life is on Rungar's clock too."""
    clock = FakeClock(start=10_000.0)
    e = engine(tmp_path, clock)
    e.on_job_assigned("linux", "job-1", HINT, at=50_000.0)
    clock.advance(10.0)
    e.runners.add(RunnerRecord("linux-1", "linux", "cloud", "r1", 10_004.0, RunnerState.BUSY))
    accounting = Accounting(e.ctx)
    githubs = JobTimes(assigned=50_000.0, started=50_200.0)
    accounting.job_started("linux", event(JobEventKind.STARTED, "linux-1", times=githubs))
    clock.advance(30.0)
    finished = JobTimes(assigned=50_000.0, started=50_200.0, finished=50_800.0)
    accounting.job_completed(
        "linux",
        event(JobEventKind.COMPLETED, "linux-1", conclusion=Conclusion.SUCCEEDED, times=finished),
    )
    [row] = read_usage(e.store.path, 0.0)
    assert (row.wait, row.runner_seconds) == (10.0, 36.0)


def test_a_job_lost_with_its_machine_is_booked_to_the_provider_that_held_it(
    tmp_path: Path,
) -> None:
    clock = FakeClock(start=10_000.0)
    e = engine(tmp_path, clock)
    record = RunnerRecord("linux-1", "linux", "cloud", "r1", 10_000.0, RunnerState.BUSY)
    e.runners.add(record)
    accounting = Accounting(e.ctx)
    accounting.job_started("linux", event(JobEventKind.STARTED, "linux-1"))
    clock.advance(100.0)
    # Its machine goes away under the job: the runner is let go, then forgotten ...
    e.removals.let_go(record, RemovalReason.ENDED)
    e.runners.pop("linux-1")
    clock.advance(60.0)
    # ... and GitHub, no longer hearing from it, fails the job a minute later.
    accounting.job_completed(
        "linux", event(JobEventKind.COMPLETED, "linux-1", conclusion=Conclusion.FAILED)
    )
    [row] = read_usage(e.store.path, 0.0)
    assert (row.provider, row.runner, row.conclusion) == ("cloud", "linux-1", "failed")
    assert row.runner_seconds == 100.0  # until its machine went, not until GitHub said so
    assert row.price_per_hour == 0.4
