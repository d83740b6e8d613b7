"""The registration pace: which registration goes next and when, as a pure decision, and the
installation's queue carrying it out on a fake clock against a throttled GitHub."""

from __future__ import annotations

import asyncio
import heapq
from collections import deque

import pytest

from rungar.github.registrations import RegistrationQueue
from rungar.scaling import registration_pace as rp
from rungar.testing.clock import FakeClock

NOW = 1_800_000_000.0


def key(refill: bool, priority: int, seq: int) -> rp.RegistrationKey:
    return rp.RegistrationKey.of(refill=refill, priority=priority, seq=seq)


def test_assigned_jobs_of_the_higher_priority_scale_set_go_first_and_refills_last() -> None:
    waiting = [
        key(True, 10, 0),  # a refill of the most important scale set
        key(False, 0, 1),  # a job of a low-priority scale set
        key(False, 5, 2),  # a job of a higher-priority one, came later
        key(False, 5, 3),
    ]
    order = []
    heap = list(waiting)
    heapq.heapify(heap)  # the queue keeps its waiting keys in a heap
    while heap:
        grant = rp.next_grant(heap[0], rp.start(), NOW)
        assert grant is not None
        order.append(heapq.heappop(heap))
    assert order == [waiting[2], waiting[3], waiting[1], waiting[0]]
    assert rp.next_grant(None, rp.start(), NOW) is None, "none waits"


def test_without_a_pace_registrations_go_at_once() -> None:
    pace = rp.start()
    for _ in range(3):
        grant = rp.next_grant(key(False, 0, 0), pace, NOW)
        assert grant is not None and grant.at == NOW
        pace = rp.granted(pace, NOW)


def test_no_registration_goes_while_the_most_in_flight_are_in_the_air() -> None:
    first = key(False, 0, 0)
    assert rp.next_grant(first, rp.start(), NOW, in_flight=4, most_in_flight=4) is None
    assert rp.next_grant(first, rp.start(), NOW, in_flight=3, most_in_flight=4) is not None
    assert rp.next_grant(first, rp.start(), NOW, in_flight=500, most_in_flight=0) is not None


def test_the_trailing_minute_keeps_its_newest_times_and_counts_exactly() -> None:
    times: deque[float] = deque()
    for at in (NOW - 90, NOW - 61, NOW - 30, NOW - 31, NOW):
        rp.trailing(times, at)
    assert list(times) == [NOW - 30, NOW - 31, NOW], "a minute older than the newest dropped"
    assert rp.taken(times, NOW + 29.5) == 2
    assert rp.taken(times, NOW + 31) == 1


def test_a_429_sets_the_pace_to_what_github_took_in_the_last_minute_less_the_margin() -> None:
    times: deque[float] = deque([NOW - 70])  # older than a minute: not counted
    for i in range(180):
        rp.trailing(times, NOW - 50 + i * 0.1)
    pace = rp.throttled(rp.start(), NOW, retry_after=40, margin=0.02, took=rp.taken(times, NOW))
    assert pace.per_minute == pytest.approx(176.4)
    assert pace.learned and pace.throttled == 1
    grant = rp.next_grant(key(False, 0, 0), pace, NOW)
    assert grant is not None and grant.at == NOW + 40, "nothing goes before Retry-After"
    after = rp.granted(pace, grant.at)
    assert after.next_at == pytest.approx(NOW + 40 + 60 / 176.4)


def test_a_429_never_raises_a_pace_already_in_force() -> None:
    pace = rp.start(configured=100)
    assert rp.throttled(pace, NOW, 1, 0.02, took=150).per_minute == 100
    bare = rp.throttled(rp.start(configured=100), NOW, 1, 0.1, took=0)
    assert bare.per_minute == pytest.approx(90), "nothing taken: the pace itself is lowered"


def test_a_learned_pace_is_forgotten_after_an_hour_without_a_429() -> None:
    pace = rp.throttled(rp.start(), NOW, 1, 0.0, took=1)
    assert rp.forgotten(pace, NOW + 3599, 3600).per_minute == 1
    assert rp.forgotten(pace, NOW + 3600, 3600).per_minute == 0
    assert rp.forgotten(pace, NOW + 3600, 0).per_minute == 1, "0 keeps it for ever"


def test_an_unused_turn_gives_its_moment_back() -> None:
    pace = rp.granted(rp.start(configured=60), NOW)
    assert pace.next_at == NOW + 1
    assert rp.returned(pace, NOW).next_at == NOW


class Throttled(Exception):
    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after


class ThrottledGitHub:
    """GitHub's JIT route as the emulator throttles it: ``per_minute`` in any 60 s."""

    def __init__(self, clock: FakeClock, per_minute: int) -> None:
        self.clock = clock
        self.per_minute = per_minute
        self.sent: deque[float] = deque()
        self.calls: list[tuple[float, str, bool]] = []

    def register(self, who: str) -> None:
        now = self.clock.now()
        while self.sent and self.sent[0] <= now - 60:
            self.sent.popleft()
        ok = len(self.sent) < self.per_minute
        self.calls.append((now, who, ok))
        if not ok:
            raise Throttled(max(1.0, float(int(self.sent[0] + 60 - now) + 1)))
        self.sent.append(now)


async def register(
    queue: RegistrationQueue, github: ThrottledGitHub, who: str, priority: int
) -> None:
    async with queue.turn(refill=False, priority=priority) as ticket:
        while True:
            ticket.sent()
            try:
                github.register(who)
            except Throttled as e:
                await ticket.throttled(e.retry_after)
                continue
            ticket.accepted()
            return


async def test_the_queue_learns_githubs_limit_and_keeps_to_it_with_the_high_priority_first() -> (
    None
):
    clock = FakeClock(NOW)
    github = ThrottledGitHub(clock, per_minute=60)
    queue = RegistrationQueue(clock)
    tasks = [asyncio.create_task(register(queue, github, f"low{i}", 0)) for i in range(100)]
    await clock.run_for(0)
    tasks += [asyncio.create_task(register(queue, github, f"high{i}", 5)) for i in range(80)]
    await clock.run_for(0)
    view = queue.view()
    assert view.source == "github" and view.per_minute == pytest.approx(58.8)
    assert view.sentence() == "registering 59/min, GitHub's limit; 120 waiting"
    await clock.run_for(600, step=0.05)
    await asyncio.gather(*tasks)
    refused = [t for t, _, ok in github.calls if not ok]
    # Those already sent when the first 429 came back are refused too; none after that.
    assert refused and max(refused) == NOW
    assert len(refused) - 1 <= 0.02 * len(github.calls)
    accepted = [who for _, who, ok in github.calls if ok]
    first_high = next(i for i, who in enumerate(accepted) if who.startswith("high"))
    last_high = max(i for i, who in enumerate(accepted) if who.startswith("high"))
    assert all(w.startswith("high") for w in accepted[first_high : last_high + 1]), (
        "no low-priority registration between the high ones once they wait"
    )
    assert first_high <= 60 and len(accepted) - last_high - 1 >= 39, (
        "the high-priority ones overtook the low ones still waiting"
    )
    minute = [t for t, _, ok in github.calls if ok and NOW + 120 <= t < NOW + 180]
    assert len(minute) >= 0.95 * 60
    assert queue.view().waiting == 0


def test_the_bound_in_flight_grows_with_what_github_took_in_the_trailing_minute() -> None:
    assert rp.in_flight_bound(4, 0.02, took=0) == 4
    assert rp.in_flight_bound(4, 0.02, took=180) == 4, "GitHub's limit: 3 refused with the first"
    assert rp.in_flight_bound(4, 0.02, took=1000) == 20
    assert rp.in_flight_bound(0, 0.02, took=1000) == 0, "0: no bound"


def test_a_429_over_a_shorter_window_learns_the_same_pace_a_minute() -> None:
    times: deque[float] = deque([NOW - 15, NOW - 11])  # older than the window: not counted
    for i in range(100):
        rp.trailing(times, NOW - 8 + i * 0.05, window=10)
    took = rp.taken(times, NOW, window=10)
    assert took == 100
    pace = rp.throttled(rp.start(), NOW, 1, 0.02, took=took, window=10)
    assert pace.per_minute == pytest.approx(588)


class Answers:
    """Calls in the air, answered when the test says so."""

    def __init__(self) -> None:
        self.in_air: list[asyncio.Future[None]] = []
        self.most = 0

    async def call(self) -> None:
        answer = asyncio.get_running_loop().create_future()
        self.in_air.append(answer)
        self.most = max(self.most, sum(1 for f in self.in_air if not f.done()))
        await answer

    def answer_all(self) -> None:
        for f in self.in_air:
            if not f.done():
                f.set_result(None)


async def accepted_call(
    queue: RegistrationQueue, answers: Answers, order: list[int], n: int
) -> None:
    async with queue.turn(refill=False, priority=n % 3) as ticket:
        order.append(n)
        ticket.sent()
        await answers.call()
        ticket.accepted()


async def test_without_a_bound_an_unthrottled_burst_goes_at_once_and_with_one_four_go() -> None:
    for bound, most in ((0, 50), (4, 4)):
        clock = FakeClock(NOW)
        queue = RegistrationQueue(clock, most_in_flight=bound)
        answers, order = Answers(), list[int]()
        tasks = [asyncio.create_task(accepted_call(queue, answers, order, n)) for n in range(50)]
        while not all(t.done() for t in tasks):
            await clock.run_for(0)
            answers.answer_all()
        assert answers.most == most
        assert queue.in_flight == 0 and queue.view().waiting == 0
        await queue.aclose()


async def test_the_waiting_go_in_priority_order_and_a_cancelled_one_gives_its_place() -> None:
    clock = FakeClock(NOW)
    queue = RegistrationQueue(clock, most_in_flight=1)
    answers, order = Answers(), list[int]()
    tasks = [asyncio.create_task(accepted_call(queue, answers, order, n)) for n in range(9)]
    await clock.run_for(0)
    assert order == [0], "the first goes at once; one in the air at most"
    tasks[2].cancel()  # priority 2, the first to go after 0
    while not all(t.done() for t in tasks):
        await clock.run_for(0)
        answers.answer_all()
    assert order == [0, 5, 8, 1, 4, 7, 3, 6], "priority 2, then 1, then 0; the cancelled one gone"
    assert queue.in_flight == 0 and queue.view().waiting == 0
    await queue.aclose()


def test_a_learned_pace_halves_its_wait_for_each_quiet_minute_after_retry_after() -> None:
    pace = rp.throttled(rp.start(), NOW, retry_after=30, margin=0.0, took=6)
    assert pace.per_minute == 6
    assert rp.relaxed(pace, NOW + 89, 60).per_minute == 6, "a minute counts from Retry-After's end"
    assert rp.relaxed(pace, NOW + 90, 60).per_minute == 12
    five = rp.relaxed(pace, NOW + 30 + 300, 60)
    assert five.per_minute == 6 * 32 and five.interval() == pytest.approx(60 / 192)
    stepwise = rp.relaxed(rp.relaxed(pace, NOW + 150, 60), NOW + 330, 60)
    assert stepwise.per_minute == five.per_minute, "the same pace however often it is asked"
    assert rp.relaxed(pace, NOW + 10_000, 0).per_minute == 6, "0 never relaxes"


def test_a_relaxed_pace_never_passes_the_configured_one_and_brings_the_next_moment_nearer() -> None:
    pace = rp.granted(rp.throttled(rp.start(configured=100), NOW, 1, 0.0, took=10), NOW + 1)
    assert pace.next_at == NOW + 7
    later = rp.relaxed(pace, NOW + 1 + 600, 60)
    assert later.per_minute == 100
    assert later.next_at == NOW + 7, "the next moment never moves later"
    waiting = rp.granted(pace, NOW + 120)  # next moment at NOW + 126, at 10 a minute
    quick = rp.relaxed(waiting, NOW + 121, 60)
    assert quick.per_minute == 40 and quick.next_at == NOW + 121 + 1.5


def test_a_pace_that_holds_a_registration_back_does_not_relax() -> None:
    pace = rp.throttled(rp.start(), NOW, retry_after=1, margin=0.0, took=6)
    pace = rp.binding(pace, NOW + 100)  # registrations waited for it until then
    assert rp.relaxed(pace, NOW + 159, 60).per_minute == 6
    assert rp.relaxed(pace, NOW + 160, 60).per_minute == 12
    assert rp.binding(rp.start(), NOW) == rp.start(), "no learned pace: nothing to count"


async def test_a_burst_five_minutes_after_a_throttle_is_not_held_to_its_pace() -> None:
    clock = FakeClock(NOW)
    github = ThrottledGitHub(clock, per_minute=6)
    queue = RegistrationQueue(clock)
    first = [asyncio.create_task(register(queue, github, f"a{i}", 0)) for i in range(12)]
    await clock.run_for(180, step=0.5)
    await asyncio.gather(*first)
    assert queue.view().source == "github" and github.calls[-1][2]
    await clock.run_for(300, step=1)  # nothing asked for five minutes; GitHub stops throttling
    github.per_minute = 1000
    began = clock.now()
    second = [asyncio.create_task(register(queue, github, f"b{i}", 0)) for i in range(12)]
    await clock.run_for(20, step=0.1)
    took = [t for t, who, ok in github.calls if ok and who.startswith("b")]
    for task in second:
        task.cancel()
    await asyncio.gather(*second, return_exceptions=True)
    await queue.aclose()
    assert len(took) == 12 and max(took) - began < 10, "held to one every 10 s it takes 110 s"
