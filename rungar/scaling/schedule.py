"""Which schedule window is in force, and when that changes: a pure function of the schedule
and ``now`` (docs/scale-sets.md, "Schedules").

A window is ``days`` + ``from``..``to`` in the schedule's timezone (UTC when unset, never the
host's own zone). ``to`` may be ``24:00``; ``to < from`` runs past midnight and belongs to the
day it opens on, so ``fri 22:00-06:00`` covers Friday night into Saturday morning. The first
window that matches, in the order written, wins; outside every window the scale set's own
``min_runners`` applies.

The next change is found among the windows' own edges over the coming eight days, so it costs
a few dozen conversions, not a scan of every minute. Edges that fall in a daylight-saving gap
take the offset before the gap, as :mod:`zoneinfo` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from rungar.config.model import ScaleSetConfig, Schedule, ScheduleWindow
from rungar.config.schedule_text import MINUTES_PER_DAY

LOOKAHEAD_DAYS = 8  # a week of edges plus the window that opened yesterday


@dataclass(frozen=True, slots=True)
class InForce:
    """The ``min_runners`` in force now, from which window, and what comes next."""

    min_runners: int
    window: str  # the window as written (``mon-fri 08:00-18:00``); "" outside every window
    next_change: float | None = None  # epoch seconds; None when it never changes
    next_min_runners: int | None = None
    next_window: str = ""


def _matches(window: ScheduleWindow, weekday: int, minute: int) -> bool:
    if window.end > window.start:
        return weekday in window.days and window.start <= minute < window.end
    yesterday = (weekday - 1) % 7
    return (weekday in window.days and minute >= window.start) or (
        yesterday in window.days and minute < window.end
    )


def _window_at(schedule: Schedule, local: datetime) -> ScheduleWindow | None:
    minute = local.hour * 60 + local.minute
    for window in schedule.windows:
        if _matches(window, local.weekday(), minute):
            return window
    return None


def _edges(schedule: Schedule, zone: ZoneInfo, now: float) -> list[float]:
    """Every instant a window opens or closes, from yesterday to LOOKAHEAD_DAYS ahead."""
    today = datetime.fromtimestamp(now, zone).date()
    edges: set[float] = set()
    for offset in range(-1, LOOKAHEAD_DAYS):
        day = today + timedelta(days=offset)
        midnight = datetime(day.year, day.month, day.day, tzinfo=zone)
        for window in schedule.windows:
            for minute in (window.start, window.end):
                local = midnight + timedelta(minutes=minute)  # wall-clock arithmetic
                if minute == MINUTES_PER_DAY:  # 24:00 is the next day's midnight
                    nxt = day + timedelta(days=1)
                    local = datetime(nxt.year, nxt.month, nxt.day, tzinfo=zone)
                edges.add(local.timestamp())
    return sorted(e for e in edges if e > now)


def in_force(config: ScaleSetConfig, now: float) -> InForce:
    """The scale set's ``min_runners`` at ``now``, and the next time (if any) it changes."""
    schedule = config.schedule
    if schedule is None or not schedule.windows:
        return InForce(config.min_runners, "")
    zone = zone_of(schedule)
    current = _window_at(schedule, datetime.fromtimestamp(now, zone))
    found = InForce(
        current.min_runners if current else config.min_runners, current.text if current else ""
    )
    for edge in _edges(schedule, zone, now):
        later = _window_at(schedule, datetime.fromtimestamp(edge, zone))
        if later is current:
            continue
        return InForce(
            found.min_runners,
            found.window,
            next_change=edge,
            next_min_runners=later.min_runners if later else config.min_runners,
            next_window=later.text if later else "",
        )
    return found


def zone_of(schedule: Schedule) -> ZoneInfo:
    return ZoneInfo(schedule.timezone)
