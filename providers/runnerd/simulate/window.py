"""A :class:`runnerd.predictor.Predictor` whose profile figures follow a sliding window.

The daemon's predictor recomputes a profile's p95 and largest peaks from all its runs at most
once a minute, which is cheap in real time and far too slow for a replay of 30 days in seconds
(43,200 recomputations of tens of thousands of runs). This one keeps each profile's counted
peaks and average CPUs in bucketed sorted lists, adding a run as it finishes and dropping runs
as they leave the window, so :meth:`profile` answers the same :class:`ProfileStats` that
:func:`runnerd.admission.predict.profile_stats` computes, at once. Job predictions are the
daemon's, unchanged.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable

from runnerd.admission.model import Run
from runnerd.admission.predict import PredictionRules, ProfileStats
from runnerd.history import JobKey
from runnerd.predictor import Predictor


class _SortedBag:
    """A sorted multiset in buckets of at most ``2 * LOAD``: adding or removing one value moves
    a bucket, not tens of thousands of values, and the p95 is a short walk from the top."""

    LOAD = 512
    __slots__ = ("buckets", "maxes", "size")

    def __init__(self) -> None:
        self.buckets: list[list[float]] = []
        self.maxes: list[float] = []
        self.size = 0

    def add(self, value: float) -> None:
        self.size += 1
        if not self.buckets:
            self.buckets.append([value])
            self.maxes.append(value)
            return
        k = min(bisect.bisect_left(self.maxes, value), len(self.maxes) - 1)
        bucket = self.buckets[k]
        bisect.insort(bucket, value)
        self.maxes[k] = bucket[-1]
        if len(bucket) > 2 * self.LOAD:
            self.buckets[k : k + 1] = [bucket[: self.LOAD], bucket[self.LOAD :]]
            self.maxes[k : k + 1] = [bucket[self.LOAD - 1], bucket[-1]]

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

    def nearest_rank(self, share: float) -> float:
        return self.at(math.ceil(share * self.size) - 1)


class _Window:
    __slots__ = ("cached", "cpus", "peaks", "runs")

    def __init__(self) -> None:
        self.runs: deque[Run] = deque()
        self.peaks = _SortedBag()
        self.cpus = _SortedBag()
        self.cached: ProfileStats | None = None

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
        return ProfileStats(
            runs=peaks.size,
            p95_peak=int(peaks.nearest_rank(0.95)),
            max_peak=int(peaks.maxes[-1]),
            cpu_runs=cpus.size,
            p95_cpu=cpus.nearest_rank(0.95) if cpus.size else 0.0,
            max_cpu=cpus.maxes[-1] if cpus.size else 0.0,
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
        super().add(key, run)
        self._windows.setdefault(key.profile, _Window()).add(run)

    def profile(self, name: str, now: float) -> ProfileStats:
        window = self._windows.get(name)
        if window is None:
            return ProfileStats()
        window.expire(now - self.window)
        return window.stats()
