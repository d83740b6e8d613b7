"""How many runners a scale set wants, which idle ones go, and which can no longer serve.

Pure functions of configuration, runner views and ``now`` (docs/architecture.md):

- desired = min(max_runners, min_runners in force + warm pool + assigned jobs); 0 while paused.
- surplus: idle runners only (busy ones are never removed), outdated revision first, then oldest.
- removal: busy runners go only when expired or stuck (forced); any other runner goes when
  unregistered, never connected, disconnected, outdated or expired. At most one replacement
  (outdated or expired) per pass, so the idle reserve is never emptied at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rungar.config.model import ScaleSetConfig, Timing
from rungar.model.runner import GitHubState, RemovalReason, RunnerState, RunnerView
from rungar.scaling.schedule import InForce, in_force


@dataclass(frozen=True, slots=True)
class Desired:
    """How many runners a scale set wants, and how many of them are idle reserve.

    ``work`` runners serve the assigned jobs (GitHub counts running jobs as assigned, so a busy
    runner covers its own job and nothing more); ``reserve`` runners are kept idle beyond them
    (``min_runners`` in force, then the warm pool), and come second whenever room is short.
    ``warm`` is the warm pool's part of the reserve: the ceiling cuts it first.
    """

    total: int
    reserve: int
    minimum: InForce
    warm: int = 0

    @property
    def work(self) -> int:
        return self.total - self.reserve


def desired(
    config: ScaleSetConfig, assigned_jobs: int, *, paused: bool, now: float, warm: int = 0
) -> Desired:
    """min(max_runners, min_runners in force + warm + assigned jobs); nothing while paused.

    ``warm`` is the warm pool's prediction (:func:`rungar.scaling.warm_pool.predict`)."""
    minimum = in_force(config, now)
    if paused:
        return Desired(0, 0, minimum)
    work = max(0, min(config.max_runners, assigned_jobs))
    reserve = minimum.min_runners + max(0, warm)
    total = max(0, min(config.max_runners, reserve + max(0, assigned_jobs)))
    kept = total - work
    return Desired(total, kept, minimum, warm=max(0, kept - minimum.min_runners))


def desired_runners(
    config: ScaleSetConfig, assigned_jobs: int, *, paused: bool, now: float = 0.0, warm: int = 0
) -> int:
    return desired(config, assigned_jobs, paused=paused, now=now, warm=warm).total


def surplus_to_remove(
    runners: Sequence[RunnerView], count: int, current_revision: Mapping[str, str]
) -> list[str]:
    """Names of up to ``count`` idle runners to remove: outdated first, then oldest."""
    if count <= 0:
        return []
    idle = [r for r in runners if r.state is RunnerState.IDLE and not r.busy]
    idle.sort(
        key=lambda r: (r.revision == current_revision.get(r.provider, r.revision), r.created_at)
    )
    return [r.name for r in idle[:count]]


@dataclass(frozen=True, slots=True)
class RemovalDecision:
    name: str
    reason: RemovalReason
    forced: bool = False  # removes a busy runner (its job fails)
    replacement: bool = False


def _young(runner: RunnerView, grace: float, now: float) -> bool:
    return runner.state is RunnerState.STARTING and now - runner.created_at <= grace


def _offline_too_long(runner: RunnerView, grace: float, now: float) -> bool:
    return (
        runner.github is GitHubState.OFFLINE
        and runner.offline_since is not None
        and now - runner.offline_since > grace
    )


def _expired(
    runner: RunnerView, config: ScaleSetConfig, now: float, *, busy: bool
) -> RemovalReason | None:
    """EXPIRED past max_age; IDLE_TOO_LONG for an idle runner past max_idle_age."""
    if runner.created_at <= 0:
        return None
    age = now - runner.created_at
    if config.max_age is not None and age > config.max_age:
        return RemovalReason.EXPIRED
    if not busy and config.max_idle_age is not None and age > config.max_idle_age:
        return RemovalReason.IDLE_TOO_LONG
    return None


def decide_one(
    runner: RunnerView,
    config: ScaleSetConfig,
    current_revision: str,
    now: float,
    timing: Timing | None = None,
) -> RemovalDecision | None:
    timing = timing or Timing()
    never_connected = timing.never_connected_grace or config.start_timeout
    disconnected = timing.disconnected_grace or config.start_timeout
    stuck = timing.stuck_after or config.start_timeout
    if runner.state is RunnerState.LEAVING:
        return None
    if runner.busy:
        if _expired(runner, config, now, busy=True):
            return RemovalDecision(runner.name, RemovalReason.EXPIRED, forced=True)
        if runner.connected and _offline_too_long(runner, stuck, now):
            return RemovalDecision(runner.name, RemovalReason.STUCK, forced=True)
        return None
    young = _young(runner, never_connected, now)
    if runner.github is GitHubState.NOT_REGISTERED and not young:
        return RemovalDecision(runner.name, RemovalReason.UNREGISTERED)
    if not runner.connected and runner.state is RunnerState.STARTING:
        if not young:
            return RemovalDecision(runner.name, RemovalReason.NEVER_CONNECTED)
        return None
    if _offline_too_long(runner, disconnected, now):
        return RemovalDecision(runner.name, RemovalReason.DISCONNECTED)
    if all(entry.name != runner.provider for entry in config.providers):
        # Its provider was taken off the scale set's list: the idle runner is drained there and
        # replaced on a provider the scale set still lists, so its reserve stays where it is meant
        # to be (a busy one finishes its job first).
        return RemovalDecision(runner.name, RemovalReason.DRAINED, replacement=True)
    if current_revision and runner.revision and runner.revision != current_revision:
        return RemovalDecision(runner.name, RemovalReason.OUTDATED, replacement=True)
    expired = _expired(runner, config, now, busy=False)
    if expired is not None:
        return RemovalDecision(runner.name, expired, replacement=True)
    return None


def decide_removal(
    runners: Sequence[RunnerView],
    config: ScaleSetConfig,
    current_revision: Mapping[str, str],
    now: float,
    timing: Timing | None = None,
) -> list[RemovalDecision]:
    """Every runner that can no longer serve, with at most one replacement per pass."""
    removals: list[RemovalDecision] = []
    replaced = False
    for runner in sorted(runners, key=lambda r: (r.created_at, r.name)):
        removal = decide_one(runner, config, current_revision.get(runner.provider, ""), now, timing)
        if removal is None:
            continue
        if removal.replacement:
            if replaced:
                continue
            replaced = True
        removals.append(removal)
    return removals
