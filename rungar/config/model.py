"""The configuration Rungar runs from, as frozen values (scale_sets.yaml after validation).

Durations are seconds (floats), sizes are bytes. Every timing constant lives in :class:`Timing` with
its documented value (docs/configuration.md) as its default, so tests and demos can compress the
clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Placement(StrEnum):
    SPREAD = "spread"
    PACK = "pack"


@dataclass(frozen=True, slots=True)
class Timing:
    """Every documented duration, in seconds; ``hold`` of ``None`` is 2 × reconcile_interval."""

    reconcile_interval: float = 30.0
    backoff_first: float = 15.0
    backoff_max: float = 120.0
    hold: float | None = None
    unreachable_grace: float = 300.0  # runners of an unreachable provider kept this long
    left_grace: float = 60.0  # a machine left by a removal is not adopted before this
    delete_timeout: float = 120.0
    deadline_grace: float = 600.0  # machine deadline = max_age + reconcile_interval + this
    provider_timeout: float = 10.0  # List, Info, ValidateRunner, UpdateRunner; not Create/Delete
    probe_interval: float = 1.0  # an unreachable provider is listed this often between passes
    start_timeout: float = 300.0  # default for scale sets that set none
    never_connected_grace: float = 0.0  # 0 = the scale set's start_timeout
    disconnected_grace: float = 0.0  # offline this long: disconnected; 0 = start_timeout
    stuck_after: float = 0.0  # busy and offline this long: stuck; 0 = start_timeout
    session_retry_first: float = 10.0
    session_retry_max: float = 60.0
    crash_backoff_first: float = 30.0  # runners that end before connecting: first skip
    crash_backoff_max: float = 600.0  # ... doubling in a row up to this
    # Active and standby (README, "Running a standby"): the active daemon has GitHub confirm
    # its lease this often; the lease lasts this long after GitHub last confirmed it; the
    # standby asks for the lead scale set's message session this often.
    lease_renew_interval: float = 10.0
    lease_duration: float = 30.0
    standby_retry: float = 5.0

    @property
    def hold_duration(self) -> float:
        return self.hold if self.hold is not None else 2 * self.reconcile_interval


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    name: str
    type: str
    weight: float = 1.0
    max_runners: int = 0  # 0 = no limit of our own; the backend refuses when full
    disabled: bool = False
    runner: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)  # the type's own keys
    address: str = ""  # where to reach it: unix:///path or host:port
    command: tuple[str, ...] = ()  # or a local plugin to start
    timeout: float = 0.0  # 0 = timing.provider_timeout


@dataclass(frozen=True, slots=True)
class ScaleSetProvider:
    """One provider of a scale set, with the runner block already merged over the provider's."""

    name: str
    runner: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ScheduleWindow:
    """One window of a schedule, as written: ``days`` 0 (Monday) .. 6, minutes since midnight.

    ``end`` may be 1440 (``24:00``); ``end < start`` runs past midnight and belongs to the day
    it opens on. ``text`` is how the file wrote it (``mon-fri 08:00-18:00``), for status.
    """

    days: frozenset[int]
    start: int
    end: int
    min_runners: int
    text: str = ""


@dataclass(frozen=True, slots=True)
class Schedule:
    """Time-of-day ``min_runners``: the first window (in written order) that matches wins."""

    timezone: str = "UTC"
    windows: tuple[ScheduleWindow, ...] = ()


@dataclass(frozen=True, slots=True)
class ScaleSetConfig:
    name: str
    max_runners: int
    providers: tuple[ScaleSetProvider, ...]
    labels: tuple[str, ...] = ()
    runner_group: str = "Default"
    min_runners: int = 0
    priority: int = 0
    placement: Placement = Placement.SPREAD
    start_timeout: float = 300.0
    max_idle_age: float | None = None
    max_age: float | None = None
    paused: bool = False
    schedule: Schedule | None = None

    @property
    def provider_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.providers)


@dataclass(frozen=True, slots=True)
class ScaleSetsFile:
    providers: tuple[ProviderConfig, ...]
    scale_sets: tuple[ScaleSetConfig, ...]
    timing: Timing = field(default_factory=Timing)
    path: str = ""

    def provider(self, name: str) -> ProviderConfig:
        for p in self.providers:
            if p.name == name:
                return p
        raise KeyError(name)

    def scale_set(self, name: str) -> ScaleSetConfig:
        for s in self.scale_sets:
            if s.name == name:
                return s
        raise KeyError(name)
