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
    NoRoom,
    Policy,
    Running,
    SliceReading,
)


def memory_reserved(
    running: Sequence[Running], limits: Limits, slice_fresh: bool, now: float
) -> int:
    """What the running runners count at against the memory budget: each at its cap under caps,
    without a recent sample of the slice, or without a recent sample of its own; else at the
    larger of what it reserved and what it last used."""
    if limits.policy is Policy.CAPS or not slice_fresh:
        return sum(r.cap for r in running)
    fresh_for = limits.fresh_for
    return sum(
        r.cap if now - r.used_at > fresh_for else r.used if r.used > r.reserved else r.reserved
        for r in running
    )


def counted_memory(runner: Running, limits: Limits, slice_fresh: bool, now: float) -> int:
    """What one running runner counts at against the memory budget (:func:`memory_reserved`)."""
    return memory_reserved((runner,), limits, slice_fresh, now)


def cpu_reserved(running: Sequence[Running], limits: Limits) -> float:
    """What the running runners count at against the CPU budget: each at its profile's CPUs
    under caps, else at the CPUs it reserved; added up in their order."""
    caps = limits.policy is Policy.CAPS
    taken = 0.0
    for r in running:
        taken += r.cpus if caps else r.reserved_cpu
    return taken


def counted_cpu(runner: Running, limits: Limits) -> float:
    """What one running runner counts at against the CPU budget (:func:`cpu_reserved`)."""
    return cpu_reserved((runner,), limits)


def is_fresh(at: float | None, now: float, limits: Limits) -> bool:
    return at is not None and now - at <= limits.fresh_for


def _fresh_host(reading: HostReading | None, now: float, limits: Limits) -> HostReading | None:
    return reading if reading is not None and is_fresh(reading.at, now, limits) else None


def slice_free(limits: Limits, reserved: int) -> int | None:
    """What the slice's MemoryMax leaves beside runners counted at ``reserved`` (None: none)."""
    return None if limits.memory_max is None else limits.memory_max - limits.mirror - reserved


def host_spare(host: HostReading, limits: Limits, widened: bool, others: int, reserved: int) -> int:
    """What the host's room leaves beside ``others`` runners counted at ``reserved``."""
    return hostguard.room(host, limits, widened, others) - reserved


def cpu_fits(cpu: float, taken: float, limits: Limits) -> bool:
    """Whether ``cpu`` fits the CPU budget beside ``taken``: never more than the whole budget
    is asked, so one runner can always start."""
    if limits.cpu_budget is None:
        return True
    return min(cpu, limits.cpu_budget) <= limits.cpu_budget - taken + 1e-9


def _forget_old_waiters(state: GuardState, running: bool, now: float, limits: Limits) -> GuardState:
    """Waiters not asked for ``cpu_wait_forget`` are forgotten; the margin widened after a host
    wait narrows again once nothing runs."""
    forget = limits.cpu_wait_forget
    waiting = tuple(w for w in state.cpu_waiting if now - w.last_asked <= forget)
    return replace(state, cpu_waiting=waiting, widened=state.widened and running)


def _needs(candidate: Candidate, limits: Limits, slice_fresh: bool) -> tuple[int, str]:
    """What the candidate reserves, and why."""
    if limits.policy is Policy.MEASURED and slice_fresh:
        return candidate.prediction.memory, candidate.prediction.basis
    if limits.policy is Policy.MEASURED:
        return candidate.cap, "its cap, as no sample of the slice is recent"
    return candidate.cap, "its profile's memory"


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
    """Admit the candidate or say what holds it back."""
    state = _forget_old_waiters(state, bool(running), now, limits)

    def refuse(resource: str, message: str, wait: str, new: GuardState | None = None) -> Decided:
        # ``state`` as it stands at the refusal: a stall entered or left on the way is kept.
        kept = state if new is None else new
        return Decided(NoRoom(resource, message, wait), _asked(kept, candidate.scale_set, now))

    slice_fresh = slice_reading is not None and is_fresh(slice_reading.at, now, limits)
    same_profile = sum(1 for r in running if r.profile == candidate.profile)
    reserved = memory_reserved(running, limits, slice_fresh, now)
    taken = cpu_reserved(running, limits)
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
    needs, basis = _needs(candidate, limits, slice_fresh)
    if limits.policy is Policy.MEASURED and slice_fresh and slice_reading is not None:
        high = _above_high_water(slice_reading, limits)
        if high:
            return refuse("memory", high, "slot")
    host = _fresh_host(host_reading, now, limits)
    if host is not None:
        now_stalled = hostguard.stalled(host, limits, state.stalled)
        if now_stalled != state.stalled:
            state = replace(state, stalled=now_stalled)
        if hostguard.blocks(host, limits, now_stalled):
            message = hostguard.stall_message(host, limits)
            return refuse("memory", message, "host", replace(state, widened=bool(running)))
    free = slice_free(limits, reserved)
    if free is not None and needs > free:
        return refuse(
            "memory",
            f"The slice is short of memory: needs {format_bytes(needs)}; "
            f"{format_bytes(max(0, free))} of its {format_bytes(limits.memory_max or 0)} "
            "MemoryMax is free",
            "slot",
        )
    if host is not None:
        spare = host_spare(host, limits, state.widened, len(running), reserved)
        if needs > spare:
            message = hostguard.short_message(needs, spare, host)
            return refuse("memory", message, "host", replace(state, widened=bool(running)))
        if state.widened:
            state = replace(state, widened=False)  # the host has room again
        free = spare if free is None else min(free, spare)
    return _admit_for_cpu(
        candidate,
        needs,
        basis,
        free,
        taken,
        slice_reading if slice_fresh else None,
        limits,
        state,
        now,
    )


def at_high_water(memory: int, limits: Limits) -> bool:
    """The slice reads ``memory``: at or over the high-water mark, where nothing starts."""
    budget = limits.memory_max
    return budget is not None and memory >= int(limits.high_water * budget)  # whole bytes


def starves(since: float, mine: float, now: float, limits: Limits) -> bool:
    """A job held for CPU since ``since`` holds back one held since ``mine`` (``now`` for one
    not held yet): it is older and has waited ``cpu_starvation`` or more."""
    return now - since >= limits.cpu_starvation and since < mine


def _above_high_water(reading: SliceReading, limits: Limits) -> str:
    """Why nothing starts: the slice is at its high-water mark ("" when it is below)."""
    budget = limits.memory_max
    if budget is None:
        return ""
    if not at_high_water(reading.memory, limits):
        return ""
    share = 100 * reading.memory / budget
    return (
        f"The slice uses {share:.0f}% of its MemoryMax "
        f"({format_bytes(reading.memory)} of {format_bytes(budget)}); nothing "
        f"starts at {limits.high_water * 100:g}% or more"
    )


def _admit_for_cpu(
    candidate: Candidate,
    needs: int,
    basis: str,
    free: int | None,
    taken: float,
    fresh_slice: SliceReading | None,
    limits: Limits,
    state: GuardState,
    now: float,
) -> Decided:
    """The candidate fits every memory check: admitted unless CPU holds it back (a job that had
    a slot and memory but not CPU waits for CPU, oldest first across scale sets)."""
    cpu = 0.0
    mine = _waiter(state.cpu_waiting, candidate.scale_set)
    if limits.cpu_budget is not None:
        total = limits.cpu_budget
        measured = limits.policy is Policy.MEASURED
        cpu = min(candidate.cpus if not measured else candidate.prediction.cpu, total)
        my_since = mine.since if mine else now
        starved = [
            w
            for w in state.cpu_waiting
            if w.scale_set != candidate.scale_set and starves(w.since, my_since, now, limits)
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
        if not cpu_fits(cpu, taken, limits):
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
        state = replace(state, cpu_waiting=left)
    record = AdmissionRecord(
        policy=limits.policy,
        reserved=needs,
        basis=basis,
        free=free,
        slice=fresh_slice.memory if fresh_slice is not None else None,
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


def _asked(state: GuardState, scale_set: str, now: float) -> GuardState:
    """A scale set held for CPU keeps waiting through holds for memory or a slot."""
    if _waiter(state.cpu_waiting, scale_set) is None:
        return state
    waiting = tuple(
        CpuWaiter(w.scale_set, w.since, now) if w.scale_set == scale_set else w
        for w in state.cpu_waiting
    )
    return replace(state, cpu_waiting=waiting)


def _cpu_refusal(state: GuardState, candidate: Candidate, now: float, message: str) -> Decided:
    if _waiter(state.cpu_waiting, candidate.scale_set) is not None:
        new = _asked(state, candidate.scale_set, now)
    else:  # held for CPU from now, asked now
        waiter = CpuWaiter(candidate.scale_set, now, now)
        new = replace(state, cpu_waiting=(*state.cpu_waiting, waiter))
    return Decided(NoRoom("cpu", message, "cpu"), new)


def cpu_line(running: Sequence[Running], limits: Limits, state: GuardState) -> str:
    """``CPU 30 of 32 CPUs reserved; a job waits for CPU``."""
    if limits.cpu_budget is None:
        return ""
    taken = cpu_reserved(running, limits)
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
    other runner): the MemoryMax, the host's room and the CPU budget, by the rules
    :func:`decide` applies. A heavier job queued for its scale set asks this; slots and disk do
    not change."""
    slice_fresh = slice_reading is not None and is_fresh(slice_reading.at, now, limits)
    reserved = memory_reserved(others, limits, slice_fresh, now)
    taken = cpu_reserved(others, limits)
    free = slice_free(limits, reserved)
    if free is not None and memory > free:
        return False
    host = _fresh_host(host_reading, now, limits)
    if host is not None and memory > host_spare(host, limits, state.widened, len(others), reserved):
        return False
    return cpu_fits(cpu, taken, limits)
