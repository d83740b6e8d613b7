"""The narrow face GitHub shows the daemon (ARCHITECTURE §1, §3): what a scale-set reconciler needs.

The engine depends on :class:`GitHub` only; :class:`rungar.github.service.ScaleSetGitHub` speaks
the real protocol and :class:`rungar.testing.fake_github.FakeGitHub` is the hand-written fake for
unit tests. The listener's stream yields :class:`Demand` (from the statistics of every answer:
``assigned`` is the scaling signal) and :class:`JobEvent` (assigned, started, completed; keyed by
GitHub's ``jobId``, already de-duplicated).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from rungar.config.model import ScaleSetConfig
from rungar.model.machine import JobHint


@dataclass(frozen=True, slots=True)
class Demand:
    """A scale set's statistics at one moment; desired = min(max, min_in_force + assigned)."""

    scale_set: str
    scale_set_id: int
    assigned: int
    running: int
    available: int = 0
    acquired: int = 0
    registered: int = 0
    busy: int = 0
    idle: int = 0
    at: float = 0.0


class JobEventKind(StrEnum):
    ASSIGNED = "assigned"
    STARTED = "started"
    COMPLETED = "completed"


@dataclass(frozen=True, slots=True)
class JobEvent:
    kind: JobEventKind
    scale_set: str
    job_id: str
    hint: JobHint
    runner_name: str = ""
    runner_id: int = 0
    result: str = ""  # lower-cased: "succeeded", "failed", "canceled", …
    at: float = 0.0
    queued_at: float = 0.0  # GitHub's clock; 0 = not given
    runner_assigned_at: float = 0.0  # GitHub's clock; 0 = not given

    @property
    def canceled(self) -> bool:
        return self.result in ("canceled", "cancelled")


ListenerEvent = Demand | JobEvent


@dataclass(frozen=True, slots=True)
class RunnerStatus:
    """A runner registration as GitHub sees it."""

    name: str
    id: int
    online: bool
    busy: bool
    scale_set_id: int = 0


class RemoveOutcome(StrEnum):
    REMOVED = "removed"  # gone now (or was already)
    BUSY = "busy"  # running a job: try again later


class CursorStore(Protocol):
    """Where a listener keeps the id of the last message it handled, per scale set id.

    Keyed by id so a re-created scale set starts from 0 (ARC #3205, GARM).
    """

    async def get_last_message_id(self, scale_set_id: int) -> int: ...

    async def set_last_message_id(self, scale_set_id: int, message_id: int) -> None: ...


class InMemoryCursorStore:
    """For tests and for a daemon without a store: a restart replays unacked messages."""

    def __init__(self) -> None:
        self.cursors: dict[int, int] = {}

    async def get_last_message_id(self, scale_set_id: int) -> int:
        return self.cursors.get(scale_set_id, 0)

    async def set_last_message_id(self, scale_set_id: int, message_id: int) -> None:
        self.cursors[scale_set_id] = message_id


class GitHub(Protocol):
    async def ensure_scale_set(self, config: ScaleSetConfig) -> int:
        """The scale set's id, creating it in its runner group when missing."""
        ...

    async def generate_jit_config(self, scale_set_id: int, runner_name: str) -> tuple[int, str]:
        """Register a runner: its id and its JIT config (a secret)."""
        ...

    async def remove_runner(self, runner_id: int) -> RemoveOutcome: ...

    async def get_runner_by_name(self, name: str) -> RunnerStatus | None: ...

    async def list_runners(self, scale_set_id: int) -> list[RunnerStatus]: ...

    def listen(self, config: ScaleSetConfig) -> AsyncIterator[ListenerEvent]:
        """The scale set's demand and job events until the iterator is closed."""
        ...

    def set_max_capacity(self, scale_set: str, max_capacity: int) -> None:
        """Change what the listener tells GitHub it can take (0 while paused)."""
        ...
