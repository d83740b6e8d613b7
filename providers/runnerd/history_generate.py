"""``runnerd history generate``: a realistic job history for tests, demos and benchmarks.

Shaped after the examples of docs/admission.md ("Sizing", "Try it first: runnerd simulate"): JVM
builds whose peaks grow toward the room their cap gives them, node jobs from a linter to a bundle
build, flaky and out-of-memory runs, cancelled ones, and pushes that queue a workflow's jobs
together in daily waves (busy working hours, quiet nights and weekends). Starts follow a first-come
queue per profile over its configured slots, so slot waits appear where the load peaks.

:func:`generate` is pure (a seeded ``random.Random``, ``until`` passed in); :func:`write_history`
writes the rows through :class:`runnerd.history.History`'s writer API.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rungar.model.job_key import JobKey
from runnerd.admission.model import CANCELLED, FAILURE, SUCCESS, TIMED_OUT
from runnerd.history import History, JobEnd, JobStart

GiB = 1024**3
MiB = 1024**2
DAY = 86400.0
START_LATENCY = 5.0


@dataclass(frozen=True, slots=True)
class GeneratedProfile:
    name: str
    memory: int
    cpus: float
    slots: int


@dataclass(frozen=True, slots=True)
class JobKind:
    """One job of a workflow: its peak as a share of its cap (JVMs) or in bytes, its run time."""

    profile: str
    job: str
    peak: tuple[float, float]  # bytes, or a share of the cap when ``grows_into_cap``
    minutes: tuple[float, float]
    cpu: tuple[float, float]  # average CPUs over the run
    fails: float = 0.02  # flaky share
    met_cap: float = 0.0  # share of runs whose own limit ran out of memory
    killed: float = 0.002  # killed for memory while its own limit held
    grows_into_cap: bool = False


@dataclass(frozen=True, slots=True)
class Workflow:
    repository: str
    workflow: str
    jobs: tuple[JobKind, ...]
    weight: float


PROFILES: tuple[GeneratedProfile, ...] = (
    GeneratedProfile("jvm", 10 * GiB, 8, 2),
    GeneratedProfile("node", 2 * GiB, 4, 6),
)
MIRROR = 1 * GiB
MEMORY_MAX = 33 * GiB

WORKFLOWS: tuple[Workflow, ...] = (
    Workflow(
        "acme/platform",
        "ci",
        (
            JobKind("jvm", "build", (0.45, 0.85), (8, 18), (1.2, 2.8), grows_into_cap=True),
            JobKind(
                "jvm",
                "integration",
                (0.55, 0.93),
                (12, 24),
                (0.6, 1.6),
                fails=0.04,
                met_cap=0.015,
                grows_into_cap=True,
            ),
        ),
        weight=1.0,
    ),
    Workflow(
        "acme/web",
        "ci",
        (
            JobKind("node", "lint", (250 * MiB, 600 * MiB), (1, 3), (0.2, 0.6)),
            JobKind("node", "test", (600 * MiB, 1100 * MiB), (3, 9), (0.6, 1.6), fails=0.07),
            JobKind("node", "build", (700 * MiB, 1000 * MiB), (2, 6), (0.8, 1.8), met_cap=0.003),
        ),
        weight=1.6,
    ),
    Workflow(
        "acme/docs",
        "pages",
        (JobKind("node", "build", (300 * MiB, 700 * MiB), (1, 3), (0.3, 0.8)),),
        weight=0.6,
    ),
    Workflow(
        "acme/mobile",
        "ci",
        (
            JobKind("node", "lint", (300 * MiB, 500 * MiB), (1, 2), (0.2, 0.5)),
            JobKind("node", "e2e", (700 * MiB, 1200 * MiB), (6, 14), (0.4, 1.2), fails=0.1),
        ),
        weight=0.8,
    ),
)


def host_for(jobs: int, days: float) -> tuple[tuple[GeneratedProfile, ...], int]:
    """Profiles and a MemoryMax that keep up with ``jobs`` in ``days``: the 33G host of the
    documented example for up to about 70 jobs a day, and proportionally more slots beyond."""
    per_day = jobs / max(days, 1e-9)
    scale = max(1, math.ceil(per_day / 67 / 3.5))
    profiles = tuple(GeneratedProfile(p.name, p.memory, p.cpus, p.slots * scale) for p in PROFILES)
    return profiles, MIRROR + scale * (MEMORY_MAX - MIRROR)


@dataclass(frozen=True, slots=True)
class GeneratedJob:
    start: JobStart
    key: JobKey
    end: JobEnd
    job_id: str


def load(at: float) -> float:
    """Pushes per unit time, relative: working-hours waves, quiet nights and weekends."""
    hour = (at % DAY) / 3600.0
    weekday = int(at // DAY + 4) % 7  # 1970-01-01 was a Thursday; 5 and 6 are the weekend
    wave = math.exp(-(((hour - 10.5) / 2.2) ** 2)) + 0.8 * math.exp(-(((hour - 15.0) / 2.0) ** 2))
    day = 0.25 if weekday >= 5 else 1.0
    return day * (0.05 + wave)


def _push_times(rng: random.Random, count: int, start: float, end: float) -> list[float]:
    peak = 1.9  # above the largest value of load()
    times: list[float] = []
    while len(times) < count:
        at = rng.uniform(start, end)
        if rng.random() * peak <= load(at):
            times.append(at)
    times.sort()
    return times


def _outcome(rng: random.Random, kind: JobKind, cap: int) -> tuple[str, int, bool, bool]:
    lo, hi = kind.peak
    peak = int(rng.uniform(lo, hi) * (cap if kind.grows_into_cap else 1))
    roll = rng.random()
    if roll < kind.met_cap:
        return FAILURE, cap, True, False
    roll -= kind.met_cap
    if roll < kind.killed:
        return FAILURE, peak, False, True
    roll -= kind.killed
    if roll < 0.02:
        return CANCELLED, int(peak * rng.uniform(0.2, 0.9)), False, False
    roll -= 0.02
    if roll < 0.003:
        return TIMED_OUT, peak, False, False
    roll -= 0.003
    if roll < kind.fails:
        return FAILURE, int(peak * rng.uniform(0.5, 1.0)), False, False
    return SUCCESS, min(peak, cap), False, False


def generate(
    jobs: int,
    days: float,
    seed: int,
    until: float,
    profiles: Iterable[GeneratedProfile] | None = None,
    workflows: Iterable[Workflow] = WORKFLOWS,
) -> list[GeneratedJob]:
    """``jobs`` finished jobs queued in the ``days`` before ``until``; the same ``seed``, the same
    jobs."""
    rng = random.Random(seed)
    if profiles is None:
        profiles = host_for(jobs, days)[0]
    shapes: Mapping[str, GeneratedProfile] = {p.name: p for p in profiles}
    flows = list(workflows)
    weights = [w.weight for w in flows]
    per_push = sum(w.weight * len(w.jobs) for w in flows) / sum(weights)
    pushes = _push_times(rng, max(1, math.ceil(jobs / per_push)), until - days * DAY, until)
    queued: list[tuple[float, Workflow, JobKind]] = []
    for at in pushes:
        flow = rng.choices(flows, weights)[0]
        for kind in flow.jobs:
            queued.append((at + rng.uniform(0, 20), flow, kind))
            if len(queued) == jobs:
                break
        if len(queued) == jobs:
            break
    queued.sort(key=lambda q: q[0])
    free: dict[str, list[float]] = {n: [0.0] * p.slots for n, p in shapes.items()}
    out: list[GeneratedJob] = []
    for i, (at, flow, kind) in enumerate(queued):
        shape = shapes[kind.profile]
        slot_free = heapq.heappop(free[kind.profile])
        started = max(at, slot_free) + START_LATENCY
        result, peak, met_cap, killed = _outcome(rng, kind, shape.memory)
        minutes = rng.uniform(*kind.minutes)
        if result == CANCELLED:
            minutes *= rng.uniform(0.05, 0.8)
        elif result != SUCCESS:
            minutes *= rng.uniform(0.3, 1.0)
        finished = started + minutes * 60.0
        heapq.heappush(free[kind.profile], finished)
        cpu = round(min(shape.cpus, rng.uniform(*kind.cpu)), 2)
        start = JobStart(
            runner=f"{kind.profile}-{i}",
            scale_set=kind.profile,
            profile=kind.profile,
            cap_memory=shape.memory,
            cap_cpus=shape.cpus,
            policy="caps",
            reserved_memory=shape.memory,
            reserved_cpu=shape.cpus,
            basis="its profile's memory",
            budget_free=None,
            slice_memory=None,
            started_at=started,
            queued_at=at,
            slot_wait=max(0.0, started - START_LATENCY - at),
        )
        key = JobKey(kind.profile, flow.repository, flow.workflow, kind.job)
        end = JobEnd(result, peak, cpu, met_cap, killed, 0, finished)
        out.append(GeneratedJob(start, key, end, str(100000 + i)))
    return out


def write_history(path: str | Path, jobs: Iterable[GeneratedJob]) -> int:
    """Write ``jobs`` through the history's writer; returns how many."""
    history = History(path)
    count = 0
    try:
        for job in jobs:
            row = history.start(job.start)
            history.took_job(
                row,
                job.key,
                job.job_id,
                job.start.reserved_memory,
                job.start.reserved_cpu,
                job.start.basis,
            )
            history.finish(row, job.end)
            count += 1
    finally:
        history.close()
    return count


def example_config(history: str, jobs: int = 2000, days: float = 30) -> str:
    """A runnerd.toml matching the profiles :func:`generate` ran ``jobs`` in ``days`` in."""
    profiles, memory_max = host_for(jobs, days)
    # The documented example's host has 32 CPUs for its 33G; one that keeps up with more jobs
    # has more of both.
    cpus = 32 * ((memory_max - MIRROR) // (MEMORY_MAX - MIRROR))
    lines = [
        "# Generated by runnerd history generate: the profiles its jobs ran in.",
        "[host]",
        'slice = "runnerd.slice"',
        f'memory_max = "{memory_max // GiB}G"',
        f'mirror_memory = "{MIRROR // GiB}G"',
        f'history = "{history}"',
        f"cpus = {cpus}",
        "",
        "[sizing]",
        "min_jobs = 10",
    ]
    for p in profiles:
        lines += [
            "",
            f"[profiles.{p.name}]",
            f'image = "ghcr.io/ayagmar/runnerd-runner:{p.name}-0.0.20"',
            f"cpus = {p.cpus:g}",
            f'memory = "{p.memory // GiB}G"',
            f"slots = {p.slots}",
        ]
    return "\n".join(lines) + "\n"
