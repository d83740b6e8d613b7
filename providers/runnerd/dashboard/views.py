"""What the dashboard's pages show, worked out from runnerd's own data; pure, no I/O.

The budget bar (:func:`budget_parts`) splits the slice's MemoryMax into parts that add up to it
exactly: what runners use now, what they reserve beyond that, the mirror, the room the host
holds (hatched), and what is free. :func:`utilization` puts resource utilization and
concurrency utilization of each profile on one time axis, and :func:`reading` says what that
means for its slots.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runnerd.figures import row_slot_time, slot_shares

# A profile "reached" its concurrency or its resources when a bucket's average came this close.
FULL = 0.95
# Resource utilization under this while every slot was busy leaves room for more slots.
LOW_UTILIZATION = 0.70
# Resource utilization at or over this while slots were free: jobs are bigger than slots assume.
HIGH_UTILIZATION = 0.90


@dataclass(frozen=True, slots=True)
class Part:
    key: str  # in_use | reserved | mirror | host | free
    label: str
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "bytes": self.bytes}


def budget_parts(
    memory_max: int | None,
    mirror: int,
    runners: Iterable[tuple[int, int]],
    host_room: int | None,
) -> list[Part]:
    """The budget bar's parts, which add up to ``memory_max``.

    ``runners`` is each live runner's (counted reservation, memory in use). A runner's use
    counts first, what it reserves beyond its use second; the host's part is the room under
    MemoryMax the host does not leave the slice. Where the parts would run past MemoryMax
    (the host holds room the runners already use), the later parts give way. Without a
    MemoryMax the whole is what the host leaves the slice, or else what runners reserve.
    """
    in_use = 0
    reserved = 0
    for counted, used in runners:
        in_use += max(0, used)
        reserved += max(0, counted - max(0, used))
    held_by_host = 0
    if memory_max is None:
        total = host_room if host_room is not None else in_use + reserved + mirror
    else:
        total = memory_max
        if host_room is not None:
            held_by_host = max(0, memory_max - host_room)
    left = total
    parts = []
    for key, label, wanted in (
        ("in_use", "in use", in_use),
        ("reserved", "reserved, not in use", reserved),
        ("mirror", "mirror", mirror),
        ("host", "held by the host", held_by_host),
    ):
        taken = min(max(0, wanted), left)
        left -= taken
        parts.append(Part(key, label, taken))
    parts.append(Part("free", "free", left))
    return parts


@dataclass(frozen=True, slots=True)
class ProfileCapacity:
    name: str
    slots: int
    memory: int
    cpus: float


@dataclass(frozen=True, slots=True)
class Utilization:
    """One profile's buckets: each a share of what its slots hold (1.0 = all of it)."""

    profile: str
    times: tuple[float, ...]  # each bucket's start, epoch seconds
    concurrency: tuple[float, ...]  # jobs running ÷ slots, averaged over the bucket
    memory: tuple[float, ...]  # jobs' peak memory ÷ (slots × memory)
    cpu: tuple[float, ...]  # jobs' average CPUs ÷ (slots × cpus)
    reading: str
    # The window's busy and occupied shares of the slots' time (docs/runnerd.md, "Busy and
    # occupied"): the busy share is Sizing's for the same span.
    busy: float = 0.0
    occupied: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "times": list(self.times),
            "concurrency": [round(v, 4) for v in self.concurrency],
            "memory": [round(v, 4) for v in self.memory],
            "cpu": [round(v, 4) for v in self.cpu],
            "busy": round(self.busy, 4),
            "occupied": round(self.occupied, 4),
            "reading": self.reading,
        }


def utilization(
    jobs: Sequence[Mapping[str, Any]],
    profiles: Sequence[ProfileCapacity],
    start: float,
    end: float,
    buckets: int,
    now: float,
    live_memory: Mapping[str, int] | None = None,
) -> list[Utilization]:
    """Each profile's utilization from ``start`` to ``end`` in ``buckets`` equal buckets.

    ``jobs`` are history rows (``profile``, ``runner``, ``started_at``, ``finished_at``,
    ``peak_memory``, ``avg_cpu``, ``slots``); one without ``finished_at`` runs until ``now``, at
    the memory ``live_memory`` gives its runner when known. Each job counts for the part of a
    bucket it ran: memory at its peak, CPU at its average, so a bucket's value is a time-weighted
    mean; each against the slots its profile had when it ran (``slots``), not today's. The
    reading takes the peaks at any moment, not the buckets' means: jobs shorter than a bucket
    fill every slot without any bucket's mean coming near it.
    """
    live_memory = live_memory or {}
    width = max(1e-9, (end - start) / max(1, buckets))
    times = tuple(start + i * width for i in range(buckets))
    found = []
    for p in profiles:
        running = [0.0] * buckets
        memory = [0.0] * buckets
        cpu = [0.0] * buckets
        moments: list[tuple[float, int, float, float, float]] = []
        slot_times = []
        for job in jobs:
            if job["profile"] != p.name:
                continue
            # Busy from its runner's start, or its job's queue time when later: a warm or
            # reserve runner waiting for a job does not count (docs/runnerd.md).
            stretch = row_slot_time(job, now, p.slots)
            slot_times.append(stretch)
            if stretch.busy_from is None:
                continue
            slots_then = stretch.slots
            began, ended = stretch.busy_from, stretch.until
            finished = job["finished_at"]
            peak = int(job["peak_memory"] or 0)
            if finished is None:
                peak = max(peak, live_memory.get(str(job["runner"]), 0))
            avg = float(job["avg_cpu"] or 0.0)
            first = max(0, int((began - start) // width))
            last = min(buckets - 1, int((ended - start) // width))
            scale = p.slots / slots_then  # its share of the slots then, in today's slots
            for i in range(first, last + 1):
                b0 = start + i * width
                share = max(0.0, min(ended, b0 + width) - max(began, b0)) / width
                running[i] += share * scale
                memory[i] += share * peak * scale
                cpu[i] += share * avg * scale
            if ended > max(began, start) and began < end:
                weights = (scale, peak * scale, avg * scale)
                moments.append((max(began, start), 1, *weights))
                moments.append((min(ended, end), -1, *weights))
        slots = max(1, p.slots)
        concurrency = tuple(v / slots for v in running)
        mem = tuple(v / (slots * p.memory) if p.memory else 0.0 for v in memory)
        cpus = tuple(v / (slots * p.cpus) if p.cpus else 0.0 for v in cpu)
        at_once = _peaks(moments)
        peaks = (
            at_once[0] / slots,
            at_once[1] / (slots * p.memory) if p.memory else 0.0,
            at_once[2] / (slots * p.cpus) if p.cpus else 0.0,
        )
        busy, occupied = slot_shares(slot_times, start, end)
        found.append(
            Utilization(
                p.name,
                times,
                concurrency,
                mem,
                cpus,
                reading(concurrency, mem, cpus, peaks),
                busy,
                occupied,
            )
        )
    return found


def _peaks(moments: list[tuple[float, int, float, float, float]]) -> tuple[float, float, float]:
    """The most jobs, memory and CPU running at any one moment (a job ending at the moment
    another starts does not overlap it)."""
    best = [0.0, 0.0, 0.0]
    now = [0.0, 0.0, 0.0]
    for _, step, *weights in sorted(moments, key=lambda m: (m[0], m[1])):
        for i, w in enumerate(weights):
            now[i] += step * w
            best[i] = max(best[i], now[i])
    return best[0], best[1], best[2]


def reading(
    concurrency: Sequence[float],
    memory: Sequence[float],
    cpu: Sequence[float],
    peaks: tuple[float, float, float] | None = None,
) -> str:
    """The tuning reading: which of concurrency and resources peaked without the other.
    ``peaks`` are the shares at the busiest moment (slots, memory, CPU); without them the
    buckets' largest means stand in."""
    if not concurrency or max(concurrency) == 0:
        return "no jobs in this window"
    if peaks is None:
        peaks = (max(concurrency), max(memory, default=0.0), max(cpu, default=0.0))
    peak_slots, peak_memory, peak_cpu = peaks
    peak_resource = max(peak_memory, peak_cpu)
    which = "memory" if peak_memory >= peak_cpu else "CPU"
    if peak_slots >= FULL and peak_resource < LOW_UTILIZATION:
        return (
            f"peak concurrency without high utilization: every slot was busy while {which} "
            f"peaked at {peak_resource:.0%} of what the slots hold → room to raise slots"
        )
    if peak_resource >= HIGH_UTILIZATION and peak_slots < FULL:
        return (
            f"peak utilization without high concurrency: {which} reached {peak_resource:.0%} "
            f"with at most {peak_slots:.0%} of the slots busy → jobs are larger than the "
            "slots assume; lower slots (or raise memory) before jobs fail"
        )
    return (
        f"concurrency peaked at {peak_slots:.0%} of the slots and {which} at "
        f"{peak_resource:.0%}: in step, nothing to tune"
    )
