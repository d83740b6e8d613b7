"""The replay behind ``runnerd simulate``: the history through the daemon's admission code.

Seed 000, "Try it first" and "CPU admission" (reference runnerd.md §6). Each finished job of a
configured profile is queued when it was and runs as long as it ran; while it runs it is held at
its peak (the slice reads every running job's peak plus the mirror). Start latency, seed
containers, shells and cancelled jobs are left out, and run times are fixed, so CPU contention
shows as holds, not slowdowns.

Every start is decided by :func:`runnerd.admission.decide`, the daemon's own function, with
predictions from :class:`runnerd.predictor.Predictor` fed the replayed runs as they finish:
causal, no look-ahead. The replay is event-driven (a heap of arrivals and finishes, plus a tick
every ``TICK`` seconds while a job waits under a CPU budget, for the 2-minute starvation rule),
so 100,000 jobs replay in seconds. Cheap necessary checks (a full profile, a reservation larger
than the free budget) skip a call that could only refuse; every admission and every hold
counted as HELD or CPU HELD comes from ``decide``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from runnerd.admission import (
    Admit,
    Candidate,
    GuardState,
    Limits,
    Outcome,
    Policy,
    PredictionRules,
    Running,
    SliceReading,
    decide,
)
from runnerd.admission.model import Prediction
from runnerd.history import JobKey
from runnerd.simulate.window import WindowPredictor
from runnerd.sizing.runs import SizingRun

TICK = 30.0
FINISH, ARRIVE, WAKE = 0, 1, 2  # finishes first at the same instant: they free room


@dataclass(frozen=True, slots=True)
class ProfileShape:
    """A profile as the replay needs it: each runner's cap and CPUs."""

    memory: int
    cpus: float


@dataclass(frozen=True, slots=True)
class Scenario:
    """One row of the table: a policy and slots, with a CPU budget factor or none."""

    name: str
    policy: Policy
    slots: Mapping[str, int]
    cpu_factor: float | None = None


@dataclass(frozen=True, slots=True)
class ReplayResult:
    scenario: Scenario
    jobs: int
    never_started: int
    wait_p50: float
    wait_p95: float
    wait_max: float
    wait_mean: float
    at_once: int
    peaks: int  # every running job's peak plus the mirror at the busiest moment
    under: int  # jobs that peaked above what admission reserved for them
    held: int  # times the high-water mark held back a job the predictions had room for
    cpu: float  # the most the running jobs' average CPUs added up to at once
    cpu_held: int | None  # times the CPU budget held back a job memory and slots had room for
    makespan: float


def _nearest_rank(ordered: Sequence[float], share: float) -> float:
    if not ordered:
        return 0.0
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


class _Replay:
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
        self.scenario = scenario
        self.profiles = profiles
        self.jobs = jobs
        self.limits = limits
        self.measured = limits.policy is Policy.MEASURED
        self.predictor = WindowPredictor(rules)
        self.predictor.load(((r.key, r.as_run()) for r in warm), 0.0)
        self.finished: dict[JobKey, int] = {}
        self.cache: dict[tuple[JobKey, bool], tuple[object, Prediction]] = {}
        self.shortcuts = shortcuts
        self.cpu_since: dict[str, float] = {}  # the CPU waiters of ``state``, by scale set
        self.cpu_oldest = math.inf
        self.cpu_taken = 0.0
        self.queues: dict[JobKey, dict[int, None]] = {}
        self.state = GuardState()
        self.waiting: dict[int, None] = {}  # insertion order is queue order
        self.running: dict[int, Running] = {}
        self.running_list: tuple[Running, ...] = ()
        self.per_profile: dict[str, int] = dict.fromkeys(profiles, 0)
        self.present: dict[JobKey, int] = {}  # copies queued or running, for "beside"
        self.reserved_of: dict[int, int] = {}
        self.counted_sum = 0  # what running runners count at against the budget
        self.peak_sum = 0
        self.cpu_sum = 0.0
        self.waits: list[float] = []
        self.at_once = 0
        self.worst_peaks = 0
        self.worst_cpu = 0.0
        self.under = 0
        self.held = 0
        self.cpu_held = 0
        self.last_finish = 0.0
        self.heap: list[tuple[float, int, int]] = []
        self.ticking = False

    # ---- predictions ------------------------------------------------------------------

    def _prediction(self, job: SizingRun, now: float) -> Prediction:
        shape = self.profiles[job.key.profile]
        if not self.measured:
            return Prediction(shape.memory, shape.cpus, "its profile's memory")
        beside = self.present.get(job.key, 0) > 1
        # A prediction changes only with its job's runs, its profile's figures, or time passing
        # a hold's or the window's edge: recomputed when any of them moved (time by the hour).
        stamp = (
            self.finished.get(job.key, 0),
            self.predictor.profile(job.key.profile, now),
            int(now // 3600),
        )
        cached = self.cache.get((job.key, beside))
        if cached is not None and cached[0] == stamp:
            return cached[1]
        prediction = self.predictor.predict_job(job.key, shape.memory, shape.cpus, now, beside)
        self.cache[(job.key, beside)] = (stamp, prediction)
        return prediction

    # ---- the loop ---------------------------------------------------------------------

    def run(self) -> ReplayResult:
        for i, job in enumerate(self.jobs):
            self.heap.append((job.arrived_at, ARRIVE, i))
        heapq.heapify(self.heap)
        while self.heap:
            now = self.heap[0][0]
            arrived: list[int] = []
            # A finish or a tick can start anyone; an arrival frees nothing, so only it is tried.
            everyone = False
            while self.heap and self.heap[0][0] == now:
                _, kind, i = heapq.heappop(self.heap)
                if kind == FINISH:
                    self._finish(i, now)
                    everyone = True
                elif kind == ARRIVE:
                    key = self.jobs[i].key
                    self.queues.setdefault(key, {})[i] = None
                    self.waiting[i] = None
                    self.present[key] = self.present.get(key, 0) + 1
                    arrived.append(i)
                else:
                    self.ticking = False
                    everyone = True
            if self.waiting:
                self._try_starts(now, None if everyone else arrived)
            if self.waiting and self.limits.cpu_budget is not None and not self.ticking:
                heapq.heappush(self.heap, (now + TICK, WAKE, -1))
                self.ticking = True
        return self._result()

    def _finish(self, i: int, now: float) -> None:
        job = self.jobs[i]
        runner = self.running.pop(i)
        self.running_list = tuple(self.running.values())
        self.cpu_taken -= runner.reserved_cpu
        self.per_profile[job.key.profile] -= 1
        self.counted_sum -= self._counted(runner, job)
        self.peak_sum -= job.peak
        self.cpu_sum -= job.avg_cpu or 0.0
        self.present[job.key] -= 1
        reserved = self.reserved_of.pop(i)
        if self.measured:  # under caps nothing reads a prediction
            run = replace(job.as_run(reserved=reserved), finished_at=now)
            self.predictor.add(job.key, run)
            self.finished[job.key] = self.finished.get(job.key, 0) + 1
        self.last_finish = now

    def _counted(self, runner: Running, job: SizingRun) -> int:
        # The replay samples continuously, so a measured runner counts at max(reserved, peak).
        return max(runner.reserved, job.peak) if self.measured else runner.cap

    def _in_order(self, only: list[int] | None) -> list[list[int]]:
        """The waiting jobs to try, one list per job key in queue order; a profile whose slots
        are all busy is left out, as decide() refuses its jobs for slots first."""
        if only is not None:
            return [[i] for i in only]
        if not self.shortcuts:
            return [list(self.waiting)]
        slots = self.scenario.slots
        return [
            list(queue)
            for key, queue in self.queues.items()
            if queue and self.per_profile[key.profile] < slots[key.profile]
        ]

    def _try_starts(self, now: float, only: list[int] | None) -> None:
        budget = self.limits.memory_max
        free = None if budget is None else budget - self.limits.mirror - self.counted_sum
        budget_cpu = self.limits.cpu_budget
        high_water_held = False
        closed: set[JobKey] = set()  # keys whose head found the slice short: so do the rest
        predictions: dict[JobKey, Prediction] = {}
        lists = self._in_order(only)
        merged = lists[0] if len(lists) == 1 else heapq.merge(*lists)
        for i in merged:
            job = self.jobs[i]
            key = job.key
            profile = key.profile
            if key in closed:
                continue
            if self.per_profile[profile] >= self.scenario.slots[profile] and self.shortcuts:
                closed.add(key)
                continue
            prediction = predictions.get(key)
            if prediction is None:  # the same for every copy until a job finishes
                prediction = predictions[key] = self._prediction(job, now)
            if self.shortcuts and free is not None and prediction.memory > free:
                closed.add(key)  # its copies predict the same: decide() refuses them all
                continue
            if self.shortcuts and high_water_held:
                self.held += 1  # the same slice reading holds every start back
                continue
            if self.shortcuts and self._cpu_refuses(str(i), prediction, now):
                self.cpu_held += 1  # a job already waiting for CPU that still does not fit
                continue
            outcome = self._decide(i, job, prediction, now)
            if outcome.state is not self.state:
                self.state = outcome.state
                if budget_cpu is not None:  # what _cpu_refuses reads
                    self._cpu_index()
            decision = outcome.decision
            if isinstance(decision, Admit):
                self._start(i, job, decision, now)
                if budget is not None:
                    free = budget - self.limits.mirror - self.counted_sum
            elif decision.resource == "cpu":
                self.cpu_held += 1
            elif decision.resource == "memory" and (free is None or prediction.memory <= free):
                self.held += 1  # the predictions had room: the high-water mark held it
                high_water_held = True

    def _cpu_index(self) -> None:
        waiting = self.state.cpu_waiting
        self.cpu_since = {w.scale_set: w.since for w in waiting}
        self.cpu_oldest = min((w.since for w in waiting), default=math.inf)
        self.cpu_taken = sum(r.reserved_cpu for r in self.running_list)

    def _cpu_refuses(self, scale_set: str, prediction: Prediction, now: float) -> bool:
        """What decide() answers for a job already held for CPU, without asking it again: the
        starvation rule (an older job held 2 minutes or more), then the budget. Only for
        waiters, whose state such a refusal leaves as it was."""
        total = self.limits.cpu_budget
        mine = self.cpu_since.get(scale_set)
        if total is None or mine is None:
            return False
        oldest = self.cpu_oldest  # the oldest waiter is the one that blocks younger ones
        if oldest < mine and now - oldest >= self.limits.cpu_starvation:
            return True
        return min(prediction.cpu, total) > total - self.cpu_taken + 1e-9

    def _decide(self, i: int, job: SizingRun, prediction: Prediction, now: float) -> Outcome:
        shape = self.profiles[job.key.profile]
        candidate = Candidate(
            name=str(i),
            profile=job.key.profile,
            scale_set=str(i),  # each job asks on its own, so the oldest starved one is known
            cap=shape.memory,
            cpus=shape.cpus,
            disk=0,
            slots=self.scenario.slots[job.key.profile],
            prediction=prediction,
        )
        reading = SliceReading(now, self.peak_sum + self.limits.mirror)
        return decide(
            candidate, self.running_list, reading, None, None, self.limits, self.state, now
        )

    def _start(self, i: int, job: SizingRun, admit: Admit, now: float) -> None:
        shape = self.profiles[job.key.profile]
        runner = Running(
            name=str(i),
            profile=job.key.profile,
            scale_set=str(i),
            cap=shape.memory,
            cpus=shape.cpus,
            reserved=admit.memory,
            reserved_cpu=admit.cpu,
            used=job.peak,
            used_at=math.inf,  # held at its peak, sampled continuously
        )
        del self.waiting[i]
        del self.queues[job.key][i]
        self.running[i] = runner
        self.cpu_taken += admit.cpu
        self.running_list = (*self.running_list, runner)
        self.per_profile[job.key.profile] += 1
        self.counted_sum += self._counted(runner, job)
        self.peak_sum += job.peak
        self.cpu_sum += job.avg_cpu or 0.0
        self.reserved_of[i] = admit.memory
        self.waits.append(now - job.arrived_at)
        if job.peak > admit.memory:
            self.under += 1
        self.at_once = max(self.at_once, len(self.running))
        self.worst_peaks = max(self.worst_peaks, self.peak_sum + self.limits.mirror)
        self.worst_cpu = max(self.worst_cpu, self.cpu_sum)
        duration = max(0.0, job.finished_at - job.started_at)
        heapq.heappush(self.heap, (now + duration, FINISH, i))

    def _result(self) -> ReplayResult:
        waits = sorted(self.waits)
        return ReplayResult(
            scenario=self.scenario,
            jobs=len(self.jobs),
            never_started=len(self.waiting),
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
