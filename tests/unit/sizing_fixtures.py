"""Shared builders for the sizing and simulate tests (runs, profiles, configs)."""

from __future__ import annotations

from pathlib import Path

from runnerd.admission.model import Margin, Policy
from runnerd.config import HostConfig, Profile, RunnerdConfig, SizingConfig
from runnerd.history import JobEnd, JobKey, JobStart
from runnerd.history_generate import GeneratedJob, write_history
from runnerd.sizing.runs import SizingRun

G = 1024**3
M = 1024**2
NOW = 1_800_000_000.0
HOUR = 3600.0


def run(
    at: float,
    peak: float,
    cap: float = 8,
    job: str = "build",
    profile: str = "node",
    result: str = "succeeded",
    met_cap: bool = False,
    killed: bool = False,
    slot_wait: float = 0.0,
    host_wait: float = 0.0,
    cpus: float = 8.0,
    avg_cpu: float | None = None,
    branch: str | None = None,
    run_id: str | None = None,
    duration: float = 600.0,
) -> SizingRun:
    """A run finished at ``at``; sizes in G."""
    return SizingRun(
        key=JobKey(profile, "acme/web", "ci", job),
        result=result,
        peak=int(peak * G),
        cap=int(cap * G),
        cpus=cpus,
        started_at=at - duration,
        finished_at=at,
        queued_at=at - duration - slot_wait - host_wait,
        avg_cpu=avg_cpu,
        met_cap=met_cap,
        killed_for_memory=killed,
        slot_wait=slot_wait,
        host_wait=host_wait,
        branch=branch,
        run_id=run_id,
    )


def series(
    n: int, peak: float, start: float = NOW - 20 * 86400, every: float = HOUR, **kw: object
) -> list[SizingRun]:
    # why the ignore[arg-type] below: kw forwards run()'s typed keyword arguments
    return [run(start + i * every, peak, **kw) for i in range(n)]  # type: ignore[arg-type]


def profile(
    name: str = "node", memory: float = 8, slots: int = 2, cpus: float = 8, **kw: object
) -> Profile:
    # why the ignore[arg-type] below: kw forwards Profile's typed fields
    return Profile(name=name, cpus=cpus, memory=int(memory * G), slots=slots, **kw)  # type: ignore[arg-type]


def config(
    *profiles: Profile,
    memory_max: float | None = 33,
    policy: Policy = Policy.CAPS,
    mirror: float = 0,
    cpu_overcommit: float | None = None,
    **sizing: object,
) -> RunnerdConfig:
    host = HostConfig(
        memory_max=int(memory_max * G) if memory_max else None,
        admission=policy,
        mirror_memory=int(mirror * G),
        cpu_overcommit=cpu_overcommit,
    )
    return RunnerdConfig(
        host=host,
        # why the ignore[arg-type] below: sizing forwards SizingConfig's typed fields
        sizing=SizingConfig(margin=Margin(15.0), **sizing),  # type: ignore[arg-type]
        profiles={p.name: p for p in profiles},
    )


def light_history(db: Path, n: int = 30, now: float = NOW) -> None:
    """``n`` runs of one job peaking at 2G under a 7G cap, the last day: auto sizing lowers it."""
    rows = []
    for i in range(n):
        at = now - 86400 + i * 600
        start = JobStart(
            f"r{i}", "node", "node", 7 * G, 8.0, "caps", 7 * G, 8.0, "cap", None, None, at - 300,
            queued_at=at - 300,
        )  # fmt: skip
        end = JobEnd("succeeded", 2 * G, None, False, False, 0, at)
        rows.append(GeneratedJob(start, JobKey("node", "a/b", "ci", "t"), end, str(i)))
    write_history(db, rows)
