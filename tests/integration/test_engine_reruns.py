"""``rerun_lost_jobs`` in the engine: only a job whose runner was lost with its machine, and
that GitHub then failed, is re-run; never twice (a re-run attempt lost again stays failed),
never a job that failed on its own, never for a scale set that did not ask for it."""

from __future__ import annotations

from pathlib import Path

from rungar.config.model import (
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.engine.core.records import RunnerRecord
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.machine import Conclusion, JobHint
from rungar.model.runner import RemovalReason, RunnerState
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

RUNNER = {"vcpus": 2, "memory": "4GiB"}


def engine_for(tmp_path: Path, github: FakeGitHub, clock: FakeClock | None = None) -> Engine:
    clock = clock or FakeClock()
    sets = tuple(
        ScaleSetConfig(
            name,
            max_runners=5,
            providers=(ScaleSetProvider("p", RUNNER),),
            rerun_lost_jobs=name == "on",
        )
        for name in ("on", "off")
    )
    return Engine(
        ScaleSetsFile((ProviderConfig("p", "fake", runner=RUNNER),), sets, Timing()),
        {"p": FakeProvider("p", vcpus=64, memory_bytes=128 * GIB, clock=clock)},
        github,
        clock=clock,
        store=SqliteStore(tmp_path / "state.db"),
        events=EventLog(clock),
        installation="gh-test",
    )


def busy(engine: Engine, name: str, scale_set: str, job_id: str) -> RunnerRecord:
    hint = JobHint("octo/app", "ci.yml", "build", job_id, "main", "9000001")
    record = RunnerRecord(
        name=name,
        scale_set=scale_set,
        provider="p",
        revision="r",
        created_at=engine.clock.now(),
        state=RunnerState.BUSY,
        connected=True,
        job_id=job_id,
        hint=hint,
    )
    engine.runners.add(record)
    return record


async def test_only_a_lost_runners_failed_job_is_re_run_and_only_once(tmp_path: Path) -> None:
    github = FakeGitHub()
    engine = engine_for(tmp_path, github)
    lost = busy(engine, "r1", "on", "job-1")
    engine.removals.let_go(lost, RemovalReason.ENDED)
    engine.on_job_completed("on", "job-1", "r1", Conclusion.FAILED)
    await engine.drain_tasks()
    assert github.reruns == [("octo/app", "9000001", "r1")]
    assert [e.action for e in engine.events.recent() if e.action == "job_rerun"] == ["job_rerun"]
    # The re-run attempt (a new job id, the same run and job) is lost too: not re-run again.
    again = busy(engine, "r2", "on", "job-1b")
    engine.removals.let_go(again, RemovalReason.ENDED)
    engine.on_job_completed("on", "job-1b", "r2", Conclusion.FAILED)
    await engine.drain_tasks()
    assert len(github.reruns) == 1


async def test_a_job_that_failed_on_its_own_or_succeeded_is_not_re_run(tmp_path: Path) -> None:
    github = FakeGitHub()
    engine = engine_for(tmp_path, github)
    busy(engine, "r1", "on", "job-1")
    engine.on_job_completed("on", "job-1", "r1", Conclusion.FAILED)  # its runner reported it
    lost = busy(engine, "r2", "on", "job-2")
    engine.removals.let_go(lost, RemovalReason.ENDED)
    engine.on_job_completed("on", "job-2", "r2", Conclusion.SUCCEEDED)  # it finished after all
    await engine.drain_tasks()
    assert github.reruns == []


async def test_a_scale_set_without_rerun_lost_jobs_re_runs_nothing(tmp_path: Path) -> None:
    github = FakeGitHub()
    engine = engine_for(tmp_path, github)
    lost = busy(engine, "r1", "off", "job-1")
    engine.removals.let_go(lost, RemovalReason.ENDED)
    engine.on_job_completed("off", "job-1", "r1", Conclusion.FAILED)
    await engine.drain_tasks()
    assert github.reruns == []


async def test_a_runner_removed_on_purpose_was_not_lost_its_failed_job_is_not_re_run(
    tmp_path: Path,
) -> None:
    github = FakeGitHub()
    engine = engine_for(tmp_path, github)
    removed = busy(engine, "r1", "on", "job-1")
    engine.removals.let_go(removed, RemovalReason.REQUESTED)  # an operator's rungar runners rm
    engine.on_job_completed("on", "job-1", "r1", Conclusion.FAILED)
    await engine.drain_tasks()
    assert github.reruns == []


async def test_a_restart_between_a_re_run_and_its_loss_does_not_re_run_the_job_again(
    tmp_path: Path,
) -> None:
    github = FakeGitHub()
    first = engine_for(tmp_path, github)
    lost = busy(first, "r1", "on", "job-1")
    first.removals.let_go(lost, RemovalReason.ENDED)
    first.on_job_completed("on", "job-1", "r1", Conclusion.FAILED)
    await first.drain_tasks()
    assert len(github.reruns) == 1
    first.store.close()
    # The daemon restarts on the same state database; the re-run attempt is lost too.
    second = engine_for(tmp_path, github)
    again = busy(second, "r2", "on", "job-1b")
    second.removals.let_go(again, RemovalReason.ENDED)
    second.on_job_completed("on", "job-1b", "r2", Conclusion.FAILED)
    await second.drain_tasks()
    assert len(github.reruns) == 1
    assert not [e for e in second.events.recent() if e.action == "job_rerun"]


async def test_a_job_lost_before_a_restart_and_failed_after_it_is_re_run_once(
    tmp_path: Path,
) -> None:
    github = FakeGitHub()
    first = engine_for(tmp_path, github)
    lost = busy(first, "r1", "on", "job-1")
    first.removals.let_go(lost, RemovalReason.ENDED)
    first.store.close()
    second = engine_for(tmp_path, github)
    second.on_job_completed("on", "job-1", "r1", Conclusion.FAILED)
    second.on_job_completed("on", "job-1", "r1", Conclusion.FAILED)  # told twice
    await second.drain_tasks()
    assert github.reruns == [("octo/app", "9000001", "r1")]


async def test_re_runs_are_forgotten_after_rerun_memory(tmp_path: Path) -> None:
    github = FakeGitHub()
    clock = FakeClock()
    first = engine_for(tmp_path, github, clock)
    lost = busy(first, "r1", "on", "job-1")
    first.removals.let_go(lost, RemovalReason.ENDED)
    first.on_job_completed("on", "job-1", "r1", Conclusion.FAILED)
    await first.drain_tasks()
    assert first.store.reruns(0.0) == {("octo/app", "9000001", "build")}
    # Past the memory, the next loss prunes the database's records of the old one.
    clock.advance(first.config.timing.rerun_memory + 3600.0)
    on = busy(first, "r3", "on", "job-3")
    first.removals.let_go(on, RemovalReason.ENDED)
    assert first.store.reruns(0.0) == set()
    assert set(first.store.lost_jobs(0.0)) == {"job-3"}
