"""The walks over the waiting jobs: who decide() is asked about, and who is held without asking.

docs/admission.md, "CPU admission" (a job held 2 minutes for CPU holds back every younger one) and
"Try it first: runnerd simulate" (HELD, CPU HELD); 100,000 jobs go through every policy in
seconds. A walk
tries the waiting jobs in queue order after a finish or a tick. :meth:`Walks._walk_each` visits
them one at a time (the jobs that just arrived; every waiting job for the reference), and
:meth:`Walks._walk` jumps from one job decide() must be asked about to the next, counting the
held ones in between by bisection, as the one-at-a-time walk would count them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from runnerd.admission.admit import cpu_fits, starves
from runnerd.admission.model import CpuWaiter, Prediction
from runnerd.admission.predict import ProfileStats
from runnerd.simulate.engine import Replayer
from runnerd.simulate.waiting import NEVER, KeyQueue


class Walks(Replayer):
    """The two walks; :class:`runnerd.simulate.replay._Replay` picks one at each event."""

    def _walk_each(self, now: float, order: Iterable[int]) -> None:
        """Try ``order`` one job at a time: the jobs that just arrived, or with
        ``shortcuts=False`` every waiting job, each asked of decide()."""
        cut = self.shortcuts
        free = self._free()
        high_water_held = False
        closed: set[KeyQueue] = set()  # keys whose head found the slice short: so do the rest
        reached: set[KeyQueue] = set()
        queue_of, per_profile, slots = self.queue_of, self.per_profile, self.slots
        measured = self.measured
        hour = int(now // 3600)
        for i in order:
            kq = queue_of[i]
            if kq in closed:
                continue
            if cut and per_profile[kq.profile] >= slots[kq.profile]:
                closed.add(kq)
                continue
            if not measured:
                prediction = kq.cap_prediction  # see _predicted
            else:
                if kq not in reached:  # the same for every copy until a job finishes
                    self._reach(kq, now, hour)
                    reached.add(kq)
                prediction = self._predicted(kq, now)
            if cut and free is not None and prediction.memory > free:
                closed.add(kq)  # its copies predict the same: decide() refuses them all
                continue
            if cut and high_water_held:
                self.held += 1  # the same slice reading holds every start back
                continue
            if cut and self.limits.cpu_budget is not None and not self._at_high_water():
                # decide() would hold it at the mark first
                if i in self.waiters.entries:
                    if self._cpu_refuses(prediction, i, now):
                        self.cpu_held += 1  # a job already waiting for CPU that still does not fit
                        continue
                elif self._starved_before(now):
                    self._first_held(i, kq, now)
                    continue
            high_water_held = self._count(self._ask(i, kq, prediction, now), prediction, free)
            free = self._free()

    def _starved_before(self, now: float) -> bool:
        """A job held for CPU since before ``now`` has waited 2 minutes or more: decide()
        holds any job that is not waiting yet for CPU (see :meth:`_first_held`)."""
        return starves(self.waiters.oldest(), now, now, self.limits)

    def _first_held(self, i: int, kq: KeyQueue, now: float) -> None:
        """What asking decide() about job ``i`` does when an older job has waited 2 minutes
        for CPU and ``i`` has its slot and its memory: it is held for CPU from now, its own
        waiter among the others. On an overloaded host nearly every job that arrives is held
        so; tests compare this with asking decide() (``shortcuts=False``)."""
        self.waiters.add(i, CpuWaiter(str(i), now, now))
        kq.held_for_cpu(i)
        self.events += 1
        self.cpu_held += 1

    def _cpu_refuses(self, prediction: Prediction, i: int, now: float) -> bool:
        """What decide() answers for a job already held for CPU, without asking it again: the
        starvation rule (an older job held 2 minutes or more), then the budget. Only for
        waiters, whose state such a refusal leaves as it was."""
        limits = self.limits
        if limits.cpu_budget is None:
            return False
        oldest = self.waiters.oldest()  # the oldest waiter is the one that blocks younger ones
        if starves(oldest, self.waiters.entries[i].since, now, limits):
            return True
        return not cpu_fits(prediction.cpu, self._summed_cpu(), limits)

    def _walk(self, now: float) -> None:
        """Every waiting job in queue order, as :meth:`_walk_each` would try them, without
        visiting the ones decide() would only hold for CPU again.

        Between two questions to decide() nothing changes, so a key's jobs up to the next one
        it must be asked about are all held for CPU, as :meth:`_cpu_refuses` holds them: they
        are counted by bisection when the key is next asked about, closed (all its slots busy,
        or its prediction past the free memory) or at the end. Asked about are every job not
        held for CPU yet, and a held one whose key's prediction fits the free CPUs, unless an
        older job has been held 2 minutes, when only the oldest held are. A key is reached
        (its prediction looked up) when the walk reaches its first job, where the
        one-at-a-time walk looks it up.
        """
        slots, per_profile = self.slots, self.per_profile
        hour = int(now // 3600)
        if self._idle(now, hour):
            return
        self.idle = None
        total = self.limits.cpu_budget
        waiters = self.waiters
        queue_of = self.queue_of
        free = self._free()
        pending = [kq for kq in self.nonempty if per_profile[kq.profile] < slots[kq.profile]]
        pending.sort(key=_first_job, reverse=True)
        active: list[KeyQueue] = []  # reached and not closed
        start = 0  # every job before it has been walked past
        moved = False  # a job started: keys may have closed
        limits = self.limits
        current: dict[str, ProfileStats] = {}  # each profile's figures: no finish in a walk
        while True:
            taken = self._summed_cpu()
            held_ahead = total is not None and bool(waiters.entries)
            marked = self._at_high_water()  # decide() holds the next job with a slot there
            starved = held_ahead and starves(waiters.oldest(), now, now, limits)
            group: dict[KeyQueue, int] = {}  # each key's first job among the oldest held
            if starved:
                oldest = waiters.groups[waiters.order[0]]  # the oldest group held
                for k in range(bisect.bisect_left(oldest, start), len(oldest)):
                    group.setdefault(queue_of[oldest[k]], oldest[k])
            if moved:
                active = [kq for kq in active if self._still_open(kq, start, free, now)]
            best, chosen = NEVER, None
            seen = 0
            while True:
                if seen < len(active):
                    kq = active[seen]
                elif pending and pending[-1].queue[0] < best:
                    kq = pending.pop()  # reached before anything changes
                    if not self._reached(kq, now, hour, free, current):
                        continue
                    active.append(kq)
                else:
                    break
                seen += 1
                # The first job of the key decide() must be asked about. One not held for
                # CPU yet is asked when reached, so those of an open key are all ahead.
                at = kq.fresh[0] if kq.fresh else NEVER
                if marked:
                    at = kq.first(start)  # held for CPU or not: the mark holds it first
                elif held_ahead:
                    held = group.get(kq, NEVER) if starved else kq.first(start)
                    if held < at and cpu_fits(self._predicted(kq, now).cpu, taken, limits):
                        at = held  # held for CPU, and now it fits
                if at < best:
                    best, chosen = at, kq
            if chosen is None:
                self._end_walk(now, hour, active, start, (taken, marked, starved))
                return
            i = int(best)
            self.cpu_held += chosen.count(chosen.done_to, i)
            chosen.done_to = i + 1
            prediction = self._predicted(chosen, now)
            answer = self._ask(i, chosen, prediction, now)
            if self._count(answer, prediction, free):
                self._held_from(i, now, hour, active, pending, free)
                return
            moved = answer == "start"
            free = self._free()
            start = i + 1

    def _reached(
        self,
        kq: KeyQueue,
        now: float,
        hour: int,
        free: int | None,
        current: dict[str, ProfileStats],
    ) -> bool:
        """The walk reaches the key's first job: its prediction looked up (``current`` holds
        each profile's figures for the walk); False when its profile's slots are all busy or
        its prediction is past the free memory."""
        if self.per_profile[kq.profile] >= self.slots[kq.profile]:
            return False
        if self.measured:  # the figures _profile answers are read once for the whole walk
            stats = current.get(kq.profile)
            if stats is None:
                stats = current[kq.profile] = self._profile(kq.profile, now)
            self._reach(kq, now, hour, stats)
        if free is not None and kq.memory > free and self._short(kq, free, now):
            return False
        kq.done_to = 0
        return True

    def _end_walk(
        self,
        now: float,
        hour: int,
        active: list[KeyQueue],
        start: int,
        state: tuple[float, bool, bool],
    ) -> None:
        """Nothing more to ask: every job left of an open key is held for CPU. ``state`` is the
        last round's (CPUs taken, marked, starved)."""
        left = 0
        for kq in active:
            size = len(kq.queue)
            left += size
            if kq.done_to:
                size -= bisect.bisect_left(kq.queue, kq.done_to)
            self.cpu_held += size
        taken, marked, starved = state
        if self.limits.cpu_budget is not None and (
            not start or not self._would_ask(now, active, taken, marked, starved)
        ):  # asked nothing, or a walk from the first job would ask nothing: see _idle
            self.idle = (self.events, hour, dict(self.stats), left)

    def _would_ask(
        self, now: float, active: list[KeyQueue], taken: float, marked: bool, starved: bool
    ) -> bool:
        """Whether a walk from the first job, with things as a walk that asked decide() left
        them, would ask it anything. ``active`` are the keys still open at its end: a key only
        closes during a walk, so these are the keys a new walk would reach. It would ask a
        job not held for CPU yet (none is left in an open key: each was asked when reached),
        any job at the high-water mark, and a held one whose prediction fits the free CPUs:
        among the oldest held when one of them has waited 2 minutes. A walk that asks nothing
        counts every job of the open keys held, as :meth:`_idle` then does."""
        waiters = self.waiters
        in_oldest: set[KeyQueue] | None = None
        if starved:
            in_oldest = {self.queue_of[j] for j in waiters.groups[waiters.order[0]]}
        for kq in active:
            if not kq.queue:
                continue
            if kq.fresh or marked:
                return True
            if not waiters.entries or (in_oldest is not None and kq not in in_oldest):
                continue
            if cpu_fits(self._predicted(kq, now).cpu, taken, self.limits):
                return True
        return False

    def _still_open(self, kq: KeyQueue, start: int, free: int | None, now: float) -> bool:
        if self.per_profile[kq.profile] < self.slots[kq.profile] and not self._short(kq, free, now):
            return True
        self.cpu_held += kq.count(kq.done_to, start)  # closed: held until here
        return False

    def _held_from(
        self,
        i: int,
        now: float,
        hour: int,
        active: list[KeyQueue],
        pending: list[KeyQueue],
        free: int | None,
    ) -> None:
        """The high-water mark held job ``i`` back: every later job of an open key is held."""
        slots, per_profile = self.slots, self.per_profile
        for kq in active:  # nothing changed since they were last found open
            if kq.done_to < i:  # not the key of job i, counted already
                self.cpu_held += kq.count(kq.done_to, i)
            self.held += kq.count(i + 1, NEVER)
        for kq in pending:
            if per_profile[kq.profile] < slots[kq.profile]:
                self._reach(kq, now, hour)
                if not self._short(kq, free, now):
                    self.held += len(kq.queue)

    def _idle(self, now: float, hour: int) -> bool:
        """A walk that asked decide() nothing left things as they are until a job arrives,
        finishes or starts, or a profile's figures or the hour move: until then a walk asks
        nothing and counts the same held jobs (a job held longer only holds back more). A walk
        that started jobs leaves no such mark: the next walk looks again from the first job,
        where the new oldest held may be."""
        idle = self.idle
        if idle is None or idle[0] != self.events or idle[1] != hour:
            return False
        if any(self._profile(name, now) != stats for name, stats in idle[2].items()):
            return False
        self.cpu_held += idle[3]
        return True


def _first_job(kq: KeyQueue) -> int:
    return kq.queue[0]
