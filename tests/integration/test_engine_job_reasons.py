"""Why a job waits, told on GitHub, by the engine's task (rungar.engine.jobs.reasons) on a fake
clock: with a personal access token, a commit status per run past the threshold, none for a job
that starts sooner, the head read once, and nothing at all while the key is off; across a
restart, the same check run updated and concluded."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rungar.config.model import (
    JobReasonsConfig,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.machine import JobHint, Refusal, RefusalKind
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

RUNNER = {"vcpus": 2, "memory": "4GiB"}
ON = JobReasonsConfig(enabled=True, after=60.0, update_every=60.0)


def engine_for(
    tmp_path: Path,
    github: FakeGitHub,
    reasons: JobReasonsConfig,
    cancel_after: float | None = None,
    clock: FakeClock | None = None,
) -> Engine:
    clock = clock or FakeClock()
    linux = ScaleSetConfig(
        "linux",
        max_runners=5,
        providers=(ScaleSetProvider("p", RUNNER),),
        unservable_cancel_after=cancel_after,
    )
    return Engine(
        ScaleSetsFile(
            (ProviderConfig("p", "fake", runner=RUNNER),),
            (linux,),
            Timing(),
            job_reasons=reasons,
        ),
        {"p": FakeProvider("p", vcpus=64, memory_bytes=128 * GIB, clock=clock)},
        github,
        clock=clock,
        store=SqliteStore(tmp_path / "state.db"),
        events=EventLog(clock),
        installation="gh-test",
    )


def hint(job_id: str, run_id: str) -> JobHint:
    return JobHint("octo/app", "ci.yml", "build", job_id, "main", run_id)


async def test_a_token_gets_a_commit_status_for_the_run_that_waited_and_none_for_the_other(
    tmp_path: Path,
) -> None:
    github = FakeGitHub()
    github.app = False  # a personal access token: commit statuses
    engine = engine_for(tmp_path, github, ON)
    clock = engine.clock
    assert isinstance(clock, FakeClock)
    engine.on_job_assigned("linux", "j1", hint("j1", "77"))
    clock.advance(30)
    await engine.reasons.turn()
    engine.on_job_assigned("linux", "j2", hint("j2", "78"))
    clock.advance(20)
    engine.on_job_started("linux", "j2", "", hint("j2", "78"))  # started within the threshold
    clock.advance(11)  # j1 has waited 61 s
    await engine.reasons.turn()  # its run's head commit, first
    assert github.head_reads == [("octo/app", "77")]
    assert github.statuses == []
    await engine.reasons.turn()
    ((repository, sha, body),) = github.statuses
    assert repository == "octo/app" and len(sha) == 40
    assert body["state"] == "pending" and body["context"] == "rungar: linux"
    assert str(body["description"]).startswith("waiting 1m 01s: ")
    clock.advance(30)
    engine.on_job_started("linux", "j1", "", hint("j1", "77"))
    await engine.reasons.turn()
    assert [s[2]["state"] for s in github.statuses] == ["pending", "success"]
    assert str(github.statuses[-1][2]["description"]).startswith("waited 1m 31s: ")
    assert github.head_reads == [("octo/app", "77")]  # run 78 never read, 77 once
    assert github.check_runs == {}
    assert engine.reasons.seen.published == 1 and engine.reasons.seen.concluded == 1


async def test_nothing_is_written_while_the_key_is_off(tmp_path: Path) -> None:
    github = FakeGitHub()
    engine = engine_for(tmp_path, github, replace(ON, enabled=False))
    clock = engine.clock
    assert isinstance(clock, FakeClock)
    engine.on_job_assigned("linux", "j1", hint("j1", "77"))
    for _ in range(3):
        clock.advance(120)
        await engine.reasons.turn()
    assert github.head_reads == [] and github.check_runs == {} and github.statuses == []


async def test_a_run_its_only_provider_refuses_as_invalid_is_cancelled_with_an_event_and_a_metric(
    tmp_path: Path,
) -> None:
    github = FakeGitHub()
    # Reasons off: the cancel is the scale set's own opt-in, and still says why on GitHub.
    engine = engine_for(tmp_path, github, replace(ON, enabled=False), cancel_after=600.0)
    clock = engine.clock
    assert isinstance(clock, FakeClock)
    engine.on_job_assigned("linux", "j1", hint("j1", "77"))
    too_big = Refusal(RefusalKind.INVALID, "8 vCPUs is more than the host's 4 CPUs")
    engine.fleet.record_refusal("linux", "p", too_big, clock.now())
    clock.advance(599)
    await engine.reasons.turn()
    assert github.cancelled_runs == []
    clock.advance(1)
    await engine.reasons.turn()
    assert github.cancelled_runs == [("octo/app", "77")]
    ((body,),) = github.check_runs.values()
    assert body["conclusion"] == "failure" and body["name"] == "rungar: linux"
    assert "p refuses its runner as invalid: 8 vCPUs" in str(body["output"])
    (event,) = [e for e in engine.events.recent() if e.action == "run_cancelled"]
    assert event.scale_set == "linux" and "no provider of linux" in event.message
    registry = engine.metrics.registry
    assert registry.get_sample_value("rungar_runs_cancelled_total", {"scale_set": "linux"}) == 1
    clock.advance(600)
    await engine.reasons.turn()  # the job still queued until GitHub says it ended: not again
    assert github.cancelled_runs == [("octo/app", "77")]


async def test_a_restarted_engine_updates_and_concludes_the_same_check_run(tmp_path: Path) -> None:
    github = FakeGitHub()
    clock = FakeClock()
    first = engine_for(tmp_path, github, ON, clock=clock)
    first.on_job_assigned("linux", "j1", hint("j1", "77"))
    first.on_job_assigned("linux", "j2", hint("j2", "78"))
    clock.advance(61)
    await first.reasons.turn()  # the heads
    await first.reasons.turn()  # the check runs
    assert len(github.check_runs) == 2
    first.store.close()

    again = engine_for(tmp_path, github, ON, clock=clock)  # the same state database
    full = Refusal(RefusalKind.FULL, "no memory left", resource="memory")
    again.fleet.record_refusal("linux", "p", full, clock.now())
    clock.advance(61)
    await again.reasons.turn()  # the reason changed: each check run rewritten, none created
    assert github.head_reads == [("octo/app", "77"), ("octo/app", "78")]  # kept, not read again
    assert sorted(len(bodies) for bodies in github.check_runs.values()) == [2, 2]
    assert all("found p full" in str(b[-1]["output"]) for b in github.check_runs.values())
    assert all(b[-1]["head_sha"] == b[0]["head_sha"] != "" for b in github.check_runs.values())
    again.on_job_started("linux", "j1", "", hint("j1", "77"))
    await again.reasons.turn()
    ended = [b[-1] for b in github.check_runs.values() if b[-1].get("conclusion")]
    assert len(ended) == 1 and str(ended[0]["output"]).count("waited 2m 02s") == 2
    # Run 78's job was never heard of again; the statistics say no job is assigned: concluded.
    again.on_demand("linux", 0)
    clock.advance(1)
    await again.reasons.turn()
    assert all(b[-1].get("conclusion") == "neutral" for b in github.check_runs.values())
    assert len(github.check_runs) == 2
