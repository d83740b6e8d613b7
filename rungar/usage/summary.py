"""Jobs served, summed by repository, workflow, scale set or provider (``rungar usage``).

Pure: rows in, groups out. A group's runner-seconds are the lives of the runners that served
its jobs; its jobs are counted by conclusion; its waits are GitHub's (assigned to the scale set
until a runner took the job), given as p50 and p95 by nearest rank; its cost is the priced
jobs' runner-hours times the price per hour their provider had when they ended, and ``None``
when none of its jobs ran on a priced provider (docs/usage.md, "Usage").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

BY_KEYS = ("repository", "workflow", "scale-set", "provider")
UNKNOWN_CONCLUSION = "unknown"


@dataclass(frozen=True, slots=True)
class JobUsage:
    """One job served: where it came from, where it ran, for how long, how it ended."""

    job_id: str
    finished_at: float
    repository: str
    workflow: str
    job: str
    scale_set: str
    provider: str
    runner: str
    runner_seconds: float
    conclusion: str  # succeeded, failed, cancelled, timed_out or unknown
    wait: float | None = None  # None: GitHub did not say, nor did Rungar see the job assigned
    price_per_hour: float | None = None  # the provider's price when the job ended


@dataclass(slots=True)
class Group:
    key: str
    runner_seconds: float = 0.0
    jobs: int = 0
    conclusions: dict[str, int] = field(default_factory=dict)
    waits: list[float] = field(default_factory=list)
    cost: float | None = None

    def add(self, row: JobUsage) -> None:
        self.jobs += 1
        self.runner_seconds += row.runner_seconds
        self.conclusions[row.conclusion] = self.conclusions.get(row.conclusion, 0) + 1
        if row.wait is not None:
            self.waits.append(row.wait)
        if row.price_per_hour is not None:
            self.cost = (self.cost or 0.0) + row.runner_seconds / 3600.0 * row.price_per_hour

    def document(self) -> dict[str, Any]:
        ordered = sorted(self.waits)
        return {
            "key": self.key,
            "jobs": self.jobs,
            "runner_seconds": round(self.runner_seconds, 1),
            "conclusions": dict(sorted(self.conclusions.items())),
            "wait_p50": percentile(ordered, 50),
            "wait_p95": percentile(ordered, 95),
            "cost": None if self.cost is None else round(self.cost, 4),
        }


def percentile(ordered: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile of sorted values; None for none."""
    if not ordered:
        return None
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return round(ordered[rank - 1], 1)


def key_of(row: JobUsage, by: str) -> str:
    value = {
        "repository": row.repository,
        "workflow": f"{row.repository}: {row.workflow}" if row.repository else row.workflow,
        "scale-set": row.scale_set,
        "provider": row.provider,
    }[by]
    return value or "(unknown)"


def summarize(rows: Iterable[JobUsage], by: str, since: float, now: float) -> dict[str, Any]:
    """The usage document: every group of ``rows`` by ``by``, most runner-seconds first, and
    their total. ``since`` and ``now`` are the window's ends (epoch seconds), stated in it."""
    if by not in BY_KEYS:
        raise ValueError(f"by: must be one of {', '.join(BY_KEYS)}, not {by!r}")
    groups: dict[str, Group] = {}
    total = Group("total")
    for row in rows:
        key = key_of(row, by)
        groups.setdefault(key, Group(key)).add(row)
        total.add(row)
    ordered = sorted(groups.values(), key=lambda g: (-g.runner_seconds, g.key))
    return {
        "version": 1,  # the shape's version (docs/json.md)
        "by": by,
        "since": since,
        "now": now,
        "groups": [g.document() for g in ordered],
        "total": total.document(),
    }
