"""The replay behind ``runnerd simulate``: the history through the daemon's admission code.

docs/admission.md, "Try it first: runnerd simulate" and "CPU admission". Each finished job of a
configured profile is queued when it was and runs as long as it ran; while it runs it is held at
its peak (the slice reads every running job's peak plus the mirror). Start latency, seed
containers, shells and cancelled jobs are left out, and run times are fixed, so CPU contention
shows as holds, not slowdowns.

Every start is decided by :func:`runnerd.admission.decide`, the daemon's own function, with
predictions from :class:`runnerd.predictor.Predictor` fed the replayed runs as they finish:
causal, no look-ahead (:mod:`runnerd.simulate.engine`). The replay is event-driven: arrivals
read in queue order beside a heap of finishes and ticks (every ``TICK`` seconds while a job
waits under a CPU budget, for the 2-minute starvation rule). After a finish or a tick every
waiting job is walked in queue order, after arrivals the arrivals (:mod:`runnerd.simulate.walks`).
Cheap necessary checks (a full profile, a reservation larger than the free memory) skip a call
that could only refuse, and a job already held for CPU that still does not fit is counted again
without asking, in bulk: thousands of waiting jobs cost a bisection per job key, not a visit
each. Every start and every HELD comes from decide(), and every first hold for CPU but one kind:
a job that arrives while an older one has waited 2 minutes for CPU is held as decide() holds it
(:meth:`runnerd.simulate.walks.Walks._first_held`; tests compare with asking it), so 100,000
jobs replay through a policy in seconds.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from runnerd.admission import Limits, PredictionRules
from runnerd.simulate.engine import FINISH, WAKE
from runnerd.simulate.rows import ProfileShape, ReplayResult, Scenario
from runnerd.simulate.walks import Walks
from runnerd.simulate.window import WindowPredictor
from runnerd.sizing.runs import SizingRun

__all__ = ["replay", "replayable"]

TICK = 30.0


def _nearest_rank(ordered: Sequence[float], share: float) -> float:
    if not ordered:
        return 0.0
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


class _Replay(Walks):
    def __init__(
        self,
        scenario: Scenario,
        profiles: Mapping[str, ProfileShape],
        jobs: Sequence[SizingRun],
        warm: Sequence[SizingRun],
        limits: Limits,
        rules: PredictionRules,
        shortcuts: bool = True,
    ) -> None:
        predictor = WindowPredictor(rules)
        predictor.load([(r.key, r.as_run()) for r in warm], 0.0)
        super().__init__(scenario, profiles, jobs, limits, predictor, shortcuts)

    # ---- the loop ---------------------------------------------------------------------

    def run(self) -> ReplayResult:
        arrivals = self.arrived
        if any(a > b for a, b in itertools.pairwise(arrivals)):
            raise ValueError("jobs must come in the order they were queued (see replayable)")
        # The replay makes millions of short-lived objects, freed as they go out of use, beside
        # the history's runs, which all stay: the cyclic collector's passes over them cost a
        # tenth of the replay and find nothing, so it waits until the replay is done.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._events(arrivals)
        finally:
            if collecting:
                gc.enable()
        return self._result()

    def _events(self, arrivals: list[float]) -> None:
        heap = self.heap  # finishes and ticks; arrivals are read in order beside it
        heappop, finish, queue_of = heapq.heappop, self._finish, self.queue_of
        n = len(arrivals)
        a = 0
        budget_cpu = self.limits.cpu_budget
        while a < n or heap:
            now = heap[0][0] if heap and (a == n or heap[0][0] <= arrivals[a]) else arrivals[a]
            # Finishes first at the same instant (they free room), then arrivals, then a tick.
            everyone = False
            while heap and heap[0][0] == now and heap[0][1] == FINISH:
                finish(heappop(heap)[2], now)
                everyone = True
            first = a
            while a < n and arrivals[a] == now:
                kq = queue_of[a]
                if not kq.queue:
                    self.nonempty[kq] = None
                kq.add(a)
                kq.present += 1
                a += 1
            if a > first:
                self.waiting += a - first
                self.events += a - first
            if heap and heap[0][0] == now:  # the tick
                heappop(heap)
                self.ticking = False
                everyone = True
            if self.waiting:
                if everyone and self.shortcuts:
                    self._walk(now)
                else:
                    self._walk_each(now, range(first, a) if not everyone else self._all())
            if self.waiting and budget_cpu is not None and not self.ticking:
                heapq.heappush(heap, (now + TICK, WAKE, -1))
                self.ticking = True

    def _result(self) -> ReplayResult:
        waits = sorted(self.waits)
        return ReplayResult(
            scenario=self.scenario,
            jobs=len(self.jobs),
            never_started=self.waiting,
            wait_p50=_nearest_rank(waits, 0.50),
            wait_p95=_nearest_rank(waits, 0.95),
            wait_max=waits[-1] if waits else 0.0,
            wait_mean=sum(waits) / len(waits) if waits else 0.0,
            at_once=self.at_once,
            peaks=self.worst_peaks,
            under=self.under,
            held=self.held,
            cpu=self.worst_cpu,
            cpu_held=self.cpu_held if self.limits.cpu_budget is not None else None,
            makespan=self.last_finish - (self.jobs[0].arrived_at if self.jobs else 0.0),
        )


def replayable(runs: Sequence[SizingRun], profiles: Mapping[str, ProfileShape]) -> list[SizingRun]:
    """The finished, not cancelled jobs of configured profiles, in the order they were queued."""
    kept = [r for r in runs if not r.cancelled and r.key.profile in profiles]
    kept.sort(key=lambda r: r.arrived_at)
    return kept


def replay(
    scenario: Scenario,
    profiles: Mapping[str, ProfileShape],
    jobs: Sequence[SizingRun],
    limits: Limits,
    rules: PredictionRules,
    slice_cpus: float | None = None,
    warm: Sequence[SizingRun] = (),
    shortcuts: bool = True,
) -> ReplayResult:
    """Replay ``jobs`` (from :func:`replayable`) under one scenario; ``warm`` are the runs that
    finished before the window, which predictions may read from the start. ``shortcuts=False``
    asks decide() about every waiting job at every event (slow; tests compare the two)."""
    budget = None
    if scenario.cpu_factor is not None:
        if slice_cpus is None:
            raise ValueError("a CPU budget needs the slice's CPUs")
        budget = slice_cpus * scenario.cpu_factor
    limits = replace(
        limits,
        policy=scenario.policy,
        cpu_budget=budget,
        # A replayed job leaves the queue only by starting: it never stops asking.
        cpu_wait_forget=math.inf,
    )
    return _Replay(scenario, profiles, jobs, warm, limits, rules, shortcuts).run()
