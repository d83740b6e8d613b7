"""Sizing advice, pure: each profile's memory and slots from its jobs' sampled peaks.

docs/admission.md, "Sizing". Runs in, :class:`ProfileAdvice` out; ``now`` is
an argument and nothing here reads a file or the clock.

- A job's recent runs are its last 60 successful ones in the window (3 × min_jobs when that is
  more), with the failed ones among them; cancelled runs are left out unless one met its cap.
- The need is the largest peak plus the margin, or plus 1G (page-cache room) when that is more,
  rounded up to 256M. A run at a larger cap than now counts at no more than the current memory;
  a run that met its own limit counts at least its cap.
- A job with a run that met its cap or was killed for memory is on its cap until 3 of its runs
  in a row succeed clear of it; while any job is, the profile is not lowered.
- Lower when the need is a tenth or more under memory; then, if jobs waited a minute or more for
  a slot (p95, host waits left out) or the slots were busy half the time, add as many slots as
  the profile's memory now holds.
- A raise reads only runs that met the current memory since the profile has had it, toward the
  larger of what they need and what the same job needed at larger caps; slots go down only when
  MemoryMax cannot hold them, and when it cannot hold one the advice is to grow the slice.
- Under measured admission advice never changes slots.
- Fewer than min_jobs runs: no advice, only the peaks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from rungar.model.job_key import JobKey
from rungar.model.units import format_bytes
from runnerd.admission.model import Margin, Policy
from runnerd.admission.predict import GRANULE, round_up
from runnerd.config import Profile, RunnerdConfig, SizingConfig
from runnerd.figures import slot_shares, slot_time
from runnerd.sizing.runs import DAY, SizingRun, by_job, by_profile

GiB = 1024**3
SIZING_TIMES = 3
RECENT_RUNS = 20
WORTH_LOWERING = 0.10
WAITED = 60.0
BUSY = 0.5
CLEAN_RUNS = 3


class Action(StrEnum):
    NONE = "none"
    LOWER = "lower"
    RAISE = "raise"
    GROW_SLICE = "grow_slice"
    TOO_FEW = "too_few"


@dataclass(frozen=True, slots=True)
class SizingRules:
    margin: Margin = field(default_factory=Margin)
    min_jobs: int = 10
    window: float = 30 * DAY

    @classmethod
    def of(cls, sizing: SizingConfig, window: float = 30 * DAY) -> SizingRules:
        return cls(sizing.margin, sizing.min_jobs, window)

    @property
    def recent(self) -> int:
        return max(RECENT_RUNS, self.min_jobs) * SIZING_TIMES


def need(peak: int, margin: Margin) -> int:
    """The largest peak plus the margin, or plus the page-cache room (1G) when that is more,
    rounded up to 256M."""
    return round_up(max(margin.add(peak), peak + margin.room), GRANULE)


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest rank, as admission's p95: with fewer than 20 values the p95 is the largest."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def counted(run: SizingRun, memory: int) -> int:
    """A run's peak as sizing counts it under ``memory``."""
    value = max(run.peak, run.cap) if run.met_cap else run.peak
    if run.cap > memory:
        value = min(value, memory)  # a JVM grows toward the room it has
    return value


def recent_runs(runs: Sequence[SizingRun], rules: SizingRules) -> list[SizingRun]:
    """One job's recent runs: its last ``rules.recent`` successes with failures among them."""
    kept = [r for r in runs if not r.cancelled or r.met_cap]
    successes = [r for r in kept if r.succeeded]
    if len(successes) <= rules.recent:
        return kept
    oldest = successes[-rules.recent].finished_at
    return [r for r in kept if r.finished_at >= oldest]


def on_cap(runs: Sequence[SizingRun]) -> bool:
    """A run met its cap or was killed for memory, not yet followed by 3 clean successes."""
    last = max((i for i, r in enumerate(runs) if r.hit), default=None)
    if last is None:
        return False
    streak = 0
    for run in runs[last + 1 :]:
        streak = streak + 1 if run.succeeded and not run.hit else 0
        if streak >= CLEAN_RUNS:
            return False
    return True


@dataclass(frozen=True, slots=True)
class JobSizing:
    key: JobKey
    runs: int
    largest: int  # counted under the current memory
    need: int
    on_cap: bool
    met_now: int  # runs that met the current memory since the profile has had it
    met_peak: int  # the largest of those, at least the cap
    need_at_larger: int | None  # what its runs at a larger cap needed


@dataclass(frozen=True, slots=True)
class ProfileAdvice:
    profile: str
    policy: Policy
    memory: int
    slots: int
    runs: int
    p50: int
    p95: int
    largest: int
    need: int | None = None
    action: Action = Action.NONE
    line: str = ""
    new_memory: int | None = None
    new_slots: int | None = None
    on_cap: int = 0
    wait_p95: float = 0.0
    busy: float = 0.0
    wants_slots: bool = False
    jobs: tuple[JobSizing, ...] = ()

    @property
    def applicable(self) -> bool:
        return self.action in (Action.LOWER, Action.RAISE) and (
            self.new_memory != self.memory or self.new_slots != self.slots
        )

    def to_json(self) -> dict[str, object]:
        return {
            "profile": self.profile,
            "policy": self.policy.value,
            "memory": self.memory,
            "slots": self.slots,
            "runs": self.runs,
            "peaks": {"p50": self.p50, "p95": self.p95, "max": self.largest},
            "need": self.need,
            "action": self.action.value,
            "new_memory": self.new_memory,
            "new_slots": self.new_slots,
            "on_cap": self.on_cap,
            "wait_p95": self.wait_p95,
            "busy": round(self.busy, 4),
            "wants_slots": self.wants_slots,
            "line": self.line,
            "jobs": [
                {
                    "repository": j.key.repository,
                    "workflow": j.key.workflow,
                    "job": j.key.job,
                    "runs": j.runs,
                    "largest": j.largest,
                    "need": j.need,
                    "on_cap": j.on_cap,
                    "met_cap": j.met_now,
                    "need_at_larger": j.need_at_larger,
                }
                for j in self.jobs
            ],
        }


@dataclass(frozen=True, slots=True)
class Budget:
    """What the slice holds beside this profile: its MemoryMax, the mirror, the others' caps."""

    memory_max: int | None
    mirror: int = 0
    others: int = 0  # other profiles' slots × memory (what caps reserve for them)

    def room(self) -> int | None:
        return None if self.memory_max is None else self.memory_max - self.mirror - self.others


def job_sizing(
    key: JobKey, runs: Sequence[SizingRun], memory: int, since: float, margin: Margin
) -> JobSizing:
    """One job from its recent runs (oldest first) under the profile's current ``memory``."""
    met = [r for r in runs if r.met_cap and r.cap == memory and r.finished_at >= since]
    larger = [max(r.peak, r.cap) if r.met_cap else r.peak for r in runs if r.cap > memory]
    largest = max(counted(r, memory) for r in runs)
    return JobSizing(
        key=key,
        runs=len(runs),
        largest=largest,
        need=need(largest, margin),
        on_cap=on_cap(runs),
        met_now=len(met),
        met_peak=max((max(r.peak, r.cap) for r in met), default=0),
        need_at_larger=need(max(larger), margin) if larger else None,
    )


def slot_pressure(runs: Sequence[SizingRun], slots: int, now: float) -> tuple[float, float]:
    """(p95 slot wait, busy share) of the runs from the first one's start to ``now``. The busy
    share is :func:`runnerd.figures.slot_shares`', as the Utilization page reads it: a slot is
    busy from when its runner's job was queued, so a warm runner waiting for a job does not
    count; each run against the slots its profile had (``slots`` for one that did not record
    them). Cancelled runs held their slots too; only the p95 leaves them out."""
    if not runs:
        return 0.0, 0.0
    counted_runs = [r for r in runs if not r.cancelled]
    wait = percentile([r.slot_wait for r in counted_runs], 0.95) if counted_runs else 0.0
    start = min(r.started_at for r in runs)
    times = [
        slot_time(r.started_at, r.queued_at, r.job_started_at, r.finished_at, now, r.slots or slots)
        for r in runs
    ]
    busy, _ = slot_shares(times, start, max(now, start + 1.0))
    return wait, busy


def advise_profile(
    profile: Profile,
    runs: Sequence[SizingRun],
    rules: SizingRules,
    policy: Policy,
    budget: Budget,
    now: float,
    memory_since: float | None = None,
) -> ProfileAdvice:
    """Advice for one profile from its runs (oldest first); those before the window are ignored."""
    memory = profile.memory
    since = memory_since if memory_since is not None else now - rules.window
    in_window = [r for r in runs if r.finished_at >= now - rules.window]
    base = _evidence(profile, in_window, rules, policy, since, now)
    jobs = base.jobs
    if base.runs < rules.min_jobs:
        line = (
            f"no advice: {base.runs} {_plural(base.runs, 'job')} in the window, fewer than "
            f"min_jobs {rules.min_jobs}; peaks only"
        )
        return replace(base, action=Action.TOO_FEW, line=line)
    needed = max(j.need for j in jobs)
    raised = [j for j in jobs if j.met_now]
    if raised:
        target = max(max(need(j.met_peak, rules.margin), j.need_at_larger or 0) for j in raised)
        met = sum(j.met_now for j in raised)
        why = (
            f"{met} {_plural(met, 'run')} met the {format_bytes(memory)} cap since the "
            "profile had it"
        )
        return _raise(profile, base, budget, target, why)
    held = base.on_cap
    if held:
        line = (
            f"keep {format_bytes(memory)}: {held} {_plural(held, 'job')} on "
            f"{'its' if held == 1 else 'their'} cap until 3 runs in a row succeed clear of it"
        )
        return replace(base, need=needed, line=line)
    kept = [j for j in jobs if (j.need_at_larger or 0) > memory]
    if kept:
        larger = max(j.need_at_larger or 0 for j in kept)
        line = (
            f"keep {format_bytes(memory)}: {len(kept)} {_plural(len(kept), 'job')} needed "
            f"{format_bytes(larger)} at a larger memory, and none ran out at {format_bytes(memory)}"
        )
        return replace(base, need=needed, line=line)
    if memory - needed >= WORTH_LOWERING * memory:
        return _lower(profile, base, needed)
    if needed > memory:
        # No run met the cap, so nothing asks for more: a peak under it is not a need for
        # more. What the need adds is room for page cache, which this cap does not leave.
        line = (
            f"keep {format_bytes(memory)}: no run met it, its heaviest job peaked at "
            f"{format_bytes(max(j.largest for j in jobs))}; with "
            f"{format_bytes(rules.margin.room)} of room for page cache (page_cache_room) it "
            f"would need {format_bytes(needed)}, so jobs that write files may be throttled"
        )
    else:
        line = (
            f"keep {format_bytes(memory)}: its heaviest job needs {format_bytes(needed)}, less "
            "than a tenth under it"
        )
    return replace(base, need=needed, line=line + _more_slots_note(profile, base))


def _evidence(
    profile: Profile,
    in_window: Sequence[SizingRun],
    rules: SizingRules,
    policy: Policy,
    since: float,
    now: float,
) -> ProfileAdvice:
    """What the window's runs say of the profile, before any advice: each job's sizing, the
    peaks, and whether its slots are short."""
    memory = profile.memory
    jobs: list[JobSizing] = []
    peaks: list[int] = []
    for key, job_runs in by_job(in_window).items():
        recent = recent_runs(job_runs, rules)
        if recent:
            jobs.append(job_sizing(key, recent, memory, since, rules.margin))
            peaks.extend(counted(r, memory) for r in recent)
    wait, busy = slot_pressure(in_window, profile.slots, now)
    wants = wait >= WAITED or busy >= BUSY
    return ProfileAdvice(
        profile=profile.name,
        policy=policy,
        memory=memory,
        slots=profile.slots,
        runs=len(peaks),
        p50=int(percentile(peaks, 0.5)),
        p95=int(percentile(peaks, 0.95)),
        largest=max(peaks, default=0),
        on_cap=sum(1 for j in jobs if j.on_cap),
        wait_p95=wait,
        busy=busy,
        wants_slots=wants,
        jobs=tuple(sorted(jobs, key=lambda j: -j.need)),
    )


def _lower(profile: Profile, base: ProfileAdvice, needed: int) -> ProfileAdvice:
    memory, slots = profile.memory, profile.slots
    under = 100 * (memory - needed) / memory
    line = (
        f"lower memory {format_bytes(memory)} → {format_bytes(needed)}: its heaviest job needs "
        f"{format_bytes(needed)}, {under:.0f}% under"
    )
    new_slots = slots
    if base.policy is Policy.CAPS and base.wants_slots:
        # Lowering never asks for more than the profile's slots take now.
        new_slots = max(slots, (slots * memory) // needed)
        if new_slots > slots:
            line += f"; slots {slots} → {new_slots}, which its memory now holds, as jobs waited"
    elif base.wants_slots:
        line += _more_slots_note(profile, base)
    return replace(
        base, need=needed, action=Action.LOWER, line=line, new_memory=needed, new_slots=new_slots
    )


def _raise(
    profile: Profile, base: ProfileAdvice, budget: Budget, target: int, why: str
) -> ProfileAdvice:
    memory, slots = profile.memory, profile.slots
    if base.policy is Policy.MEASURED:
        # Only one runner beside the mirror has to fit, as the config check asks.
        fits = budget.memory_max is None or target + budget.mirror <= budget.memory_max
        new_slots = slots
    else:
        room = budget.room()
        new_slots = slots if room is None else min(slots, max(0, room) // target)
        fits = new_slots >= 1
    if not fits:
        line = (
            f"grow the slice first: one runner of {format_bytes(target)} does not fit MemoryMax "
            f"{format_bytes(budget.memory_max or 0)} beside what it holds; {why}; nothing to apply"
        )
        return replace(base, need=target, action=Action.GROW_SLICE, line=line)
    line = f"raise memory {format_bytes(memory)} → {format_bytes(target)}: {why}"
    if new_slots < slots:
        line += f"; slots {slots} → {new_slots}, as MemoryMax cannot hold {slots}"
    return replace(
        base, need=target, action=Action.RAISE, line=line, new_memory=target, new_slots=new_slots
    )


def _more_slots_note(profile: Profile, advice: ProfileAdvice) -> str:
    if not advice.wants_slots:
        return ""
    wait, busy = advice.wait_p95, advice.busy
    why = f"p95 slot wait {wait:.0f}s" if wait >= WAITED else f"slots busy {busy:.0%}"
    if advice.policy is Policy.MEASURED:
        return (
            f"; more slots may fit ({why}): runnerd simulate --slots "
            f"{profile.name}={profile.slots + 1} replays the history with more"
        )
    return f"; jobs waited for a slot ({why})"


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def advise(
    config: RunnerdConfig,
    runs: Sequence[SizingRun],
    memory_max: int | None,
    now: float,
    memory_since: Mapping[str, float] | None = None,
    window: float = 30 * DAY,
) -> list[ProfileAdvice]:
    """Advice for every profile of ``config``, against the slice's ``memory_max``."""
    rules = SizingRules.of(config.sizing, window)
    grouped = by_profile(runs)
    out = []
    for name, profile in config.profiles.items():
        others = sum(p.slots * p.memory for n, p in config.profiles.items() if n != name)
        budget = Budget(memory_max, config.host.mirror_memory, others)
        since = (memory_since or {}).get(name)
        out.append(
            advise_profile(
                profile, grouped.get(name, []), rules, config.host.admission, budget, now, since
            )
        )
    return out
