"""A runner as the daemon tracks it: what scaling and reconciliation decide from."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class RunnerState(StrEnum):
    """A tracked runner's state. A runner being created is not tracked yet: the engine keeps
    its name in ``RunnerTable.creating`` until its machine exists."""

    STARTING = "starting"  # machine created, not yet connected to GitHub
    IDLE = "idle"
    BUSY = "busy"
    LEAVING = "leaving"  # registration removed or ended; machine not yet deleted


class GitHubState(StrEnum):
    BUSY = "busy"
    IDLE = "idle"
    OFFLINE = "offline"
    NOT_REGISTERED = "not registered"
    UNKNOWN = "unknown"  # GitHub was not asked, or did not answer


class RemovalReason(StrEnum):
    JOB_COMPLETED = "job_completed"
    SCALED_DOWN = "scaled_down"
    NEVER_CONNECTED = "never_connected"
    UNREGISTERED = "unregistered"
    DISCONNECTED = "disconnected"
    STUCK = "stuck"
    OUTDATED = "outdated"
    EXPIRED = "expired"
    REQUESTED = "requested"
    ORPHANED = "orphaned"


class LossReason(StrEnum):
    ENDED = "ended"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True, slots=True)
class RunnerView:
    """What is known of one runner at a moment."""

    name: str
    scale_set: str
    provider: str
    revision: str
    created_at: float  # 0 = unknown (adopted without a creation time): never expires
    state: RunnerState
    github: GitHubState = GitHubState.UNKNOWN
    connected: bool = False  # has been seen online on GitHub at least once
    offline_since: float | None = None
    runner_id: int = 0
    job: str = ""

    @property
    def busy(self) -> bool:
        return self.state is RunnerState.BUSY or self.github is GitHubState.BUSY
