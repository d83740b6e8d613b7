"""The narrow face GitHub shows the daemon: what a scale-set reconciler needs.

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
from typing import Any, Protocol

from rungar.config.model import ScaleSetConfig
from rungar.model.machine import Conclusion, JobHint
from rungar.model.phase import Phase
from rungar.model.runner_release import RunnerRelease


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


@dataclass(frozen=True, slots=True)
class JobTimes:
    """GitHub's own times of a job (epoch seconds; 0 until the step happened): queued, assigned
    to the scale set, taken by a runner, finished."""

    queued: float = 0.0
    assigned: float = 0.0
    started: float = 0.0
    finished: float = 0.0

    @property
    def runner_wait(self) -> float | None:
        """Assigned to the scale set until a runner took it, by GitHub's clock; None if unknown."""
        if self.assigned > 0 and self.started >= self.assigned:
            return self.started - self.assigned
        return None


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
    # For COMPLETED: how the job ended, mapped from GitHub's word once, by the listener; None
    # for a word Rungar has none for.
    conclusion: Conclusion | None = None
    at: float = 0.0
    times: JobTimes = JobTimes()

    @property
    def canceled(self) -> bool:
        return self.conclusion is Conclusion.CANCELLED


ListenerEvent = Demand | JobEvent


@dataclass(frozen=True, slots=True)
class SessionPhase:
    """A listener's message session, for ``rungar status``: STARTING; WAITING while GitHub
    answers its session create with a conflict (another session owns the scale set);
    LISTENING; UNREACHABLE while GitHub fails it (``error`` says how); None when no listener
    runs. While WAITING, ``holder`` is the owner GitHub named for the session that holds the
    scale set (or "") and ``holder_seen_at`` when it said so."""

    phase: Phase | None
    error: str = ""
    holder: str = ""
    holder_seen_at: float = 0.0


@dataclass(frozen=True, slots=True)
class RunnerStatus:
    """A runner registration as GitHub sees it."""

    name: str
    id: int
    online: bool
    busy: bool
    scale_set_id: int = 0


@dataclass(frozen=True, slots=True)
class Budget:
    """GitHub's REST budget as last read (None: never read) and what it does to reads that
    can wait: ``stretch`` 1, 2 (below 25 %) or 4 (below 10 %); ``note`` for ``rungar status``."""

    remaining: int | None = None
    limit: int | None = None
    reset_at: float | None = None
    stretch: float = 1.0
    note: str = ""
    not_modified: int = 0  # conditional reads GitHub answered 304 (free)


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


class SessionStore(Protocol):
    """What the GitHub side records between runs: each scale set's id (by name), so a changed
    runner group updates the scale set instead of creating a second one, and the id of the
    message session held, per scale set id.

    After a crash (``kill -9``) the session lingers on GitHub and a new one is refused (409)
    until it expires, minutes later. The recorded id lets the restarted daemon delete its own
    stale session first; a session it has no record of (another installation's) is waited for.
    """

    async def get_scale_set_id(self, name: str) -> int: ...

    async def set_scale_set_id(self, name: str, scale_set_id: int) -> None: ...

    async def get_session_id(self, scale_set_id: int) -> str: ...

    async def set_session_id(self, scale_set_id: int, session_id: str) -> None:
        """Record ``session_id``; an empty one forgets the record."""
        ...


class InMemorySessionStore:
    """For tests and for a daemon without a store: nothing survives a restart."""

    def __init__(self) -> None:
        self.session_ids: dict[int, str] = {}
        self.scale_set_ids: dict[str, int] = {}

    async def get_scale_set_id(self, name: str) -> int:
        return self.scale_set_ids.get(name, 0)

    async def set_scale_set_id(self, name: str, scale_set_id: int) -> None:
        self.scale_set_ids[name] = scale_set_id

    async def get_session_id(self, scale_set_id: int) -> str:
        return self.session_ids.get(scale_set_id, "")

    async def set_session_id(self, scale_set_id: int, session_id: str) -> None:
        if session_id:
            self.session_ids[scale_set_id] = session_id
        else:
            self.session_ids.pop(scale_set_id, None)


class GitHub(Protocol):
    async def ensure_scale_set(self, config: ScaleSetConfig) -> int:
        """The scale set's id, creating it in its runner group when missing."""
        ...

    async def generate_jit_config(
        self, scale_set_id: int, runner_name: str, app: int = 0
    ) -> tuple[int, str]:
        """Register a runner: its id and its JIT config (a secret), through the GitHub App
        ``app`` (its index in ``github.apps``; 0, the only one, without that key)."""
        ...

    async def remove_runner(self, runner_id: int) -> RemoveOutcome: ...

    async def rerun_failed_job(self, repository: str, run_id: str, runner_name: str) -> int:
        """Re-run, once, the job of ``run_id`` in ``repository`` that failed on
        ``runner_name`` (the REST job re-run route); the job's id. Raises GitHubError."""
        ...

    # ---- what a developer sees of a waiting job (rungar.github.checks)

    def writes_check_runs(self) -> bool:
        """True when the credential may write check runs (a GitHub App); a personal access
        token writes commit statuses instead."""
        ...

    async def head_commit(self, repository: str, run_id: str) -> str:
        """The workflow run's head commit. Raises GitHubError."""
        ...

    async def write_check_run(
        self, repository: str, check_run_id: int, body: dict[str, Any]
    ) -> int:
        """Create (``check_run_id`` 0) or update a check run; its id. Raises GitHubError."""
        ...

    async def write_commit_status(self, repository: str, sha: str, body: dict[str, Any]) -> None:
        """Raises GitHubError."""
        ...

    async def cancel_workflow_run(self, repository: str, run_id: str) -> None:
        """Raises GitHubError."""
        ...

    async def get_runner_by_name(self, name: str) -> RunnerStatus | None: ...

    async def list_runners(self, scale_set_id: int) -> list[RunnerStatus]: ...

    async def list_all_runners(self) -> list[RunnerStatus]:
        """Every scale set's registrations in one call (each names its ``scale_set_id``): a
        reconcile pass asks once, not once per scale set."""
        ...

    def listen(self, config: ScaleSetConfig) -> AsyncIterator[ListenerEvent]:
        """The scale set's demand and job events until the iterator is closed."""
        ...

    def set_max_capacity(self, scale_set: str, max_capacity: int) -> None:
        """Change what the listener tells GitHub it can take (0 while paused)."""
        ...

    def session_phase(self, scale_set: str) -> SessionPhase:
        """Where the scale set's listener stands with its message session."""
        ...

    def budget(self) -> Budget:
        """The REST budget and how much it slows reads that can wait."""
        ...

    async def latest_runner_release(self) -> RunnerRelease | None:
        """GitHub's latest runner release (:mod:`rungar.github.releases`); None when GitHub
        publishes none. Raises :class:`rungar.errors.GitHubError` when it does not answer."""
        ...

    async def renew_session(self, scale_set: str) -> bool:
        """Ask GitHub whether the scale set's message session is still this daemon's: True
        when it confirms it, False when there is none or it is gone. Raises
        :class:`rungar.errors.GitHubError` when GitHub does not answer."""
        ...
