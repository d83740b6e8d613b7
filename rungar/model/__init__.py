"""Frozen value types shared by every part of Rungar."""

from rungar.model.machine import (
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    ProviderInfo,
    Refusal,
    RefusalKind,
)
from rungar.model.runner_block import RunnerBlock
from rungar.model.units import format_bytes, parse_bytes, parse_duration

__all__ = [
    "CreateRequest",
    "Created",
    "JobHint",
    "Machine",
    "MachineState",
    "ProviderInfo",
    "Refusal",
    "RefusalKind",
    "RunnerBlock",
    "format_bytes",
    "parse_bytes",
    "parse_duration",
]
