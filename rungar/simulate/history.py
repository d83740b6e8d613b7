"""The jobs ``rungar simulate`` replays: read from runnerd's history databases or JSON lines.

A job is queued when it was and runs as long as it ran; its memory peak and average CPU come
along so a runnerd host's admission can reserve and predict them. Each job belongs to a scale
set: the one its history names when that scale set is configured, else the one ``--scale-set
LABEL=NAME`` maps its label to, else the only scale set there is.

JSON lines, one job per line (``queued_at`` and ``duration`` required; times are epoch
seconds, memory in bytes or as ``3G``)::

    {"scale_set": "ci", "repository": "acme/app", "workflow": "ci.yml", "job": "build",
     "queued_at": 1800000000, "duration": 600, "peak_memory": "3G", "cap_memory": "8G",
     "avg_cpu": 1.5, "result": "success"}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rungar.errors import ConfigError
from rungar.model.units import parse_bytes


@dataclass(frozen=True, slots=True)
class SimJob:
    """One job of the history, as the replay needs it."""

    label: str  # the scale set (or runnerd profile) its history names
    repository: str
    workflow: str
    job: str
    queued_at: float
    duration: float
    peak: int = 0  # bytes; 0: unknown
    cap: int = 0  # the memory cap it ran under; 0: unknown
    avg_cpu: float | None = None
    result: str = "success"
    scale_set: str = ""  # filled in by :func:`assign_scale_sets`
    asked_by: str = ""  # the scale set runnerd recorded as asking for its runner; "": unknown


def load_jobs(paths: Sequence[str]) -> list[SimJob]:
    """Every job of every file, oldest queued first. A ``.jsonl``/``.json`` file is JSON lines;
    anything else is read as a runnerd history database."""
    jobs: list[SimJob] = []
    for path in paths:
        if path.endswith((".jsonl", ".json", ".ndjson")):
            jobs += _read_jsonl(Path(path))
        else:
            jobs += _read_runnerd(path)
    jobs.sort(key=lambda j: (j.queued_at, j.label, j.repository, j.workflow, j.job))
    return jobs


def _read_runnerd(path: str) -> list[SimJob]:
    # runnerd's own reader, imported here: only a history database needs it.
    from runnerd.sizing.runs import open_read_only, read_runs

    try:
        with open_read_only(path) as db:
            runs = read_runs(db, 0.0)
    except FileNotFoundError as e:
        raise ConfigError([str(e)]) from None
    except Exception as e:  # sqlite3.DatabaseError and friends: not a history database
        raise ConfigError([f"{path}: not a runnerd job history: {e}"]) from None
    return [
        SimJob(
            label=r.key.profile,
            repository=r.key.repository,
            workflow=r.key.workflow,
            job=r.key.job,
            queued_at=r.arrived_at,
            duration=max(0.0, r.finished_at - r.started_at),
            peak=r.peak,
            cap=r.cap,
            avg_cpu=r.avg_cpu,
            result=r.result,
            asked_by=r.scale_set,
        )
        for r in runs
    ]


def _read_jsonl(path: Path) -> list[SimJob]:
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise ConfigError([f"{path}: cannot be read: {e.strerror or e}"]) from None
    jobs, problems = [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            jobs.append(_job_of(json.loads(line)))
        except (ValueError, TypeError, KeyError) as e:
            problems.append(f"{path}:{number}: {_why(e)}")
    if problems:
        raise ConfigError(problems)
    return jobs


def _why(e: Exception) -> str:
    if isinstance(e, KeyError):
        return f"{e.args[0]}: is required"
    return str(e)


def _job_of(row: object) -> SimJob:
    if not isinstance(row, dict):
        raise ValueError("each line must be a JSON object")
    label = row.get("scale_set") or row.get("profile") or ""
    duration = row.get("duration")
    if duration is None and "finished_at" in row and "started_at" in row:
        duration = float(row["finished_at"]) - float(row["started_at"])
    if duration is None:
        raise KeyError("duration")
    for key in ("queued_at",):
        if key not in row:
            raise KeyError(key)
    if float(duration) < 0:
        raise ValueError("duration: must not be negative")
    return SimJob(
        label=str(label),
        repository=str(row.get("repository", "")),
        workflow=str(row.get("workflow", "")),
        job=str(row.get("job", "")),
        queued_at=float(row["queued_at"]),
        duration=float(duration),
        peak=parse_bytes(row["peak_memory"]) if row.get("peak_memory") else 0,
        cap=parse_bytes(row["cap_memory"]) if row.get("cap_memory") else 0,
        avg_cpu=None if row.get("avg_cpu") is None else float(row["avg_cpu"]),
        result=str(row.get("result", "success")),
    )


def assign_scale_sets(
    jobs: Iterable[SimJob], scale_sets: Sequence[str], mapping: Mapping[str, str]
) -> list[SimJob]:
    """Each job with its scale set; raises ConfigError naming every label that has none.

    A label's mapping comes first; then the scale set runnerd recorded as asking, when the
    configuration has it (a profile several scale sets run in maps to none of them)."""
    known = set(scale_sets)
    unknown = sorted(set(mapping.values()) - known)
    if unknown:
        raise ConfigError([f"--scale-set: no scale set named {n}" for n in unknown])
    out, unmatched = [], set()
    only = scale_sets[0] if len(scale_sets) == 1 else ""
    for job in jobs:
        name = (
            mapping.get(job.label)
            or (job.asked_by if job.asked_by in known else "")
            or (job.label if job.label in known else only)
        )
        if not name:
            unmatched.add(job.label)
            continue
        out.append(replace(job, scale_set=name))
    if unmatched:
        raise ConfigError(
            [
                f"jobs of {label or '(no scale set)'} match no scale set; map them with "
                f"--scale-set {label or 'LABEL'}=NAME (scale sets: {', '.join(scale_sets)})"
                for label in sorted(unmatched)
            ]
        )
    return out


def sped_up(jobs: Sequence[SimJob], speed: float) -> list[SimJob]:
    """The same jobs queued ``speed`` times as fast, from the first one's queue time."""
    if speed == 1 or not jobs:
        return list(jobs)
    start = jobs[0].queued_at
    return [replace(j, queued_at=start + (j.queued_at - start) / speed) for j in jobs]
