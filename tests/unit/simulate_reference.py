"""The straightforward predictor the replay's tests compare the fast one against."""

from __future__ import annotations

from collections.abc import Iterable

from runnerd.admission import PredictionRules
from runnerd.admission.model import Prediction, Run
from runnerd.admission.predict import ProfileStats, predict, profile_stats
from runnerd.history import JobKey
from runnerd.simulate.window import WindowPredictor


class ScanPredictor(WindowPredictor):
    """Predictions by scanning: every profile figure recomputed from all of its runs in the
    window, a job's facts from its runs, also for a prediction read after the instant it was
    due."""

    def __init__(self, rules: PredictionRules, window: float = 30 * 86400.0) -> None:
        super().__init__(rules, window)
        self.all_runs: dict[str, list[Run]] = {}

    def load(self, rows: Iterable[tuple[JobKey, Run]], now: float) -> None:
        rows = list(rows)
        super().load(rows, now)
        for key, done in rows:
            self.all_runs.setdefault(key.profile, []).append(done)

    def add(self, key: JobKey, done: Run) -> None:
        super().add(key, done)
        self.all_runs.setdefault(key.profile, []).append(done)

    def profile(self, name: str, now: float) -> ProfileStats:
        runs = self.all_runs.get(name, [])
        return profile_stats([r for r in runs if r.finished_at >= now - self.window])

    def predict_with(
        self,
        key: JobKey,
        profile: ProfileStats,
        cap: int,
        cpus: float,
        now: float,
        beside: bool = False,
    ) -> Prediction:
        return predict(self.runs(key, now), profile, cap, cpus, self.rules, now, beside)
