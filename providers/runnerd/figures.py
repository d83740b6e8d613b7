"""Every figure of a job's record, defined once (docs/runnerd.md, "Every figure, defined once").

Pure: a history row (or the spans a scale set was refused) in, numbers out; nothing here reads
the clock or a file. ``runnerctl jobs`` and ``job``, the TUI, the dashboard's job page and their
``--json`` all read a job's figures through :func:`job_figures`, so they agree to the second.

Two clocks meet here. runnerd's clock stamps what runnerd saw (its runner's start, the job's
start as Rungar told it, the runner's end); GitHub's clock stamps what GitHub saw (the job
queued, a runner took it, it finished), which Rungar passes on with the job. runnerd keeps every
time on its own clock: a job's queue time is GitHub's converted once, as runnerd first hears of
the job, by the offset its hint carries (Rungar's clock less GitHub's, measured as GitHub's
message of the job came), so no wait is ever one clock's time less the other's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class HeldSpan:
    """A stretch in which this host was refusing a scale set's runners, and for what
    (``slot``: its slots or the memory budget; ``host``: the host's memory; ``cpu``)."""

    start: float
    end: float
    kind: str


def held_back(spans: Iterable[HeldSpan], since: float, until: float) -> dict[str, float]:
    """How long a job queued at ``since`` whose runner started at ``until`` was held back by
    this host's refusals, per kind: each refusal from ``since`` on, until the next ask or
    ``until``. A refusal before the job queued was for other jobs: none of its stretch is
    charged to this one, so a job admitted at its first ask is charged nothing."""
    out = {"slot": 0.0, "host": 0.0, "cpu": 0.0}
    for span in spans:
        if span.start < since:
            continue
        overlap = min(span.end, until) - span.start
        if overlap > 0:
            out[span.kind] = out.get(span.kind, 0.0) + overlap
    return out


def converted(github_time: float, offset: float | None) -> float | None:
    """A GitHub time on Rungar's clock (which runnerd's keeps with), by the offset its hint
    carries; None without either."""
    if github_time > 0 and offset is not None:
        return github_time + offset
    return None


def queued_by_our_clock(
    github_queued: float,
    github_started: float,
    started: float,
    first_listed: float | None,
    first_converted: float | None = None,
    offset: float | None = None,
) -> float | None:
    """When a job was queued, by runnerd's clock, never after ``started``: its queue time as
    converted when runnerd first heard of it (``first_converted``), else converted now by the
    ``offset`` its hint carries; from a Rungar that measures no offset, GitHub's queue time moved
    by the job's start (``started`` on runnerd's clock, ``github_started`` on GitHub's), else as
    it is; else when a create first listed it here; None when none is known."""
    if first_converted is not None:
        return min(first_converted, started)
    now_converted = converted(github_queued, offset)
    if now_converted is not None:
        return min(now_converted, started)
    if github_queued > 0 and github_started >= github_queued:
        return started - (github_started - github_queued)
    if github_queued > 0:
        return min(github_queued, started)
    if first_listed is not None:
        return min(first_listed, started)
    return None


@dataclass(frozen=True, slots=True)
class SlotTime:
    """One runner's time in a slot of its profile (docs/runnerd.md, "Busy and occupied"):
    occupied from its start to its end; busy from its job's queue time, or its start when
    later, to its end (``busy_from`` None: still waiting for a job, not busy). ``slots``: its
    profile's slots when it ran."""

    occupied_from: float
    busy_from: float | None
    until: float
    slots: int


def slot_time(
    runner_started: float,
    queued: float | None,
    job_started: float | None,
    finished: float | None,
    now: float,
    slots: int,
) -> SlotTime:
    """A runner's :class:`SlotTime` from its record's times (``finished`` None: running at
    ``now``). A job whose queue time is not known is busy from its start; one that never
    became known, from its runner's start, as its duration counts."""
    until = finished if finished is not None else now
    busy: float | None
    if queued is not None:
        busy = max(runner_started, queued)
    elif job_started is not None:
        busy = job_started
    elif finished is not None:
        busy = runner_started
    else:
        busy = None  # a reserve or warm runner still waiting for its job
    return SlotTime(runner_started, busy, until, max(1, slots))


def row_slot_time(row: Mapping[str, Any], now: float, slots: int) -> SlotTime:
    """A history row's :class:`SlotTime`; ``slots`` stands in for a row that recorded none."""
    return slot_time(
        float(row["started_at"]),
        _f(row, "queued_at"),
        _f(row, "job_started_at"),
        _f(row, "finished_at"),
        now,
        int(row.get("slots") or slots),
    )


def slot_shares(times: Iterable[SlotTime], start: float, end: float) -> tuple[float, float]:
    """(busy, occupied): the share of the slots' time from ``start`` to ``end`` that runners
    spent busy, and occupied. Each runner counts against the slots its profile had then, so a
    profile whose slots changed reads each stretch as it was. The one computation behind
    Sizing's and the Utilization page's busy share."""
    span = max(end - start, 1e-9)
    busy = occupied = 0.0
    for t in times:
        occupied += max(0.0, min(t.until, end) - max(t.occupied_from, start)) / t.slots
        if t.busy_from is not None:
            busy += max(0.0, min(t.until, end) - max(t.busy_from, start)) / t.slots
    return busy / span, occupied / span


def _f(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    return None if value is None else float(value)


def job_figures(row: Mapping[str, Any]) -> dict[str, float | None]:
    """A job's figures from its history row, in seconds (``None``: not known):

    - ``wait``: from the job's queue time until its runner took it (runnerd's clock);
    - ``slot_wait``, ``host_wait``, ``cpu_wait``: of that, how long this host held it back by
      refusing for a slot, the host's memory, CPU;
    - ``idle``: how long its runner waited for a job before this one queued (a reserve or
      warm runner; what ``min_runners`` and warm pools cost); 0 for a runner started for it;
    - ``pickup``: from when its runner started, or the job queued if later, until the runner
      took it (a new runner's boot, or how quickly a waiting one was given it);
    - ``duration``: from the job's start until its runner ended (runnerd's clock); a job whose
      start never became known runs from its runner's start;
    - ``github_wait``, ``github_duration``: the same two by GitHub's own times, when known.
    """
    runner_started = float(row["started_at"])
    job_started = _f(row, "job_started_at")
    queued = _f(row, "queued_at")
    finished = _f(row, "finished_at")
    began = job_started if job_started is not None else runner_started
    idle: float | None = None
    pickup: float | None = None
    wait: float | None = None
    if job_started is not None:
        ready_from = runner_started if queued is None else max(runner_started, queued)
        idle = max(0.0, min(queued, job_started) - runner_started) if queued is not None else None
        pickup = max(0.0, job_started - ready_from)
        wait = max(0.0, job_started - queued) if queued is not None else None
    elif queued is not None and row.get("job_started_at") is None and row.get("slots") is None:
        # A record from before job starts were kept: queued_at was its first refusal here.
        wait = max(0.0, runner_started - queued)
    gh_queued = _f(row, "github_queued_at")
    gh_started = _f(row, "github_started_at")
    gh_done = _f(row, "github_completed_at")
    return {
        "wait": wait,
        "slot_wait": float(row.get("slot_wait") or 0.0),
        "host_wait": float(row.get("host_wait") or 0.0),
        "cpu_wait": float(row.get("cpu_wait") or 0.0),
        "idle": idle,
        "pickup": pickup,
        "duration": max(0.0, finished - began) if finished is not None else None,
        "github_wait": (
            gh_started - gh_queued if gh_started and gh_queued and gh_started >= gh_queued else None
        ),
        "github_duration": (
            gh_done - gh_started if gh_done and gh_started and gh_done >= gh_started else None
        ),
    }
