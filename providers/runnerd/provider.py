"""``RunnerdProvider``: the host provider behind the provider protocol (docs/architecture.md).

docs/admission.md. Create resolves the runner's profile (``runner: {profile: node}``, else the
profile named after its scale set; the profile's settings override the block's), asks the pure
:func:`runnerd.admission.decide` with the latest readings, and starts the runner on its runtime, or
refuses: FULL with the resource and a sentence saying what ran out, INVALID for an unknown profile
or a runner larger than the host. Creates are serialized so two admissions never take the same room.
Sampling (every ``sample_interval``) lives in :mod:`runnerd.sampler`.

A runner's job is recorded when Rungar deletes the runner, with the conclusion its Delete
carries (:mod:`runnerd.outcome`). A runner whose job completed gets ``exit_grace`` to exit by
itself, sampled to the end, before it is stopped; one that exits before the Delete comes keeps
its peaks, exit status and end time in the history until then.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import structlog

from rungar.clock import Clock
from rungar.config.schema import RUNNER_KEYS
from rungar.model.job_key import JobKey
from rungar.model.machine import (
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    ProviderInfo,
    Refusal,
    RefusalKind,
    Removal,
    RoomExpected,
)
from rungar.model.runner_block import RunnerBlock
from rungar.model.units import format_bytes
from runnerd import readers
from runnerd.admission import (
    Candidate,
    GuardState,
    HostReading,
    Limits,
    NoRoom,
    Policy,
    Running,
    SliceReading,
    decide,
    memory_reserved,
)
from runnerd.admission.admit import fits_beside
from runnerd.admission.model import Admit, Decided, Run
from runnerd.admission.room import PredictedEnd, expected_room, predicted_end
from runnerd.config import Profile, RunnerdConfig, prediction_rules
from runnerd.events import EventLog
from runnerd.figures import HeldSpan, converted, held_back, queued_by_our_clock
from runnerd.history import History, JobEnd, JobStart, JobTimes
from runnerd.metrics import LiveFigures, RunnerdMetrics, SliceCounters
from runnerd.outcome import Ending, recorded_result, waits_for_exit
from runnerd.predictor import Predictor
from runnerd.runner_install import RunnerVersionReader
from runnerd.runtime.base import (
    MANAGED_LABEL,
    NAME_LABEL,
    PROFILE_LABEL,
    SCALE_SET_LABEL,
    RunnerSpec,
    Runtime,
    Usage,
)
from runnerd.version import VERSION

log = structlog.get_logger("runnerd.provider")

LISTED_KEPT = 10_000  # job ids remembered from creates' hints
HELD_KEPT = 10_000  # refusal stretches kept per scale set


@dataclass
class HostedRunner:
    """A runner runnerd started: what it reserved, what it uses, which job it took."""

    name: str
    request_id: str
    scale_set: str
    profile: Profile
    labels: dict[str, str]
    handle: str
    created_at: float
    reserved: int
    reserved_cpu: float
    basis: str
    row: int
    hints: tuple[JobHint, ...] = ()
    job: JobHint | None = None
    state: MachineState = MachineState.RUNNING
    used: int = 0
    used_at: float = 0.0
    held: int = 0
    peak: int = 0
    cpu_seconds: float = 0.0
    met_cap: bool = False
    killed_for_memory: bool = False
    sock_throttled: int | None = None
    exit_code: int | None = None
    peak_cpu: float = 0.0  # the most CPUs it used between two samples
    cpu_at: float = 0.0  # when cpu_seconds was last read
    ended_at: float | None = None  # when it exited by itself or was stopped
    exited: bool = False  # it ended by itself, not stopped by runnerd
    job_started_at: float | None = None  # when it took its job (UpdateRunner), runnerd's clock
    cpu_at_job: float = 0.0  # its CPU seconds when it took its job: the job's average from there
    cpu_rate: float | None = None  # CPUs used between its last two samples

    def key(self) -> JobKey | None:
        if self.job is None or not self.job.job:
            return None
        return JobKey(self.profile.name, self.job.repository, self.job.workflow, self.job.job)

    def machine(self, provider: str) -> Machine:
        size = f"{self.profile.cpus:g} vCPU, {format_bytes(self.profile.memory)}"
        return Machine(self.name, self.state, dict(self.labels), size, self.created_at, provider)

    def running(self) -> Running:
        return Running(
            self.name,
            self.profile.name,
            self.scale_set,
            self.profile.memory,
            self.profile.cpus,
            self.reserved,
            self.reserved_cpu,
            self.used,
            self.used_at,
        )


# What a queue entry waits for, by the last refusal's resource and wait (one word each side).
WAITS_FOR = {"host": "host", "cpu": "cpu"}  # else the resource: slots, memory (MemoryMax), disk


def waits_for(resource: str, wait: str) -> str:
    """The queue entry's kind, as the refusal's sentence says it: ``slots``, ``memory`` (the
    slice's MemoryMax), ``host`` (the host's memory), ``cpu`` or ``disk``."""
    return WAITS_FOR.get(wait, resource)


@dataclass
class Waiting:
    """How long a scale set has been refused, split by what held it (slot, host, CPU)."""

    first: float
    last: float
    kind: str  # which wait the time counts toward: slot (slots or MemoryMax), host, cpu
    spent: dict[str, float] = field(default_factory=lambda: {"slot": 0.0, "host": 0.0, "cpu": 0.0})
    why: str = ""  # the last refusal's sentence, for the dashboard's queue
    resource: str = ""  # what the last refusal ran out of, as :func:`waits_for` says it
    # The jobs the last refused create listed: the scale set waits for them; once each has
    # started on a runner here, nothing waits and the entry ends.
    jobs: set[str] = field(default_factory=set)

    def tick(self, now: float, kind: str) -> None:
        self.spent[self.kind] += max(0.0, now - self.last)
        self.last, self.kind = now, kind


@dataclass
class Readings:
    """The sampler's latest view; admission treats anything older than fresh_for as missing."""

    slice: SliceReading | None = None
    host: HostReading | None = None
    disk_free: int | None = None
    disk_at: float = 0.0
    counters: SliceCounters | None = None  # the slice's CPU and IO, for the metrics


def _size(value: int | None) -> str:
    return "none" if value is None else format_bytes(value)


def _cpus(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def slice_limits(config: RunnerdConfig) -> tuple[int | None, float | None]:
    """The slice's MemoryMax and CPUs: the config's when set, else read from its cgroup."""
    host = config.host
    memory_max = host.memory_max
    if memory_max is None:
        memory_max = readers.read_slice_limit(host.cgroup_root, host.slice)
    cpus = host.cpus or readers.read_slice_cpus(host.cgroup_root, host.slice)
    return memory_max, cpus


def limits_of(config: RunnerdConfig, memory_max: int | None, slice_cpus: float | None) -> Limits:
    """The [host] settings admission applies, with the slice's MemoryMax and CPUs."""
    host = config.host
    budget = slice_cpus * host.cpu_overcommit if slice_cpus and host.cpu_overcommit else None
    return Limits(
        policy=host.admission,
        memory_max=memory_max,
        mirror=host.mirror_memory,
        high_water=host.high_water,
        fresh_for=host.fresh_for,
        cpu_budget=budget,
        cpu_starvation=host.cpu_starvation,
        cpu_wait_forget=host.cpu_wait_forget,
        stall_enter=host.stall_enter,
        stall_leave=host.stall_leave,
        margin_min=host.margin_min,
        margin_share=host.margin_share,
        disk_reserve=host.disk_reserve,
    )


class RunnerdProvider:
    def __init__(
        self,
        config: RunnerdConfig,
        runtime: Runtime,
        history: History,
        clock: Clock,
        memory_max: int | None,
        slice_cpus: float | None,
        host_memory: int | None = None,
        name: str = "runnerd",
    ) -> None:
        self.config = config
        self.runtime = runtime
        self.history = history
        self.clock = clock
        self.name = name
        self.host_memory = host_memory
        self.slice_cpus = slice_cpus
        self.limits = limits_of(config, memory_max, slice_cpus)
        host = config.host
        rules = prediction_rules(config)
        self.predictor = Predictor(rules, host.history_window, host.reread)
        self.readings = Readings()
        self.guard = GuardState()
        self.runners: dict[str, HostedRunner] = {}
        self.waiting: dict[str, Waiting] = {}
        # Each scale set's stretches of refusals, kept ``[host] held_window``: a job's waits
        # are the part of them between its queue time and its runner's start.
        self.held: dict[str, list[HeldSpan]] = {}
        self.first_listed: dict[str, float] = {}  # job id: when a create first listed it
        # job id: its queue time on runnerd's clock, GitHub's converted by its hint's offset
        # when runnerd first heard of it (docs/runnerd.md, "Every figure, defined once")
        self.queued_here: dict[str, float] = {}
        self.sample_listeners: list[Callable[[HostedRunner], None]] = []
        self._open_hold: dict[str, tuple[float, str]] = {}  # scale set: (last refusal, kind)
        # runner name: its scale set, for runners refused here; Rungar names one to tell the
        # queue of a scale set this host keeps a queue entry for
        self.refused_names: dict[str, str] = {}
        self.events: EventLog | None = None  # the daemon's; None in tools and some tests
        self.runner_version = RunnerVersionReader(config, clock)  # what Info tells
        self.metrics = RunnerdMetrics()
        self.metrics.watch(self.live_figures)
        self._lock = asyncio.Lock()

    def reconfigure(
        self, config: RunnerdConfig, memory_max: int | None, slice_cpus: float | None
    ) -> None:
        """Admit new runners by ``config``'s profiles (auto sizing wrote new values) and the
        slice's MemoryMax and CPUs as read again. A running runner keeps the profile it was
        admitted with: its container's limits do not move."""
        changed = sorted(
            name
            for name, profile in config.profiles.items()
            if self.config.profiles.get(name) != profile
        )
        self.config = config
        self.runner_version = RunnerVersionReader(config, self.clock)  # read afresh
        self.set_slice(memory_max, slice_cpus)
        self.limits = limits_of(config, memory_max, slice_cpus)
        host = config.host
        rules = prediction_rules(config)
        if rules != self.predictor.rules:  # a reload changed [sizing]: read the history again
            self.predictor = Predictor(rules, host.history_window, host.reread)
        log.info("runnerd.reconfigured", profiles=changed)

    def set_slice(self, memory_max: int | None, slice_cpus: float | None) -> bool:
        """Take the slice's MemoryMax and CPUs as read now (a ``systemctl daemon-reload`` may
        have changed them); True when they changed."""
        if (memory_max, slice_cpus) == (self.limits.memory_max, self.slice_cpus):
            return False
        log.info(
            "runnerd.slice_changed",
            memory_max=memory_max,
            was=self.limits.memory_max,
            cpus=slice_cpus,
            cpus_were=self.slice_cpus,
        )
        before = self.limits.memory_max, self.slice_cpus
        self.slice_cpus = slice_cpus
        self.limits = limits_of(self.config, memory_max, slice_cpus)
        self.record_event(
            "slice.changed",
            self.config.host.slice,
            f"{self.config.host.slice}: MemoryMax {_size(memory_max)} (was {_size(before[0])}), "
            f"{_cpus(slice_cpus)} CPUs (were {_cpus(before[1])})",
            memory_max=memory_max,
            cpus=slice_cpus,
        )
        return True

    def record_event(self, kind: str, subject: str, message: str, **data: Any) -> None:
        if self.events is not None:
            self.events.record(self.clock.now(), kind, subject, message, **data)

    def live_figures(self) -> LiveFigures:
        """What the metrics show at a scrape: readings older than ``fresh_for`` left out."""
        now = self.clock.now()
        limits = self.limits
        reading = self.readings.slice
        fresh = reading is not None and now - reading.at <= limits.fresh_for
        live = [r.running() for r in self.runners.values() if r.state is not MachineState.STOPPED]
        counters = self.readings.counters
        io = None
        if counters is not None and counters.io_read is not None:
            io = (counters.io_read, counters.io_write or 0)
        return LiveFigures(
            memory=reading.memory if reading is not None and fresh else None,
            memory_max=limits.memory_max,
            reserved=memory_reserved(live, limits, fresh, now),
            cpus=self.slice_cpus,
            counters=counters
            if counters is not None and now - counters.at <= limits.fresh_for
            else None,
            cpu_seconds=counters.cpu_seconds if counters is not None else None,
            io=io,
            running=self.running_per_profile(),
            busy=self.running_per_profile(busy=True),
            slots={name: profile.slots for name, profile in self.config.profiles.items()},
        )

    def running_per_profile(self, busy: bool = False) -> dict[str, int]:
        """Running runners by profile: the slots they occupy; with ``busy``, only those whose
        job has queued (they took it, or were asked for queued jobs), as a slot counts as
        busy from its job's queue time (docs/runnerd.md, "Busy and occupied")."""
        counts: dict[str, int] = {}
        for state in self.runners.values():
            if state.state is MachineState.STOPPED:
                continue
            if busy and state.job is None and not state.hints:
                continue  # a reserve or warm runner waiting for a job
            counts[state.profile.name] = counts.get(state.profile.name, 0) + 1
        return counts

    # ---- the protocol ------------------------------------------------------------------

    async def info(self) -> ProviderInfo:
        return ProviderInfo(
            self.name,
            "runnerd",
            VERSION,
            RUNNER_KEYS["runnerd"],
            runner_version=await self.runner_version.version(),
        )

    async def validate_runner(self, runner: Mapping[str, Any]) -> list[str]:
        try:
            block = RunnerBlock.from_mapping(runner)
        except ValueError as e:
            return [str(e)]
        known = RUNNER_KEYS["runnerd"]
        problems = []
        for key in block.extra:
            if key not in known:
                near = difflib.get_close_matches(key, list(known), 1, 0.6)
                hint = f"; did you mean {near[0]}?" if near else f"; it knows {', '.join(known)}"
                problems.append(f"{key}: not a runner key runnerd knows{hint}")
        if problems:
            return problems
        name = block.extra.get("profile")
        if name is not None and name not in self.config.profiles:
            return [self._unknown_profile(str(name))]
        too_big = self._larger_than_host(block.memory_bytes, block.vcpus)
        return [too_big] if too_big else []

    async def create(self, request: CreateRequest) -> Created | Refusal:
        async with self._lock:
            return await self._create(request)

    async def _create(self, request: CreateRequest) -> Created | Refusal:
        existing = self.runners.get(request.runner_name)
        if existing is not None:
            if existing.request_id == request.request_id:
                return Created(existing.machine(self.name))
            return Refusal(
                RefusalKind.FAILED,
                f"A runner named {request.runner_name} already runs here for another request",
            )
        resolved = self._resolve(request)
        if isinstance(resolved, Refusal):
            return resolved
        profile = resolved
        now = self.clock.now()
        await self._refresh_predictor(now)
        self._note_listed(request.job_hints, now)
        if request.job_hints and self.limits.policy is Policy.MEASURED:
            await self._follow_queue(request.scale_set, request.job_hints, now)
        outcome = self._decide(request, profile, now)
        self.guard = outcome.state
        decision = outcome.decision
        if isinstance(decision, NoRoom):
            self.metrics.refusals.labels(profile.name, decision.resource).inc()
            self._note_wait(request.scale_set, now, decision.wait)
            self.waiting[request.scale_set].why = decision.message
            self.waiting[request.scale_set].resource = waits_for(decision.resource, decision.wait)
            self.waiting[request.scale_set].jobs = {h.job_id for h in request.job_hints if h.job_id}
            self.refused_names[request.runner_name] = request.scale_set
            if len(self.refused_names) > LISTED_KEPT:
                del self.refused_names[next(iter(self.refused_names))]
            log.info(
                "runner.refused",
                runner=request.runner_name,
                scale_set=request.scale_set,
                resource=decision.resource,
                reason=decision.message,
            )
            room = self._expected_room(request, profile, now)
            return Refusal(RefusalKind.FULL, decision.message, decision.resource, room)
        waits = self._end_wait(request.scale_set, now)
        try:
            handle = await self.runtime.start(self._spec(request, profile))
        except RuntimeError as e:
            return Refusal(RefusalKind.FAILED, f"The runner could not start: {e}")
        record = decision.record
        row = await self._history_start(request, profile, decision, waits, now)
        state = HostedRunner(
            name=request.runner_name,
            request_id=request.request_id,
            scale_set=request.scale_set,
            profile=profile,
            labels=dict(request.labels),
            handle=handle,
            created_at=now,
            reserved=decision.memory,
            reserved_cpu=decision.cpu,
            basis=record.basis,
            row=row,
            hints=tuple(request.job_hints),
            used_at=now,
        )
        self.runners[request.runner_name] = state
        self.metrics.admissions.labels(profile.name, record.policy.value).inc()
        log.info("runner.admitted", runner=request.runner_name, admission=record.line())
        return Created(state.machine(self.name))

    def _decide(self, request: CreateRequest, profile: Profile, now: float) -> Decided:
        """Admission's decision for the runner, beside every runner running now."""
        running = [r for r in self.runners.values() if r.state is not MachineState.STOPPED]
        return decide(
            self._candidate(request, profile, now, running),
            [r.running() for r in running],
            self.readings.slice,
            self.readings.host,
            self._disk_free(now),
            self.limits,
            self.guard,
            now,
        )

    def _disk_free(self, now: float) -> int | None:
        fresh = now - self.readings.disk_at <= self.limits.fresh_for
        return self.readings.disk_free if fresh else None

    def _expected_room(
        self, request: CreateRequest, profile: Profile, now: float
    ) -> RoomExpected | None:
        """When room is expected for a runner just refused: the earliest predicted end of the
        running jobs after which admission would take it (docs/admission.md, "When room comes
        back"); None when no prediction says."""
        running = [r for r in self.runners.values() if r.state is not MachineState.STOPPED]
        ends: dict[str, PredictedEnd] = {}
        for runner in running:
            key = runner.key()
            if key is None or runner.job_started_at is None:
                continue  # no job yet: its end is not known
            ending = predicted_end(self.predictor.durations(key, now), runner.job_started_at, now)
            if ending is not None:
                ends[runner.name] = ending
        if not ends:
            return None
        expected = expected_room(
            self._candidate(request, profile, now, running),
            [r.running() for r in running],
            ends,
            self.readings.slice,
            self.readings.host,
            self._disk_free(now),
            self.limits,
            self.guard,
            now,
        )
        if expected is None:
            return None
        return RoomExpected(round(expected.seconds, 1), round(expected.confidence, 3))

    def _candidate(
        self, request: CreateRequest, profile: Profile, now: float, running: list[HostedRunner]
    ) -> Candidate:
        prediction = self.predictor.predict_runner(
            profile.name,
            request.job_hints,
            profile.memory,
            profile.cpus,
            now,
            busy_keys=frozenset(k for r in running if (k := r.key()) is not None),
            busy_repositories=frozenset(
                h.repository for r in running if r.job is None for h in r.hints
            ),
        )
        return Candidate(
            request.runner_name,
            profile.name,
            request.scale_set,
            profile.memory,
            profile.cpus,
            profile.disk or self.config.host.disk_per_runner,
            profile.slots,
            prediction,
        )

    def _spec(self, request: CreateRequest, profile: Profile) -> RunnerSpec:
        """What the runtime starts for an admitted runner."""
        return RunnerSpec(
            name=request.runner_name,
            profile=profile.name,
            scale_set=request.scale_set,
            image=profile.image or request.runner.image,
            command=profile.command,
            cpus=profile.cpus,
            memory=profile.memory,
            labels={
                **request.labels,
                MANAGED_LABEL: "true",
                NAME_LABEL: request.runner_name,
                PROFILE_LABEL: profile.name,
                SCALE_SET_LABEL: request.scale_set,
            },
            env={
                **profile.env,
                "ACTIONS_RUNNER_INPUT_JITCONFIG": request.jit_config,
                "RUNGAR_JITCONFIG": request.jit_config,
                "RUNGAR_RUNNER_NAME": request.runner_name,
            },
        )

    async def _history_start(
        self,
        request: CreateRequest,
        profile: Profile,
        decision: Admit,
        waits: Waiting | None,
        now: float,
    ) -> int:
        """The job's row in the history, opened as the runner starts."""
        record = decision.record
        return await self.history.run(
            self.history.start,
            JobStart(
                runner=request.runner_name,
                scale_set=request.scale_set,
                profile=profile.name,
                cap_memory=profile.memory,
                cap_cpus=profile.cpus,
                policy=record.policy.value,
                reserved_memory=decision.memory,
                reserved_cpu=decision.cpu,
                basis=record.basis,
                budget_free=record.free,
                slice_memory=record.slice,
                started_at=now,
                # Its job's queue time once known; until then the first refusal it waited
                # through, or its own start when it was asked for queued jobs. A reserve or
                # warm runner asked for none has none: it is not busy until its job queues.
                queued_at=waits.first if waits else (now if request.job_hints else None),
                slot_wait=waits.spent["slot"] if waits else 0.0,
                host_wait=waits.spent["host"] if waits else 0.0,
                cpu_wait=record.cpu_wait,
                slots=profile.slots,
            ),
        )

    async def delete(self, name: str, removal: Removal | None = None) -> None:
        """Stop the runner and record its job as Rungar's ``removal`` says it ended."""
        state = self.runners.get(name)
        if state is None:
            return
        if removal is not None and removal.job is not None and state.job is None:
            await self._learn_job(state, removal.job)  # its UpdateRunner never came
        if removal is not None and removal.job is not None:
            self._left_queue(removal.job.job_id)
        if state.ended_at is None and waits_for_exit(removal):
            await self._await_exit(state)
        async with self._lock:
            if self.runners.get(name) is not state:
                return  # a concurrent delete recorded it
            del self.runners[name]
        await self.runtime.stop(state.handle)
        if state.ended_at is None:
            state.state, state.ended_at = MachineState.STOPPED, self.clock.now()
        await self.record(state, removal)

    async def _await_exit(self, state: HostedRunner) -> None:
        """Sample the runner until it exits by itself, for at most ``exit_grace``."""
        host = self.config.host
        deadline = self.clock.now() + host.exit_grace
        poll = min(host.sample_interval, host.exit_grace / 20)
        while state.ended_at is None:
            await self.sample_runner(state)
            if state.ended_at is not None or self.clock.now() >= deadline:
                return
            await self.clock.sleep(poll)

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        return [
            r.machine(self.name)
            for r in self.runners.values()
            if all(r.labels.get(k) == v for k, v in selector.items())
        ]

    async def last_output(self, name: str, lines: int = 20) -> Sequence[str]:
        """The runner's last lines of output, from its runtime; a runner already deleted is
        read by its name (the process runtime keeps its log file)."""
        state = self.runners.get(name)
        handle = state.handle if state is not None else name
        try:
            return await self.runtime.last_output(handle, lines)
        except (OSError, RuntimeError, httpx.HTTPError):
            return []

    async def update_runner(self, name: str, job: JobHint) -> None:
        """The runner took ``job``: it now reserves that job's prediction."""
        state = self.runners.get(name)
        if state is None:
            return
        state.job = job
        now = self.clock.now()
        await self._job_started(state, job, now)
        key = state.key()
        if key is None:
            return
        others = {k for r in self.runners.values() if r is not state and (k := r.key())}
        prediction = self.predictor.predict_job(
            key, state.profile.memory, state.profile.cpus, now, beside=key in others
        )
        if self.limits.policy is Policy.MEASURED:
            state.reserved, state.reserved_cpu = prediction.memory, prediction.cpu
            state.basis = prediction.basis
        await self.history.run(
            self.history.took_job,
            state.row,
            key,
            job.job_id,
            state.reserved,
            state.reserved_cpu,
            state.basis,
            job.branch,
            job.run_id,
        )

    async def _job_started(self, state: HostedRunner, job: JobHint, now: float) -> None:
        """The runner took ``job`` now: its run (duration, average CPU) counts from here, and
        its waits are the refusals of its scale set here between its queue time and its
        runner's start, not an earlier refusal of the same scale set."""
        if state.job_started_at is not None:
            return
        state.job_started_at = now
        state.cpu_at_job = state.cpu_seconds
        state.peak_cpu = 0.0  # the job's peak, as its chart from its start shows it
        queued = queued_by_our_clock(
            job.queued_at,
            job.started_at,
            now,
            self.first_listed.get(job.job_id),
            self.queued_here.get(job.job_id),
            job.clock_offset,
        )
        self._left_queue(job.job_id)
        waits = held_back(
            self.held.get(state.scale_set, ()),
            queued if queued is not None else state.created_at,
            state.created_at,
        )
        await self.history.run(
            self.history.job_times,
            state.row,
            JobTimes(
                job_started_at=now,
                queued_at=queued,
                slot_wait=waits["slot"],
                host_wait=waits["host"],
                github_queued_at=job.queued_at or None,
                github_started_at=job.started_at or None,
            ),
        )

    def _note_listed(self, hints: Sequence[JobHint], now: float) -> None:
        """When each job was first listed here and, once, its queue time converted onto
        runnerd's clock by its hint's offset (never after now: it was queued before it was
        listed)."""
        for hint in hints:
            if hint.job_id:
                self.first_listed.setdefault(hint.job_id, now)
                at = converted(hint.queued_at, hint.clock_offset)
                if at is not None and hint.job_id not in self.queued_here:
                    self.queued_here[hint.job_id] = min(at, now)
        for kept in (self.first_listed, self.queued_here):
            if len(kept) > LISTED_KEPT:  # jobs that went elsewhere: the oldest go
                for job_id in list(kept)[: len(kept) - LISTED_KEPT]:
                    del kept[job_id]

    def _left_queue(self, job_id: str) -> None:
        """``job_id`` started (or ended) here: a scale set that waited only for it and the
        others that started since waits no more."""
        if not job_id:
            return
        self.first_listed.pop(job_id, None)
        self.queued_here.pop(job_id, None)
        now = self.clock.now()
        for name, waiting in list(self.waiting.items()):
            if job_id in waiting.jobs:
                waiting.jobs.discard(job_id)
                if not waiting.jobs:
                    del self.waiting[name]
                    self._hold(name, now, "")  # nothing is held back from here

    def _still_queued(self, scale_set: str, queued: Sequence[JobHint]) -> None:
        """The scale set's queue now, oldest first: a job its entry here waits for that is not
        in it has left the queue (a job stays among the oldest until it leaves), and the entry
        ends when none is left."""
        waiting = self.waiting.get(scale_set)
        if waiting is None or not waiting.jobs:
            return
        listed = {h.job_id for h in queued if h.job_id}
        for job_id in waiting.jobs - listed:
            self._left_queue(job_id)

    def queue(self, now: float) -> dict[str, Waiting]:
        """The scale sets waiting here now: refused, still asked for (a refusal within
        ``cpu_wait_forget``), with a job not yet started. Older entries are dropped."""
        forget = self.config.host.cpu_wait_forget
        for name in [n for n, w in self.waiting.items() if now - w.last > forget]:
            del self.waiting[name]
        return dict(self.waiting)

    async def queue_changed(self, name: str, queued: Sequence[JobHint]) -> None:
        """Rungar says what ``name``'s scale set has queued now (UpdateRunner without a job):
        as a job queued there, though its next Create may go to another provider, its waiting
        runners here follow it as they do a Create's hints; as jobs left it, wherever they ran,
        its queue entry here waits for those still listed (``name`` may be a runner this host
        refused)."""
        state = self.runners.get(name)
        if state is None:
            scale_set = self.refused_names.get(name)
            if scale_set is not None:
                self._still_queued(scale_set, queued)
            return
        self._still_queued(state.scale_set, queued)
        async with self._lock:
            now = self.clock.now()
            self._note_listed(queued, now)
            if queued and self.limits.policy is Policy.MEASURED:
                await self._refresh_predictor(now)
                await self._follow_queue(state.scale_set, queued, now)

    # ---- a waiting runner follows its scale set's queue ---------------------------------

    async def _follow_queue(self, scale_set: str, hints: Sequence[JobHint], now: float) -> None:
        """Each runner of ``scale_set`` still waiting for its job may be given any of ``hints``
        (the scale set's queued jobs, as a create brings them), so a heavier one among them
        raises its reservation to that job's prediction. When that no longer fits beside the
        other runners, it is stopped and listed as stopped, so Rungar removes its registration
        and the job waits for a runner that fits."""
        for state in list(self.runners.values()):
            if state.scale_set != scale_set or state.job is not None:
                continue
            if state.state is MachineState.STOPPED:
                continue
            others = [
                r
                for r in self.runners.values()
                if r is not state and r.state is not MachineState.STOPPED
            ]
            prediction = self.predictor.predict_runner(
                state.profile.name,
                hints,
                state.profile.memory,
                state.profile.cpus,
                now,
                busy_keys=frozenset(k for r in others if (k := r.key()) is not None),
                busy_repositories=frozenset(
                    h.repository for r in others if r.job is None for h in r.hints
                ),
            )
            # Only ever up: a job that left the queue may be this runner's, not yet told.
            memory = max(prediction.memory, state.reserved)
            cpu = max(prediction.cpu, state.reserved_cpu)
            if (memory, cpu) == (state.reserved, state.reserved_cpu):
                continue
            if not fits_beside(
                memory,
                cpu,
                [r.running() for r in others],
                self.readings.slice,
                self.readings.host,
                self.limits,
                self.guard,
                now,
            ):
                await self._stop_waiting(state, memory, now)
                continue
            log.info(
                "runner.rereserved",
                runner=state.name,
                was=state.reserved,
                reserved=memory,
                basis=prediction.basis,
            )
            if memory > state.reserved:
                state.basis = prediction.basis
            state.reserved, state.reserved_cpu = memory, cpu
            state.hints = tuple(dict.fromkeys((*state.hints, *hints)))

    async def _stop_waiting(self, state: HostedRunner, needs: int, now: float) -> None:
        await self.runtime.stop(state.handle)
        message = (
            f"{state.name} stopped before it took a job: a heavier job queued for "
            f"{state.scale_set}, and its {format_bytes(needs)} no longer fits beside the other "
            "runners"
        )
        log.info("runner.stopped_for_queue", runner=state.name, needs=needs)
        self.record_event("runner.stopped", state.name, message, needs=needs)
        # Listed as stopped until Rungar deletes it; it ran no job, so it records no job run.
        state.state, state.ended_at = MachineState.STOPPED, now

    async def _learn_job(self, state: HostedRunner, job: JobHint) -> None:
        """Name the job a runner ran, keeping what it reserved: its admission is over. Its
        start is GitHub's run time back from the runner's end, when GitHub gave both."""
        state.job = job
        if job.started_at > 0 and job.completed_at >= job.started_at:
            end = state.ended_at if state.ended_at is not None else self.clock.now()
            began = max(state.created_at, end - (job.completed_at - job.started_at))
            await self._job_started(state, job, began)
            state.cpu_at_job = 0.0  # its CPU from its start is not known: its whole life's
        key = state.key()
        if key is not None:
            await self.history.run(
                self.history.took_job,
                state.row,
                key,
                job.job_id,
                state.reserved,
                state.reserved_cpu,
                state.basis,
                job.branch,
                job.run_id,
            )

    # ---- helpers -----------------------------------------------------------------------

    def _resolve(self, request: CreateRequest) -> Profile | Refusal:
        block = request.runner
        name = str(block.extra.get("profile") or request.scale_set)
        profile = self.config.profiles.get(name)
        if profile is None:
            return Refusal(RefusalKind.INVALID, self._unknown_profile(name), "profile")
        too_big = self._larger_than_host(max(block.memory_bytes, profile.memory), profile.cpus)
        if too_big:
            return Refusal(RefusalKind.INVALID, too_big, "memory")
        return profile

    def _unknown_profile(self, name: str) -> str:
        known = ", ".join(sorted(self.config.profiles))
        return f"No profile named {name} in {self.config.file}; it has {known}"

    def _larger_than_host(self, memory: int, cpus: float) -> str:
        limit = self.limits.memory_max
        if limit is not None:
            limit -= self.limits.mirror
        if self.host_memory is not None:
            limit = self.host_memory if limit is None else min(limit, self.host_memory)
        if limit is not None and memory > limit:
            return (
                f"The runner needs {format_bytes(memory)}, more than this host can ever give "
                f"it ({format_bytes(limit)})"
            )
        if self.slice_cpus and cpus > self.slice_cpus:
            return f"The runner needs {cpus:g} CPUs; this host has {self.slice_cpus:g}"
        return ""

    async def _refresh_predictor(self, now: float) -> None:
        if self.predictor.due(now):
            since = now - self.config.host.history_window
            rows = await self.history.run(self.history.finished_since, since)
            self.predictor.load(rows, now)

    def _note_wait(self, scale_set: str, now: float, kind: str) -> None:
        self._hold(scale_set, now, kind)
        waiting = self.waiting.get(scale_set)
        if waiting is None or now - waiting.last > self.config.host.cpu_wait_forget:
            self.waiting[scale_set] = Waiting(now, now, kind)
        else:
            waiting.tick(now, kind)

    def _end_wait(self, scale_set: str, now: float) -> Waiting | None:
        self._hold(scale_set, now, "")
        waiting = self.waiting.pop(scale_set, None)
        if waiting is None or now - waiting.last > self.config.host.cpu_wait_forget:
            return None
        waiting.tick(now, waiting.kind)
        return waiting

    def _hold(self, scale_set: str, now: float, kind: str) -> None:
        """A refusal (``kind``) or an admission (``""``) of ``scale_set`` now: the time since
        its previous refusal, when that came within ``cpu_wait_forget``, was held back by it."""
        spans = self.held.setdefault(scale_set, [])
        open_at, open_kind = self._open_hold.pop(scale_set, (None, ""))
        if open_at is not None and 0 < now - open_at <= self.config.host.cpu_wait_forget:
            spans.append(HeldSpan(open_at, now, open_kind))
        if kind:
            self._open_hold[scale_set] = (now, kind)
        keep_from = now - self.config.host.held_window
        while spans and (spans[0].end < keep_from or len(spans) > HELD_KEPT):
            spans.pop(0)

    # ---- a runner's end ----------------------------------------------------------------

    async def sample_runner(self, state: HostedRunner) -> None:
        """One sample of a running runner; notes its end when it has exited."""
        now = self.clock.now()
        usage = await self.runtime.sample(state.handle)
        if usage is None:  # the runtime lost it: its series just ends
            await self.runner_ended(state, None, now)
            return
        self._apply(state, usage, now)
        for listener in self.sample_listeners:
            listener(state)
        if usage.exited:
            await self.runner_ended(state, usage.exit_code, now)

    def _apply(self, state: HostedRunner, usage: Usage, now: float) -> None:
        if not usage.exited:
            state.used, state.used_at, state.held = usage.memory, now, usage.held
        state.peak = max(state.peak, usage.memory)
        state.cpu_rate = None
        if state.cpu_at and now > state.cpu_at and usage.cpu_seconds >= state.cpu_seconds:
            rate = (usage.cpu_seconds - state.cpu_seconds) / (now - state.cpu_at)
            state.cpu_rate = rate
            state.peak_cpu = max(state.peak_cpu, rate)
        if usage.cpu_seconds >= state.cpu_seconds:
            state.cpu_seconds, state.cpu_at = usage.cpu_seconds, now
        state.met_cap = state.met_cap or usage.met_cap
        state.killed_for_memory = state.killed_for_memory or usage.killed_for_memory
        if usage.sock_throttled is not None:
            state.sock_throttled = usage.sock_throttled

    async def runner_ended(self, state: HostedRunner, exit_code: int | None, now: float) -> None:
        """It ended by itself: it stops counting, and what it showed is kept in the history
        until Rungar's Delete says how its job ended."""
        if state.ended_at is not None:
            return
        state.state, state.ended_at, state.exit_code = MachineState.STOPPED, now, exit_code
        state.exited = True
        await self.history.run(self.history.ended, state.row, self._end(state, ""))
        log.info("runner.exited", runner=state.name, exit_code=exit_code, peak=state.peak)

    def _end(self, state: HostedRunner, result: str, removal: Removal | None = None) -> JobEnd:
        """Its figures at its end: average CPU is its CPU time over its run time, both from
        its job's start (its runner's start when the job never became known)."""
        finished = state.ended_at if state.ended_at is not None else self.clock.now()
        began = state.job_started_at if state.job_started_at is not None else state.created_at
        elapsed = max(1e-9, finished - began)
        spent = max(0.0, state.cpu_seconds - state.cpu_at_job)
        completed = removal.job.completed_at if removal and removal.job else 0.0
        return JobEnd(
            result=result,
            peak_memory=state.peak,
            avg_cpu=spent / elapsed if state.cpu_seconds else None,
            met_cap=state.met_cap,
            killed_for_memory=state.killed_for_memory,
            sock_throttled=state.sock_throttled,
            finished_at=finished,
            exit_code=state.exit_code,
            peak_cpu=round(state.peak_cpu, 3) if state.peak_cpu else None,
            github_completed_at=completed or None,
        )

    async def record(self, state: HostedRunner, removal: Removal | None) -> None:
        """Record how the runner's job ended, and teach the predictor; a runner that ran no
        job leaves no row."""
        ending = Ending(state.job is not None, state.exited, state.exit_code, state.met_cap)
        result = recorded_result(removal, ending)
        why = removal.describe() if removal is not None else "not said"
        if result is None:
            await self.history.run(self.history.drop, state.row)
            log.info("runner.removed_without_job", runner=state.name, why=why)
            return
        end = self._end(state, result, removal)
        await self.history.run(self.history.finish, state.row, end)
        key = state.key()
        if key is not None and state.reserved > 0:
            self.metrics.prediction_ratio.labels(state.profile.name).observe(
                state.peak / state.reserved
            )
        if key is not None:
            self.predictor.add(
                key,
                Run(
                    end.finished_at,
                    result,
                    state.peak,
                    state.profile.memory,
                    end.avg_cpu,
                    state.met_cap,
                    state.killed_for_memory,
                    state.reserved,
                    max(0.0, end.finished_at - (state.job_started_at or state.created_at)),
                ),
            )
        log.info("runner.finished", runner=state.name, result=result, peak=state.peak, why=why)
