"""A :class:`runnerd.predictor.Predictor` whose profile figures follow a sliding window.

The daemon's predictor recomputes a profile's p95 and largest peaks from all its runs at most
once a minute, which is cheap in real time and far too slow for a replay of 30 days in seconds
(43,200 recomputations of tens of thousands of runs). This one keeps the top of each profile's
counted peaks and average CPUs in bucketed sorted lists (the p95 and the largest are among
them; the rest are only counted), adding a run as it finishes and dropping runs as they leave
the window, so :meth:`profile` answers the same :class:`ProfileStats` that
:func:`runnerd.admission.predict.profile_stats` computes, at once. Job predictions are the
daemon's, unchanged; a run added as it finishes skips the daemon's per-profile lists, which
nothing here reads.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from rungar.model.job_key import JobKey
from runnerd.admission.model import Run
from runnerd.admission.predict import PredictionRules, ProfileStats
from runnerd.predictor import Predictor


class _SortedBag:
    """A sorted multiset in buckets of at most ``2 * LOAD``: adding or removing one value moves
    a bucket, not tens of thousands of values, and the p95 is a short walk from the top."""

    LOAD = 512
    __slots__ = ("buckets", "maxes", "size")

    def __init__(self, ordered: Sequence[float] = ()) -> None:
        load = self.LOAD
        self.buckets = [list(ordered[k : k + load]) for k in range(0, len(ordered), load)]
        self.maxes = [bucket[-1] for bucket in self.buckets]
        self.size = len(ordered)

    def add(self, value: float) -> None:
        self.size += 1
        maxes = self.maxes
        if not maxes:
            self.buckets.append([value])
            maxes.append(value)
            return
        k = bisect.bisect_left(maxes, value)
        if k == len(maxes):  # a new largest
            k -= 1
            maxes[k] = value
        bucket = self.buckets[k]
        bisect.insort(bucket, value)
        if len(bucket) > 2 * self.LOAD:
            self.buckets[k : k + 1] = [bucket[: self.LOAD], bucket[self.LOAD :]]
            maxes[k : k + 1] = [bucket[self.LOAD - 1], bucket[-1]]

    def remove(self, value: float) -> None:
        k = bisect.bisect_left(self.maxes, value)
        bucket = self.buckets[k]
        del bucket[bisect.bisect_left(bucket, value)]
        self.size -= 1
        if bucket:
            self.maxes[k] = bucket[-1]
        else:
            del self.buckets[k], self.maxes[k]

    def at(self, index: int) -> float:
        """The value at ``index`` of the sorted values, walked to from the top end."""
        from_top = self.size - 1 - index
        for bucket in reversed(self.buckets):
            if from_top < len(bucket):
                return bucket[len(bucket) - 1 - from_top]
            from_top -= len(bucket)
        raise IndexError(index)


class _UpperTail:
    """A window's values as their p95 (nearest rank) and largest read them: only the values at
    or above ``floor`` are kept sorted, the rest are counted. The p95 of tens of thousands of
    runs is among the top few hundred, so most runs that come and go cost a comparison, not a
    sorted insert. When the kept values no longer reach down to the p95, or have grown far past
    it, the floor is set again from every value in the window (``values``)."""

    SLACK = 256  # values kept beyond twice the p95's distance from the top
    __slots__ = ("floor", "size", "top", "values")

    def __init__(self, values: Callable[[], list[float]]) -> None:
        self.values = values
        self.floor = -math.inf
        self.top = _SortedBag()
        self.size = 0

    def add(self, value: float) -> None:
        self.size += 1
        if value >= self.floor:
            self.top.add(value)

    def remove(self, value: float) -> None:
        self.size -= 1
        if value >= self.floor:
            self.top.remove(value)

    def nearest_rank(self, share: float) -> float:
        """The value at ``ceil(share * size) - 1`` of all the values, sorted."""
        from_top = self.size - math.ceil(share * self.size)
        if not from_top < self.top.size <= 4 * from_top + 2 * self.SLACK:
            self._set_floor(2 * from_top + self.SLACK)
        top = self.top
        return top.at(top.size - 1 - from_top)

    def largest(self) -> float:
        """The largest value; read after :meth:`nearest_rank`, which keeps one above the floor."""
        return self.top.maxes[-1]

    def _set_floor(self, keep: int) -> None:
        ordered = sorted(self.values())
        self.floor = ordered[-keep] if keep < len(ordered) else -math.inf
        # Every value equal to the floor is kept, so the kept ones are a run of the sorted.
        self.top = _SortedBag(ordered[bisect.bisect_left(ordered, self.floor) :])


class _Window:
    __slots__ = ("cached", "cpus", "peaks", "runs")

    def __init__(self) -> None:
        self.runs: deque[Run] = deque()
        self.peaks = _UpperTail(self._peaks)
        self.cpus = _UpperTail(self._cpus)
        self.cached: ProfileStats | None = None

    def _peaks(self) -> list[float]:
        return [run.counted_peak for run in self.runs]

    def _cpus(self) -> list[float]:
        return [run.avg_cpu for run in self.runs if run.succeeded and run.avg_cpu is not None]

    def add(self, run: Run) -> None:
        if run.cancelled and not run.met_cap:
            return  # profile_stats leaves these out
        self.cached = None
        self.runs.append(run)
        self.peaks.add(run.counted_peak)
        if run.succeeded and run.avg_cpu is not None:
            self.cpus.add(run.avg_cpu)

    def expire(self, start: float) -> None:
        while self.runs and self.runs[0].finished_at < start:
            run = self.runs.popleft()
            self.cached = None
            self.peaks.remove(run.counted_peak)
            if run.succeeded and run.avg_cpu is not None:
                self.cpus.remove(run.avg_cpu)

    def stats(self) -> ProfileStats:
        if self.cached is None:
            self.cached = self._stats()
        return self.cached

    def _stats(self) -> ProfileStats:
        peaks, cpus = self.peaks, self.cpus
        if not peaks.size:
            return ProfileStats()
        p95_peak = peaks.nearest_rank(0.95)
        p95_cpu = max_cpu = 0.0
        if cpus.size:
            p95_cpu = cpus.nearest_rank(0.95)
            max_cpu = cpus.largest()
        return ProfileStats(
            runs=peaks.size,
            p95_peak=int(p95_peak),
            max_peak=int(peaks.largest()),
            cpu_runs=cpus.size,
            p95_cpu=p95_cpu,
            max_cpu=max_cpu,
        )


class WindowPredictor(Predictor):
    """Runs must be added in finish order, as a replay finishes them."""

    def __init__(self, rules: PredictionRules, window: float = 30 * 86400.0) -> None:
        super().__init__(rules, window)
        self._windows: dict[str, _Window] = {}

    def load(self, rows: Iterable[tuple[JobKey, Run]], now: float) -> None:
        rows = list(rows)
        super().load(rows, now)
        self._windows = {}
        for key, run in rows:
            self._windows.setdefault(key.profile, _Window()).add(run)

    def add(self, key: JobKey, run: Run) -> None:
        # The base class's per-profile runs and figures are never read here: only the job's.
        self._append_to_job(key, run)
        window = self._windows.get(key.profile)
        if window is None:
            window = self._windows[key.profile] = _Window()
        window.add(run)

    def oldest(self, name: str) -> float:
        """When the oldest run in the profile's window finished, as :meth:`profile` last left
        it: the figures stay as they are at any ``now`` with ``now - window`` not past it, until
        a run is added."""
        window = self._windows.get(name)
        return window.runs[0].finished_at if window is not None and window.runs else math.inf

    def profile(self, name: str, now: float) -> ProfileStats:
        window = self._windows.get(name)
        if window is None:
            return ProfileStats()
        start = now - self.window
        runs = window.runs
        if runs and runs[0].finished_at < start:  # a run leaves the window (see expire)
            window.expire(start)
        cached = window.cached
        return cached if cached is not None else window.stats()
