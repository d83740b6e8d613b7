"""The provider role every backend plays, in Python terms (proto/rungar/provider/v1/provider.proto).

runnerd, the cloud providers and the scripted fake implement it and are served over gRPC by
``rungar.rpc.server.serve``; Rungar talks to each through ``rungar.rpc.client.GrpcProvider``,
which implements it too. A refusal is a value; ``ProviderUnavailable`` means no answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rungar.model.machine import (
    Created,
    CreateRequest,
    JobHint,
    Machine,
    ProviderInfo,
    Refusal,
    Removal,
)


class Provider(Protocol):
    async def info(self) -> ProviderInfo: ...

    async def validate_runner(self, runner: Mapping[str, Any]) -> list[str]:
        """Problems with a runner block, checked offline; empty when it is fine."""
        ...

    async def create(self, request: CreateRequest) -> Created | Refusal:
        """Create and start the machine, or refuse. Idempotent by name and request id."""
        ...

    async def delete(self, name: str, removal: Removal | None = None) -> None:
        """Stop and delete the machine; an unknown name is success. ``removal`` says why, when
        Rungar knows: the job's conclusion, or the reason it goes without one."""
        ...

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        """Machines whose labels include every pair of ``selector``."""
        ...

    async def update_runner(self, name: str, job: JobHint) -> None:
        """Tell the provider which job the runner took."""
        ...

    async def last_output(self, name: str, lines: int = 20) -> Sequence[str]:
        """The machine's last ``lines`` lines of output, oldest first; [] when the provider
        cannot tell or does not know the name (asked when a runner ends before it connects)."""
        ...
