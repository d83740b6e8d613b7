"""A runner as the daemon tracks it: what scaling and reconciliation decide from."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class RunnerState(StrEnum):
    """A tracked runner's state. A runner being created is not tracked yet: the engine keeps
    its name in ``RunnerTable.creating`` (:class:`~rungar.engine.core.records.CreatesInFlight`)
    until its machine exists."""

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
    """Why a runner goes; every one but ORPHANED crosses the provider protocol in Delete."""

    JOB_COMPLETED = "job_completed"  # its job completed: the removal carries the conclusion
    SCALED_DOWN = "scaled_down"  # idle, and fewer jobs than runners
    IDLE_TOO_LONG = "idle_too_long"  # idle past max_idle_age
    NEVER_CONNECTED = "never_connected"
    UNREGISTERED = "unregistered"
    DISCONNECTED = "disconnected"
    STUCK = "stuck"  # busy but offline too long: its job is lost
    OUTDATED = "outdated"
    EXPIRED = "expired"  # past max_age, busy or not
    SCALE_SET_REMOVED = "scale_set_removed"
    DRAINED = "drained"  # its provider is drained
    REQUESTED = "requested"  # an operator's `rungar runners rm`
    ENDED = "ended"  # its machine stopped or vanished by itself
    NOT_PLACED = "not_placed"  # the leftover of a create given up on
    ORPHANED = "orphaned"  # a registration with no machine: nothing to tell a provider


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
