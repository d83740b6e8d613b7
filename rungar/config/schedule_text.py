"""A schedule window as written: days, times of day and the timezone, read into numbers
(docs/scale-sets.md, "Schedules"). The loader checks windows with these;
:mod:`rungar.scaling.schedule` decides which window is in force."""

from __future__ import annotations

from zoneinfo import ZoneInfo

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MINUTES_PER_DAY = 1440


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


def zone_problem(name: str) -> str | None:
    """Why ``name`` cannot be a schedule's timezone, or None."""
    if name.lower() in ("local", "localtime"):
        return "the host's own zone is refused; name an IANA zone such as Europe/Vilnius or UTC"
    try:
        ZoneInfo(name)
    except (ValueError, KeyError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return f"{name!r} is not an IANA timezone (such as Europe/Vilnius or UTC)"
    return None
