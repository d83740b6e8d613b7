"""The replay's state and its steps: predictions, starts, finishes, and asking decide().

docs/admission.md, "Try it first: runnerd simulate" and "CPU admission"; the loop and the table are
in :mod:`runnerd.simulate.replay`, the walks over the waiting jobs in :mod:`runnerd.simulate.walks`.
Every start is decided by :func:`runnerd.admission.decide`, the daemon's own function, with
predictions from the daemon's predictor fed the replayed runs as they finish. Each job asks as a
scale set of its own, so the oldest job held for CPU is known; decide() is handed the waiters it
reads (:meth:`runnerd.simulate.waiting.CpuWaiters.view`), or, with ``shortcuts=False`` (the
reference the tests compare against), all of them. Without a CPU budget nothing decide() answers
depends on who asks, and a key's jobs share one candidate.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from runnerd.admission import (
    Admit,
    Candidate,
    GuardState,
    Limits,
    Policy,
    Running,
    SliceReading,
    decide,
)
from runnerd.admission.admit import (
    at_high_water,
    counted_cpu,
    counted_memory,
    cpu_reserved,
    slice_free,
)
from runnerd.admission.model import Prediction, Run
from runnerd.admission.predict import ProfileStats
from runnerd.simulate.rows import ProfileShape, Scenario
from runnerd.simulate.waiting import NEVER, CpuWaiters, KeyQueue
from runnerd.simulate.window import WindowPredictor
from runnerd.sizing.runs import SizingRun

FINISH, WAKE = 0, 2  # finishes first at the same instant: they free room; arrivals are 1


class Replayer:
    """One scenario's replay state, and the steps the loop and the walks are made of."""

    def __init__(
        self,
        scenario: Scenario,
        profiles: Mapping[str, ProfileShape],
        jobs: Sequence[SizingRun],
        limits: Limits,
        predictor: WindowPredictor,
        shortcuts: bool = True,
    ) -> None:
        self.scenario = scenario
        self.slots = scenario.slots
        self.jobs = jobs
        self.arrived = [job.arrived_at for job in jobs]
        # Each job runs as long as it ran: from its own start, never its runner's idle time.
        self.durations = [max(0.0, job.finished_at - job.run_started_at) for job in jobs]
        self.limits = limits
        self.mirror = limits.mirror
        self.measured = limits.policy is Policy.MEASURED
        self.predictor = predictor
        self.shortcuts = shortcuts
        # Only CPU admission reads who asks (its waiters are scale sets): without a CPU budget
        # a key's jobs ask decide() as one candidate, made again when its prediction changes.
        self.own_candidates = limits.cpu_budget is not None or not shortcuts
        # By the key's fields: a tuple hashes and compares in C, a JobKey in Python.
        keys: dict[tuple[str, str, str, str], KeyQueue] = {}
        self.queue_of: list[KeyQueue] = []
        for job in jobs:
            key = job.key
            fields = (key.profile, key.repository, key.workflow, key.job)
            kq = keys.get(fields)
            if kq is None:
                shape = profiles[key.profile]
                kq = keys[fields] = KeyQueue(key, shape.memory, shape.cpus)
            self.queue_of.append(kq)
        self.nonempty: dict[KeyQueue, None] = {}  # keys with waiting jobs
        self.waiters = CpuWaiters()
        # The running runners' CPUs as counted_cpu counts them, summed in start order as
        # decide() sums them, or None: not summed since the last finish.
        self.cpu_summed: float | None = 0.0
        self.state = GuardState()  # what decide() keeps; its CPU waiters also in ``waiters``
        self.reading = SliceReading(NEVER, 0)  # the slice as decide() was last shown it
        # Profile figures as last read, good until a run of the profile finishes (see _finish)
        # or the oldest run in its window leaves it (``oldest``).
        self.stats: dict[str, ProfileStats] = {}
        self.oldest: dict[str, float] = {}
        self.window = predictor.window
        self.events = 0  # arrivals, finishes, starts and first holds for CPU so far
        # What the last walk that asked nothing left: events, hour, profile figures, held jobs.
        self.idle: tuple[int, int, dict[str, ProfileStats], int] | None = None
        self.waiting = 0
        self.running: dict[int, Running] = {}
        self.running_list: list[Running] | None = []  # in start order; None: rebuild it
        self.per_profile: dict[str, int] = dict.fromkeys(profiles, 0)
        # What the running runners count at against MemoryMax, as counted_memory counts them:
        # the replay's slice reading is always fresh and each runner's peak is its last use.
        self.counted_sum = 0
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

    def _profile(self, name: str, now: float) -> ProfileStats:
        stats = self.stats.get(name)
        if stats is None or self.oldest[name] < now - self.window:  # see WindowPredictor.oldest
            stats = self.stats[name] = self.predictor.profile(name, now)
            self.oldest[name] = self.predictor.oldest(name)
        return stats

    def _reach(
        self, kq: KeyQueue, now: float, hour: int, stats: ProfileStats | None = None
    ) -> None:
        """A walk reached the key: where the daemon's cache of predictions would look. A
        prediction changes only with its job's runs, its profile's figures, or time passing a
        hold's or the window's edge: a new one is due when any of them moved (time by the
        hour), and computed when read (:meth:`_predicted`)."""
        if not self.measured:
            return
        if stats is None:  # else the walk's, read once for each profile (see Walks._reached)
            stats = self._profile(kq.profile, now)
        due = kq.cached[kq.present > 1]  # alone, or beside another copy
        if not due.holds(kq.finished, stats, hour):
            due.renew(kq.finished, stats, hour, now)
        kq.due = due

    def _predicted(self, kq: KeyQueue, now: float) -> Prediction:
        due = kq.due
        if not self.measured:
            return kq.cap_prediction
        if due.prediction is None:
            # predict_job() as it answered when the prediction was due, now or at an earlier
            # walk that did not need it: the profile's figures of then are the due's.
            due.prediction = self.predictor.predict_with(
                kq.key, due.stats, kq.memory, kq.cpus, due.at, due.beside
            )
        return due.prediction

    def _short(self, kq: KeyQueue, free: int | None, now: float) -> bool:
        """The slice is short of the key's prediction: decide() refuses its jobs. A prediction
        never exceeds the cap, so a cap that fits needs no prediction read."""
        return free is not None and kq.memory > free and self._predicted(kq, now).memory > free

    def _all(self) -> list[int]:
        return sorted(i for kq in self.nonempty for i in kq.queue)

    def _finish(self, i: int, now: float) -> None:
        job = self.jobs[i]
        kq = self.queue_of[i]
        runner = self.running.pop(i)
        self.running_list = None  # rebuilt when next read: finishes often come together
        self.cpu_summed = None
        self.per_profile[kq.profile] -= 1
        peak = job.peak
        self.counted_sum -= counted_memory(runner, self.limits, True, now)
        self.peak_sum -= peak
        self.cpu_sum -= job.avg_cpu or 0.0
        kq.present -= 1
        self.events += 1
        if self.measured:  # under caps nothing reads a prediction
            # job.as_run(reserved=...), finishing now: the run as the replay ran it
            run = Run(now, job.result, peak, job.cap, job.avg_cpu, job.met_cap,
                      job.killed_for_memory, runner.reserved)  # fmt: skip
            self.predictor.add(kq.key, run)
            self.stats.pop(kq.profile, None)
            kq.finished += 1
        self.last_finish = now

    def _at_high_water(self) -> bool:
        """The slice reads at or over the high-water mark: decide() holds back every job that
        has a slot, before it looks at CPU."""
        return self.measured and at_high_water(self.peak_sum + self.mirror, self.limits)

    def _free(self) -> int | None:
        return slice_free(self.limits, self.counted_sum)

    # ---- asking decide() ---------------------------------------------------------------

    def _ask(self, i: int, kq: KeyQueue, prediction: Prediction, now: float) -> str:
        """Ask decide() about job ``i`` and act on its answer: "start", or the resource that
        held it back."""
        name = str(i)
        whole = not self.shortcuts  # the reference hands decide() every waiter
        state = self.state
        asked = state if whole or not self.waiters.entries else self.waiters.view(i, state)
        shared = None if self.own_candidates else kq.candidate  # see own_candidates
        if shared is not None and shared.prediction is prediction:
            candidate = shared
        else:
            # With a CPU budget each job asks as a scale set of its own, so the oldest starved
            # one is known; without one a key's jobs share a candidate (see own_candidates).
            who = name if self.own_candidates else kq.label
            candidate = Candidate(who, kq.profile, who, kq.memory, kq.cpus, 0,
                                  self.slots[kq.profile], prediction)  # fmt: skip
            if not self.own_candidates:
                kq.candidate = candidate
        reading = self.reading  # the same until the time or the running jobs change
        if reading.at != now or reading.memory != self.peak_sum + self.mirror:
            reading = self.reading = SliceReading(now, self.peak_sum + self.mirror)
        outcome = decide(candidate, self._running(), reading, None, None, self.limits, asked, now)
        new = outcome.state
        if whole:
            self.state = new
        elif new.stalled != state.stalled or new.widened != state.widened:
            self.state = replace(new, cpu_waiting=())  # the waiters are kept apart
        if self.waiters.settle(i, name, new):
            kq.held_for_cpu(i)
            self.events += 1
        decision = outcome.decision
        if isinstance(decision, Admit):
            self._start(i, name, kq, decision, now)
            return "start"
        return decision.resource

    def _running(self) -> list[Running]:
        running = self.running_list
        if running is None:
            running = self.running_list = list(self.running.values())
        return running

    def _summed_cpu(self) -> float:
        """What decide() sums the running runners' CPUs to, in its order. A start adds its
        runner last, so the sum moves along with it; a finish has it summed again."""
        summed = self.cpu_summed
        if summed is None:
            summed = self.cpu_summed = cpu_reserved(self._running(), self.limits)
        return summed

    def _start(self, i: int, name: str, kq: KeyQueue, admit: Admit, now: float) -> None:
        job = self.jobs[i]
        peak = job.peak
        reserved = admit.memory
        # Held at its peak, sampled continuously: it was last used "at infinity".
        runner = Running(name, kq.profile, name, kq.memory, kq.cpus, reserved, admit.cpu,
                         peak, math.inf)  # fmt: skip
        kq.remove(i)
        if not kq.queue:
            del self.nonempty[kq]
        self.waiting -= 1
        self.events += 1
        running = self.running
        running[i] = runner
        if self.cpu_summed is not None:
            self.cpu_summed += counted_cpu(runner, self.limits)
        self._running().append(runner)
        self.per_profile[kq.profile] += 1
        self.counted_sum += counted_memory(runner, self.limits, True, now)
        self.peak_sum += peak
        self.cpu_sum += job.avg_cpu or 0.0
        self.waits.append(now - self.arrived[i])
        if peak > reserved:
            self.under += 1
        if len(running) > self.at_once:
            self.at_once = len(running)
        if self.peak_sum + self.mirror > self.worst_peaks:
            self.worst_peaks = self.peak_sum + self.mirror
        if self.cpu_sum > self.worst_cpu:
            self.worst_cpu = self.cpu_sum
        heapq.heappush(self.heap, (now + self.durations[i], FINISH, i))

    def _count(self, answer: str, prediction: Prediction, free: int | None) -> bool:
        """Count decide()'s answer; True when the high-water mark held the job back."""
        if answer == "cpu":
            self.cpu_held += 1
        elif answer == "memory" and (free is None or prediction.memory <= free):
            self.held += 1  # the predictions had room: the high-water mark held it
            return True
        return False
