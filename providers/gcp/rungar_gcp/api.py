"""The narrow slice of Compute Engine the provider uses, as values and a protocol.

``rungar_gcp.compute.ComputeApi`` implements :class:`GceApi` with google-cloud-compute; the
provider logic only sees these values, so it never touches a protobuf or an SDK exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from rungar_gcp.errors import Plane


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    """One instance to insert in one zone with one machine type."""

    name: str
    zone: str
    machine_type: str  # "" = the instance template's
    labels: Mapping[str, str]  # already GCP-encoded
    metadata: Mapping[str, str] = field(repr=False)  # holds the JIT config: never printed
    image: str = ""
    disk_gib: int = 50
    disk_type: str = "pd-balanced"
    instance_template: str = ""
    spot: bool = False
    termination_time: str = ""  # RFC 3339; the deadline backstop, "" = none
    network_tags: tuple[str, ...] = ()
    network: str = ""
    subnetwork: str = ""
    external_ip: bool = True
    service_account: str = ""
    scopes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class InsertFailure:
    """Why an insert did not produce a running instance, as GCE (or its absence) said it."""

    plane: Plane
    codes: tuple[str, ...] = ()
    status: int | None = None
    message: str = ""

    def describe(self) -> str:
        what = ", ".join(self.codes) or (f"HTTP {self.status}" if self.status else "no answer")
        return f"{what}: {self.message}" if self.message else what


@dataclass(frozen=True, slots=True)
class Instance:
    """An instance as listed, with the exact labels from ``rungar-labels``."""

    name: str
    zone: str
    status: str  # GCE's: PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED, …
    machine_type: str = ""
    labels: Mapping[str, str] | None = None  # None: no readable rungar-labels item
    request_id: str = ""
    runner_name: str = ""  # the runner's name as Rungar gave it ("" = the instance name)
    created_at: float = 0.0


class GceApi(Protocol):
    async def offers(self, zone: str, machine_type: str) -> bool | None:
        """Whether ``zone`` offers ``machine_type``; ``None`` when the answer is unknown."""
        ...

    async def insert(self, spec: InstanceSpec, request_id: str) -> InsertFailure | None:
        """Insert and wait for the operation; ``None`` when the instance was created."""
        ...

    async def get(self, zone: str, name: str) -> Instance | None:
        """The instance, or ``None`` when it does not exist. No answer raises
        ``ProviderUnavailable``."""
        ...

    async def find(self, filter_text: str) -> list[Instance]:
        """Instances of every zone of the project matching a GCE list filter."""
        ...

    async def delete(self, zone: str, name: str, request_id: str) -> None:
        """Delete; an instance already gone is success."""
        ...

    async def serial_output(self, zone: str, name: str) -> str:
        """The instance's serial port 1 output as GCE keeps it; "" when it has none."""
        ...

    def close(self) -> None: ...
