"""When each scale set's recent jobs were assigned: the history warm pools predict from
(docs/scale-sets.md, "Warm pool").

Every assigned job is written to the state database as GitHub tells it (a job told twice is
kept once), so a restart keeps the pool's memory of the last weeks; it is read back at start
and kept in memory, sorted, for :func:`rungar.scaling.warm_pool.predict`. Jobs older than any
prediction looks (:func:`rungar.scaling.warm_pool.history_span`) are pruned, at most once an
hour. A failed write loses one job's record, never the job.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable

import structlog

from rungar.config.model import ScaleSetConfig
from rungar.errors import StateError
from rungar.scaling.warm_pool import Warm, history_span, predict
from rungar.store.sqlite import SqliteStore

log = structlog.get_logger("rungar.engine")

PRUNE_EVERY = 3600.0  # seconds between two prunes of the history


class JobHistory:
    def __init__(
        self, store: SqliteStore, scale_sets: Iterable[ScaleSetConfig], now: float
    ) -> None:
        self.store = store
        self.span = max((history_span(s.warm_pool) for s in scale_sets), default=history_span(None))
        self.times: dict[str, list[float]] = store.job_history(now - self.span)
        self.pruned_at = 0.0

    def record(self, scale_set: str, job_id: str, assigned_at: float) -> None:
        """Keep one assigned job; a job already kept (GitHub told it again) changes nothing."""
        try:
            new = self.store.record_job(scale_set, job_id, assigned_at)
        except StateError as e:
            log.warning("job_history.not_recorded", scale_set=scale_set, error=str(e))
            return
        if new:
            insort(self.times.setdefault(scale_set, []), assigned_at)
        self.prune(assigned_at)

    def warm(self, config: ScaleSetConfig, now: float) -> Warm | None:
        """The scale set's warm pool now (None when it has none)."""
        if config.warm_pool is None:
            return None
        return predict(config, self.times.get(config.name, ()), now)

    def configure(self, scale_sets: Iterable[ScaleSetConfig]) -> None:
        """A new configuration (``rungar apply``) may look further back: keep that much."""
        self.span = max((history_span(s.warm_pool) for s in scale_sets), default=self.span)

    def prune(self, now: float, *, force: bool = False) -> None:
        if not force and now - self.pruned_at < PRUNE_EVERY:
            return
        self.pruned_at = now
        cutoff = now - self.span
        try:
            self.store.prune_job_history(cutoff)
        except StateError as e:
            log.warning("job_history.not_pruned", error=str(e))
        for times in self.times.values():
            del times[: bisect_left(times, cutoff)]
