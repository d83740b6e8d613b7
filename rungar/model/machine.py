"""What providers create, list and refuse: the values of the provider protocol.

These mirror ``proto/rungar/provider/v1/provider.proto`` without any protobuf in them;
``rungar.rpc`` converts at the boundary so no generated message travels further.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from rungar.model.runner_block import RunnerBlock


class MachineState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPED = "stopped"


class RefusalKind(StrEnum):
    """Why a provider would not create a runner (ARCHITECTURE §2)."""

    FULL = "full"  # out of memory, CPU, disk, slots, quota, or stock: backoff and holds
    INVALID = "invalid"  # can never be created here: backoff, no hold
    FAILED = "failed"  # anything else the provider knows failed: backoff, no hold


@dataclass(frozen=True, slots=True)
class Refusal:
    """A provider's answer that it will not create the runner."""

    kind: RefusalKind
    message: str
    resource: str = ""

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


@dataclass(frozen=True, slots=True)
class JobHint:
    """A queued job the runner may take, as far as Rungar knows it."""

    repository: str = ""
    workflow: str = ""
    job: str = ""
    job_id: str = ""


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
