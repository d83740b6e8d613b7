"""Auto sizing, pure: one look's changes to each profile's memory, slots and cpus.

docs/admission.md, "Auto sizing". :func:`plan` takes the config, the runs
in the window, the record of past changes and ``now``, and returns at most one change per
profile, each sized against the budget the ones before it in the same look take. In order:

1. Take back a lowering that went too far, at the next look without waiting for
   raise_interval: a run met the lowered cap, or a job that succeeded at the old memory failed 3
   times in a row at it (failure or timed_out, one per workflow run, on at least two branches).
   Memory goes back, and under caps slots too; for 30 days no lowering goes under it again.
2. Raise memory: only from a run that met the cap since the profile's last change, straight to
   what the job needs (the advice), at most once every raise_interval, up to max_memory.
3. Lower memory: follows the advice (min_jobs runs, no job on its cap), after interval, by at
   most max_step percent in 256M steps, never under min_memory or a taken-back floor. Under
   caps it also adds the slots the advice gives.
4. One more slot when jobs waited a minute or more for a slot at p95 (host waits left out) or
   the slots were busy half the time since the last change, while every profile still fits
   MemoryMax with the mirror (at caps under caps, at their p95 peaks under measured) and, with
   a CPU budget under caps, its cpus; bounded by max_slots; with neither max_slots nor a
   MemoryMax nothing bounds slots, so none is added.
5. cpus up when one job has 3 successful runs at the current cpus (since the last change and
   since runnerd runs them) averaging 70% of the cap or more at the median; down after
   interval when min_jobs such runs, every one measured, say twice the heaviest job's p95
   average rounded up is less. Either way by at most max_step percent, in whole CPUs.
Slot and CPU raises need only 3 runs. Raises wait raise_interval, lowerings interval, both
counted from the profile's last change (a change a crash may not have written counts too).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from rungar.model.units import format_bytes
from runnerd.admission.model import FAILURE, TIMED_OUT, Policy
from runnerd.admission.predict import GRANULE, round_up
from runnerd.config import Profile, RunnerdConfig
from runnerd.sizing.advise import (
    BUSY,
    WAITED,
    Action,
    Budget,
    SizingRules,
    advise_profile,
    percentile,
    slot_pressure,
)
from runnerd.sizing.changes import Change, Values
from runnerd.sizing.runs import DAY, SizingRun, by_job, by_profile

FLOOR_FOR = 30 * DAY
CPU_BUSY = 0.70
FEW_RUNS = 3  # slot and CPU raises, and the take-back's failures in a row
BRANCHES = 2


@dataclass(frozen=True, slots=True)
class ProfileHistory:
    """What a look knows of a profile beyond the config."""

    changes: tuple[Change, ...] = ()  # written (or maybe written) changes, oldest first
    cpus_since: float = 0.0  # since when runnerd has run the profile's current cpus
    running: int = 0  # runners of it running now: slots never go under them


@dataclass(frozen=True, slots=True)
class AutoPlan:
    changes: tuple[Change, ...] = ()
    notes: tuple[str, ...] = ()  # why a wanted change was not made, e.g. "No CPU raise: …"


@dataclass
class _Look:
    config: RunnerdConfig
    memory_max: int | None
    slice_cpus: float | None
    now: float
    values: dict[str, Values] = field(default_factory=dict)  # as changed so far this look
    p95: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def policy(self) -> Policy:
        return self.config.host.admission

    @property
    def cpu_budget(self) -> float | None:
        factor = self.config.host.cpu_overcommit
        if factor is None or self.slice_cpus is None:
            return None
        return self.slice_cpus * factor

    def fits(self, name: str, new: Values) -> bool:
        """Every profile's slots with the mirror within MemoryMax, and the CPU budget."""
        values = {**self.values, name: new}
        mirror = self.config.host.mirror_memory
        if self.memory_max is not None:
            if self.policy is Policy.CAPS:
                total = mirror + sum(v.slots * v.memory for v in values.values())
            else:
                total = mirror + sum(
                    v.slots * min(v.memory, self.p95.get(n) or v.memory) for n, v in values.items()
                )
            if total > self.memory_max:
                return False
        budget = self.cpu_budget
        cpus = sum(v.slots * v.cpus for v in values.values())
        return budget is None or self.policy is not Policy.CAPS or cpus <= budget + 1e-9


def plan(
    config: RunnerdConfig,
    runs: Sequence[SizingRun],
    memory_max: int | None,
    slice_cpus: float | None,
    histories: Mapping[str, ProfileHistory],
    now: float,
) -> AutoPlan:
    """One look: the changes to write, in order, and notes on the ones held back."""
    look = _Look(config, memory_max, slice_cpus, now)
    look.values = {n: Values(p.memory, p.slots, p.cpus) for n, p in config.profiles.items()}
    grouped = by_profile(runs)
    rules = SizingRules.of(config.sizing)
    for name, profile_runs in grouped.items():
        peaks = [r.peak for r in profile_runs if not r.cancelled]
        look.p95[name] = round_up(config.sizing.margin.add(int(percentile(peaks, 0.95))))
    changes = []
    for name, profile in config.profiles.items():
        history = histories.get(name, ProfileHistory())
        change = _profile_change(look, profile, grouped.get(name, []), history, rules)
        if change is not None:
            changes.append(change)
            look.values[name] = change.new
    return AutoPlan(tuple(changes), tuple(look.notes))


def _profile_change(
    look: _Look,
    profile: Profile,
    runs: Sequence[SizingRun],
    history: ProfileHistory,
    rules: SizingRules,
) -> Change | None:
    now = look.now
    last = history.changes[-1] if history.changes else None
    last_at = last.at if last is not None else -math.inf
    current = look.values[profile.name]
    runs = [r for r in runs if r.finished_at >= now - rules.window]
    since = [r for r in runs if r.finished_at >= last_at]

    def make(kind: str, reason: str, new: Values, **extra: object) -> Change | None:
        if not look.fits(profile.name, new) and kind != "take_back":
            look.notes.append(f"{profile.name}: no {kind}: {reason}; MemoryMax cannot hold it")
            return None
        return Change(
            profile=profile.name,
            at=now,
            source="auto",
            kind=kind,
            reason=reason,
            old=current,
            new=new,
            **extra,  # type: ignore[arg-type]  # extra holds the event's optional typed fields
        )

    taken_back = _take_back(look, profile, current, history.changes, runs, history.running)
    if taken_back is not None:
        new, reason = taken_back
        return make("take_back", reason, new, floor_memory=new.memory, floor_until=now + FLOOR_FOR)

    can_raise = now - last_at >= look.config.sizing.raise_interval
    can_lower = now - last_at >= look.config.sizing.interval
    floor = max(
        (c.floor_memory or 0 for c in history.changes if (c.floor_until or 0) > now), default=0
    )
    budget = Budget(look.memory_max, look.config.host.mirror_memory, _others(look, profile.name))
    advice = advise_profile(
        profile, runs, rules, look.policy, budget, now, memory_since=max(last_at, 0.0)
    )
    if advice.action is Action.RAISE and advice.new_memory is not None:
        target = min(advice.new_memory, profile.max_memory or advice.new_memory)
        if target <= current.memory:
            look.notes.append(f"{profile.name}: no raise: max_memory holds it at {_b(target)}")
        elif not can_raise:
            return None  # a raise waits for raise_interval; nothing else goes before it
        else:
            slots = advice.new_slots if look.policy is Policy.CAPS else current.slots
            slots = max(slots or current.slots, history.running)
            return make("raise", advice.line, replace(current, memory=target, slots=slots))
    elif advice.action is Action.GROW_SLICE:
        look.notes.append(f"{profile.name}: {advice.line}")
    if advice.action is Action.LOWER and advice.new_memory is not None and can_lower:
        change = _lower(look, profile, current, advice.new_memory, floor, advice.wants_slots)
        if change is not None:
            new, reason = change
            return make("lower", reason, new)
    if can_raise and len([r for r in since if not r.cancelled]) >= FEW_RUNS:
        slot = _more_slots(look, profile, current, since, history)
        if slot is not None:
            return make("slots", slot[1], slot[0])
    cpu = _cpus(look, profile, current, runs, history, last_at, can_raise, can_lower)
    if cpu is not None:
        return make("cpus", cpu[1], cpu[0])
    return None


def _others(look: _Look, name: str) -> int:
    return sum(v.slots * v.memory for n, v in look.values.items() if n != name)


def _b(value: int) -> str:
    return format_bytes(value)


def _take_back(
    look: _Look,
    profile: Profile,
    current: Values,
    changes: Sequence[Change],
    runs: Sequence[SizingRun],
    running: int,
) -> tuple[Values, str] | None:
    """A lowering by auto sizing that went too far, still in effect, even when another auto
    change (slots, cpus) came after it. Under caps its slots go back too, but never under the
    runners running now: a take-back drops no slot in use."""
    last = next((c for c in reversed(changes) if c.new.memory != c.old.memory), None)
    if last is None or last.source != "auto" or last.kind != "lower":
        return None  # the memory in force was not set by an auto lowering
    if current.memory != last.new.memory:
        return None  # memory was set by hand since: not taken back
    since = [r for r in runs if r.finished_at >= last.at]
    met = [r for r in since if r.met_cap and r.cap == current.memory]
    slots = last.old.slots if look.policy is Policy.CAPS else current.slots
    back = Values(last.old.memory, max(slots, running), current.cpus)
    if met:
        return back, f"a run met the lowered cap of {_b(current.memory)}"
    for key, job_runs in by_job(since).items():
        succeeded_before = any(
            r.key == key and r.succeeded and r.cap == last.old.memory for r in runs
        )
        if succeeded_before and failing_in_a_row(job_runs):
            return back, (
                f"{key.repository} {key.workflow} {key.job} failed {FEW_RUNS} times in a row at "
                f"{_b(current.memory)} after it succeeded at {_b(last.old.memory)}"
            )
    return None


def failing_in_a_row(runs: Sequence[SizingRun]) -> bool:
    """The last 3 workflow runs of a job failed (failure or timed_out) on at least two branches.

    One run per workflow run: a re-run attempt of the same workflow run does not count again.
    Runs without a branch cannot show two branches, so they never take a lowering back alone.
    """
    last_per_run: dict[str, SizingRun] = {}
    for run in runs:
        if run.cancelled:
            continue
        last_per_run[run.run_id or f"row:{run.finished_at}"] = run
    latest = sorted(last_per_run.values(), key=lambda r: r.finished_at)[-FEW_RUNS:]
    if len(latest) < FEW_RUNS or any(r.result not in (FAILURE, TIMED_OUT) for r in latest):
        return False
    return len({r.branch for r in latest if r.branch}) >= BRANCHES


def _lower(
    look: _Look, profile: Profile, current: Values, needed: int, floor: int, wants: bool
) -> tuple[Values, str] | None:
    step = max(
        GRANULE, int(current.memory * look.config.sizing.max_step / 100) // GRANULE * GRANULE
    )
    target = max(needed, current.memory - step, floor, profile.min_memory or 0)
    target = round_up(target, GRANULE)
    if target >= current.memory:
        return None
    slots = current.slots
    if look.policy is Policy.CAPS and wants:
        slots = max(slots, current.slots * current.memory // target)
        if profile.max_slots is not None:
            slots = max(current.slots, min(slots, profile.max_slots))
    reason = f"its jobs need {_b(needed)}; lowered by at most {look.config.sizing.max_step:g}%"
    if slots > current.slots:
        reason += f", with the {slots - current.slots} more slots the memory freed holds"
    return Values(target, slots, current.cpus), reason


def _more_slots(
    look: _Look,
    profile: Profile,
    current: Values,
    since: Sequence[SizingRun],
    history: ProfileHistory,
) -> tuple[Values, str] | None:
    wait, busy = slot_pressure(since, current.slots, look.now)
    if wait < WAITED and busy < BUSY:
        return None
    if profile.max_slots is None and look.memory_max is None:
        return None  # nothing bounds slots, so none is added
    if profile.max_slots is not None and current.slots >= profile.max_slots:
        return None
    why = f"p95 slot wait {wait:.0f}s" if wait >= WAITED else f"slots busy {busy:.0%}"
    new = replace(current, slots=max(current.slots, history.running) + 1)
    if not look.fits(profile.name, new):
        look.notes.append(f"{profile.name}: no more slots ({why}): MemoryMax cannot hold one more")
        return None
    return new, f"jobs waited for a slot ({why})"


def _cpus(
    look: _Look,
    profile: Profile,
    current: Values,
    runs: Sequence[SizingRun],
    history: ProfileHistory,
    last_at: float,
    can_raise: bool,
    can_lower: bool,
) -> tuple[Values, str] | None:
    start = max(last_at, history.cpus_since)
    measured = [
        r for r in runs if r.succeeded and r.cpus == current.cpus and r.finished_at >= start
    ]
    step = max(1, math.floor(current.cpus * look.config.sizing.max_step / 100))
    with_avg = [r for r in measured if r.avg_cpu is not None]
    for key, job_runs in by_job(with_avg).items():
        if len(job_runs) < FEW_RUNS:
            continue
        median = statistics.median(r.avg_cpu or 0.0 for r in job_runs)
        if median < CPU_BUSY * current.cpus:
            continue
        who = f"{key.repository} {key.job} averages {median:.1f} of its {current.cpus:g} cpus"
        top = look.slice_cpus
        if top is not None and current.cpus >= top:
            look.notes.append(
                f"{profile.name}: No CPU raise: {who}, and they take the slice's {top:g} CPUs"
            )
            return None
        new_cpus = current.cpus + step if top is None else min(top, current.cpus + step)
        new = replace(current, cpus=float(new_cpus))
        if not look.fits(profile.name, new):
            look.notes.append(
                f"{profile.name}: No CPU raise: {who}, and the CPU budget has no room for more"
            )
            return None
        return (new, f"{who}") if can_raise else None
    if not can_lower or len(measured) < look.config.sizing.min_jobs:
        return None
    if len(with_avg) < len(measured):
        return None  # every job among them needs a measured average
    heaviest = max(
        percentile([r.avg_cpu or 0.0 for r in rs], 0.95) for rs in by_job(with_avg).values()
    )
    target = max(1, math.ceil(2 * heaviest))
    if target >= current.cpus:
        return None
    new_cpus = max(target, current.cpus - step)
    return (
        replace(current, cpus=float(new_cpus)),
        f"its heaviest job averages {heaviest:.1f} CPUs at p95; twice that is {target}",
    )
