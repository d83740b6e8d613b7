"""The listener's semantics against the emulator over HTTP: demand, job events, and every way the
service misbehaves."""

from __future__ import annotations

from typing import Any

from rungar.github.interface import Demand, InMemoryCursorStore, JobEvent, JobEventKind
from rungar.github.service import ScaleSetGitHub
from rungar.model.machine import Conclusion
from rungar.testing.github_emulator import (
    Fault,
    FaultKind,
    GitHubEmulator,
    InstantClock,
    JobSpec,
    JobState,
)
from rungar.testing.github_emulator.harness import (
    Recorder,
    emulator,
    eventually,
    github,
    running_listener,
    scale_set,
)

JOB = JobSpec(labels=("self-hosted", "rungar"))
STALE_NEVER = 3600.0  # a session left behind stays until the test ends it (evict_session)
A = JobEventKind.ASSIGNED
S = JobEventKind.STARTED
C = JobEventKind.COMPLETED


def conflicts(gh: ScaleSetGitHub) -> int:
    """How many times GitHub answered 409 (a live session holds the scale set)."""
    return gh.counter.snapshot().get("409", 0)


# why the ignore[no-untyped-def] below: emu is the emulator fixture, untyped in these tests
def _run_job(emu, scale_set_id: int, name: str, job_id: str, result: str = "Succeeded") -> None:  # type: ignore[no-untyped-def]
    runner = emu.state.register_runner(scale_set_id, name)
    emu.state.connect(runner)
    job = emu.state.take_job(runner)
    assert job is not None and job.job_id == job_id
    emu.state.complete(job, result)


async def test_jobs_flow_through_as_demand_and_deduplicated_events() -> None:
    rec = Recorder()
    async with (
        emulator() as emu,
        github(emu) as gh,
        running_listener(gh, scale_set(max_runners=7), rec) as lis,
    ):
        await eventually(lambda: bool(rec.demands), what="the session's statistics")
        job = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(job.job_id) == [A], what="JobAssigned")
        assert rec.demands[-1].assigned == 1
        _run_job(emu, lis.scale_set_id, "linux-1", job.job_id)
        await eventually(lambda: rec.kinds(job.job_id) == [A, S, C], what="started and completed")
        await eventually(lambda: rec.demands[-1].assigned == 0, what="demand back to zero")
    done = next(e for e in rec.jobs if e.kind is C)
    assert done.conclusion is Conclusion.SUCCEEDED and done.runner_name == "linux-1"
    polls = [r for r in emu.state.requests if r["route"] == "MQ_GET"]
    assert polls and all(r["headers"]["x-scalesetmaxcapacity"] == "7" for r in polls)
    assert not emu.state.scale_sets[lis.scale_set_id].unacked  # every message was acked


async def test_a_paused_scale_set_reports_zero_capacity_and_gets_no_job() -> None:
    rec = Recorder()
    config = scale_set(paused=True)
    async with emulator() as emu, github(emu) as gh, running_listener(gh, config, rec) as lis:
        job = emu.state.queue_job(JOB)
        await eventually(
            lambda: any(r["route"] == "MQ_GET" for r in emu.state.requests), what="a poll"
        )
        await eventually(
            lambda: emu.state.scale_sets[lis.scale_set_id].max_capacity == 0, what="capacity 0"
        )
        assert emu.state.jobs[job.job_id].state is JobState.QUEUED
        lis.set_max_capacity(3)
        await eventually(lambda: rec.kinds(job.job_id) == [A], what="assignment after unpausing")


async def test_legacy_mode_acquires_available_jobs_with_the_message_queue_token() -> None:
    rec = Recorder()
    async with (
        emulator(acquire_mode="legacy") as emu,
        github(emu) as gh,
        running_listener(gh, scale_set(), rec) as lis,
    ):
        job = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(job.job_id) == [A], what="JobAssigned after acquiring")
        # why the ignore[union-attr] below: a listener that acquired a job has a session
        session = lis.session.session  # type: ignore[union-attr]
        assert session is not None
    acquires = [r for r in emu.state.requests if r["route"] == "A12"]
    assert len(acquires) == 1
    assert acquires[0]["headers"]["authorization"] == f"Bearer {session.message_queue_token}"
    assert acquires[0]["body"] == f"[{job.request_id}]"


async def test_a_401_on_the_queue_refreshes_the_session_and_keeps_the_cursor() -> None:
    rec = Recorder()
    async with emulator() as emu, github(emu) as gh, running_listener(gh, scale_set(), rec):
        first = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(first.job_id) == [A], what="first job")
        emu.state.faults.add(Fault("MQ_GET", status=401))
        await eventually(lambda: any(r["route"] == "A9" for r in emu.state.requests), what="A9")
        second = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(second.job_id) == [A], what="second job")
    routes = [r for r in emu.state.requests if r["route"] in ("MQ_GET", "A9", "A8")]
    i = next(i for i, r in enumerate(routes) if r["route"] == "A9")
    cursor_before = routes[i - 1]["query"].get("lastMessageId")
    assert cursor_before is not None
    assert routes[i + 1]["query"].get("lastMessageId") == cursor_before
    assert sum(1 for r in routes if r["route"] == "A8") == 1


async def test_an_evicted_session_is_replaced_and_no_job_is_lost() -> None:
    rec = Recorder()
    async with emulator() as emu, github(emu) as gh, running_listener(gh, scale_set(), rec) as lis:
        await eventually(lambda: bool(rec.demands), what="session")
        emu.state.evict_session(lis.scale_set_id)
        job = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(job.job_id) == [A], what="job after eviction")
    assert sum(1 for r in emu.state.requests if r["route"] == "A8") == 2


async def test_a_session_conflict_stands_by_with_capped_backoff_until_the_stale_one_expires() -> (
    None
):
    rec = Recorder()
    clock = InstantClock(cap=0.05)
    # The stale session ends when the test says so, once the listener has stood by three times,
    # not after a real second that a busy machine may spend before the listener's first try.
    async with emulator(session_idle_ttl=STALE_NEVER) as emu, github(emu, clock=clock) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        await gh.client.create_session(scale_set_id, "crashed-host")  # never deleted, never polled
        async with running_listener(gh, scale_set(), rec):
            await eventually(lambda: conflicts(gh) >= 3, what="three 409s")
            assert not rec.demands  # the stale session still holds the scale set
            emu.state.evict_session(scale_set_id)  # it expires
            await eventually(lambda: bool(rec.demands), what="the listener to get its session")
            job = emu.state.queue_job(JOB)
            await eventually(lambda: rec.kinds(job.job_id) == [A], what="job")
    assert max(clock.sleeps) <= 0.2  # the configured cap
    assert clock.sleeps[:3] == [0.05, 0.05 * 1.5, 0.05 * 1.5**2]


async def test_a_deleted_scale_set_is_recreated_with_a_new_id_and_a_fresh_cursor() -> None:
    rec = Recorder()
    cursors = InMemoryCursorStore()
    async with (
        emulator() as emu,
        github(emu) as gh,
        running_listener(gh, scale_set(), rec, cursors) as lis,
    ):
        first = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(first.job_id) == [A], what="first job")
        old_id = lis.scale_set_id
        emu.state.delete_scale_set(old_id)
        await eventually(lambda: lis.scale_set_id not in (0, old_id), what="re-creation")
        second = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(second.job_id) == [A], what="job on the new scale set")
        # The first job was re-queued when its scale set vanished: it is assigned again.
        await eventually(
            lambda: rec.kinds(first.job_id) == [A], what="first job still assigned once"
        )
        assert emu.state.jobs[first.job_id].scale_set_id == lis.scale_set_id
    assert cursors.cursors[lis.scale_set_id] > 0 and old_id in cursors.cursors


async def test_empty_200s_5xx_and_a_hung_poll_are_survived() -> None:
    rec = Recorder()
    async with (
        emulator() as emu,
        github(emu, long_poll_timeout=0.5) as gh,
        running_listener(gh, scale_set(), rec),
    ):
        await eventually(lambda: bool(rec.demands), what="session")
        emu.state.faults.add(Fault("MQ_GET", kind=FaultKind.EMPTY, count=2))
        emu.state.faults.add(Fault("MQ_GET", status=502, count=2))
        emu.state.faults.add(Fault("MQ_GET", kind=FaultKind.HANG, delay=3.0))
        emu.state.faults.add(Fault("MQ_GET", kind=FaultKind.BOM))
        await eventually(lambda: not emu.state.faults.faults, what="every fault fired")
        job = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(job.job_id) == [A], what="job after the faults")
    assert sorted(kind for _, kind in emu.state.faults.fired) == sorted(
        ["empty", "empty", "status", "status", "hang", "bom"]
    )


async def test_a_failed_ack_neither_loses_nor_duplicates_job_events() -> None:
    rec, rec2 = Recorder(), Recorder()
    cursors = InMemoryCursorStore()
    async with emulator() as emu:
        async with github(emu) as gh, running_listener(gh, scale_set(), rec, cursors) as lis:
            await eventually(lambda: bool(rec.demands), what="session")
            emu.state.faults.add(Fault("MQ_DELETE", status=500, count=5))
            job = emu.state.queue_job(JOB)
            await eventually(lambda: rec.kinds(job.job_id) == [A], what="job")
            _run_job(emu, lis.scale_set_id, "linux-1", job.job_id)
            await eventually(lambda: rec.kinds(job.job_id) == [A, S, C], what="job finished")
            scale_set_id = lis.scale_set_id
        assert emu.state.scale_sets[scale_set_id].unacked  # the ack really failed
        # Restarted with the persisted cursor: nothing already handled comes back as an event.
        async with github(emu) as gh2, running_listener(gh2, scale_set(), rec2, cursors):
            await eventually(lambda: len(rec2.demands) >= 3, what="a few polls after the restart")
            later = emu.state.queue_job(JOB)
            await eventually(
                lambda: rec2.kinds(later.job_id) == [A], what="a job after the restart"
            )
    assert [e.kind for e in rec.jobs] == [A, S, C]
    assert [e.job_id for e in rec2.jobs] == [later.job_id]


async def test_a_restart_with_a_stale_session_replays_nothing_already_handled() -> None:
    rec = Recorder()
    cursors = InMemoryCursorStore()
    # The stale session expires when the test says so, once the restart has met it: not after
    # a real lifetime that a busy machine may outlast before the restart's first try.
    async with emulator(session_idle_ttl=STALE_NEVER) as emu:
        async with github(emu) as gh, running_listener(gh, scale_set(), rec, cursors) as lis:
            job = emu.state.queue_job(JOB)
            await eventually(lambda: rec.kinds(job.job_id) == [A], what="job")
            scale_set_id = lis.scale_set_id
            # Crash: the session is neither deleted nor polled again.
            emu.state.faults.add(Fault("A10", kind=FaultKind.HANG, delay=0.1, count=10))
        later = emu.state.queue_job(JOB)
        async with github(emu) as gh2, running_listener(gh2, scale_set(), rec, cursors):
            await eventually(lambda: conflicts(gh2) >= 1, what="the stale session met (409)")
            emu.state.evict_session(scale_set_id)  # it expires
            await eventually(lambda: rec.kinds(later.job_id) == [A], what="job after restart")
            _run_job(emu, scale_set_id, "linux-9", job.job_id)
            await eventually(lambda: rec.kinds(job.job_id) == [A, S, C], what="first job done")
    assert rec.kinds(job.job_id) == [A, S, C]
    assert rec.kinds(later.job_id) == [A]


async def test_an_unclaimed_job_is_reassigned_three_times_then_cancelled() -> None:
    rec = Recorder()
    async with (
        emulator(assignment_timeout=0.3) as emu,
        github(emu) as gh,
        running_listener(gh, scale_set(), rec),
    ):
        job = emu.state.queue_job(JOB)
        await eventually(
            lambda: emu.state.jobs[job.job_id].state is JobState.COMPLETED, what="cancellation"
        )
        await eventually(lambda: len(rec.kinds(job.job_id)) == 8, what="every event")
        await eventually(lambda: rec.demands[-1].assigned == 0, what="no demand left")
    assert rec.kinds(job.job_id) == [A, C] * 4
    assert all(e.canceled for e in rec.jobs if e.kind is C)
    assert emu.state.jobs[job.job_id].result == "canceled"


async def test_more_than_fifty_events_are_split_across_messages_and_each_job_is_seen_once() -> None:
    rec = Recorder()
    async with (
        emulator() as emu,
        github(emu) as gh,
        running_listener(gh, scale_set(max_runners=500), rec),
    ):
        await eventually(lambda: bool(rec.demands), what="session")
        jobs = [emu.state.queue_job(JOB) for _ in range(120)]
        await eventually(lambda: len(rec.jobs) == 120, what="120 assignments")
        await eventually(lambda: rec.demands[-1].assigned == 120, what="demand 120")
        # A message is acknowledged after its jobs are handled: the last one's may still be on
        # its way when the 120th job is seen.
        await eventually(lambda: len(acks(emu)) >= 3, what="three messages acknowledged")
    assert sorted(e.job_id for e in rec.jobs) == sorted(j.job_id for j in jobs)


def acks(emu: GitHubEmulator) -> list[dict[str, Any]]:
    return [r for r in emu.state.requests if r["route"] == "MQ_DELETE"]


async def test_message_queue_polls_are_never_stretched_by_a_low_rest_budget() -> None:
    # The queue is not REST: a REST reading at 8% of its budget once stretched every poll 4x.
    rec = Recorder()
    clock = InstantClock()
    async with emulator() as emu, github(emu, clock=clock) as gh:
        emu.state.rate_remaining = 400  # under 10% of 5000 once the chain has spent a few calls
        async with running_listener(gh, scale_set(), rec):
            await eventually(lambda: len(rec.demands) >= 3, what="a few polls")
    assert gh.client.transport.rate_limit is not None
    assert gh.client.transport.rate_limit.remaining < 400
    assert clock.sleeps == []


async def test_unacked_messages_are_redelivered_to_a_reader_without_a_cursor() -> None:
    async with emulator() as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        session = await gh.client.create_session(scale_set_id, "host")
        await gh.client.get_message(session, 0, 5)
        emu.state.queue_job(JOB)
        first = await gh.client.get_message(session, 0, 5)
        again = await gh.client.get_message(session, 0, 5)
        assert first is not None and again is not None
        assert again.message_id == first.message_id
        await gh.client.delete_message(session, first.message_id)
        assert await gh.client.get_message(session, 0, 5) is None


async def test_a_refresh_that_finds_the_session_evicted_opens_a_new_one() -> None:
    rec = Recorder()
    async with emulator() as emu, github(emu) as gh, running_listener(gh, scale_set(), rec) as lis:
        await eventually(lambda: bool(rec.demands), what="session")
        emu.state.faults.add(Fault("MQ_GET", status=401))
        emu.state.faults.add(Fault("A9", kind=FaultKind.DELAY, delay=0.3))
        await eventually(lambda: any(r["route"] == "A9" for r in emu.state.requests), what="A9")
        emu.state.evict_session(
            lis.scale_set_id
        )  # while the refresh is on its way: it finds nothing
        job = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(job.job_id) == [A], what="job on the new session")
    routes = [r["route"] for r in emu.state.requests if r["route"] in ("A8", "A9")]
    assert routes == ["A8", "A9", "A8"]


async def test_the_listen_stream_yields_demand_and_jobs_and_closing_it_deletes_the_session() -> (
    None
):
    async with emulator() as emu, github(emu) as gh:
        stream = gh.listen(scale_set())
        first = await anext(stream)
        assert isinstance(first, Demand) and first.assigned == 0
        job = emu.state.queue_job(JOB)
        seen: list[object] = []
        while not any(isinstance(e, JobEvent) for e in seen):
            seen.append(await anext(stream))
        event = next(e for e in seen if isinstance(e, JobEvent))
        assert event.job_id == job.job_id and event.kind is A
        # why the ignore[attr-defined] below: typed as an iterator, it is an async generator
        await stream.aclose()  # type: ignore[attr-defined]
        assert not gh.listeners
    assert emu.state.requests[-1]["route"] == "A10"
    assert all(not s.alive for s in emu.state.sessions.values())
