"""The values admission decides from and answers with (docs/admission.md, "Measured admission").

Pure data: the daemon fills these from its samples, its runners and the job history; ``runnerd
simulate`` (a later issue) fills them from a replay. Sizes are bytes, times epoch seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from rungar.model.machine import Conclusion
from rungar.model.units import format_bytes


class Policy(StrEnum):
    CAPS = "caps"
    MEASURED = "measured"


class OverRun(StrEnum):
    """``[host] over_run``: what a run past what it reserved has its job reserve.

    ``recent`` (the default): the larger of its recent runs' largest peak and that run's,
    while that run is among its recent runs, ``hold_for`` at most. ``window``: the larger of
    the job's largest peak of the whole history window and that run's, for ``hold_for``,
    whatever newer runs came (docs/admission.md, "A run past what it reserved")."""

    RECENT = "recent"
    WINDOW = "window"


@dataclass(frozen=True, slots=True)
class Margin:
    """``[sizing] margin``: a percent of the peak (``15``) or a size (``"512M"``)."""

    percent: float = 15.0
    absolute: int = 0
    # ``[sizing] page_cache_room``: the least sizing's need adds to a peak, room for the page
    # cache a job that writes files fills its cap with (1G; predictions do not add it).
    room: int = 1024**3

    def add(self, peak: int) -> int:
        if self.absolute:
            return peak + self.absolute
        return int(peak * (1 + self.percent / 100))

    def describe(self) -> str:
        return format_bytes(self.absolute) if self.absolute else f"{self.percent:g}%"


@dataclass(frozen=True, slots=True)
class Holder:
    """A program outside the slice and what its processes hold, by process name only."""

    name: str
    bytes: int


# A job's conclusion in the history: GitHub's, in the one vocabulary Rungar passes on.
SUCCESS = Conclusion.SUCCEEDED.value
FAILURE = Conclusion.FAILED.value
CANCELLED = Conclusion.CANCELLED.value
TIMED_OUT = Conclusion.TIMED_OUT.value


@dataclass(frozen=True, slots=True)
class Run:
    """One finished run of a job, as predictions read it."""

    finished_at: float
    result: str
    peak: int
    cap: int
    avg_cpu: float | None = None
    met_cap: bool = False  # memory.events.local oom: its own limit ran out
    killed_for_memory: bool = False  # an oom kill while its own limit held
    reserved: int | None = None
    # From its job's start (its runner's, when the job's is not known) to its end: what its
    # next runs' ends are predicted from (docs/admission.md, "When room comes back").
    duration: float | None = None

    @property
    def counted_peak(self) -> int:
        """A run that met its cap counts at least its cap."""
        return max(self.peak, self.cap) if self.met_cap else self.peak

    @property
    def succeeded(self) -> bool:
        return self.result == SUCCESS

    @property
    def cancelled(self) -> bool:
        return self.result == CANCELLED


@dataclass(frozen=True, slots=True)
class Prediction:
    """What a runner reserves and why, as a phrase for the admission record."""

    memory: int
    cpu: float
    basis: str
    cpu_basis: str = ""


@dataclass(frozen=True, slots=True)
class Running:
    """A running runner as admission counts it."""

    name: str
    profile: str
    scale_set: str
    cap: int
    cpus: float
    reserved: int
    reserved_cpu: float
    used: int = 0  # its job memory at the last sample
    used_at: float = 0.0  # that sample's time; its start until the first sample


@dataclass(frozen=True, slots=True)
class Candidate:
    """A runner Rungar asks for."""

    name: str
    profile: str
    scale_set: str
    cap: int
    cpus: float
    disk: int
    slots: int
    prediction: Prediction


@dataclass(frozen=True, slots=True)
class SliceReading:
    at: float
    memory: int  # memory.current − inactive_file, as docker stats counts it


@dataclass(frozen=True, slots=True)
class HostReading:
    at: float
    total: int  # MemTotal
    available: int  # MemAvailable
    full_avg10: float  # /proc/pressure/memory "full" share of the last 10 s, percent
    held: int  # what the runners hold now, without page cache or reclaimable slab
    holders: tuple[Holder, ...] = ()  # programs outside the slice holding ≥ 512M


@dataclass(frozen=True, slots=True)
class Limits:
    """The [host] settings admission applies, with the slice's MemoryMax and CPUs read."""

    policy: Policy = Policy.CAPS
    memory_max: int | None = None
    mirror: int = 0
    high_water: float = 0.90
    fresh_for: float = 6.0
    cpu_budget: float | None = None  # slice CPUs × cpu_overcommit; None: no CPU admission
    cpu_starvation: float = 120.0
    cpu_wait_forget: float = 300.0
    stall_enter: float = 5.0
    stall_leave: float = 1.0
    margin_min: int = 2 * 1024**3
    margin_share: int = 16
    disk_reserve: int = 10 * 1024**3


@dataclass(frozen=True, slots=True)
class CpuWaiter:
    """A scale set held for CPU: since its first refusal, until it starts or stops asking."""

    scale_set: str
    since: float
    last_asked: float


@dataclass(frozen=True, slots=True)
class GuardState:
    """What admission remembers between decisions: the stall, the widened margin, CPU waits."""

    stalled: bool = False
    widened: bool = False
    cpu_waiting: tuple[CpuWaiter, ...] = ()


@dataclass(frozen=True, slots=True)
class AdmissionRecord:
    """What a runner reserved and why, kept with its job (``runnerctl job``)."""

    policy: Policy
    reserved: int
    basis: str
    free: int | None  # of the budget, before this runner
    slice: int | None = None
    cpu: float | None = None
    cpu_wait: float = 0.0

    def line(self) -> str:
        how = "measured peaks" if self.policy is Policy.MEASURED else "caps"
        text = f"admitted by {how}: reserved {format_bytes(self.reserved)}, {self.basis}"
        if self.free is not None:
            text += f"; {format_bytes(self.free)} of the budget was free"
        return text


@dataclass(frozen=True, slots=True)
class Admit:
    memory: int
    cpu: float
    record: AdmissionRecord


@dataclass(frozen=True, slots=True)
class NoRoom:
    """``resource`` is memory|cpu|slots|disk; ``wait`` says which wait it counts toward."""

    resource: str
    message: str
    wait: str = "slot"  # slot | host | cpu


@dataclass(frozen=True, slots=True)
class Decided:
    """What :func:`~runnerd.admission.admit.decide` returns: the decision, and the host guard's
    state after it."""

    decision: Admit | NoRoom
    state: GuardState = field(default_factory=GuardState)
