"""What a runtime does for runnerd: start a runner under its caps, sample it, stop it.

docs/admission.md, "What a job's memory is": each runner is sampled every 2 s; its memory is job
memory (memory.current − the file LRU lists); whether it met its cap comes from the kernel's events,
never from how close a sample came. Runtimes: ``process`` (runtime/process.py) and ``docker``
(runtime/docker.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

MANAGED_LABEL = "runnerd.managed"
NAME_LABEL = "runnerd.runner"
PROFILE_LABEL = "runnerd.profile"
SCALE_SET_LABEL = "runnerd.scale-set"


@dataclass(frozen=True, slots=True)
class RunnerSpec:
    name: str
    profile: str
    scale_set: str
    image: str
    command: tuple[str, ...]
    cpus: float
    memory: int
    labels: Mapping[str, str]
    env: Mapping[str, str] = field(repr=False)  # holds the JIT config: never logged or stored


@dataclass(frozen=True, slots=True)
class Usage:
    """One sample of a runner. ``exited`` once its process or container has ended."""

    memory: int  # job memory, bytes
    held: int  # without page cache or reclaimable slab, for the host guard
    cpu_seconds: float
    met_cap: bool = False  # its own limit ran out of memory
    killed_for_memory: bool = False  # an oom kill while its own limit held
    sock_throttled: int | None = None  # None where the kernel does not count it
    exited: bool = False
    exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class SliceUsage:
    memory: int  # memory.current − inactive_file, as docker stats counts it
    held: int


@dataclass(frozen=True, slots=True)
class Adopted:
    """A runner a previous runnerd left running."""

    name: str
    handle: str
    labels: Mapping[str, str]
    started_at: float
    cpus: float
    memory: int


class Runtime(Protocol):
    kind: str

    async def start(self, spec: RunnerSpec) -> str:
        """Start the runner; its handle. Raises ``RuntimeError`` with a sentence on failure."""
        ...

    async def sample(self, handle: str) -> Usage | None:
        """A sample, or ``None`` when the runner is unknown (its series just ends)."""
        ...

    async def stop(self, handle: str) -> None:
        """Stop and remove the runner; an unknown handle is success."""
        ...

    async def slice_usage(self) -> SliceUsage | None:
        """The slice as a whole, or ``None`` when it cannot be read."""
        ...

    async def adopt(self) -> list[Adopted]:
        """Runners a previous runnerd left running, to count and list again."""
        ...

    async def last_output(self, handle: str, lines: int) -> list[str]:
        """The runner's last ``lines`` lines of output (stdout and stderr), oldest first; []
        when there are none or the handle is unknown."""
        ...

    def describe(self) -> str:
        """One line for ``runnerctl doctor``."""
        ...
