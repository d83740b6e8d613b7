"""The daemon's in-memory index of the job history, for predictions at thousands per second.

docs/admission.md, "Measured admission". ``Predictor`` re-reads the history at most once a minute
over 30 days, so a prediction costs no database read. Runs are grouped by job key and by profile
when loaded; a finished job is added as it finishes, so a re-read only catches what another writer
added. The rules themselves are the pure functions of :mod:`runnerd.admission.predict`; each job's
runs are a :class:`runnerd.admission.job_runs.JobRuns`, whose facts cost bisections, not a scan, and
a job's last prediction is given again while its facts and the profile figures the rules read are
unchanged.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from rungar.model.job_key import JobKey
from rungar.model.machine import JobHint
from runnerd.admission.job_runs import JobRuns
from runnerd.admission.model import Prediction, Run
from runnerd.admission.predict import (
    RECENT_RUNS,
    JobFacts,
    PredictionRules,
    ProfileStats,
    largest,
    predict,
    predict_from_facts,
    profile_stats,
)
from runnerd.admission.room import DURATIONS_KEPT, MIN_DURATIONS


def _durations(runs: Sequence[Run]) -> list[float]:
    """The last durations of ``runs`` (oldest first), cancelled ones left out."""
    found: list[float] = []
    for run in reversed(runs):
        if run.duration is not None and not run.cancelled:
            found.append(run.duration)
            if len(found) >= DURATIONS_KEPT:
                break
    return found


# Enough runs per job for a p95 over max(20, min_jobs) successes with failures among them and
# for a cap hold's clean streak; older runs of a very busy job cannot change a prediction.
KEEP_FACTOR = 5


class _Last(NamedTuple):
    """A prediction and what it was made from."""

    facts: JobFacts
    profile: ProfileStats
    cap: int
    cpus: float
    prediction: Prediction


class _Job:
    """A job's runs, and its last prediction alone and beside another copy: predictions are
    asked for far more often than the figures they read change (a replay asks again after
    every run of the job's profile, which changes the profile's count of runs)."""

    __slots__ = ("last", "runs")

    def __init__(self) -> None:
        self.runs = JobRuns()
        self.last: list[_Last | None] = [None, None]


def _same_figures_read(one: ProfileStats, other: ProfileStats, rules: PredictionRules) -> bool:
    """The tiers read a profile's counts of runs only against ``min_jobs``, its other figures
    as they are: profiles that agree on these give the same prediction from the same facts."""
    return one is other or (
        (one.runs < rules.min_jobs) == (other.runs < rules.min_jobs)
        and (one.cpu_runs < rules.min_jobs) == (other.cpu_runs < rules.min_jobs)
        and one.p95_peak == other.p95_peak
        and one.max_peak == other.max_peak
        and one.p95_cpu == other.p95_cpu
        and one.max_cpu == other.max_cpu
    )


class Predictor:
    def __init__(self, rules: PredictionRules, window: float = 30 * 86400.0, reread: float = 60.0):
        self.rules = rules
        self.window = window
        self.reread = reread
        self.loaded_at = float("-inf")
        self._jobs: dict[JobKey, _Job] = {}
        self._profiles: dict[str, list[Run]] = {}
        self._stats: dict[str, tuple[float, ProfileStats]] = {}
        self._keep = KEEP_FACTOR * max(RECENT_RUNS, rules.min_jobs)

    def due(self, now: float) -> bool:
        return now - self.loaded_at >= self.reread

    def load(self, rows: Iterable[tuple[JobKey, Run]], now: float) -> None:
        """Replace the index with ``rows`` (oldest first), as read from the history."""
        self._jobs, self._profiles, self._stats = {}, {}, {}
        for key, run in rows:
            self._append(key, run)
        self.loaded_at = now

    def add(self, key: JobKey, run: Run) -> None:
        self._append(key, run)
        self._stats.pop(key.profile, None)

    def _append(self, key: JobKey, run: Run) -> None:
        self._append_to_job(key, run)
        self._profiles.setdefault(key.profile, []).append(run)

    def _append_to_job(self, key: JobKey, run: Run) -> None:
        job = self._jobs.get(key)
        if job is None:
            job = self._jobs[key] = _Job()
        runs = job.runs
        runs.append(run)
        if len(runs.runs) > 2 * self._keep:
            runs.keep_last(self._keep)

    def runs(self, key: JobKey, now: float) -> Sequence[Run]:
        job = self._jobs.get(key)
        if job is None:
            return []
        return job.runs.runs[job.runs.window_start(now - self.window) :]

    def durations(self, key: JobKey, now: float) -> list[float]:
        """The job's last durations (:data:`runnerd.admission.room.DURATIONS_KEPT`, cancelled
        runs left out); its profile's when it has fewer than
        :data:`~runnerd.admission.room.MIN_DURATIONS`."""
        own = _durations(self.runs(key, now))
        if len(own) >= MIN_DURATIONS:
            return own
        runs = self._profiles.get(key.profile, [])
        start = bisect.bisect_left(runs, now - self.window, key=lambda r: r.finished_at)
        return _durations(runs[start:])

    def profile(self, name: str, now: float) -> ProfileStats:
        cached = self._stats.get(name)
        if cached is not None and now - cached[0] < self.reread:
            return cached[1]
        runs = self._profiles.get(name, [])
        start = bisect.bisect_left(runs, now - self.window, key=lambda r: r.finished_at)
        if start:
            del runs[:start]
        stats = profile_stats(runs)
        self._stats[name] = (now, stats)
        return stats

    def predict_job(
        self, key: JobKey, cap: int, cpus: float, now: float, beside: bool = False
    ) -> Prediction:
        return self.predict_with(key, self.profile(key.profile, now), cap, cpus, now, beside)

    def predict_with(
        self,
        key: JobKey,
        profile: ProfileStats,
        cap: int,
        cpus: float,
        now: float,
        beside: bool = False,
    ) -> Prediction:
        """:meth:`predict_job` with its profile's figures given: what it answered at ``now``,
        also later, while no run of the job was added (``runnerd simulate`` reads a prediction
        after the instant it was due)."""
        job = self._jobs.get(key)
        if job is None:
            return predict([], profile, cap, cpus, self.rules, now, beside)
        runs, rules = job.runs, self.rules
        facts = runs.facts(runs.window_start(now - self.window), rules, now)
        last = job.last[beside]
        if (
            last is not None
            and last.facts is facts  # the job's facts are kept while its runs and time allow
            and last.cap == cap
            and last.cpus == cpus
            and _same_figures_read(last.profile, profile, rules)
        ):
            return last.prediction
        prediction = predict_from_facts(facts, profile, cap, cpus, rules, beside)
        job.last[beside] = _Last(facts, profile, cap, cpus, prediction)
        return prediction

    def predict_runner(
        self,
        profile: str,
        hints: Sequence[JobHint],
        cap: int,
        cpus: float,
        now: float,
        busy_keys: frozenset[JobKey] = frozenset(),
        busy_repositories: frozenset[str] = frozenset(),
    ) -> Prediction:
        """A runner before its job is known: the largest prediction of its queued jobs.

        A copy beside another (the same job running, queued twice, or a repository with a busy
        runner whose job is not known yet) takes the larger of its own and its profile's p95.
        """
        keys = [JobKey(profile, h.repository, h.workflow, h.job) for h in hints if h.job]
        if not keys:
            stats = self.profile(profile, now)
            return predict([], stats, cap, cpus, self.rules, now)
        predictions = [
            self.predict_job(
                key,
                cap,
                cpus,
                now,
                beside=key in busy_keys
                or keys.count(key) > 1
                or key.repository in busy_repositories,
            )
            for key in dict.fromkeys(keys)
        ]
        return largest(predictions, len(keys))
