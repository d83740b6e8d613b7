"""The emulator's state as GitHub keeps it: taken runner names, capacity-bound dispatch, no job
for a removed runner, and service tokens checked at every call however often they are
presented."""

from __future__ import annotations

from rungar.testing.clock import FakeClock
from rungar.testing.github_emulator import EmulatorOptions, JobSpec
from rungar.testing.github_emulator.clock import EmulatorClock
from rungar.testing.github_emulator.model import JobState, Runner
from rungar.testing.github_emulator.state import EmulatorState


def state() -> tuple[EmulatorState, FakeClock]:
    real = FakeClock()
    return EmulatorState(EmulatorOptions(), EmulatorClock(real=real)), real


def test_a_runner_name_is_taken_until_every_runner_of_that_name_is_gone() -> None:
    s, _ = state()
    record = s.create_scale_set("linux", 1, ["linux"])
    first = s.register_runner(record.id, "r-1")
    assert first is not None
    assert s.register_runner(record.id, "r-1") is None  # 409 AgentExists
    assert s.register_runner(record.id, "r-2") is not None
    # A runner put in by other means (a twin the service should not have) counts too.
    s.runners[900] = Runner(900, "r-1", record.id, "c", 0.0)
    assert s.remove_runner(first.id) == "removed"
    assert s.register_runner(record.id, "r-1") is None, "the twin still holds the name"
    s.runners.pop(900)
    again = s.register_runner(record.id, "r-1")
    assert again is not None and again.id != first.id
    # Replacing a runner under its id frees the old name and takes the new one.
    s.runners[again.id] = Runner(again.id, "r-9", record.id, "c", 0.0)
    assert s.register_runner(record.id, "r-1") is not None
    assert s.register_runner(record.id, "r-9") is None
    assert sorted(r.name for r in s.runners.values()) == ["r-1", "r-2", "r-9"]


def test_a_removed_runner_takes_no_job_even_from_a_request_it_opened_before() -> None:
    s, _ = state()
    record = s.create_scale_set("linux", 1, ["linux"])
    assert s.open_session(record.id, "rungar") is not None
    record.polled = True
    removed, kept = s.register_runner(record.id, "r-1"), s.register_runner(record.id, "r-2")
    assert removed is not None and kept is not None
    assert s.connect(removed) and s.connect(kept)
    # The removed runner's long poll still holds its runner object when the job arrives.
    assert s.remove_runner(removed.id) == "removed"
    job = s.queue_job(JobSpec(labels=("self-hosted", "linux")))
    assert s.take_job(removed) is None
    assert job.state is JobState.ASSIGNED and not job.runner_id
    assert s.take_job(kept) is job and job.runner_id == kept.id


def test_a_burst_is_dispatched_oldest_first_within_each_scale_sets_capacity() -> None:
    s, real = state()
    small = s.create_scale_set("small", 1, ["linux"])
    large = s.create_scale_set("large", 1, ["linux"])
    for record, capacity in ((small, 3), (large, 2)):
        assert s.open_session(record.id, "rungar") is not None
        record.polled, record.max_capacity = True, capacity
    jobs = []
    for _ in range(7):
        jobs.append(s.queue_job(JobSpec(labels=("self-hosted", "linux"))))
        real.advance(1)
    # The lowest scale-set id wins a job while it has room; the oldest jobs go first.
    assert [j.scale_set_id for j in jobs] == [small.id] * 3 + [large.id] * 2 + [0, 0]
    assert [j.state for j in jobs[5:]] == [JobState.QUEUED, JobState.QUEUED]
    s.cancel(jobs[1])  # small holds one job less
    s.dispatch()
    assert (jobs[5].scale_set_id, jobs[6].scale_set_id) == (small.id, 0)
    small.max_capacity = None  # no capacity reported: no bound
    s.dispatch()
    assert jobs[6].scale_set_id == small.id


def test_a_service_token_is_checked_at_every_call_after_the_first() -> None:
    s, real = state()
    tokens = s.tokens
    token = tokens.issue_jwt({"kind": "admin", "sid": "session-1"}, ttl=60)
    for _ in range(2):
        claims = tokens.check_jwt(token, "admin")
        assert claims is not None and claims["sid"] == "session-1"
        assert tokens.check_jwt(token, "mq") is None, "another kind of token"
        assert tokens.session_of(token) == "session-1"
    assert claims is not None
    claims["sid"] = "changed by a caller"
    assert tokens.check_jwt(token, "admin") == {**claims, "sid": "session-1"}
    real.advance(61)
    assert tokens.check_jwt(token, "admin") is None, "expired"
    assert tokens.session_of(token) == "session-1", "the request log still names it"
    fresh = tokens.issue_jwt({"kind": "admin"}, ttl=60)
    assert tokens.check_jwt(fresh, "admin") is not None
    tokens.revoke(fresh)
    assert tokens.check_jwt(fresh, "admin") is None, "revoked"
    forged = fresh[:-4] + ("AAAA" if not fresh.endswith("AAAA") else "BBBB")
    assert tokens.check_jwt(forged, "admin") is None, "a signature that does not verify"
    assert tokens.session_of("not a token") == ""


def test_every_job_no_runner_took_is_withdrawn_once_its_own_timeout_passes() -> None:
    s, real = state()
    s.options.assignment_timeout = 100.0
    s.options.session_idle_ttl = 10_000.0  # the session stays live without polls
    record = s.create_scale_set("linux", 1, ["linux"])
    assert s.open_session(record.id, "rungar") is not None
    record.polled, record.max_capacity = True, 1

    def withdrawn() -> int:
        return sum(1 for e in record.pending if e.get("messageType") == "JobCompleted")

    first = s.queue_job(JobSpec(labels=("linux",)))
    s.tick()
    real.advance(60)
    s.tick()
    assert (first.state, withdrawn()) == (JobState.ASSIGNED, 0)
    real.advance(40)
    s.tick()  # withdrawn and offered again at once: the same job, a new wait
    assert (first.reassignments, first.state, withdrawn()) == (1, JobState.ASSIGNED, 1)
    s.cancel(first)
    real.advance(10)
    second = s.queue_job(JobSpec(labels=("linux",)))  # offered between two walks of the jobs
    for _ in range(9):
        real.advance(10)
        s.tick()
    assert second.reassignments == 0
    real.advance(10)
    s.tick()
    assert second.reassignments == 1
    s.options.assignment_timeout = 5.0  # a shorter wait holds from the next tick
    real.advance(5)
    s.tick()
    assert second.reassignments == 2
