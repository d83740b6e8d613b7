"""Which schedule window is in force, and when that changes: a pure function of the schedule
and ``now`` (README, "Schedules").

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
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from rungar.config.model import ScaleSetConfig, Schedule, ScheduleWindow

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MINUTES_PER_DAY = 1440
LOOKAHEAD_DAYS = 8  # a week of edges plus the window that opened yesterday


@dataclass(frozen=True, slots=True)
class InForce:
    """The ``min_runners`` in force now, from which window, and what comes next."""

    min_runners: int
    window: str  # the window as written (``mon-fri 08:00-18:00``); "" outside every window
    next_change: float | None = None  # epoch seconds; None when it never changes
    next_min_runners: int | None = None
    next_window: str = ""


def parse_days(text: str) -> frozenset[int] | str:
    """``mon-fri`` -> {0..4}; ``fri-mon`` wraps; ``sat,sun`` lists. A str return is the error."""
    days: set[int] = set()
    for part in text.replace(" ", "").lower().split(","):
        first, dash, last = part.partition("-")
        if first not in DAY_NAMES or (dash and last not in DAY_NAMES):
            bad = first if first not in DAY_NAMES else last
            return f"{bad!r} is not a day; use mon, tue, wed, thu, fri, sat or sun, or a range"
        start = DAY_NAMES.index(first)
        end = DAY_NAMES.index(last) if dash else start
        span = (end - start) % 7
        days.update((start + i) % 7 for i in range(span + 1))
    return frozenset(days)


def parse_clock(text: str, *, allow_24: bool) -> int | str:
    """``08:30`` -> 510 minutes; ``24:00`` only where ``allow_24``. A str return is the error."""
    hours, colon, minutes = text.partition(":")
    if not colon or len(hours) != 2 or len(minutes) != 2:
        return f"{text!r} is not a time; write HH:MM, such as 08:00"
    if not (hours.isdigit() and minutes.isdigit()):
        return f"{text!r} is not a time; write HH:MM, such as 08:00"
    h, m = int(hours), int(minutes)
    if (h, m) == (24, 0):
        return MINUTES_PER_DAY if allow_24 else f"{text!r}: 24:00 may end a window, not open one"
    if h > 23 or m > 59:
        return f"{text!r} is not a time of day (00:00 to 23:59)"
    return h * 60 + m


def clock_text(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


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


def zone_problem(name: str) -> str | None:
    """Why ``name`` cannot be a schedule's timezone, or None."""
    if name.lower() in ("local", "localtime"):
        return "the host's own zone is refused; name an IANA zone such as Europe/Vilnius or UTC"
    try:
        ZoneInfo(name)
    except (ValueError, KeyError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return f"{name!r} is not an IANA timezone (such as Europe/Vilnius or UTC)"
    return None


def utc_text(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")
