"""What each demo host's runnerd learnt: its jobs by conclusion, and its predicted admissions.

Each runnerd host records every job Rungar removed a runner for, with the conclusion GitHub
gave it (docs/learning.md), and under measured admission reserves each
new runner's predicted peak once its profile has enough runs. The demo's summary reads this
back from each host's job history (read-only, after its runners are gone), so a newcomer sees
the learning happen, and a wrong ``cancelled`` would show.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CAP_BASES = ("its cap", "its profile's memory")  # an admission at the cap, not a prediction
ORDER = ("succeeded", "failed", "timed_out", "cancelled")


@dataclass(frozen=True, slots=True)
class HostLearning:
    host: str
    conclusions: Counter[str] = field(default_factory=Counter)
    predicted: int = 0  # jobs whose runner was admitted by a prediction from its history
    below_cap: int = 0  # of those, how many reserved less than their cap
    before: int = 0  # jobs it had recorded before the demo began, not counted above

    @property
    def jobs(self) -> int:
        return sum(self.conclusions.values())

    def text(self) -> str:
        """``12 jobs: 10 succeeded, 2 failed; 5 admitted by a prediction, 3 below the cap``
        (a prediction past the cap is held to it: small caps often are)."""
        if not self.jobs:
            return "no jobs recorded" + (
                f" (it had run {self.before} before the demo)" if self.before else ""
            )
        known = [w for w in ORDER if self.conclusions[w]]
        words = known + sorted(w for w in self.conclusions if w not in ORDER)
        counts = ", ".join(f"{self.conclusions[w]} {w}" for w in words)
        below = f", {self.below_cap} below the cap" if self.below_cap else ""
        before = f" (it had run {self.before} before the demo)" if self.before else ""
        return (
            f"{self.jobs} {'job' if self.jobs == 1 else 'jobs'}: {counts}; "
            f"{self.predicted} admitted by a prediction{below}{before}"
        )


def learning_of(
    host: str, rows: Iterable[tuple[str, str, str, int, int]], before: int = 0
) -> HostLearning:
    """From (result, policy, basis, reserved, cap) of each recorded job; ``before``: how many
    it had recorded before."""
    conclusions: Counter[str] = Counter()
    predicted = below = 0
    for result, policy, basis, reserved, cap in rows:
        conclusions[result] += 1
        if policy == "measured" and not basis.startswith(CAP_BASES):
            predicted += 1
            below += reserved < cap
    return HostLearning(host, conclusions, predicted, below, before)


def read_learning(host: str, history: Path, since: float = 0.0) -> HostLearning:
    """The jobs ``history`` recorded that started at ``since`` (epoch seconds) or later; those
    before only counted."""
    if not history.exists():
        return HostLearning(host)
    db = sqlite3.connect(f"file:{history}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT result, policy, basis, reserved_memory, cap_memory FROM jobs"
            " WHERE result IS NOT NULL AND started_at >= ?",
            (since,),
        ).fetchall()
        before = db.execute(
            "SELECT COUNT(*) FROM jobs WHERE result IS NOT NULL AND started_at < ?", (since,)
        ).fetchone()[0]
    finally:
        db.close()
    return learning_of(host, rows, int(before))


def open_jobs(history: Path) -> int:
    """Runners whose job runnerd has not recorded yet (still running, or awaiting Rungar)."""
    if not history.exists():
        return 0
    db = sqlite3.connect(f"file:{history}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT COUNT(*) FROM jobs WHERE result IS NULL").fetchone()[0])
    finally:
        db.close()


async def settled_learning(
    hosts: Sequence[tuple[str, Path]], wait: float = 10.0, poll: float = 0.25, since: float = 0.0
) -> list[HostLearning]:
    """Each host's learning once it has recorded every job it ran, or after ``wait`` seconds:
    the last runners' Deletes may still be giving them their grace to exit. Only the jobs
    started at ``since`` or later (epoch seconds) count as learnt; those before are counted
    apart."""
    end = time.monotonic() + wait
    while time.monotonic() < end and any(open_jobs(path) for _, path in hosts):
        await asyncio.sleep(poll)
    return [read_learning(name, path, since) for name, path in hosts]
