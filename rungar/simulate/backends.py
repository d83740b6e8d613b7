"""The providers of a simulated fleet: runnerd hosts deciding with runnerd's own admission,
clouds with a quota, and scripted refusals and outages on either.

A runnerd host is the real decision on modelled readings: every create asks
:func:`runnerd.admission.decide` with a :class:`runnerd.admission.Candidate` built as
``RunnerdProvider`` builds it, predictions from :class:`runnerd.predictor.Predictor` fed each
job as it finishes, and the slice read as every running job's peak plus the mirror (sampled
continuously, as ``runnerd simulate`` does). What is modelled: a job holds its peak for its
whole run; a job's peak is scaled by its profile's memory over the cap it ran under (1 when they
match); the host's own memory and disk are not modelled; when the running jobs' peaks outgrow
MemoryMax the kernel kills the largest, which counts as a kill and fails its job.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rungar.errors import ProviderUnavailable
from rungar.model.job_key import JobKey
from rungar.model.machine import (
    Created,
    JobHint,
    Machine,
    MachineState,
    Refusal,
    RefusalKind,
    RoomExpected,
)
from rungar.simulate.history import SimJob
from rungar.simulate.models import ProviderModel

if TYPE_CHECKING:
    from runnerd.admission import Candidate, PredictionRules, Running, SliceReading
    from runnerd.admission.model import Run
    from runnerd.predictor import Predictor


@dataclass
class Usage:
    """What one provider did during a replay."""

    created: int = 0
    refusals: dict[str, int] = field(default_factory=dict)  # kind -> count
    kills: int = 0
    machine_seconds: float = 0.0
    job_seconds: float = 0.0  # of that, runners running a job; the rest is boot and idle


class Backend:
    """A cloud: takes every runner up to its quota; the base of the runnerd host."""

    def __init__(self, model: ProviderModel, start: float) -> None:
        self.name = model.name
        self.model = model
        self.boot = model.boot
        self.start = start
        self.machines: dict[str, float] = {}  # runner -> created at
        self.usage = Usage()

    def answering(self, now: float) -> bool:
        offset = now - self.start
        return not any(w.covers(offset) for w in self.model.outages)

    def create(
        self,
        runner: str,
        scale_set: str,
        block: Mapping[str, object],
        hints: Sequence[JobHint],
        now: float,
    ) -> Created | Refusal:
        if not self.answering(now):
            raise ProviderUnavailable(f"{self.name} does not answer (a scripted outage)")
        offset = now - self.start
        for window in self.model.refusals:
            if window.covers(offset):
                return Refusal(window.kind, window.message, "scripted")
        refusal = self.admit(runner, scale_set, block, hints, now)
        if refusal is not None:
            return refusal
        self.machines[runner] = now
        return Created(Machine(runner, MachineState.STARTING, created_at=now, provider=self.name))

    def admit(
        self,
        runner: str,
        scale_set: str,
        block: Mapping[str, object],
        hints: Sequence[JobHint],
        now: float,
    ) -> Refusal | None:
        quota = self.model.quota
        if quota and len(self.machines) >= quota:
            return Refusal(RefusalKind.FULL, f"quota of {quota} machines reached", "quota")
        return None

    def delete(self, runner: str, now: float) -> None:
        created = self.machines.pop(runner, None)
        if created is not None:
            self.usage.machine_seconds += now - created

    def job_started(self, runner: str, job: SimJob, now: float) -> list[str]:
        """The runner took ``job``; returns the runners the kernel killed for it."""
        return []

    def job_finished(self, runner: str, job: SimJob, now: float, *, killed: bool) -> None:
        return None


@dataclass
class _HostRunner:
    profile: str
    scale_set: str
    cap: int
    cpus: float
    reserved: int
    reserved_cpu: float
    hints: tuple[JobHint, ...]
    job: SimJob | None = None
    peak: int = 0
    counted: bool = False  # its peak is in the slice's reading
    key: JobKey | None = None
    started: float = 0.0  # when it took its job


class RunnerdHost(Backend):
    """A runnerd host: admission by ``decide()``, predictions by the daemon's predictor."""

    def __init__(self, model: ProviderModel, start: float, policy: str | None = None) -> None:
        super().__init__(model, start)
        from runnerd.admission import GuardState, Limits, Policy
        from runnerd.config import parse_config
        from runnerd.simulate.command import rules_of

        config = parse_config(model.runnerd_toml, model.runnerd_file)
        host = config.host
        admission = Policy(policy) if policy else host.admission
        budget = None
        if host.cpu_overcommit is not None and host.cpus:
            budget = host.cpus * host.cpu_overcommit
        self.config = config
        self.limits = Limits(
            policy=admission,
            memory_max=host.memory_max,
            mirror=host.mirror_memory,
            high_water=host.high_water,
            fresh_for=host.fresh_for,
            cpu_budget=budget,
            cpu_starvation=host.cpu_starvation,
            cpu_wait_forget=host.cpu_wait_forget,
        )
        self.measured = admission is Policy.MEASURED
        self.predictor = _predictor(rules_of(config), host.history_window, host.reread)
        self.guard = GuardState()
        self.runners: dict[str, _HostRunner] = {}
        self.peaks = 0  # every running job's peak: what the slice reads, less the mirror
        self.views: dict[str, Running] = {}

    def _view(self, name: str) -> None:
        """Keep decide()'s view of one runner: held at its peak, sampled continuously."""
        from runnerd.admission import Running

        r = self.runners[name]
        used = r.peak if r.counted else 0
        self.views[name] = Running(name, r.profile, r.scale_set, r.cap, r.cpus, r.reserved,
                                   r.reserved_cpu, used, math.inf)  # fmt: skip

    def admit(
        self,
        runner: str,
        scale_set: str,
        block: Mapping[str, object],
        hints: Sequence[JobHint],
        now: float,
    ) -> Refusal | None:
        from runnerd.admission import Candidate, NoRoom, Prediction, SliceReading, decide

        name = str(block.get("profile") or scale_set)
        profile = self.config.profiles.get(name)
        if profile is None:
            known = ", ".join(sorted(self.config.profiles))
            return Refusal(
                RefusalKind.INVALID,
                f"No profile named {name} in {self.model.runnerd_file}; it has {known}",
                "profile",
            )
        if self.measured:
            busy_keys = frozenset(r.key for r in self.runners.values() if r.key is not None)
            busy_repos = frozenset(
                h.repository for r in self.runners.values() if r.job is None for h in r.hints
            )
            prediction = self.predictor.predict_runner(
                name, hints, profile.memory, profile.cpus, now, busy_keys, busy_repos
            )
        else:  # decide() reads no prediction under caps: the cap is what a runner reserves
            prediction = Prediction(profile.memory, profile.cpus, "its profile's memory")
        candidate = Candidate(
            runner,
            name,
            scale_set,
            profile.memory,
            profile.cpus,
            0,
            profile.slots,
            prediction,
        )
        reading = SliceReading(now, self.peaks + self.limits.mirror)
        outcome = decide(
            candidate,
            list(self.views.values()),
            reading,
            None,
            None,
            self.limits,
            self.guard,
            now,
        )
        self.guard = outcome.state
        decision = outcome.decision
        if isinstance(decision, NoRoom):
            room = self.expected_room(candidate, reading, now)
            return Refusal(RefusalKind.FULL, decision.message, decision.resource, room)
        self.runners[runner] = _HostRunner(
            name, scale_set, profile.memory, profile.cpus, decision.memory, decision.cpu,
            tuple(hints),
        )  # fmt: skip
        self._view(runner)
        return None

    def expected_room(
        self, candidate: Candidate, reading: SliceReading, now: float
    ) -> RoomExpected | None:
        """As runnerd answers a refusal: when its running jobs' predicted ends (from the
        predictor's past durations, never the replay's own end of each job) leave room."""
        from runnerd.admission.room import PredictedEnd, expected_room, predicted_end

        ends: dict[str, PredictedEnd] = {}
        for name, state in self.runners.items():
            if state.key is None:
                continue  # no job yet: its end is not known
            ending = predicted_end(self.predictor.durations(state.key, now), state.started, now)
            if ending is not None:
                ends[name] = ending
        if not ends:
            return None
        expected = expected_room(
            candidate,
            list(self.views.values()),
            ends,
            reading,
            None,
            None,
            self.limits,
            self.guard,
            now,
        )
        if expected is None:
            return None
        return RoomExpected(round(expected.seconds, 1), round(expected.confidence, 3))

    def delete(self, runner: str, now: float) -> None:
        super().delete(runner, now)
        state = self.runners.pop(runner, None)
        self.views.pop(runner, None)
        if state is not None and state.counted:
            self.peaks -= state.peak

    def job_started(self, runner: str, job: SimJob, now: float) -> list[str]:
        state = self.runners.get(runner)
        if state is None:
            return []
        key = JobKey(state.profile, job.repository, job.workflow, job.job)
        state.job, state.key, state.started = job, key, now
        peak = job.peak
        if job.cap and peak:
            peak = int(peak * state.cap / job.cap)
        state.peak = min(peak, state.cap)
        state.counted = True
        self.peaks += state.peak
        if self.measured:
            beside = any(r.key == key for r in self.runners.values() if r is not state)
            prediction = self.predictor.predict_job(key, state.cap, state.cpus, now, beside=beside)
            state.reserved, state.reserved_cpu = prediction.memory, prediction.cpu
        self._view(runner)
        return self._oom()

    def _oom(self) -> list[str]:
        """The slice past MemoryMax: the kernel kills the largest job until it fits."""
        budget = self.limits.memory_max
        killed: list[str] = []
        if budget is None:
            return killed
        while self.peaks + self.limits.mirror > budget:
            busy = [(r.peak, name) for name, r in self.runners.items() if r.counted]
            if not busy:
                break
            _, name = max(busy)
            killed.append(name)
            self.runners[name].counted = False
            self.peaks -= self.runners[name].peak
            self._view(name)
        return killed

    def job_finished(self, runner: str, job: SimJob, now: float, *, killed: bool) -> None:
        from runnerd.admission.model import Run

        state = self.runners.get(runner)
        if state is None or state.key is None:
            return
        peak = state.peak
        result = "failure" if killed else job.result
        run = Run(now, result, peak, state.cap, job.avg_cpu, False, killed, state.reserved,
                  now - state.started)  # fmt: skip
        self.predictor.add(state.key, run)


def _predictor(rules: PredictionRules, window: float, reread: float) -> Predictor:
    """The daemon's predictor, its profile figures re-read at most every ``reread`` seconds.

    The daemon's drops them at each finished job; over a replay of 100,000 jobs that makes
    every prediction a scan of the profile's month of runs. A job's own runs still count the
    moment it finishes."""
    from runnerd.predictor import Predictor

    class MinutePredictor(Predictor):
        def add(self, key: JobKey, run: Run) -> None:
            self._append(key, run)  # as Predictor.add, keeping the profile figures a while

    return MinutePredictor(rules, window, reread)
