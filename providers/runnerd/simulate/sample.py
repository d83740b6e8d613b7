"""Which part of the window ``runnerd simulate`` replays: all of it, or its latest whole weeks.

docs/simulate.md, "runnerd simulate: the latest whole weeks". A replay costs in proportion to
its jobs, so a window holding more than ``max_jobs`` is replayed over its latest whole weeks
that hold at most that many (never less than one week): whole weeks, so each day of the week
counts as often as in the window. The jobs before them are history the predictions read, as the
daemon's would have. The table then describes the weeks replayed, and says so.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from runnerd.sizing.runs import DAY, SizingRun

WEEK = 7 * DAY
MAX_JOBS = 50_000  # a generated month of 100,000 jobs: 2 weeks, about 8 s on two CPUs


@dataclass(frozen=True, slots=True)
class Span:
    """The part of the window replayed: from ``start`` to its end."""

    start: float
    weeks: int  # whole weeks replayed; 0 when the whole window is
    jobs: int  # jobs replayed
    window_jobs: int  # jobs in the whole window
    window_days: float
    max_jobs: int | None

    def note(self) -> str:
        """What the table describes, when it is not the whole window ("" when it is)."""
        if not self.weeks:
            return ""
        weeks = "week" if self.weeks == 1 else f"{self.weeks} weeks"
        return (
            f"Replayed the latest {weeks} of the {self.window_days:g} days: {self.jobs} of the "
            f"window's {self.window_jobs} jobs, as it holds more than {self.max_jobs} "
            "(--max-jobs; --all replays every job). Whole weeks, so each day of the week counts "
            "as often as in the window; the jobs before them are history the predictions read, "
            "as the daemon's would have. Every figure below is over those weeks: a busier "
            "moment earlier in the window shows only with --all."
        )


def latest_weeks(jobs: Sequence[SizingRun], start: float, end: float, max_jobs: int | None) -> Span:
    """The span to replay of ``jobs`` (queued in ``[start, end)``, in queue order): the whole
    window when ``max_jobs`` is None, when it holds at most ``max_jobs`` jobs, or when it is no
    longer than a week; else the most whole weeks back from ``end`` that hold at most
    ``max_jobs``, at least one."""
    arrived = [job.arrived_at for job in jobs]
    days = (end - start) / DAY
    whole = Span(start, 0, len(jobs), len(jobs), days, max_jobs)
    if max_jobs is None or len(jobs) <= max_jobs or end - WEEK <= start:
        return whole
    weeks = 1
    while end - (weeks + 1) * WEEK > start:
        if len(arrived) - bisect.bisect_left(arrived, end - (weeks + 1) * WEEK) > max_jobs:
            break
        weeks += 1
    begin = end - weeks * WEEK
    replayed = len(arrived) - bisect.bisect_left(arrived, begin)
    return Span(begin, weeks, replayed, len(jobs), days, max_jobs)
