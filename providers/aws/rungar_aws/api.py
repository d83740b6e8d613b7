"""The slice of EC2 the provider uses, as values and a protocol.

``rungar_aws.ec2.Ec2Api`` implements :class:`Ec2` with boto3; the provider logic only sees
these values, never a botocore exception or response dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class RunFailure:
    """Why RunInstances launched nothing (or may have: see ``errors.UNCERTAIN_CODES``)."""

    code: str
    status: int | None = None
    message: str = ""

    def describe(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code


@dataclass(frozen=True, slots=True)
class Ec2Instance:
    instance_id: str
    name: str
    state: str  # pending, running, shutting-down, terminated, stopping, stopped
    instance_type: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    launched_at: float = 0.0


class Ec2(Protocol):
    async def run(self, params: Mapping[str, Any]) -> Ec2Instance | RunFailure:
        """RunInstances with one instance; the instance, or why there is none."""
        ...

    async def find(self, filters: list[dict[str, Any]]) -> list[Ec2Instance]:
        """DescribeInstances, every page. No answer raises ``ProviderUnavailable``."""
        ...

    async def terminate(self, instance_ids: list[str]) -> None: ...

    async def console_output(self, instance_id: str) -> str:
        """The instance's console output (EC2 keeps the last 64 KB), decoded; "" when none."""
        ...

    async def root_device(self, image: str) -> str | None:
        """The AMI's root device name; ``None`` when the AMI does not exist."""
        ...

    def close(self) -> None: ...
