"""``rungar_job_wait_seconds``: queued on GitHub until a runner took the job, on GitHub's clock."""

from __future__ import annotations

from pathlib import Path

from rungar.config.model import ProviderConfig, ScaleSetConfig, ScaleSetProvider, ScaleSetsFile
from rungar.engine.core.notices import observe_job_wait
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.github.wire import JobMessage
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub

QUEUED = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def test_a_job_message_carries_githubs_queue_and_runner_assign_times() -> None:
    job = JobMessage.from_json(
        {
            "messageType": "JobStarted",
            "jobId": "7",
            "queueTime": "2026-01-01T00:00:00Z",
            "runnerAssignTime": "2026-01-01T00:00:42.1234567Z",
        }
    )
    assert job.queue_time == QUEUED
    assert round(job.runner_assign_time - job.queue_time, 3) == 42.123


def test_dotnets_zero_time_and_nonsense_read_as_not_given() -> None:
    job = JobMessage.from_json(
        {
            "messageType": "JobStarted",
            "queueTime": "yesterday",
            "runnerAssignTime": "0001-01-01T00:00:00Z",
        }
    )
    assert (job.queue_time, job.runner_assign_time) == (0.0, 0.0)


def engine(tmp_path: Path) -> Engine:
    config = ScaleSetsFile(
        (ProviderConfig("compute1", "fake"),),
        (ScaleSetConfig("linux", max_runners=4, providers=(ScaleSetProvider("compute1"),)),),
    )
    clock = FakeClock()
    return Engine(
        config,
        {},
        FakeGitHub(),
        clock=clock,
        store=SqliteStore(tmp_path / "state.db"),
        events=EventLog(clock, None),
    )


def waits(e: Engine) -> tuple[float, float]:
    sample = {s.name: s.value for m in e.metrics.job_wait.collect() for s in m.samples}
    return sample["rungar_job_wait_seconds_count"], sample["rungar_job_wait_seconds_sum"]


def test_the_wait_is_githubs_runner_assign_time_less_its_queue_time(tmp_path: Path) -> None:
    e = engine(tmp_path)
    observe_job_wait(e.ctx, "linux", QUEUED, QUEUED + 42, heard_at=QUEUED + 9999)
    assert waits(e) == (1, 42)


def test_without_a_runner_assign_time_the_wait_ends_when_the_daemon_heard_of_it(
    tmp_path: Path,
) -> None:
    e = engine(tmp_path)
    observe_job_wait(e.ctx, "linux", QUEUED, 0.0, heard_at=QUEUED + 30)
    observe_job_wait(e.ctx, "linux", 0.0, 0.0, heard_at=QUEUED + 30)  # no queue time: not counted
    assert waits(e) == (1, 30)
