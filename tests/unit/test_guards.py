"""Guards tested one at a time: each test fails when the one guard it names is removed.

tools/guard_mutants.py removes each guard in a copy of the tree and checks its test here fails
(``make test-long``). The engine's own guards, which need a runner table, are in
tests/sim/test_engine_guards.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from dataclasses import replace

import httpx

from rungar.config.model import ScaleSetConfig, ScaleSetProvider, Timing
from rungar.github.registrations import RegistrationQueue
from rungar.github.webhook import WebhookReceiver, signature_ok
from rungar.model.runner import GitHubState, RemovalReason, RunnerState, RunnerView
from rungar.scaling import surplus_to_remove
from rungar.scaling.decide import decide_one
from rungar.testing.clock import FakeClock

NOW = 1_800_000_000.0
CONFIG = ScaleSetConfig(
    "s", max_runners=10, providers=(ScaleSetProvider("a"),), start_timeout=300, max_age=None
)
IDLE = RunnerView(
    name="s-1",
    scale_set="s",
    provider="a",
    revision="r1",
    created_at=NOW - 600,
    state=RunnerState.IDLE,
    github=GitHubState.IDLE,
    connected=True,
)


# Never remove a busy runner: the surplus choice.


def test_surplus_never_takes_a_runner_github_lists_as_busy() -> None:
    # Its record still says idle (the job's started message has not come), GitHub says busy.
    taken = replace(IDLE, name="taken", created_at=NOW - 900, github=GitHubState.BUSY)
    idle = replace(IDLE, name="idle", created_at=NOW - 100)
    assert surplus_to_remove([taken, idle], 2, {"a": "r1"}) == ["idle"]


# Removal graces.


def test_a_starting_runner_exactly_at_its_grace_stays() -> None:
    timing = Timing(never_connected_grace=120)
    starting = replace(
        IDLE, state=RunnerState.STARTING, connected=False, github=GitHubState.UNKNOWN
    )
    at_grace = replace(starting, created_at=NOW - 120)
    assert decide_one(at_grace, CONFIG, "r1", NOW, timing) is None
    past = decide_one(replace(starting, created_at=NOW - 121), CONFIG, "r1", NOW, timing)
    assert past is not None and past.reason is RemovalReason.NEVER_CONNECTED
    # Not yet listed by GitHub: the same grace before it counts as unregistered.
    unlisted = replace(at_grace, github=GitHubState.NOT_REGISTERED)
    assert decide_one(unlisted, CONFIG, "r1", NOW, timing) is None


def test_a_busy_runner_that_never_connected_is_not_stuck_past_stuck_after() -> None:
    # Stuck is a runner seen online that went offline mid-job; one never seen online is not
    # forced out (its job would fail) however long GitHub lists it offline.
    timing = Timing(stuck_after=60)
    never_seen = replace(
        IDLE,
        state=RunnerState.BUSY,
        github=GitHubState.OFFLINE,
        connected=False,
        offline_since=NOW - 600,
    )
    assert decide_one(never_seen, CONFIG, "r1", NOW, timing) is None
    seen = decide_one(replace(never_seen, connected=True), CONFIG, "r1", NOW, timing)
    assert seen is not None and (seen.reason, seen.forced) == (RemovalReason.STUCK, True)


# A registration turn not used gives its moment back.


async def _granted_at(queue: RegistrationQueue, clock: FakeClock, times: list[float]) -> None:
    async with queue.turn(refill=False, priority=0) as ticket:
        times.append(clock.now())
        ticket.sent()
        ticket.accepted()


async def test_a_turn_never_used_gives_its_moment_back() -> None:
    clock = FakeClock(NOW)
    queue = RegistrationQueue(clock, per_minute=60)  # one a second
    async with queue.turn(refill=False, priority=0):
        pass  # the runner was no longer wanted: nothing sent
    times: list[float] = []
    task = asyncio.create_task(_granted_at(queue, clock, times))
    await clock.run_for(0)
    assert times == [NOW], "the next registration goes at once, in the moment given back"
    await task
    await queue.aclose()


async def test_a_turn_cancelled_as_it_is_granted_gives_its_moment_back() -> None:
    clock = FakeClock(NOW)
    queue = RegistrationQueue(clock, per_minute=60)  # one a second
    times: list[float] = []
    await _granted_at(queue, clock, times)  # at NOW: the next moment is NOW + 1
    waiter = asyncio.create_task(_granted_at(queue, clock, times))
    await clock.run_for(0)
    assert queue.view().waiting == 1
    clock.advance(1)  # the pace's timer grants the waiter its turn ...
    while queue.view().waiting:
        await asyncio.sleep(0)
    waiter.cancel()  # ... and it is cancelled before it runs again
    await asyncio.gather(waiter, return_exceptions=True)
    assert times == [NOW]
    late = asyncio.create_task(_granted_at(queue, clock, times))
    await clock.run_for(0)
    assert times == [NOW, NOW + 1], "the cancelled turn's moment goes to the next one"
    await late
    await queue.aclose()


# The webhook's signature is over the exact body GitHub sent.

SECRET = "It's a Secret to Everybody"


def _sign(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


async def test_the_webhook_signature_covers_the_exact_body() -> None:
    payload = {"action": "queued", "workflow_job": {"id": 1, "labels": ["linux"], "run_id": 2}}
    body = json.dumps(payload, indent=2).encode() + b"\n"  # whitespace is part of the body
    assert signature_ok(SECRET.encode(), body, _sign(body))
    assert not signature_ok(SECRET.encode(), body, _sign(body.strip()))
    assert not signature_ok(SECRET.encode(), body.strip(), _sign(body))
    woken: list[list[str]] = []
    receiver = WebhookReceiver(
        SECRET, {"linux": ["linux"]}, lambda names, job: woken.append(list(names))
    )
    transport = httpx.ASGITransport(app=receiver)
    async with httpx.AsyncClient(transport=transport, base_url="http://hook") as client:
        headers = {"X-GitHub-Event": "workflow_job", "X-GitHub-Delivery": "d-1"}
        answer = await client.post(
            "/webhook", content=body, headers={**headers, "X-Hub-Signature-256": _sign(body)}
        )
    assert answer.status_code == 202 and woken == [["linux"]]
