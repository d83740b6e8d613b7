"""A :class:`runnerd.predictor.Predictor` whose profile figures follow a sliding window.

The daemon's predictor recomputes a profile's p95 and largest peaks from all its runs at most
once a minute, which is cheap in real time and far too slow for a replay of 30 days in seconds
(43,200 recomputations of tens of thousands of runs). This one keeps each profile's counted
peaks and average CPUs in sorted lists, adding a run as it finishes and dropping runs as they
leave the window, so :meth:`profile` answers the same :class:`ProfileStats` that
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


class _Window:
    __slots__ = ("cpus", "peaks", "runs")

    def __init__(self) -> None:
        self.runs: deque[Run] = deque()
        self.peaks: list[int] = []
        self.cpus: list[float] = []

    def add(self, run: Run) -> None:
        if run.cancelled and not run.met_cap:
            return  # profile_stats leaves these out
        self.runs.append(run)
        bisect.insort(self.peaks, run.counted_peak)
        if run.succeeded and run.avg_cpu is not None:
            bisect.insort(self.cpus, run.avg_cpu)

    def expire(self, start: float) -> None:
        while self.runs and self.runs[0].finished_at < start:
            run = self.runs.popleft()
            del self.peaks[bisect.bisect_left(self.peaks, run.counted_peak)]
            if run.succeeded and run.avg_cpu is not None:
                del self.cpus[bisect.bisect_left(self.cpus, run.avg_cpu)]

    def stats(self) -> ProfileStats:
        if not self.peaks:
            return ProfileStats()
        peaks, cpus = self.peaks, self.cpus
        return ProfileStats(
            runs=len(peaks),
            p95_peak=peaks[math.ceil(0.95 * len(peaks)) - 1],
            max_peak=peaks[-1],
            cpu_runs=len(cpus),
            p95_cpu=cpus[math.ceil(0.95 * len(cpus)) - 1] if cpus else 0.0,
            max_cpu=cpus[-1] if cpus else 0.0,
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
