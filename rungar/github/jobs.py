"""Which job messages are news: a pure de-duplication of the listener's job events.

Messages are redelivered until acked, a restart without a cursor replays them, and a job with no
runner is re-assigned up to three times as ``JobAssigned`` → ``JobCompleted(canceled)``. The
tracker remembers each job's last phase by ``jobId`` and lets through only transitions forward:
assigned → started → completed, plus completed → assigned (a re-assignment). Anything else is a
duplicate and produces no event, so no duplicate creates a runner.
"""

from __future__ import annotations

from collections import OrderedDict

from rungar.github.interface import JobEventKind
from rungar.github.wire import JobMessage

KINDS = {
    "jobassigned": JobEventKind.ASSIGNED,
    "jobstarted": JobEventKind.STARTED,
    "jobcompleted": JobEventKind.COMPLETED,
}
_ALLOWED: dict[JobEventKind | None, frozenset[JobEventKind]] = {
    None: frozenset(JobEventKind),
    JobEventKind.ASSIGNED: frozenset({JobEventKind.STARTED, JobEventKind.COMPLETED}),
    JobEventKind.STARTED: frozenset({JobEventKind.COMPLETED}),
    JobEventKind.COMPLETED: frozenset({JobEventKind.ASSIGNED}),
}


def event_kind(job: JobMessage) -> JobEventKind | None:
    """The event a job message stands for; None for ``JobAvailable`` and unknown types."""
    return KINDS.get(job.kind.lower())


class JobTracker:
    """Each job's last phase, bounded (oldest forgotten first)."""

    def __init__(self, capacity: int = 20_000) -> None:
        self._phase: OrderedDict[str, JobEventKind] = OrderedDict()
        self._capacity = capacity

    def accept(self, job: JobMessage) -> JobEventKind | None:
        """The event to deliver for this message, or None if it is not news."""
        kind = event_kind(job)
        if kind is None:
            return None
        previous = self._phase.get(job.key)
        if kind not in _ALLOWED[previous]:
            return None
        self._phase[job.key] = kind
        self._phase.move_to_end(job.key)
        while len(self._phase) > self._capacity:
            self._phase.popitem(last=False)
        return kind

    def phase(self, job_id: str) -> JobEventKind | None:
        return self._phase.get(job_id)
