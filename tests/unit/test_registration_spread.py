"""Registrations spread over several GitHub Apps: which App takes the next registration and
when, as a pure decision, and the queue carrying it out on a fake clock, one priority order
across the Apps, a refused App skipped."""

from __future__ import annotations

import asyncio
import itertools

from rungar.github.registrations import RegistrationQueue, Ticket
from rungar.scaling import registration_pace as rp
from rungar.scaling import registration_spread as rs
from rungar.testing.clock import FakeClock

NOW = 1_800_000_000.0
FIRST = rp.RegistrationKey.of(refill=False, priority=0, seq=0)


def paced(next_at: float, per_minute: float = 60.0) -> rp.Pace:
    return rp.Pace(per_minute=per_minute, next_at=next_at, learned_at=NOW - 1)


def test_the_first_waiting_registration_goes_to_the_app_free_soonest() -> None:
    lanes = [rs.AppLane(paced(NOW + 2)), rs.AppLane(paced(NOW + 0.5)), rs.AppLane(paced(NOW + 1))]
    assert rs.spread(FIRST, lanes, NOW, retry_after=600) == rs.LaneGrant(1, FIRST, NOW + 0.5)
    assert rs.spread(None, lanes, NOW, retry_after=600) is None, "none waits"


def test_apps_free_at_once_take_turns_by_what_they_took_then_by_order() -> None:
    lanes = [rs.AppLane(rp.start(), took=5), rs.AppLane(rp.start(), took=3, in_flight=1)]
    grant = rs.spread(FIRST, lanes, NOW, retry_after=600)
    assert grant is not None and (grant.lane, grant.at) == (1, NOW)
    even = [rs.AppLane(rp.start(), took=4), rs.AppLane(rp.start(), took=4)]
    grant = rs.spread(FIRST, even, NOW, retry_after=600)
    assert grant is not None and grant.lane == 0, "equals: the first listed"


def test_an_app_with_its_most_in_the_air_is_passed_over() -> None:
    lanes = [
        rs.AppLane(rp.start(), in_flight=4, most_in_flight=4),
        rs.AppLane(paced(NOW + 3), most_in_flight=4),
    ]
    assert rs.spread(FIRST, lanes, NOW, retry_after=600) == rs.LaneGrant(1, FIRST, NOW + 3)
    both_full = [rs.AppLane(rp.start(), in_flight=4, most_in_flight=4)] * 2
    assert rs.spread(FIRST, both_full, NOW, retry_after=600) is None


def test_a_failing_app_is_skipped_until_retry_after_then_tried_with_one_in_the_air() -> None:
    failing = rs.AppLane(rp.start(), failing_since=NOW - 10)
    working = rs.AppLane(paced(NOW + 5))
    grant = rs.spread(FIRST, [failing, working], NOW, retry_after=600)
    assert grant is not None and grant.lane == 1, "skipped though it could go at once"
    later = NOW - 10 + 600
    grant = rs.spread(FIRST, [failing, working], later, retry_after=600)
    assert grant is not None and grant.lane == 0, "tried again after retry_after"
    probing = rs.AppLane(rp.start(), in_flight=1, most_in_flight=4, failing_since=NOW - 10)
    busy = rs.AppLane(paced(NOW + 5), took=50)  # the probe would win, but for its bound
    grant = rs.spread(FIRST, [probing, busy], later, retry_after=600)
    assert grant is not None and grant.lane == 1, "one registration in the air at most"


def test_when_every_app_fails_every_one_is_tried() -> None:
    lanes = [rs.AppLane(rp.start(), failing_since=NOW - 1)] * 2
    assert rs.usable(lanes, NOW, 600) == [0, 1]
    assert rs.usable([rs.AppLane(rp.start(), failing_since=NOW - 1)], NOW, 0) == [0]


# ---- the queue, on a fake clock ----------------------------------------------------------


async def register(
    queue: RegistrationQueue,
    clock: FakeClock,
    log: list[tuple[float, str, int]],
    who: str,
    priority: int,
) -> None:
    async with queue.turn(refill=False, priority=priority) as ticket:
        log.append((clock.now(), who, ticket.app))
        ticket.sent()
        ticket.accepted()


async def test_two_apps_register_twice_as_fast_each_at_its_own_pace() -> None:
    clock = FakeClock(NOW)
    queue = RegistrationQueue(clock, per_minute=60, apps=["a", "b"])  # one a second, each
    log: list[tuple[float, str, int]] = []
    tasks = [asyncio.create_task(register(queue, clock, log, f"r{n}", 0)) for n in range(20)]
    await clock.run_for(9.5)
    assert len(log) == 20, "20 in 10 s: twice one App's 60 a minute"
    for app in (0, 1):
        times = [t for t, _, a in log if a == app]
        assert len(times) == 10
        assert all(b - a >= 1.0 for a, b in itertools.pairwise(times)), "its own pace"
    await asyncio.gather(*tasks)
    await queue.aclose()


async def test_priority_order_holds_across_apps() -> None:
    clock = FakeClock(NOW)
    queue = RegistrationQueue(clock, per_minute=60, apps=["a", "b", "c"])
    log: list[tuple[float, str, int]] = []
    low = [asyncio.create_task(register(queue, clock, log, "low", 0)) for _ in range(30)]
    await clock.run_for(2.5)  # the three Apps have let some low ones go; the rest wait
    arrived = len(log)
    high = [asyncio.create_task(register(queue, clock, log, "high", 10)) for _ in range(12)]
    await clock.run_for(60)
    assert len(log) == 42
    after = [who for _, who, _ in log[arrived:]]
    assert after == ["high"] * 12 + ["low"] * (30 - arrived), "no low one among the high ones"
    assert {app for _, who, app in log if who == "high"} == {0, 1, 2}, "every App took some"
    await asyncio.gather(*low, *high)
    await queue.aclose()


async def refused_once(
    queue: RegistrationQueue, apps: list[int], newly: list[bool], refusing: int
) -> None:
    async with queue.turn(refill=False, priority=0) as ticket:
        while True:
            apps.append(ticket.app)
            ticket.sent()
            if ticket.app == refusing and ticket.elsewhere():
                newly.append(ticket.refused("HTTP 401: revoked"))
                await ticket.again()
                continue
            ticket.accepted()
            return


async def test_a_refused_app_is_skipped_and_its_registration_goes_to_another() -> None:
    clock = FakeClock(NOW)
    queue = RegistrationQueue(clock, apps=["a", "b"], app_retry_after=600)
    apps: list[int] = []
    newly: list[bool] = []
    await refused_once(queue, apps, newly, refusing=0)  # the first goes to App a, refused
    assert apps == [0, 1] and newly == [True]
    for _ in range(4):
        await refused_once(queue, apps, newly, refusing=0)
    assert apps[2:] == [1, 1, 1, 1], "App a is skipped while it fails"
    [a, b] = queue.apps()
    assert (a.failing_since, a.error) == (NOW, "HTTP 401: revoked")
    assert a.sentence() == "failing, skipped: HTTP 401: revoked"
    assert b.failing_since == 0 and b.taken == 5
    clock.advance(600)
    log: list[tuple[float, str, int]] = []
    await register(queue, clock, log, "again", 0)
    assert log[0][2] == 0, "App a is tried again after app_retry_after"
    assert queue.apps()[0].failing_since == 0, "and works again"
    await queue.aclose()


async def test_one_app_is_the_queue_it_always_was() -> None:
    clock = FakeClock(NOW)
    queue = RegistrationQueue(clock, per_minute=60)
    ticket = Ticket(queue, queue.key(refill=False, priority=0))
    await queue.wait(ticket)
    assert (ticket.app, queue.in_flight, ticket.elsewhere()) == (0, 1, False)
    ticket.sent()
    assert ticket.accepted() == ""
    assert queue.view().per_minute == 60 and len(queue.lanes) == 1
    await queue.aclose()
