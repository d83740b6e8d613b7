"""The replay's waiting jobs: one queue per job key, and the jobs held for CPU by when.

docs/admission.md, "CPU admission"; 100,000 jobs go through all policies in seconds. On an
overloaded host thousands of jobs wait for CPU, and a walk that visits each of them at every
event is what made a CPU replay take minutes. These structures let the walk of
:mod:`runnerd.simulate.replay` jump from one job :func:`runnerd.admission.decide` must be asked
about to the next, and count the held ones in between by bisection:

- :class:`KeyQueue`: a job key's waiting jobs (indices in queue order) and, among them, the ones
  not held for CPU yet ("fresh"), with what the current walk knows of the key.
- :class:`CpuWaiters`: the jobs held for CPU, grouped by when they were first held. A job joins
  when decide() first refuses it for CPU and leaves only by starting (the replay never forgets a
  waiter: a replayed job never stops asking), so the oldest group is the first one left.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import replace

from rungar.model.job_key import JobKey
from runnerd.admission import GuardState
from runnerd.admission.model import Candidate, CpuWaiter, Prediction
from runnerd.admission.predict import ProfileStats

NEVER = float("inf")


class Due:
    """A prediction as the replay's cache holds it: due at ``at`` for its job's runs, its
    profile's figures and the hour then, and computed when first read. It can be read later:
    while its stamp holds, no run of its job was added, so the answer is the one of ``at``."""

    __slots__ = ("at", "beside", "finished", "hour", "prediction", "stats")

    def __init__(self, beside: bool) -> None:
        self.beside = beside
        self.finished = -1  # never due yet
        self.stats = ProfileStats()
        self.hour = 0
        self.at = NEVER
        self.prediction: Prediction | None = None

    def holds(self, finished: int, stats: ProfileStats, hour: int) -> bool:
        mine = self.stats
        return (
            self.finished == finished
            and self.hour == hour
            # Figures that differ nearly always differ in their count of runs: a cheap look
            # before the comparison of every field.
            and (mine is stats or (mine.runs == stats.runs and mine == stats))
        )

    def renew(self, finished: int, stats: ProfileStats, hour: int, at: float) -> None:
        self.finished = finished
        self.stats = stats
        self.hour = hour
        self.at = at
        self.prediction = None


class KeyQueue:
    """One job key's waiting jobs. ``queue`` holds every waiting job, ``fresh`` those not held
    for CPU; both sorted (job indices are queue order)."""

    __slots__ = (
        "cached",
        "candidate",
        "cap_prediction",
        "cpus",
        "done_to",
        "due",
        "finished",
        "fresh",
        "key",
        "label",
        "memory",
        "present",
        "profile",
        "queue",
    )

    def __init__(self, key: JobKey, memory: int, cpus: float) -> None:
        self.key = key
        self.profile = key.profile
        self.memory = memory
        self.cpus = cpus
        self.queue: list[int] = []
        self.fresh: list[int] = []
        self.finished = 0  # its runs the replay finished, for the prediction cache
        self.present = 0  # copies queued or running, for "beside"
        self.cached = (Due(False), Due(True))  # alone, and beside another copy
        self.cap_prediction = Prediction(memory, cpus, "its profile's memory")
        self.label = f"{key.repository}/{key.workflow}/{key.job}"
        self.candidate: Candidate | None = None  # its jobs' question, where they share one
        self.due = self.cached[0]  # the prediction the current walk reads
        self.done_to = 0  # the current walk counted its held jobs before this one

    def add(self, i: int) -> None:
        bisect.insort(self.queue, i)
        bisect.insort(self.fresh, i)

    def remove(self, i: int) -> None:
        del self.queue[bisect.bisect_left(self.queue, i)]
        k = bisect.bisect_left(self.fresh, i)
        if k < len(self.fresh) and self.fresh[k] == i:
            del self.fresh[k]

    def held_for_cpu(self, i: int) -> None:
        del self.fresh[bisect.bisect_left(self.fresh, i)]

    def count(self, start: int, stop: float) -> int:
        """How many of its waiting jobs are in ``[start, stop)``."""
        queue = self.queue
        return bisect.bisect_left(queue, stop) - bisect.bisect_left(queue, start)

    def first(self, start: int) -> float:
        queue = self.queue
        k = bisect.bisect_left(queue, start)
        return queue[k] if k < len(queue) else NEVER


class CpuWaiters:
    """The jobs held for CPU, by job index, oldest first.

    decide() reads a state's waiters only for the candidate's own entry and for the oldest other
    one (the starvation rule: any older job that waited 2 minutes holds it back, and the oldest
    is the first such), and it changes only the candidate's entry; forgetting is off in a replay.
    So :meth:`view` hands it those two, and :meth:`settle` takes its answer back."""

    def __init__(self) -> None:
        self.entries: dict[int, CpuWaiter] = {}
        self.groups: dict[float, list[int]] = {}  # since -> job indices, sorted
        self.order: deque[float] = deque()  # the groups' since, oldest first

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, i: int) -> bool:
        return i in self.entries

    def oldest(self) -> float:
        return self.order[0] if self.order else NEVER

    def add(self, i: int, waiter: CpuWaiter) -> None:
        self.entries[i] = waiter
        group = self.groups.get(waiter.since)
        if group is None:
            group = self.groups[waiter.since] = []
            if self.order and waiter.since < self.order[-1]:  # times only move forward
                raise ValueError("a job held for CPU before the last one held")
            self.order.append(waiter.since)
        bisect.insort(group, i)

    def remove(self, i: int) -> None:
        since = self.entries.pop(i).since
        group = self.groups[since]
        del group[bisect.bisect_left(group, i)]
        if not group:
            del self.groups[since]
            self.order.remove(since)  # nearly always the first

    def view(self, i: int, base: GuardState) -> GuardState:
        """``base`` with the waiters decide() reads for job ``i``: its own entry and the oldest
        other one."""
        if not self.entries:
            return base
        mine = self.entries.get(i)
        group = self.groups[self.order[0]]
        other = group[0] if group[0] != i else group[1] if len(group) > 1 else None
        if other is None and len(self.order) > 1:
            other = self.groups[self.order[1]][0]
        ahead = None if other is None else self.entries[other]
        waiting: tuple[CpuWaiter, ...]
        if ahead is None:
            waiting = () if mine is None else (mine,)
        else:
            waiting = (ahead,) if mine is None else (ahead, mine)
        return replace(base, cpu_waiting=waiting)

    def settle(self, i: int, name: str, state: GuardState) -> bool:
        """Take decide()'s answer for job ``i`` (scale set ``name``) back; True when the job
        was first held for CPU by it."""
        now_waiting = None
        for waiter in state.cpu_waiting:
            if waiter.scale_set == name:
                now_waiting = waiter
                break
        was_waiting = i in self.entries
        if now_waiting is not None and not was_waiting:
            self.add(i, now_waiting)
            return True
        if now_waiting is None and was_waiting:
            self.remove(i)
        return False
