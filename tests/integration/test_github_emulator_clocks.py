"""The emulator behaves like GitHub on any clock (docs/github-emulator.md, "Wall-clock and emulated
times"): tokens are stamped and checked by the wall clock, so a client renewing them by its own
clock keeps working on a compressed clock and after a jump; the emulated clock decides only what
GitHub decides by its clock (assignment timeouts, session TTLs), and a poll in progress keeps its
session alive across a jump. Each test drives ``rungar github-emulator`` over HTTP with a client
that keeps its tokens as GitHub's own client does (tests/integration/wall_clock_client.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from rungar.clock import SystemClock
from rungar.github.auth import PatAuth
from rungar.github.http import http_client
from rungar.github.interface import JobEventKind
from rungar.github.service import ScaleSetGitHub
from rungar.github.timing import GitHubTiming
from rungar.testing.github_emulator import InstantClock
from rungar.testing.github_emulator.harness import Recorder, eventually, running_listener, scale_set
from tests.integration.wall_clock_client import (
    SCALE_SETS,
    WallClockClient,
    control,
    emulator_process,
    wait_for,
)

A, C = JobEventKind.ASSIGNED, JobEventKind.COMPLETED


def kinds(message: dict[str, Any] | None) -> list[tuple[str, str]]:
    events = message["events"] if message else []
    return [(e["messageType"], e.get("result", "")) for e in events]


async def refusals(base: str) -> list[tuple[str, int]]:
    """Every call the emulator answered 401 or 403, by its own request log."""
    requests = (await control(base, "GET", "requests"))["value"]
    return [(r["route"], r["status"]) for r in requests if r["status"] in (401, 403)]


async def polling(base: str) -> bool:
    """True while the one scale set's session has a message poll open."""
    [scale_set] = (await control(base, "GET", "state"))["scaleSets"]
    session = scale_set["session"]
    return bool(session and session["polling"])


async def test_a_client_renewing_tokens_by_the_wall_clock_keeps_working_on_a_120x_clock() -> None:
    # Tokens last 62 real seconds: renewed 60 s before exp, the admin token is renewed every 2 s
    # while the emulated clock runs 120 times faster (four minutes of it per renewal).
    args: tuple[str, ...] = ("--clock-factor", "120", "--token-ttl", "62")
    args += ("--long-poll", "0.5", "--session-ttl", "3600")
    async with emulator_process(*args) as base:
        client = WallClockClient(base)
        try:
            await client.create_scale_set()
            await client.open_session()
            started = (await control(base, "GET", "state"))["now"]
            job = await control(base, "POST", "jobs", {"labels": ["rungar"], "duration": 3600})
            seen: list[tuple[str, str]] = []
            last = 0
            refreshed_session = False
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 90
            while client.renewals < 3 or ("JobCompleted", "succeeded") not in seen:
                assert loop.time() < deadline, f"stuck: {client.renewals} renewals, saw {seen}"
                message = await client.get_message(last, capacity=2)
                if message is not None:
                    seen += kinds(message)
                    last = message["messageId"]
                    await client.delete_message(last)
                if ("JobAssigned", "") in seen and ("JobCompleted", "succeeded") not in seen:
                    await control(base, "POST", f"jobs/{job['jobId']}/complete")
                # An admin call every turn, as a scaler generating runners would make.
                got = await client.admin("GET", f"{SCALE_SETS}/{client.scale_set_id}")
                assert got.status_code == 200
                if client.renewals >= 2 and not refreshed_session:
                    # The queue refuses the next poll once: the session is refreshed with the
                    # admin token of the moment (the call that failed the official listener).
                    fault = {"route": "MQ_GET", "kind": "status", "status": 401}
                    await control(base, "POST", "faults", fault)
                    refreshed_session = True
            emulated = (await control(base, "GET", "state"))["now"] - started
            assert await client.close() == (204, 204)
            assert await refusals(base) == [("MQ_GET", 401)]
        finally:
            await client.aclose()
    # Only the refusal injected above: every token was still good when the client used it.
    assert client.refused() == [("GET message", 401)]
    assert ("PATCH", 200) in [(c.split()[0], s) for c, s in client.answers]
    assert emulated > 3 * 62  # the emulated clock ran well past the tokens' lifetime


async def test_a_long_poll_open_across_a_one_hour_jump_keeps_its_session_and_gets_the_cancel() -> (
    None
):
    args = ("--long-poll", "60", "--session-ttl", "120", "--assignment-timeout", "300")
    async with emulator_process(*args) as base:
        client = WallClockClient(base)
        try:
            await client.create_scale_set()
            job = await control(base, "POST", "jobs", {"labels": ["rungar"]})
            session = await client.open_session()
            first = await client.get_message(0, capacity=2)
            assert first is not None and kinds(first) == [("JobAssigned", "")]
            await client.delete_message(first["messageId"])
            # No runner takes the job. The next poll is open when the clock jumps an hour:
            # past the assignment timeout (the job is withdrawn) and the session TTL.
            poll = asyncio.create_task(client.get_message(first["messageId"], capacity=2))
            await wait_for(lambda: polling(base), "the poll to be open")
            await control(base, "POST", "clock/advance?seconds=3600")
            withdrawn = await asyncio.wait_for(poll, timeout=30)
            assert withdrawn is not None
            assert ("JobCompleted", "canceled") in kinds(withdrawn)
            assert {e["jobId"] for e in withdrawn["events"]} == {job["jobId"]}
            [scale_set] = (await control(base, "GET", "state"))["scaleSets"]
            assert scale_set["session"]["sessionId"] == session["sessionId"]
            # The tokens issued before the jump are still good: no renewal, no refusal.
            got = await client.admin("GET", f"{SCALE_SETS}/{client.scale_set_id}")
            assert got.status_code == 200 and client.renewals == 1
            await client.delete_message(withdrawn["messageId"])
            assert await client.close() == (204, 204)
            assert await refusals(base) == []
        finally:
            await client.aclose()
    assert client.refused() == []


async def test_on_the_wall_clock_a_jump_past_the_session_ttl_leaves_an_idle_session_alive() -> None:
    # With --session-clock wall, sessions count their TTL on the wall clock, as tokens do: a
    # client polls by its own clock, so GitHub's running 120 times faster must not end its
    # session between two polls (a 1.5 s gap would be 3 emulated minutes).
    args: tuple[str, ...] = ("--clock-factor", "120", "--long-poll", "0.2", "--session-ttl", "120")
    args += ("--session-clock", "wall")
    async with emulator_process(*args) as base:
        client = WallClockClient(base)
        try:
            await client.create_scale_set()
            await client.open_session()
            assert await client.get_message(0) is None  # 202: the poll ended, none is open
            await control(base, "POST", "clock/advance?seconds=3600")
            [scale_set] = (await control(base, "GET", "state"))["scaleSets"]
            assert scale_set["session"] is not None
            assert (await client.poll(0, 10)).status_code in (200, 202)
        finally:
            await client.aclose()


async def test_on_the_emulated_clock_a_jump_past_the_session_ttl_ends_an_idle_session() -> None:
    args = ("--long-poll", "0.2", "--session-ttl", "120")  # on the emulated clock by default
    async with emulator_process(*args) as base:
        client = WallClockClient(base)
        try:
            await client.create_scale_set()
            await client.open_session()
            assert await client.get_message(0) is None  # 202: the poll ended, none is open
            await control(base, "POST", "clock/advance?seconds=121")
            [scale_set] = (await control(base, "GET", "state"))["scaleSets"]
            assert scale_set["session"] is None
            answer = await client.poll(0, 10)
            assert answer.status_code == 404
            assert (await client.admin("GET", f"{SCALE_SETS}/{client.scale_set_id}")).is_success
        finally:
            await client.aclose()


async def test_rungars_listener_keeps_tokens_and_session_on_a_120x_clock_and_across_a_jump() -> (
    None
):
    # Rungar's own client, its margins shortened to fit tokens of 62 real seconds: it renews
    # them by its clock while the emulated clock runs 120 times faster, then a one-hour jump
    # comes while its poll is open. Nothing is refused and its one session lives throughout.
    # Polls of 10 real seconds, so that on a busy machine the jump still lands inside the poll
    # seen open (with short polls it could fall between two, and end the session by its TTL).
    args: tuple[str, ...] = ("--clock-factor", "120", "--token-ttl", "62", "--long-poll", "10")
    args += ("--session-ttl", "3000", "--assignment-timeout", "3000")
    timing = GitHubTiming(
        registration_token_refresh_margin=60,
        admin_token_refresh_margin=60,
        message_queue_token_refresh_margin=60,
    )
    rec = Recorder()
    async with emulator_process(*args) as base:
        gh = ScaleSetGitHub(
            f"{base}/octo-org",
            PatAuth("emulator-pat"),
            InstantClock(),
            http=http_client(timeout=10.0),
            timing=timing,
        )
        try:
            async with running_listener(gh, scale_set(), rec) as listener:
                done = await control(base, "POST", "jobs", {"labels": ["rungar"]})
                await eventually(
                    lambda: rec.kinds(done["jobId"]) == [A], what="an assignment", timeout=30
                )
                await control(base, "POST", f"jobs/{done['jobId']}/complete")
                await eventually(
                    lambda: rec.kinds(done["jobId"]) == [A, C], what="completion", timeout=30
                )

                async def renewals() -> bool:
                    requests = (await control(base, "GET", "requests"))["value"]
                    return bool(sum(r["route"] == "R3" for r in requests) >= 3)

                await wait_for(renewals, "three admin tokens", timeout=90)
                # A job no runner takes, then an hour's jump with the listener's poll open.
                left = await control(base, "POST", "jobs", {"labels": ["rungar"]})
                await eventually(
                    lambda: rec.kinds(left["jobId"]) == [A], what="an assignment", timeout=30
                )
                await wait_for(lambda: polling(base), "the poll to be open")
                await control(base, "POST", "clock/advance?seconds=3600")
                await eventually(
                    lambda: any(
                        e.kind is C and e.canceled for e in rec.jobs if e.job_id == left["jobId"]
                    ),
                    timeout=30,
                    what="the withdrawn job's cancel",
                )
                session = listener.session
                assert session is not None
                assert (session.opened, listener.sessions_recreated) == (1, 0)
                assert await refusals(base) == []
        finally:
            await gh.aclose()
    codes = gh.counter.snapshot()
    assert "401" not in codes and "404" not in codes, codes


async def test_the_rate_limit_reset_is_written_by_the_wall_clock_after_a_jump_on_a_fast_clock() -> (
    None
):
    clock = SystemClock()
    async with emulator_process("--clock-factor", "120") as base:
        await control(base, "POST", "clock/advance?seconds=3600")
        # 600 emulated seconds of spent budget: five real seconds at 120x.
        await control(base, "POST", "ratelimit", {"remaining": 0, "reset_in": 600})
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.get(f"{base}/api/v3/rate_limit")
            wait = int(answer.headers["x-ratelimit-reset"]) - clock.now()
            assert 2 < wait <= 5, wait
            assert answer.json()["rate"]["reset"] == int(answer.headers["x-ratelimit-reset"])
            url = f"{base}/api/v3/orgs/octo-org/actions/runners/registration-token"
            headers = {"Authorization": "Bearer emulator-pat"}
            assert (await http.post(url, headers=headers)).status_code == 403

            async def budget_back() -> bool:
                return (await http.post(url, headers=headers)).status_code == 201

            await wait_for(budget_back, "the budget to come back", timeout=60)
        # Back by the time the header said (the reset is whole seconds, so up to one early).
        assert clock.now() >= int(answer.headers["x-ratelimit-reset"]) - 1
