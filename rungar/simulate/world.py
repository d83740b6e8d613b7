"""The whole fleet on one virtual clock: GitHub's queue, scaling, placement, the providers.

A discrete-event loop, deterministic: the same inputs give the same result to the digit. What
runs is the real code where the daemon decides, and a model where it talks:

- real: :func:`rungar.scaling.desired` and :func:`rungar.scaling.step.plan_scale` (how many
  runners a scale set wants, schedules and warm pools included, which to create as reserve,
  which idle ones go), the warm
  pool's :func:`rungar.scaling.predict` fed each job as it is assigned; the placement
  :class:`Fleet`, its plan and the engine's loop that carries it out
  (:func:`rungar.engine.create.placing.place`: order, spread/pack, weights, limits, backoffs,
  priority holds, unreachable providers), room opening (a holder tried at once, an idle runner
  on a dearer provider replaced, as :mod:`rungar.engine.create.rooms` does); runnerd's
  ``decide()`` and predictor on runnerd hosts (:mod:`rungar.simulate.backends`).
- modelled: GitHub (a first-come queue per scale set; a connected idle runner takes the oldest
  job at once; assigned jobs are the queued and running ones); the engine's triggers (a scale
  step on each job queued or finished in the scale set, and every ``reconcile_interval`` for
  every scale set, where each provider is also listed); a scale step's creates run one after
  another and stop at the first runner not placed; runners are ephemeral, boot in the
  provider's boot time, and their machine is deleted when their job ends; GitHub registration,
  start timeouts, adoption and the state store are left out.

The replay ends at the first pass after every job has finished: idle reserve runners (from
``min_runners`` or a warm pool) are deleted then, and counted until then.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from rungar.config.model import ScaleSetsFile
from rungar.engine.create.placing import place
from rungar.model.machine import Created, JobHint, Refusal
from rungar.model.runner import RunnerState, RunnerView
from rungar.placement import Fleet, Hold, HoldRule, RoomOpened
from rungar.placement.plan import Outcome, Placed, Try
from rungar.scaling import Warm, desired, in_force, predict
from rungar.scaling.step import plan_scale
from rungar.simulate.backends import Backend
from rungar.simulate.history import SimJob

# At one instant: room is freed before it is asked for, and given to its holder first.
FINISH, BOOTED, ROOM, TICK, WAKE = 0, 1, 2, 3, 4
HINTS = 20  # queued jobs handed to a create, as the engine hands them
GIVE_UP_AFTER = 7 * 86400.0  # after the last job is queued, with nothing running


@dataclass
class _Runner:
    name: str
    scale_set: str
    provider: str
    created_at: float
    connected: bool = False
    job: int | None = None  # index of the job it runs
    started: float = 0.0  # when it took its job
    killed: bool = False


@dataclass
class HoldUse:
    taken: int = 0
    seconds: float = 0.0


@dataclass
class WorldResult:
    """What one replay measured."""

    waits: dict[str, list[float]]  # scale set -> each started job's wait, in start order
    never_started: dict[str, int]
    holds: dict[str, HoldUse]  # holder scale set -> holds taken and for how long
    backends: dict[str, Backend]
    end: float
    events: int
    runner_seconds: dict[str, float] = field(default_factory=dict)  # scale set -> machine time
    # How long held room stood empty before its holder took it: seconds, one per room taken.
    held_room_idle: list[float] = field(default_factory=list)
    replaced: int = 0  # idle runners on a dearer provider replaced by one on a cheaper one


class World:
    def __init__(
        self,
        config: ScaleSetsFile,
        backends: Mapping[str, Backend],
        jobs: Sequence[SimJob],
        *,
        check: Callable[[World], None] | None = None,
        hold_rule: HoldRule = HoldRule.EVERY_FULL,
    ) -> None:
        self.config = config
        self.check = check  # called after every event: invariants for the seeded tests
        self.timing = config.timing
        self.sets = {s.name: s for s in config.scale_sets}
        self.fleet = Fleet(config.providers, config.scale_sets, config.timing, hold_rule=hold_rule)
        self.priced = any(self.fleet.price_of(p) > 0 for p in self.fleet.providers)
        self.room_waits: dict[tuple[str, str], float] = {}  # (holder, provider) -> opened at
        self.held_room_idle: list[float] = []
        self.replaced = 0
        self.backends = dict(backends)
        self.jobs = jobs
        self.queue: dict[str, deque[int]] = {name: deque() for name in self.sets}
        self.assigned: dict[str, int] = dict.fromkeys(self.sets, 0)
        self.runners: dict[str, _Runner] = {}
        self.of_set: dict[str, dict[str, _Runner]] = {name: {} for name in self.sets}
        self.idle: dict[str, dict[str, _Runner]] = {name: {} for name in self.sets}
        self.waits: dict[str, list[float]] = {name: [] for name in self.sets}
        self.runner_seconds: dict[str, float] = dict.fromkeys(self.sets, 0.0)
        self.history: dict[str, list[float]] = {name: [] for name in self.sets}  # assigned at
        self.warm_cache: dict[str, tuple[tuple[float, ...], Warm | None]] = {}
        self.holds: dict[str, HoldUse] = {name: HoldUse() for name in self.sets}
        self.open_holds: dict[str, tuple[str, float, float]] = {}  # provider -> holder, from, since
        self.heap: list[tuple[float, int, int, str]] = []
        self.serial = itertools.count(1)
        self.seq = itertools.count()
        self.now = jobs[0].queued_at if jobs else 0.0
        self.events = 0
        self.hints_read = any(getattr(b, "measured", False) for b in self.backends.values())
        self.wakes: dict[str, float] = {}  # scale set -> its next scale step (host waits)

    # ------------------------------------------------------------------ the loop

    def push(self, at: float, kind: int, what: str) -> None:
        heapq.heappush(self.heap, (at, kind, next(self.seq), what))

    async def run(self) -> WorldResult:
        jobs, n = self.jobs, len(self.jobs)
        nxt = 0
        interval = self.timing.reconcile_interval
        origin = self.now
        self.push(self.now, TICK, "")
        ticking = True
        last_arrival = jobs[-1].queued_at if jobs else self.now
        while self.heap or nxt < n:
            if nxt < n and (not self.heap or jobs[nxt].queued_at < self.heap[0][0]):
                self.now = jobs[nxt].queued_at
                self.events += 1
                if not ticking:  # passes resume on their grid: the replay stays the same
                    passes = -(-(self.now - origin) // interval)
                    self.push(origin + passes * interval, TICK, "")
                    ticking = True
                await self.arrive(nxt)
                nxt += 1
                continue
            at, kind, _, what = heapq.heappop(self.heap)
            self.now = at
            self.events += 1
            if self.check is not None:
                self.check(self)
            if kind == FINISH:
                await self.finish(what)
            elif kind == BOOTED:
                self.booted(what)
            elif kind == ROOM:
                await self.room(what)
            elif kind == WAKE:
                if self.wakes.get(what) == at:
                    del self.wakes[what]
                    await self.scale(what)
            else:
                if (
                    nxt >= n
                    and not any(r.job is not None for r in self.runners.values())
                    and (not any(self.queue.values()) or at > last_arrival + GIVE_UP_AFTER)
                ):
                    for left in list(self.runners):  # idle reserve: kept until now
                        await self.finish(left, rescale=False)
                    break
                await self.tick()
                if self.quiet():
                    # Nothing a pass could do until the next job arrives, or a schedule window
                    # or a warm pool's slot changes: then passes resume, on their grid.
                    wake = self.next_warm_change()
                    if wake is None:
                        ticking = False
                    else:
                        passes = -(-(wake - origin) // interval)
                        self.push(origin + passes * interval, TICK, "")
                else:
                    self.push(at + interval, TICK, "")
        self.close_holds(self.now, everything=True)
        never = {name: len(q) for name, q in self.queue.items()}
        return WorldResult(
            self.waits,
            never,
            self.holds,
            self.backends,
            self.now,
            self.events,
            self.runner_seconds,
            self.held_room_idle,
            self.replaced,
        )

    async def arrive(self, index: int) -> None:
        name = self.jobs[index].scale_set
        self.queue[name].append(index)
        self.history[name].append(self.now)  # jobs arrive in time order: it stays sorted
        self.assigned[name] += 1
        idle = self.idle[name]
        if idle:
            self.start_job(next(iter(idle.values())))
        else:
            await self.scale(name)

    def booted(self, runner: str) -> None:
        record = self.runners.get(runner)
        if record is None:
            return
        record.connected = True
        self.fleet.record_start(record.provider, self.now - record.created_at)
        if self.queue[record.scale_set]:
            self.start_job(record)
        else:
            self.idle[record.scale_set][runner] = record

    def start_job(self, record: _Runner) -> None:
        index = self.queue[record.scale_set].popleft()
        self.idle[record.scale_set].pop(record.name, None)
        job = self.jobs[index]
        record.job = index
        record.started = self.now
        self.waits[record.scale_set].append(self.now - job.queued_at)
        backend = self.backends[record.provider]
        self.push(self.now + job.duration, FINISH, record.name)
        for victim in backend.job_started(record.name, job, self.now):
            killed = self.runners[victim]
            killed.killed = True
            backend.usage.kills += 1
            self.push(self.now, FINISH, victim)  # the kernel ends it now

    async def finish(self, runner: str, *, rescale: bool = True) -> None:
        record = self.runners.pop(runner, None)
        if record is None:
            return  # killed earlier: its own finish comes later and finds it gone
        name = record.scale_set
        self.runner_seconds[name] += self.now - record.created_at
        del self.of_set[name][runner]
        self.idle[name].pop(runner, None)
        backend = self.backends[record.provider]
        if record.job is not None:
            self.assigned[name] -= 1
            backend.usage.job_seconds += self.now - record.started
            backend.job_finished(runner, self.jobs[record.job], self.now, killed=record.killed)
        self.fleet.remove_runner(name, record.provider, leaving=True)
        backend.delete(runner, self.now)
        self.room_opened(self.fleet.machine_deleted(record.provider, self.now))
        if rescale:
            await self.scale(name)

    def quiet(self) -> bool:
        """No job waits, no runner lives and no hold stands: a pass has nothing to do."""
        return (
            not self.runners
            and not self.open_holds
            and not any(self.queue.values())
            and all(in_force(s, self.now).min_runners == 0 for s in self.sets.values())
            and all(self.warm(n).runners == 0 for n, s in self.sets.items() if s.warm_pool)  # type: ignore[union-attr]  # a warm pool predicts
        )

    def next_warm_change(self) -> float | None:
        """The first moment the idle reserve may change with no job arriving: a schedule's next
        window edge, or ``now + ahead`` entering a warm pool's next slot. None when neither."""
        changes = []
        for config in self.sets.values():
            if config.schedule is not None:
                edge = in_force(config, self.now).next_change
                if edge is not None:
                    changes.append(edge)
            pool = config.warm_pool
            if pool is not None:
                step = math.gcd(int(pool.slot), 900)  # as in :meth:`warm`
                changes.append(((self.now + pool.ahead) // step + 1) * step - pool.ahead)
        return min(changes, default=None)

    async def tick(self) -> None:
        for name, backend in self.backends.items():
            self.fleet.set_reachable(name, backend.answering(self.now))
        for name in self.sets:
            await self.scale(name)
        self.close_holds(self.now)

    # ------------------------------------------------------------------ the engine's step

    async def scale(self, name: str) -> None:
        config = self.sets[name]
        warm = self.warm(name) if config.warm_pool else None
        decision = desired(
            config,
            self.assigned[name],
            paused=config.paused,
            now=self.now,
            warm=warm.runners if warm else 0,
        )
        live = self.of_set[name]
        idle = self.idle[name]
        views = [
            RunnerView(
                r.name,
                name,
                r.provider,
                "",
                r.created_at,
                RunnerState.IDLE if r.name in idle else RunnerState.BUSY,
            )
            for r in live.values()
        ]
        # The engine's own plan; its creates are carried out one after another here.
        plan = plan_scale(decision, removed=False, live=views, creating=0, revisions={})
        for reserve in plan.create:
            if not await self.create(name, reserve=reserve):
                break
        for runner in plan.remove:
            await self.finish(runner)

    def warm(self, name: str) -> Warm | None:
        """The warm pool's prediction; the same until a job arrives or either slot it looks at
        changes (passes every reconcile_interval ask it far more often than that)."""
        config = self.sets[name]
        pool = config.warm_pool
        assert pool is not None
        # Slots start on multiples of this in epoch time, in any zone whose offset from UTC is
        # whole quarter hours (every zone in use today).
        step = math.gcd(int(pool.slot), 900)
        key = (len(self.history[name]), self.now // step, (self.now + pool.ahead) // step)
        cached = self.warm_cache.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        found = predict(config, self.history[name], self.now)
        self.warm_cache[name] = (key, found)
        return found

    async def create(
        self, name: str, *, reserve: bool = False, cheaper_than: float | None = None
    ) -> bool:
        now = self.now
        if self.fleet.cannot_place(name, now, reserve=reserve):
            if not reserve and cheaper_than is None:
                self.note_holds(self.fleet.apply_holds(self.fleet.plan_holds(name, now)))
                self.wake_later(name)
            return False
        runner = f"{name}-{next(self.serial):06d}"
        config = self.sets[name]
        blocks = {entry.name: entry.runner for entry in config.providers}
        hints: tuple[JobHint, ...] = ()
        if self.hints_read:  # only measured admission reads them
            hints = tuple(
                JobHint(self.jobs[i].repository, self.jobs[i].workflow, self.jobs[i].job)
                for i in itertools.islice(self.queue[name], HINTS)
            )

        async def create(provider: str) -> Created | Refusal:
            block = {**self.fleet.providers[provider].runner, **blocks.get(provider, {})}
            return self.backends[provider].create(runner, name, block, hints, now)

        async def delete(provider: str) -> None:
            self.backends[provider].delete(runner, now)

        async def settle(provider: str) -> Created | None:
            return None  # a provider in an outage answers nothing, also not this

        result = await place(
            self.fleet,
            name,
            now=lambda: now,
            create=create,
            delete=delete,
            settle=settle,
            observe=self.observe,
            on_room=self.room_opened,
            reserve=reserve,
            cheaper_than=cheaper_than,
        )
        if not isinstance(result, Placed):
            self.note_holds(result.held)
            if not reserve and cheaper_than is None:
                self.wake_later(name)
            return False
        self.close_holds(now)
        opened = self.room_waits.pop((name, result.provider), None)
        if opened is not None:
            self.held_room_idle.append(now - opened)
        for key in [k for k in self.room_waits if k[0] == name]:
            del self.room_waits[key]  # its holds lifted: room elsewhere was not its to take
        record = _Runner(runner, name, result.provider, now)
        self.runners[runner] = record
        self.of_set[name][runner] = record
        backend = self.backends[result.provider]
        backend.usage.created += 1
        self.push(now + backend.boot, BOOTED, runner)
        return True

    def wake_later(self, name: str) -> None:
        """As the engine (:meth:`rungar.engine.create.rooms.Rooms.wake_later`): a scale set
        waiting for a host's expected room is scaled again when the host is to be tried, or
        when its wait ends."""
        at = self.fleet.wake_at(name, self.now)
        if at is None:
            return
        pending = self.wakes.get(name)
        if pending is not None and self.now < pending <= at:
            return
        if at <= self.now:  # the host is kept off for another reason: asked again, not at once
            at = self.now + self.timing.backoff_first
        self.wakes[name] = at
        self.push(at, WAKE, name)

    def observe(self, scale_set: str, attempt: Try) -> None:
        if attempt.outcome is Outcome.CREATED or attempt.outcome is Outcome.SKIPPED:
            return
        if attempt.outcome is Outcome.REFUSED and attempt.refusal is not None:
            kind = attempt.refusal.kind.value
        else:
            kind = attempt.outcome.value
        refusals = self.backends[attempt.provider].usage.refusals
        refusals[kind] = refusals.get(kind, 0) + 1

    # ------------------------------------------------------------------ holds

    # ------------------------------------------------------------------ room opening

    def room_opened(self, opened: RoomOpened) -> None:
        """As the engine (:mod:`rungar.engine.create.rooms`): the holder is tried there at once (an
        event at this instant), and an idle runner on a dearer provider may be replaced."""
        if opened.holder:
            self.room_waits.setdefault((opened.holder, opened.provider), opened.at)
        if opened.holder or self.priced:
            self.push(self.now, ROOM, f"{opened.holder}\0{opened.provider}")
        for waiting in self.fleet.waiting_for_host(opened.provider, opened.at):
            if waiting != opened.holder:  # its wait was for this room: tried now
                self.wakes[waiting] = self.now
                self.push(self.now, WAKE, waiting)

    async def room(self, what: str) -> None:
        holder, _, provider = what.partition("\0")
        if holder:
            await self.scale(holder)
        if not self.priced:
            return
        price = self.fleet.price_of(provider)
        idle = [
            RunnerView(r.name, r.scale_set, r.provider, "", r.created_at, RunnerState.IDLE)
            for runners in self.idle.values()
            for r in runners.values()
            if self.fleet.price_of(r.provider) > price
        ]
        runner = self.fleet.replacement(provider, idle, self.now)
        if runner is None:
            return
        dearer = self.fleet.price_of(runner.provider)
        if await self.create(runner.scale_set, reserve=True, cheaper_than=dearer):
            old = self.runners.get(runner.name)
            if old is not None and old.job is None:
                self.replaced += 1
                await self.finish(runner.name, rescale=False)

    # ------------------------------------------------------------------ holds

    def note_holds(self, new: tuple[Hold, ...]) -> None:
        """Count holds placed (not renewals) and follow each until it lifts or lapses."""
        for hold in new:
            self.holds[hold.holder].taken += 1
        for provider in {h.provider for h in new}:
            self.follow_hold(provider)
        if self.open_holds:
            self.close_holds(self.now)

    def follow_hold(self, provider: str) -> None:
        hold = self.fleet.hold_on(provider, self.now)
        current = self.open_holds.get(provider)
        if hold is None:
            return
        if current is not None and current[0] != hold.holder:
            self.end_hold(provider, self.now)
            current = None
        start = current[1] if current is not None else self.now
        self.open_holds[provider] = (hold.holder, start, hold.since)

    def close_holds(self, now: float, *, everything: bool = False) -> None:
        duration = self.timing.hold_duration
        for provider in list(self.open_holds):
            holder, _, since = self.open_holds[provider]
            hold = self.fleet.hold_on(provider, now)
            if everything or hold is None or hold.holder != holder:
                self.end_hold(provider, min(now, since + duration))
            else:
                self.open_holds[provider] = (holder, self.open_holds[provider][1], hold.since)

    def end_hold(self, provider: str, at: float) -> None:
        holder, start, _ = self.open_holds.pop(provider)
        self.holds[holder].seconds += max(0.0, at - start)


def replay(
    config: ScaleSetsFile, backends: Mapping[str, Backend], jobs: Sequence[SimJob]
) -> WorldResult:
    """Run the replay to its end; the same inputs, the same result."""
    return asyncio.run(World(config, backends, jobs).run())
