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


class Overflow(StrEnum):
    """A priced provider's ``overflow``: when a runner that cheaper providers refused as full
    may come here (docs/placement.md)."""

    AT_ONCE = "at_once"  # the default: at once
    WHEN_HOST_IS_LATER = "when_host_is_later"  # unless a host expects room sooner


class HoldChoice(StrEnum):
    """A scale set's ``hold``: which of the providers it found full its priority holds
    (docs/placement.md)."""

    EVERY_FULL = "every_full"  # the default: every one
    SOONEST_ROOM = "soonest_room"  # those whose room for it is expected soonest


DEFAULT_MARGIN = 180.0  # ``overflow_margin``
DEFAULT_TYPICAL_START = 60.0  # ``typical_start``: before its own starts are measured


@dataclass(frozen=True, slots=True)
class Timing:
    """Every documented duration, in seconds; ``hold`` of ``None`` is 2 × reconcile_interval."""

    reconcile_interval: float = 30.0
    backoff_first: float = 15.0
    backoff_max: float = 120.0
    hold: float | None = None
    unreachable_grace: float = 300.0  # runners of an unreachable provider kept this long
    # A create given up on while its machine may still be made: its name is kept this long
    # after its provider first lists without that machine (rungar.engine.reconcile.given_up_plan)
    left_grace: float = 60.0
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
    crash_backoff_after: int = 2  # runners that end before connecting, in a row, before a skip
    crash_backoff_first: float = 30.0  # runners that end before connecting: first skip
    crash_backoff_max: float = 600.0  # ... doubling in a row up to this
    starting_sync_interval: float = 5.0  # starting runners checked against GitHub this often
    # GitHub's assigned count above the jobs it sent, with runners idle all along, this long:
    # the jobs idle runners disprove are not counted (docs/github.md)
    stale_statistics_after: float = 120.0
    # Active and standby (docs/operating.md, "Running a standby"): the active daemon has GitHub
    # confirm its lease this often; the lease lasts this long after GitHub last confirmed it; the
    # standby asks for the lead scale set's message session this often.
    lease_renew_interval: float = 10.0
    lease_duration: float = 30.0
    standby_retry: float = 5.0
    # rerun_lost_jobs: lost jobs and re-runs are remembered this long (GitHub re-runs a run
    # for 30 days), across restarts.
    rerun_memory: float = 30 * 86400.0

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
    price_per_hour: float | None = None  # a runner-hour's price, for `rungar usage`'s cost
    overflow_after: float = 0.0  # > 0: taken only by work that has waited this long elsewhere
    overflow: Overflow = Overflow.AT_ONCE  # when_host_is_later: not while a host expects room
    overflow_margin: float = DEFAULT_MARGIN
    typical_start: float = DEFAULT_TYPICAL_START


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
class WarmPool:
    """Runners kept idle ahead of predicted demand, on top of ``min_runners`` (docs/scale-sets.md,
    "Warm pool"): the ``percentile`` of the jobs assigned in the same ``slot`` of the day on the
    last ``lookback`` days of the same kind (weekdays, or weekend days), at most ``max``. The slot
    looked at is the one in force now or ``ahead`` from now, whichever predicts more."""

    max: int
    slot: float = 900.0  # seconds; divides a day into whole minutes
    lookback: int = 5  # days of the same kind
    percentile: int = 90
    ahead: float = 300.0  # a slot's runners are started this long before it opens
    timezone: str = ""  # "" = the schedule's timezone, else UTC


@dataclass(frozen=True, slots=True)
class ScaleSetConfig:
    name: str
    max_runners: int
    providers: tuple[ScaleSetProvider, ...]
    labels: tuple[str, ...] = ()
    runner_group: str = "Default"
    min_runners: int = 0
    priority: int = 0
    hold: HoldChoice = HoldChoice.EVERY_FULL
    hold_margin: float = 0.0  # soonest_room: also held when expected this much later at most
    placement: Placement = Placement.SPREAD
    start_timeout: float = 300.0
    max_idle_age: float | None = None
    max_age: float | None = None
    paused: bool = False
    schedule: Schedule | None = None
    warm_pool: WarmPool | None = None
    rerun_lost_jobs: bool = False
    # A job no provider can ever serve has its run cancelled after this long; None = never.
    unservable_cancel_after: float | None = None

    @property
    def provider_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.providers)


@dataclass(frozen=True, slots=True)
class DashboardConfig:
    """The fleet page's listener (docs/dashboards.md); ``listen`` "" = no fleet page.

    Beyond loopback it needs TLS and a token or client certificates (checked at load).
    """

    listen: str = ""
    cert_file: str = ""
    key_file: str = ""
    client_ca_file: str = ""  # set: a client must show a certificate this CA signed
    token_file: str = ""  # set: a client must send the token (bearer header or ?token=)
    refresh: float = 2.0  # how often the page's live view is brought up to date
    history: float = 3600.0  # how far back the runners-over-time chart reaches
    max_connections: int = 64
    max_streams: int = 16  # live views open at once; more are refused


DEFAULT_USAGE_RETENTION = 90 * 86400.0


@dataclass(frozen=True, slots=True)
class JobReasonsConfig:
    """Why a job waits, told on GitHub (docs/github.md, "Why a job waits, on GitHub")."""

    enabled: bool = False
    after: float = 60.0  # a job not started this long after it was assigned gets its reason
    update_every: float = 60.0  # a reason is rewritten at most this often
    rest_share: int = 5  # percent of the hourly REST budget the writes may spend
    burst_share: int = 10  # percent of that hourly share the writes may spend in burst_window
    burst_window: float = 60.0  # seconds over which burst_share is counted
    turn_every: float | None = None  # None: a quarter of min(after, update_every), 0.25 s-5 s
    fleet_url: str = ""  # linked from each reason


@dataclass(frozen=True, slots=True)
class ScaleSetsFile:
    providers: tuple[ProviderConfig, ...]
    scale_sets: tuple[ScaleSetConfig, ...]
    timing: Timing = field(default_factory=Timing)
    path: str = ""
    dashboard: DashboardConfig = field(default_factory=DashboardConfig)
    usage_retention: float = DEFAULT_USAGE_RETENTION  # jobs served are kept this long
    job_reasons: JobReasonsConfig = field(default_factory=JobReasonsConfig)

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
