"""Admit or refuse one runner: the decision the daemon and ``runnerd simulate`` share.

docs/admission.md: "The host's memory", "Measured admission", "CPU admission"; and the disk guard of
config/runnerd.example.toml (free disk must stay above ``disk_reserve`` plus the runner's
footprint). Pure: readings,
running runners, the candidate's prediction, limits, state and ``now`` in; an :class:`Decided`
out. Checks in order: slots, disk, the high-water mark, the host stall, MemoryMax, the host's
room, CPU (a job that had a slot and memory but not CPU waits for CPU).

Counting: under caps every runner reserves its cap; under measured a new runner reserves its
prediction and a running one counts at max(reserved, last used). Without a sample of the slice
from the last few seconds every runner counts at its cap, and without a host reading only
MemoryMax bounds starts. Running jobs are never stopped here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rungar.model.units import format_bytes, format_duration
from runnerd.admission import host as hostguard
from runnerd.admission.model import (
    AdmissionRecord,
    Admit,
    Candidate,
    CpuWaiter,
    Decided,
    GuardState,
    HostReading,
    Limits,
    Policy,
    Refuse,
    Running,
    SliceReading,
)


def counted_memory(runner: Running, limits: Limits, slice_fresh: bool, now: float) -> int:
    """What a running runner counts at against the budget."""
    if limits.policy is Policy.CAPS or not slice_fresh:
        return runner.cap
    if now - runner.used_at > limits.fresh_for:
        return runner.cap
    return max(runner.reserved, runner.used)


def counted_cpu(runner: Running, limits: Limits) -> float:
    return runner.cpus if limits.policy is Policy.CAPS else runner.reserved_cpu


def _totals(
    running: Sequence[Running], profile: str, limits: Limits, slice_fresh: bool, now: float
) -> tuple[int, int, float]:
    """One pass (a decision runs thousands of times a second over hundreds of runners):
    runners of ``profile``, memory counted, CPU counted."""
    same = 0
    memory = 0
    cpu = 0.0
    caps = limits.policy is Policy.CAPS
    if caps or not slice_fresh:  # every runner counts at its cap
        for r in running:
            if r.profile == profile:
                same += 1
            memory += r.cap
            cpu += r.cpus if caps else r.reserved_cpu
        return same, memory, cpu
    oldest = now - limits.fresh_for
    for r in running:
        if r.profile == profile:
            same += 1
        if r.used_at < oldest:
            memory += r.cap
        else:
            memory += r.reserved if r.reserved > r.used else r.used
        cpu += r.reserved_cpu
    return same, memory, cpu


def is_fresh(at: float | None, now: float, limits: Limits) -> bool:
    return at is not None and now - at <= limits.fresh_for


def decide(
    candidate: Candidate,
    running: Sequence[Running],
    slice_reading: SliceReading | None,
    host_reading: HostReading | None,
    disk_free: int | None,
    limits: Limits,
    state: GuardState,
    now: float,
) -> Decided:
    # The state is replaced only where it changes: the replay of ``runnerd simulate`` makes
    # hundreds of thousands of decisions and most change nothing.
    forget = limits.cpu_wait_forget
    waiting = state.cpu_waiting
    for w in waiting:
        if not now - w.last_asked <= forget:  # one to forget: keep the others
            waiting = tuple(w for w in waiting if now - w.last_asked <= forget)
            break
    widened = state.widened and bool(running)
    if waiting is not state.cpu_waiting or widened != state.widened:
        state = replace(state, cpu_waiting=waiting, widened=widened)

    def refuse(resource: str, message: str, wait: str, new: GuardState | None = None) -> Decided:
        # ``state`` as it stands at the refusal: a stall entered or left on the way is kept.
        kept = state if new is None else new
        return Decided(Refuse(resource, message, wait), _asked(kept, candidate.scale_set, now))

    slice_fresh = slice_reading is not None and is_fresh(slice_reading.at, now, limits)
    same_profile, reserved, taken = _totals(running, candidate.profile, limits, slice_fresh, now)
    if same_profile >= candidate.slots:
        busy = (
            f"The one slot of profile {candidate.profile} is busy"
            if candidate.slots == 1
            else f"All {candidate.slots} slots of profile {candidate.profile} are busy"
        )
        return refuse("slots", busy, "slot")
    if disk_free is not None and disk_free - candidate.disk < limits.disk_reserve:
        return refuse(
            "disk",
            f"The disk is short: the runner needs {format_bytes(candidate.disk)} beside the "
            f"{format_bytes(limits.disk_reserve)} reserve; {format_bytes(disk_free)} is free",
            "slot",
        )

    measured = limits.policy is Policy.MEASURED
    if measured and slice_fresh:
        needs, basis = candidate.prediction.memory, candidate.prediction.basis
    elif measured:
        needs, basis = candidate.cap, "its cap, as no sample of the slice is recent"
    else:
        needs, basis = candidate.cap, "its profile's memory"

    budget = limits.memory_max
    if measured and budget is not None and slice_fresh and slice_reading is not None:
        mark = int(limits.high_water * budget)  # whole bytes: 90% of 33G is 29.7G
        if slice_reading.memory >= mark:
            share = 100 * slice_reading.memory / budget
            return refuse(
                "memory",
                f"The slice uses {share:.0f}% of its MemoryMax "
                f"({format_bytes(slice_reading.memory)} of {format_bytes(budget)}); nothing "
                f"starts at {limits.high_water * 100:g}% or more",
                "slot",
            )

    host = (
        host_reading
        if host_reading is not None and is_fresh(host_reading.at, now, limits)
        else None
    )
    if host is not None:
        now_stalled = hostguard.stalled(host, limits, state.stalled)
        if now_stalled != state.stalled:
            state = replace(state, stalled=now_stalled)
        if hostguard.blocks(host, limits, now_stalled):
            return refuse(
                "memory",
                hostguard.stall_message(host, limits),
                "host",
                replace(state, widened=bool(running)),
            )

    free = None
    if budget is not None:
        free = budget - limits.mirror - reserved
        if needs > free:
            return refuse(
                "memory",
                f"The slice is short of memory: needs {format_bytes(needs)}; "
                f"{format_bytes(max(0, free))} of its {format_bytes(budget)} MemoryMax is free",
                "slot",
            )

    if host is not None:
        spare = hostguard.room(host, limits, state.widened, len(running)) - reserved
        if needs > spare:
            return refuse(
                "memory",
                hostguard.short_message(needs, spare, host),
                "host",
                replace(state, widened=bool(running)),
            )
        if state.widened:
            state = replace(state, widened=False)  # the host has room again
        free = spare if free is None else min(free, spare)

    cpu = 0.0
    mine = _waiter(state.cpu_waiting, candidate.scale_set)
    if limits.cpu_budget is not None:
        total = limits.cpu_budget
        cpu = candidate.cpus if not measured else candidate.prediction.cpu
        cpu = min(cpu, total)  # never more than the whole budget: one runner can always start
        my_since = mine.since if mine else now
        starved = [
            w
            for w in state.cpu_waiting
            if w.scale_set != candidate.scale_set
            and now - w.since >= limits.cpu_starvation
            and w.since < my_since
        ]
        if starved:
            oldest = min(starved, key=lambda w: w.since)
            return _cpu_refusal(
                state,
                candidate,
                now,
                f"A job has waited {format_duration(now - oldest.since)} for CPU; no younger job "
                "starts until it fits",
            )
        if cpu > total - taken + 1e-9:
            return _cpu_refusal(
                state,
                candidate,
                now,
                f"The host is short of CPU: needs {cpu:g} CPUs; CPU {taken:g} of {total:g} CPUs "
                "reserved",
            )
    cpu_wait = now - mine.since if mine else 0.0
    if mine is not None:
        left = tuple(w for w in state.cpu_waiting if w.scale_set != candidate.scale_set)
        state = _with_waiting(state, left)
    record = AdmissionRecord(
        policy=limits.policy,
        reserved=needs,
        basis=basis,
        free=free,
        slice=slice_reading.memory if slice_fresh and slice_reading else None,
        cpu=cpu if limits.cpu_budget is not None else None,
        cpu_wait=cpu_wait,
    )
    return Decided(Admit(needs, cpu, record), state)


def _waiter(waiting: tuple[CpuWaiter, ...], scale_set: str) -> CpuWaiter | None:
    """The scale set's entry among the CPU waiters, if it has one."""
    for w in waiting:
        if w.scale_set == scale_set:
            return w
    return None


def _with_waiting(state: GuardState, waiting: tuple[CpuWaiter, ...]) -> GuardState:
    """``replace(state, cpu_waiting=waiting)`` at a fraction of its cost: ``runnerd simulate``
    holds hundreds of thousands of jobs for CPU."""
    return GuardState(state.stalled, state.widened, waiting)


def _asked(state: GuardState, scale_set: str, now: float) -> GuardState:
    """A scale set held for CPU keeps waiting through holds for memory or a slot."""
    if _waiter(state.cpu_waiting, scale_set) is None:
        return state
    waiting = tuple(
        CpuWaiter(w.scale_set, w.since, now) if w.scale_set == scale_set else w
        for w in state.cpu_waiting
    )
    return _with_waiting(state, waiting)


def _cpu_refusal(state: GuardState, candidate: Candidate, now: float, message: str) -> Decided:
    if _waiter(state.cpu_waiting, candidate.scale_set) is not None:
        new = _asked(state, candidate.scale_set, now)
    else:  # held for CPU from now, asked now
        new = _with_waiting(state, (*state.cpu_waiting, CpuWaiter(candidate.scale_set, now, now)))
    return Decided(Refuse("cpu", message, "cpu"), new)


def cpu_line(running: Sequence[Running], limits: Limits, state: GuardState) -> str:
    """``CPU 30 of 32 CPUs reserved; a job waits for CPU``."""
    if limits.cpu_budget is None:
        return ""
    taken = sum(counted_cpu(r, limits) for r in running)
    text = f"CPU {taken:g} of {limits.cpu_budget:g} CPUs reserved"
    return text + "; a job waits for CPU" if state.cpu_waiting else text


def fits_beside(
    memory: int,
    cpu: float,
    others: Sequence[Running],
    slice_reading: SliceReading | None,
    host_reading: HostReading | None,
    limits: Limits,
    state: GuardState,
    now: float,
) -> bool:
    """Whether a waiting runner may reserve ``memory`` and ``cpu`` beside ``others`` (every
    other runner): the MemoryMax, the host's room and the CPU budget, as :func:`decide` counts
    them. A heavier job queued for its scale set asks this; slots and disk do not change."""
    slice_fresh = slice_reading is not None and is_fresh(slice_reading.at, now, limits)
    _, reserved, taken = _totals(others, "", limits, slice_fresh, now)
    if limits.memory_max is not None and memory > limits.memory_max - limits.mirror - reserved:
        return False
    if host_reading is not None and is_fresh(host_reading.at, now, limits):
        room = hostguard.room(host_reading, limits, state.widened, len(others))
        if memory > room - reserved:
            return False
    if limits.cpu_budget is not None:
        return min(cpu, limits.cpu_budget) <= limits.cpu_budget - taken + 1e-9
    return True
