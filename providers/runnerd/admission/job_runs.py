"""One job's runs, indexed so its :class:`JobFacts` cost a few bisections, not a scan.

docs/admission.md, "Measured admission"; ``runnerd simulate`` replays 30 days of 100,000 jobs in
seconds. :func:`runnerd.admission.predict.job_facts` scans up to a few hundred runs per
prediction; the daemon and the replay ask for predictions far more often than a job finishes, so
this keeps, beside the runs (oldest first), what the facts are made of: prefix counts, the
positions of successes, running maxima as monotonic stacks (the largest value from any position
on is the first stack entry at or after it), the last cap hit and whether 3 clean runs followed
it, and the average CPUs kept sorted for their p95. Runs only ever join at the end and leave
from the front (the window and the trim), which is what makes every answer a bisection.

The window start is found by bisection on finish times, as the predictor always did: runs must
arrive in finish order. One that does not (a clock stepped back) turns the index off and the
facts come from the scan, so the answer is the same either way; tests compare the two.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import replace

from runnerd.admission.model import OverRun, Run
from runnerd.admission.predict import (
    CLEAN_RUNS,
    JobFacts,
    PredictionRules,
    job_facts,
    needed_successes,
    recent_successes,
)


class _MaxStack:
    """Positions with strictly decreasing values: the largest value at or after any position."""

    __slots__ = ("at", "values")

    def __init__(self) -> None:
        self.at: list[int] = []
        self.values: list[float] = []

    def push(self, at: int, value: float) -> None:
        while self.values and self.values[-1] <= value:
            self.values.pop()
            self.at.pop()
        self.at.append(at)
        self.values.append(value)

    def drop(self, count: int) -> None:
        """Forget the first ``count`` positions; the rest move down by as many. What is left
        is the stack of the later positions alone: each stays larger than everything after."""
        first = bisect.bisect_left(self.at, count)
        self.at = _shifted(self.at, first, count)
        del self.values[:first]

    def largest_from(self, start: int) -> float | None:
        k = bisect.bisect_left(self.at, start)
        return self.values[k] if k < len(self.at) else None


def _shifted(positions: list[int], first: int, by: int) -> list[int]:
    return [at - by for at in positions[first:]]


class JobRuns:
    """A job's runs, oldest first, with the index behind :meth:`facts`."""

    def __init__(self, runs: Sequence[Run] = ()) -> None:
        self._rebuild(list(runs))

    def _rebuild(self, runs: list[Run]) -> None:
        self.runs: list[Run] = []
        self.ends: list[float] = []
        self.ordered = True
        self._not_cancelled = [0]  # prefix counts
        self._counted_at: list[int] = []
        self._counted_peaks: list[int] = []
        self._success_at: list[int] = []
        self._own = _MaxStack()
        self._over = _MaxStack()  # runs past their reservation, by peak
        self._last_hit = -1
        self._streak = 0
        self._cleared = False
        self._cpu_at: list[int] = []
        self._cpus: list[float] = []
        self._cpu_max = _MaxStack()
        self._sorted_cpus: list[float] = []  # self._cpus[_sorted_from:_sorted_to], sorted
        self._sorted_from = self._sorted_to = 0
        self._memo: tuple[int, PredictionRules, JobFacts] | None = None  # start, rules, facts
        for run in runs:
            self.append(run)

    def __len__(self) -> int:
        return len(self.runs)

    def append(self, run: Run) -> None:
        self._memo = None
        i = len(self.runs)
        ends = self.ends
        finished_at = run.finished_at
        if ends and finished_at < ends[-1]:
            self.ordered = False
        self.runs.append(run)
        ends.append(finished_at)
        cancelled = run.cancelled
        succeeded = run.succeeded
        not_cancelled = self._not_cancelled
        not_cancelled.append(not_cancelled[-1] + (not cancelled))
        if not cancelled or run.met_cap:
            counted_peak = run.counted_peak
            self._counted_at.append(i)
            self._counted_peaks.append(counted_peak)
            self._own.push(i, counted_peak)
            if succeeded:
                self._success_at.append(i)
        if run.reserved is not None and run.peak > run.reserved:  # cancelled or not
            self._over.push(i, run.peak)
        if run.met_cap or run.killed_for_memory:
            self._last_hit, self._streak, self._cleared = i, 0, False
        elif self._last_hit >= 0:
            self._streak = self._streak + 1 if succeeded or cancelled else 0
            self._cleared = self._cleared or self._streak >= CLEAN_RUNS
        if succeeded and run.avg_cpu is not None:
            self._cpu_at.append(i)
            self._cpus.append(run.avg_cpu)
            self._cpu_max.push(i, run.avg_cpu)

    def keep_last(self, keep: int) -> None:
        """Drop all but the last ``keep`` runs, leaving the index as one built from them: a
        busy job is trimmed every few hundred runs, and rebuilding doubled what adding cost."""
        drop = len(self.runs) - keep
        if drop <= 0:
            return
        if not self.ordered:  # the kept runs may be in order again: look afresh
            self._rebuild(self.runs[drop:])
            return
        self._memo = None
        del self.runs[:drop], self.ends[:drop]
        del self._not_cancelled[:drop]  # prefix counts: only their differences are read
        first = bisect.bisect_left(self._counted_at, drop)
        self._counted_at = _shifted(self._counted_at, first, drop)
        del self._counted_peaks[:first]
        first = bisect.bisect_left(self._success_at, drop)
        self._success_at = _shifted(self._success_at, first, drop)
        for stack in (self._own, self._over, self._cpu_max):
            stack.drop(drop)
        if self._last_hit < drop:  # the hit is gone, and with it the hold and its streak
            self._last_hit, self._streak, self._cleared = -1, 0, False
        else:
            self._last_hit -= drop
        first = bisect.bisect_left(self._cpu_at, drop)
        self._cpu_at = _shifted(self._cpu_at, first, drop)
        del self._cpus[:first]
        self._sorted_cpus = []
        self._sorted_from = self._sorted_to = 0

    def window_start(self, since: float) -> int:
        """The position of the first run that finished at or after ``since``."""
        return bisect.bisect_left(self.ends, since)

    def facts(self, start: int, rules: PredictionRules, now: float) -> JobFacts:
        """:func:`job_facts` of ``self.runs[start:]``.

        Only the cap hold and the recent run past its reservation move with ``now`` alone; the
        rest changes with the runs or the window's start, so it is kept until they move (a
        replay asks about the same runs at each of thousands of instants)."""
        if not self.ordered:
            return job_facts(self.runs[start:], rules, now)
        on_hold = self._on_hold(start, now, rules.hold_for)
        over_peak = self._over_peak(self._held_from(start, rules), now, rules.hold_for)
        memo = self._memo
        if memo is not None and memo[0] == start and memo[1] is rules:
            facts = memo[2]
            if facts.on_hold == on_hold and facts.over_peak == over_peak:
                return facts
            facts = replace(facts, on_hold=on_hold, over_peak=over_peak)
        else:
            facts = self._facts(start, rules, on_hold, over_peak)
        self._memo = (start, rules, facts)
        return facts

    def _facts(
        self, start: int, rules: PredictionRules, on_hold: bool, over_peak: int | None
    ) -> JobFacts:
        n = len(self.runs)
        counted_from = bisect.bisect_left(self._counted_at, start)
        counted = len(self._counted_at) - counted_from
        successes = len(self._success_at) - bisect.bisect_left(self._success_at, start)
        recent_p95 = recent_runs = 0
        if successes >= needed_successes(rules):
            oldest = self.ends[self._success_at[-min(successes, recent_successes(rules))]]
            first = max(start, bisect.bisect_left(self.ends, oldest))
            window = sorted(self._counted_peaks[bisect.bisect_left(self._counted_at, first) :])
            recent_runs = len(window)
            recent_p95 = window[math.ceil(0.95 * recent_runs) - 1]
        own = self._own.largest_from(start)
        over_own = self._own.largest_from(self._held_from(start, rules))
        cpu_runs, cpu_p95, cpu_max = self._cpu_facts(start, rules.min_jobs)
        return JobFacts(
            runs=n - start,
            all_cancelled=n > start and self._not_cancelled[n] == self._not_cancelled[start],
            on_hold=on_hold,
            counted=counted,
            successes=successes,
            recent_p95=recent_p95,
            recent_runs=recent_runs,
            own=int(own) if own is not None else 0,
            over_peak=over_peak,
            over_own=int(over_own) if over_own is not None else 0,
            cpu_runs=cpu_runs,
            cpu_p95=cpu_p95,
            cpu_max=cpu_max,
        )

    def _held_from(self, start: int, rules: PredictionRules) -> int:
        """Where the runs a run past its reservation is held among begin: its recent runs
        (from the oldest of the last max(20, min_jobs) successes) by default, the window's
        start under ``over_run = "window"``."""
        if rules.over_run is not OverRun.RECENT:
            return start
        recent = recent_successes(rules)
        first = bisect.bisect_left(self._success_at, start)
        if len(self._success_at) - first < recent:
            return start
        since = self.ends[self._success_at[-recent]]
        return max(start, bisect.bisect_left(self.ends, since))

    def _on_hold(self, start: int, now: float, hold_for: float) -> bool:
        hit = self._last_hit
        if hit < start or now - self.ends[hit] > hold_for:
            return False
        return not self._cleared

    def _over_peak(self, start: int, now: float, hold_for: float) -> int | None:
        at = self._over.at
        if not at or at[-1] < start:
            return None
        # The first run recent enough, by the scan's own test (finish times are ordered).
        lo, hi = start, len(self.ends)
        while lo < hi:
            mid = (lo + hi) // 2
            if now - self.ends[mid] <= hold_for:
                hi = mid
            else:
                lo = mid + 1
        peak = self._over.largest_from(lo)
        return int(peak) if peak is not None else None

    def _cpu_facts(self, start: int, min_jobs: int) -> tuple[int, float, float]:
        first = bisect.bisect_left(self._cpu_at, start)
        count = len(self._cpus) - first
        largest = self._cpu_max.largest_from(start)
        p95 = 0.0
        if count >= min_jobs and count:
            ordered = self._sorted_window(first)
            p95 = ordered[math.ceil(0.95 * count) - 1]
        return count, p95, largest if largest is not None else 0.0

    def _sorted_window(self, first: int) -> list[float]:
        """``sorted(self._cpus[first:])``, moved along rather than re-sorted each time."""
        end = len(self._cpus)
        if first < self._sorted_from:
            self._sorted_cpus = sorted(self._cpus[first:])
        else:
            ordered = self._sorted_cpus
            for value in self._cpus[self._sorted_from : min(first, self._sorted_to)]:
                del ordered[bisect.bisect_left(ordered, value)]
            for value in self._cpus[max(first, self._sorted_to) : end]:
                bisect.insort(ordered, value)
        self._sorted_from, self._sorted_to = first, end
        return self._sorted_cpus
