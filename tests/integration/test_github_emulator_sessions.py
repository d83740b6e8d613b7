"""The emulator shows what a test needs, over its control API: ``GET /_fake/state`` lists each
scale set's message session (id, owner, opened, last poll), and every request-log entry says
which client made it (user agent, message session). docs/github-emulator.md documents both.
"""

from __future__ import annotations

from typing import Any

import httpx

from rungar.github.transport import USER_AGENT
from rungar.testing.github_emulator import GitHubEmulator
from rungar.testing.github_emulator.harness import (
    Recorder,
    emulator,
    eventually,
    github,
    running_listener,
    scale_set,
)
from tests.waiting import WAIT


async def control(emu: GitHubEmulator, path: str) -> Any:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        answer = await client.get(f"{emu.base_url}/_fake/{path}")
    answer.raise_for_status()
    return answer.json()


async def test_the_state_lists_each_scale_sets_session_with_owner_opened_and_last_poll() -> None:
    async with emulator() as emu, github(emu) as gh:
        async with running_listener(gh, scale_set(), Recorder(), owner="ci-host-1") as lis:
            await eventually(
                lambda: lis.session is not None and lis.session.session is not None,
                what="a session",
            )
            assert lis.session is not None and lis.session.session is not None
            ours = lis.session.session.session_id
            await eventually(
                lambda: sum(r["route"] == "MQ_GET" for r in emu.state.requests) >= 2,
                what="two polls",
            )
            [entry] = (await control(emu, "state"))["scaleSets"]
            session = entry["session"]
            assert session["sessionId"] == ours and session["owner"] == "ci-host-1"
            assert session["opened"] <= session["lastPoll"] <= (await control(emu, "state"))["now"]
        # The listener stopped and deleted its session: the scale set has none.
        [entry] = (await control(emu, "state"))["scaleSets"]
        assert entry["session"] is None


async def test_the_request_log_names_the_client_and_session_of_each_request() -> None:
    async with emulator() as emu, github(emu) as gh:
        async with running_listener(gh, scale_set(), Recorder()) as lis:
            await eventually(
                lambda: any(r["route"] == "MQ_GET" for r in emu.state.requests), what="a poll"
            )
            assert lis.session is not None and lis.session.session is not None
            ours = lis.session.session.session_id
        log = (await control(emu, "requests"))["value"]
    by_route: dict[str, list[dict[str, str]]] = {}
    for entry in log:
        by_route.setdefault(entry["route"], []).append(entry["client"])
    scale_set_routes = ("A2", "A5", "A8", "MQ_GET", "A10")
    assert {c["userAgent"] for r in scale_set_routes for c in by_route[r]} == {USER_AGENT}
    assert {c["sessionId"] for c in by_route["MQ_GET"]} == {ours}  # from its queue token
    assert {c["sessionId"] for c in by_route["A10"]} == {ours}  # from the session's path
    assert {c["sessionId"] for c in by_route["A2"]} == {""}  # not in a session
