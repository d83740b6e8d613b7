"""What providers create, list and refuse: the values of the provider protocol.

These mirror ``proto/rungar/provider/v1/provider.proto`` without any protobuf in them;
``rungar.rpc`` converts at the boundary so no generated message travels further.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from rungar.model.runner import RemovalReason
from rungar.model.runner_block import RunnerBlock


class MachineState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPED = "stopped"


class RefusalKind(StrEnum):
    """Why a provider would not create a runner (proto/rungar/provider/v1/provider.proto)."""

    FULL = "full"  # out of memory, CPU, disk, slots, quota, or stock: backoff and holds
    INVALID = "invalid"  # can never be created here: backoff, no hold
    FAILED = "failed"  # anything else the provider knows failed: backoff, no hold


@dataclass(frozen=True, slots=True)
class RoomExpected:
    """When a provider that refused as FULL expects room for the runner: ``seconds`` from its
    answer, and how sure it is (``confidence``, 0..1). Checked before it is believed
    (:func:`rungar.model.bounded.room_expected`)."""

    seconds: float
    confidence: float


@dataclass(frozen=True, slots=True)
class Refusal:
    """A provider's answer that it will not create the runner."""

    kind: RefusalKind
    message: str
    resource: str = ""
    # FULL only: when room is expected; None = not known.
    room: RoomExpected | None = None
    # The provider sent an expected room that could not be believed: why (it was dropped).
    room_ignored: str = ""

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class Machine:
    """One machine as a provider lists it."""

    name: str
    state: MachineState
    labels: Mapping[str, str] = field(default_factory=dict)
    size: str = ""
    created_at: float = 0.0
    provider: str = ""


@dataclass(frozen=True, slots=True)
class Created:
    """A provider's answer that it created (or already had) the runner's machine."""

    machine: Machine


QUEUE_HINTS = 20  # the queued jobs a Create's hints and a queue update carry, oldest first


@dataclass(frozen=True, slots=True)
class JobHint:
    """A queued job the runner may take, as far as Rungar knows it."""

    repository: str = ""
    workflow: str = ""
    job: str = ""
    job_id: str = ""
    branch: str = ""
    run_id: str = ""
    # GitHub's own times of the job (epoch seconds by GitHub's clock; 0: not happened or not
    # known): when it was queued, when a runner took it, when it finished.
    queued_at: float = 0.0
    started_at: float = 0.0
    completed_at: float = 0.0
    # Rungar's clock less GitHub's (seconds), measured as GitHub's first message of the job
    # came (its arrival less the newest of GitHub's times in it); None: not measured. A
    # provider reads ``queued_at + clock_offset`` as the queue time on Rungar's clock.
    clock_offset: float | None = None


class Conclusion(StrEnum):
    """How a job ended: one vocabulary from GitHub's edge to runnerd's history."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"  # cancelled on GitHub, or stopped while it ran
    TIMED_OUT = "timed_out"


# GitHub says it two ways: the scale-set messages "succeeded/failed/canceled" (in any case), the
# REST API and webhooks "success/failure/cancelled/timed_out". Read only at the edge.
_GITHUB_CONCLUSIONS = {
    "succeeded": Conclusion.SUCCEEDED,
    "success": Conclusion.SUCCEEDED,
    "failed": Conclusion.FAILED,
    "failure": Conclusion.FAILED,
    "startup_failure": Conclusion.FAILED,
    "canceled": Conclusion.CANCELLED,
    "cancelled": Conclusion.CANCELLED,
    "timed_out": Conclusion.TIMED_OUT,
    "timedout": Conclusion.TIMED_OUT,
}


def conclusion_from_github(word: str) -> Conclusion | None:
    """GitHub's word for how a job ended, in Rungar's vocabulary; None for one it has no word
    for (``skipped``, ``neutral``, a new one) or none at all."""
    return _GITHUB_CONCLUSIONS.get(word.strip().lower())


@dataclass(frozen=True, slots=True)
class Removal:
    """Why Rungar removes a runner, as Delete tells its provider.

    ``conclusion`` is set only with ``JOB_COMPLETED``; ``job`` is the job the runner ran as far
    as Rungar knows it. A runner's exit status is no substitute: a runner exits 0 after a
    failed job."""

    reason: RemovalReason
    conclusion: Conclusion | None = None
    job: JobHint | None = None

    def describe(self) -> str:
        if self.reason is RemovalReason.JOB_COMPLETED:
            return f"its job {self.conclusion.value if self.conclusion else 'completed'}"
        return self.reason.value.replace("_", " ")


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """Everything a provider needs to create one runner's machine."""

    runner_name: str
    request_id: str
    scale_set: str
    labels: Mapping[str, str]
    runner: RunnerBlock
    jit_config: str = field(repr=False)  # a secret: never in repr, logs or storage
    job_hints: tuple[JobHint, ...] = ()
    deadline: float = 0.0  # epoch seconds after which the machine may be reclaimed; 0 = none
    # Seconds this create may take: what is left of the scale set's start_timeout. A provider
    # reached over the network gets it as the call's deadline; None = the client's own bound.
    budget: float | None = None


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    name: str
    kind: str
    version: str
    capabilities: tuple[str, ...] = ()
    # The GitHub Actions runner version its machines run (``2.329.0``); "" = not known.
    runner_version: str = ""
