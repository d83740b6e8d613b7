"""How the client and the listener treat GitHub's unusual answers, end to end against the
emulator with a fault plan (docs/github.md). Each test names the behaviour it holds."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from rungar.errors import GitHubError
from rungar.github.auth import AppAuth
from rungar.github.interface import InMemorySessionStore, JobEventKind
from rungar.github.timing import GitHubTiming
from rungar.testing.github_emulator import Fault, FaultKind, GitHubEmulator, InstantClock, JobSpec
from rungar.testing.github_emulator.harness import (
    Recorder,
    emulator,
    eventually,
    github,
    running_listener,
    scale_set,
)
from rungar.testing.github_emulator.model import Runner
from tests.github_app import app_keys
from tests.integration.wall_clock_client import WallClockClient
from tests.waiting import WAIT

JOB = JobSpec(labels=("self-hosted", "rungar"))
A = JobEventKind.ASSIGNED


def _routes(emu: GitHubEmulator, route: str) -> list[dict[str, Any]]:
    return [r for r in emu.state.requests if r["route"] == route]


async def _fault_next_poll(emu: GitHubEmulator, fault: Fault) -> None:
    """Add ``fault`` and return once a poll started after it (the one in flight had begun
    without it, and would answer the next message unchanged)."""
    polls = len(_routes(emu, "MQ_GET"))
    emu.state.faults.add(fault)
    await eventually(lambda: len(_routes(emu, "MQ_GET")) > polls, what="a poll with the fault")


# ---- 1. empty or garbled 200s from the message queue -------------------------------------------


async def test_empty_200s_from_the_queue_back_off_and_then_recreate_the_session() -> None:
    # Before: each empty 200 read as "no message" and the next GET went out at once (a hot
    # loop), with no wait and the same session for ever.
    rec = Recorder()
    clock = InstantClock()
    async with (
        emulator() as emu,
        github(emu, clock=clock) as gh,
        running_listener(gh, scale_set(), rec),
    ):
        await eventually(lambda: bool(rec.demands), what="the session")
        emu.state.faults.add(Fault("MQ_GET", kind=FaultKind.EMPTY, count=3))
        await eventually(lambda: len(_routes(emu, "A8")) == 2, what="a new session")
        job = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(job.job_id) == [A], what="a job on the new session")
    assert clock.sleeps[:3] == [1.0, 2.0, 4.0]  # backed off as for any error
    assert len(_routes(emu, "A8")) == 2
    assert len(_routes(emu, "A10")) >= 1  # the old session was deleted, not left to linger


async def test_a_garbled_200_is_a_failed_turn_with_a_backoff_not_an_empty_poll() -> None:
    rec = Recorder()
    clock = InstantClock()
    async with (
        emulator() as emu,
        github(emu, clock=clock) as gh,
        running_listener(gh, scale_set(), rec),
    ):
        await eventually(lambda: bool(rec.demands), what="the session")
        with capture_logs() as logs:
            emu.state.faults.add(Fault("MQ_GET", kind=FaultKind.GARBLED))
            await eventually(lambda: not emu.state.faults.faults, what="the fault")
            job = emu.state.queue_job(JOB)
            await eventually(lambda: rec.kinds(job.job_id) == [A], what="the job after it")
    assert clock.sleeps == [1.0]
    errors = [e for e in logs if e["event"] == "github.listener_error"]
    assert errors and "200" in errors[0]["error"]


# ---- 3. a message without statistics -----------------------------------------------------------


async def test_a_message_without_statistics_keeps_the_previous_demand_and_is_logged_once() -> None:
    # Before: the missing block read as zero assigned jobs, and the engine scaled down.
    rec = Recorder()
    async with (
        emulator() as emu,
        github(emu) as gh,
        running_listener(gh, scale_set(), rec),
    ):
        first = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(first.job_id) == [A], what="the first job")
        await eventually(lambda: rec.demands[-1].assigned == 1, what="demand 1")
        seen = len(rec.demands)
        with capture_logs() as logs:
            await _fault_next_poll(emu, Fault("MQ_GET", kind=FaultKind.NO_STATISTICS, count=2))
            second = emu.state.queue_job(JOB)
            await eventually(lambda: rec.kinds(second.job_id) == [A], what="the second job")
            third = emu.state.queue_job(JOB)
            await eventually(lambda: rec.kinds(third.job_id) == [A], what="the third job")
            await eventually(lambda: len(emu.state.faults.fired) == 2, what="both faults")
    assert [d.assigned for d in rec.demands[seen:]] and all(
        d.assigned >= 1 for d in rec.demands[seen:]
    )
    assert sum(1 for e in logs if e["event"] == "github.statistics_missing") == 1
    assert sorted(kind for _, kind in emu.state.faults.fired) == ["no_statistics"] * 2


# ---- 4. registration retries -------------------------------------------------------------------


async def test_registration_retries_resend_the_same_token_for_thirty_seconds_then_mint_anew() -> (
    None
):
    # Before: every retry minted a new registration token, and it gave up after ~3.5 s.
    clock = InstantClock()
    async with emulator() as emu, github(emu, clock=clock) as gh:
        emu.state.faults.add(Fault("R3", status=401, count=5))
        assert await gh.ensure_scale_set(scale_set()) > 0
        assert len(_routes(emu, "R2")) == 1  # one token, sent six times
        assert len(_routes(emu, "R3")) == 6
        assert clock.sleeps == [1.0, 2.0, 4.0, 8.0, 15.0]
        tokens = {r["headers"]["authorization"] for r in _routes(emu, "R3")}
        assert len(tokens) == 1
    async with emulator() as emu, github(emu, clock=InstantClock()) as gh:
        emu.state.faults.add(Fault("R3", status=403, count=7))
        assert await gh.ensure_scale_set(scale_set()) > 0
        assert len(_routes(emu, "R2")) == 2  # refused all window long: a new one was minted


async def test_registration_refused_beyond_both_windows_is_an_error() -> None:
    async with emulator() as emu, github(emu, clock=InstantClock()) as gh:
        emu.state.faults.add(Fault("R3", status=403, count=100))
        with pytest.raises(GitHubError) as caught:
            await gh.ensure_scale_set(scale_set())
    assert caught.value.status == 403
    assert len(_routes(emu, "R3")) == 12


# ---- 5. runner group and labels change: PATCH, not a second scale set --------------------------


async def test_changing_the_runner_group_or_labels_patches_the_scale_set_in_place() -> None:
    # Before: a second scale set of the same name was created in the new group and the old one
    # stayed registered, taking jobs nobody served.
    async with emulator(runner_groups={1: "Default", 2: "CI"}) as emu, github(emu) as gh:
        first = await gh.ensure_scale_set(scale_set(labels=("rungar",)))
        moved = await gh.ensure_scale_set(scale_set(labels=("rungar",), runner_group="ci"))
        relabelled = await gh.ensure_scale_set(scale_set(labels=("gpu",), runner_group="ci"))
    assert first == moved == relabelled
    assert len(emu.state.scale_sets) == 1
    record = emu.state.scale_sets[first]
    assert record.runner_group_id == 2 and record.labels == ["linux", "gpu"]
    assert len(_routes(emu, "A5")) == 1 and len(_routes(emu, "A6")) == 2


async def test_a_restart_with_another_runner_group_updates_the_scale_set_it_recorded() -> None:
    async with emulator(runner_groups={1: "Default", 2: "CI"}) as emu:
        sessions = InMemorySessionStore()  # the state database, read again after the restart
        async with github(emu, sessions=sessions) as gh:
            first = await gh.ensure_scale_set(scale_set())
        async with github(emu, sessions=sessions) as gh:
            again = await gh.ensure_scale_set(scale_set(runner_group="CI"))
    assert again == first and emu.state.scale_sets[first].runner_group_id == 2
    assert len(emu.state.scale_sets) == 1


# ---- 6. rate limits ----------------------------------------------------------------------------


async def test_rest_rate_limits_without_retry_after_wait_a_minute_then_longer() -> None:
    # Before: each wait was a minute, however many came in a row.
    clock = InstantClock()
    async with emulator() as emu, github(emu, clock=clock) as gh:
        emu.state.faults.add(
            Fault("R2", status=403, count=3, message="You have exceeded a secondary rate limit")
        )
        assert await gh.ensure_scale_set(scale_set()) > 0
    assert clock.sleeps == [60.0, 120.0, 240.0]


async def test_a_broker_429_without_retry_after_backs_off_seconds_with_jitter() -> None:
    # Before: the broker's 429 was read as a REST rate limit and waited a minute.
    clock = InstantClock()
    async with emulator() as emu, github(emu, clock=clock) as gh:
        await gh.ensure_scale_set(scale_set())
        emu.state.faults.add(Fault("A2", status=429, count=4))
        await gh.ensure_scale_set(scale_set())
    assert len(clock.sleeps) == 4
    for wait, base in zip(clock.sleeps, (1.0, 2.0, 4.0, 8.0), strict=True):
        assert base <= wait <= base * 1.25


async def test_waits_follow_the_configured_timing() -> None:
    clock = InstantClock()
    timing = GitHubTiming(rate_limit_wait_first=5.0, broker_retry_first=0.5, broker_retry_jitter=0)
    async with emulator() as emu, github(emu, clock=clock, timing=timing) as gh:
        emu.state.faults.add(Fault("R2", status=429, count=1))
        emu.state.faults.add(Fault("A2", status=429, count=2))
        await gh.ensure_scale_set(scale_set())
    assert clock.sleeps == [5.0, 0.5, 1.0]


# ---- 7. smaller ones ---------------------------------------------------------------------------


async def test_several_runners_of_one_name_is_an_error() -> None:
    async with emulator() as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        for runner_id in (900, 901):
            emu.state.runners[runner_id] = Runner(runner_id, "twin", scale_set_id, "c", 0.0)
        with pytest.raises(GitHubError, match="2 runners of that name"):
            await gh.get_runner_by_name("twin")


async def test_every_call_carries_rungars_user_agent_auth_and_rest_included() -> None:
    # Before: the App token, registration token and runner-registration calls went out as
    # python-httpx.
    private, public = app_keys()
    async with (
        emulator(apps={"Iv1.app": public}) as emu,
        github(emu, auth=AppAuth("Iv1.app", 1, private)) as gh,
    ):
        await gh.ensure_scale_set(scale_set())
        await gh.client.generate_rest_jit_config("rest-1", 1, ["rungar"])
    routes = {r["route"] for r in emu.state.requests}
    assert {"R1", "R2", "R3", "R4", "A2", "A5"} <= routes
    agents = {r["headers"].get("user-agent", "") for r in emu.state.requests}
    assert all(a.startswith("rungar/") for a in agents), agents


async def test_an_unknown_message_type_is_logged_skipped_and_not_acknowledged() -> None:
    rec = Recorder()
    async with (
        emulator() as emu,
        github(emu) as gh,
        running_listener(gh, scale_set(), rec) as lis,
    ):
        await eventually(lambda: bool(rec.demands), what="the session")
        with capture_logs() as logs:
            await _fault_next_poll(emu, Fault("MQ_GET", kind=FaultKind.UNKNOWN_TYPE))
            skipped = emu.state.queue_job(JOB)
            await eventually(
                lambda: any(e["event"] == "github.unknown_message" for e in logs),
                what="the odd message",
            )
            job = emu.state.queue_job(JOB)
            await eventually(lambda: rec.kinds(job.job_id) == [A], what="the next message")
    warned = [e for e in logs if e["event"] == "github.unknown_message"]
    assert warned and warned[0]["message_type"] == "RunnerScaleSetFutureMessages"
    unacked = emu.state.scale_sets[lis.scale_set_id].unacked
    assert [m.message_id for m in unacked] == [warned[0]["message_id"]]
    assert rec.kinds(skipped.job_id) == []


async def test_job_events_carry_githubs_queue_assign_start_and_finish_times() -> None:
    rec = Recorder()
    async with (
        emulator() as emu,
        github(emu) as gh,
        running_listener(gh, scale_set(), rec) as lis,
    ):
        job = emu.state.queue_job(JOB)
        await eventually(lambda: rec.kinds(job.job_id) == [A], what="assigned")
        runner = emu.state.register_runner(lis.scale_set_id, "linux-1")
        assert runner is not None
        emu.state.connect(runner)
        emu.state.take_job(runner)
        emu.state.complete(job, "succeeded")
        await eventually(lambda: len(rec.kinds(job.job_id)) == 3, what="started and completed")
    assigned, started, completed = (e for e in rec.jobs if e.job_id == job.job_id)
    assert assigned.times.queued == pytest.approx(job.created_at, abs=1e-3)
    assert assigned.times.assigned == pytest.approx(job.assigned_at, abs=1e-3)
    assert assigned.times.started == 0.0
    assert started.times.started == pytest.approx(job.started_at, abs=1e-3)
    assert started.times.runner_wait == pytest.approx(job.started_at - job.assigned_at, abs=2e-3)
    assert completed.times.finished == pytest.approx(job.finished_at, abs=1e-3)


# ---- 9. the session id in the state database ---------------------------------------------------


def _crash(lis: object) -> None:
    """Leave the listener's session alive on the service, as ``kill -9`` does."""
    lis.session = None  # type: ignore[attr-defined]


async def test_a_restart_deletes_its_own_stale_session_and_opens_at_once() -> None:
    # Before: the stale session of a crash held the scale set (409) until it expired: with the
    # service's two minutes, two minutes of jobs waiting.
    rec, rec2 = Recorder(), Recorder()
    sessions = InMemorySessionStore()  # the state database, as the restarted daemon reads it
    async with emulator(session_idle_ttl=120.0) as emu:
        async with (
            github(emu, sessions=sessions) as gh,
            running_listener(gh, scale_set(), rec) as lis,
        ):
            await eventually(lambda: bool(rec.demands), what="the first session")
            stale = lis.session.session.session_id  # type: ignore[union-attr]
            assert sessions.session_ids == {lis.scale_set_id: stale}
            _crash(lis)
        async with (
            github(emu, sessions=sessions) as gh2,
            running_listener(gh2, scale_set(), rec2) as lis2,
        ):
            # At once: well within the 120 s the stale session would hold the scale set.
            await eventually(lambda: bool(rec2.demands), timeout=60, what="a session at once")
            job = emu.state.queue_job(JOB)
            await eventually(lambda: rec2.kinds(job.job_id) == [A], what="a job")
            assert lis2.session is not None and lis2.session.conflicts == 0
            fresh = lis2.session.session.session_id  # type: ignore[union-attr]
            assert sessions.session_ids == {lis2.scale_set_id: fresh}
        deleted = [r["path"].rsplit("/", 1)[-1] for r in _routes(emu, "A10")]
        assert deleted[0] == stale
        assert len(_routes(emu, "A8")) == 2  # no 409 in between


async def test_a_session_another_installation_holds_is_still_waited_for() -> None:
    rec, rec2 = Recorder(), Recorder()
    # The stale session expires when the test says so, once the other installation has met it,
    # not after a real second a busy machine may spend before that installation's first try.
    async with emulator(session_idle_ttl=3600.0) as emu:
        async with github(emu) as gh, running_listener(gh, scale_set(), rec) as lis:
            await eventually(lambda: bool(rec.demands), what="the first session")
            scale_set_id = lis.scale_set_id
            _crash(lis)
        # Another installation: its own state database, with no record of that session.
        async with (
            github(emu, sessions=InMemorySessionStore()) as other,
            running_listener(other, scale_set(), rec2),
        ):
            await eventually(
                lambda: other.counter.snapshot().get("409", 0) >= 1, what="the session waited for"
            )
            emu.state.evict_session(scale_set_id)  # it expires
            await eventually(lambda: bool(rec2.demands), what="the session after its expiry")
        assert not _routes(emu, "A10")[:-1]  # nothing deleted but its own session, at the end
        assert len(_routes(emu, "A8")) >= 3  # the first session, 409s, then the new session


# ---- 8. the emulator is as strict as the service -----------------------------------------------


async def test_the_emulator_answers_like_the_service_where_clients_depend_on_it() -> None:
    async with emulator(runner_groups={1: "Default", 5: "Build Farm"}) as emu, github(emu) as gh:
        admin = await gh.client._admin.get()
        headers = {"Authorization": f"Bearer {admin.token}"}
        query = "?api-version=6.0-preview"
        async with httpx.AsyncClient(timeout=WAIT) as http:
            groups = await http.get(
                f"{admin.url}_apis/runtime/runnergroups/{query}&groupName=build%20FARM",
                headers=headers,
            )
            assert groups.json()["count"] == 1 and groups.json()["value"][0]["id"] == 5
            assert groups.headers["x-github-request-id"]
            sets = f"{admin.url}_apis/runtime/runnerscalesets{query}"
            no_labels = await http.post(sets, headers=headers, json={"name": "x"})
            untyped = await http.post(
                sets, headers=headers, json={"name": "x", "labels": [{"name": "x"}]}
            )
            assert (no_labels.status_code, untyped.status_code) == (400, 400)
            created = await http.post(
                f"{admin.url}/_apis/runtime/runnerscalesets{query}",  # "//": accepted
                headers=headers,
                json={
                    "name": "x",
                    "labels": [{"name": "x", "type": "System"}],
                    "RunnerSetting": {"disableUpdate": False},
                },
            )
            assert created.status_code == 200
            scale_set_id = created.json()["id"]
            patched = await http.patch(
                f"{admin.url}_apis/runtime/runnerscalesets/{scale_set_id}{query}",
                headers=headers,
                json={
                    "runnerGroupId": 5,
                    "labels": [{"name": "x", "type": "System"}, {"name": "gpu", "type": "System"}],
                    "RunnerSetting": {"disableUpdate": False},
                },
            )
        answer = patched.json()
        assert answer["runnerGroupId"] == 5 and answer["runnerGroupName"] == "Build Farm"
        assert [label["name"] for label in answer["labels"]] == ["x", "gpu"]
        assert answer["RunnerSetting"]["disableUpdate"] is False
        # Stored whole, every field it does not name at its default, and the same on a create
        # and a PATCH: one body reads back one way.
        stored = {"ephemeral": False, "isElastic": False, "disableUpdate": False}
        assert created.json()["RunnerSetting"] == stored
        assert answer["RunnerSetting"] == stored


async def test_in_legacy_mode_a_job_queued_before_the_session_is_available_in_every_count() -> None:
    # The session's statistics, its first message (the job offered, JobAvailable) and the one
    # after the acquire (JobAssigned) agree: assigned goes 0, 0, 1, never 1, 0, 1.
    async with emulator(acquire_mode="legacy") as emu:
        client = WallClockClient(emu.base_url)
        try:
            await client.create_scale_set(labels=("rungar",))
            job = emu.state.queue_job(JOB)
            opened = (await client.open_session())["statistics"]
            offered = await client.get_message(0, capacity=10)
            assert offered is not None
            assert [e["messageType"] for e in offered["events"]] == ["JobAvailable"]
            await client.delete_message(offered["messageId"])
            assert await client.acquire([job.request_id]) == [job.request_id]
            assigned = await client.get_message(offered["messageId"], capacity=10)
            assert assigned is not None
            assert [e["messageType"] for e in assigned["events"]] == ["JobAssigned"]
        finally:
            await client.aclose()
    counts = [
        (s["totalAvailableJobs"], s["totalAssignedJobs"])
        for s in (opened, offered["statistics"], assigned["statistics"])
    ]
    assert counts == [(1, 0), (1, 0), (0, 1)]


async def test_in_legacy_mode_the_listener_never_sees_its_demand_drop_before_the_acquire() -> None:
    rec = Recorder()
    async with emulator(acquire_mode="legacy") as emu, github(emu) as gh:
        await gh.ensure_scale_set(scale_set())
        job = emu.state.queue_job(JOB)
        async with running_listener(gh, scale_set(), rec):
            await eventually(lambda: rec.kinds(job.job_id) == [A], what="JobAssigned")
            await eventually(lambda: rec.demands[-1].assigned == 1, what="the assigned demand")
    assigned = [d.assigned for d in rec.demands]
    assert assigned == sorted(assigned), f"the demand went {assigned}"


async def test_jobs_queued_before_a_session_show_in_its_statistics_and_acks_repeat_safely() -> None:
    async with emulator() as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        emu.state.queue_job(JOB)
        emu.state.queue_job(JOB)
        session = await gh.client.create_session(scale_set_id, "host")
        assert session.statistics is not None and session.statistics.assigned == 2
        message = await gh.client.get_message(session, 0, 10)
        assert message is not None
        await gh.client.delete_message(session, message.message_id)
        await gh.client.delete_message(session, message.message_id)  # the service answers 204
    acks = [r for r in emu.state.requests if r["route"] == "MQ_DELETE"]
    assert len(acks) == 2
    assert emu.state.faults.fired == []
