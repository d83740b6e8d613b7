"""What the engine knows of one scale set beyond its configuration: GitHub's demand, the
last scaling decision, the listener's phase, and the jobs assigned and not yet started."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice

from rungar.config.model import ScaleSetConfig
from rungar.model.machine import QUEUE_HINTS, JobHint
from rungar.model.phase import Phase
from rungar.scaling import InForce, Warm
from rungar.scaling.stale_statistics import Judged


@dataclass
class ScaleSetState:
    """What the engine knows of one scale set beyond its configuration."""

    config: ScaleSetConfig
    id: int = 0
    assigned: int = 0
    desired: int | None = None  # unknown until the first decision
    reserve: int = 0  # of desired, the runners kept idle beyond the assigned jobs
    minimum: InForce | None = None  # min_runners in force (schedule window) at the last decision
    warm: Warm | None = None  # the warm pool's prediction at the last decision
    warm_runners: int = 0  # of reserve, the warm pool's part (after max_runners)
    polled_at: float = 0.0  # when GitHub last told the assigned count (0 = never)
    # GitHub's assigned count checked against the jobs it sent, at the last decision
    # (rungar/scaling/stale_statistics.py); None before the first
    statistics: Judged | None = None
    paused_at_runtime: bool | None = None  # None: as configured
    _phase: Phase = Phase.STARTING
    note: str = ""
    queued: dict[str, JobHint] = field(default_factory=dict)  # job id -> hint
    # provider -> the queue's front it was last told (UpdateRunner), forgotten when one of those
    # jobs leaves the queue: the same front is not sent to it again (rungar/engine/jobs/book.py)
    queue_told: dict[str, tuple[JobHint, ...]] = field(default_factory=dict)
    # provider -> (the runner it last refused FULL, the job ids that create listed and not yet
    # seen leave the queue): it keeps a queue entry for them and hears when they leave
    # (engine/jobs.py, tell_refusers)
    refused_by: dict[str, tuple[str, set[str]]] = field(default_factory=dict)
    assigned_at: dict[str, float] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    removed: bool = False  # no longer configured: drains, then is forgotten
    watchers: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def queue_front(self) -> tuple[JobHint, ...]:
        """The queued jobs a Create or a queue update carries: the first ``QUEUE_HINTS``,
        oldest first."""
        return tuple(islice(self.queued.values(), QUEUE_HINTS))

    @property
    def paused(self) -> bool:
        if self.paused_at_runtime is not None:
            return self.paused_at_runtime
        return self.config.paused

    @property
    def phase(self) -> Phase:
        return self._phase

    @phase.setter
    def phase(self, phase: Phase) -> None:
        """Every change is told to the watchers (readiness: sd_notify, ``/readyz``)."""
        changed = phase != self._phase
        self._phase = phase
        if changed:
            for watcher in self.watchers:
                watcher()
