"""Sizes and durations as people write them: ``8GiB``, ``512M``, ``1.5G``, ``30s``, ``1h30m``.

Sizes: a bare number is bytes; ``K/M/G/T`` and ``KiB/MiB/GiB/TiB`` are both powers of 1024
(the docs write ``6G`` and ``8GiB`` for the same thing); ``KB/MB/GB/TB`` are powers of 1000.
"""

from __future__ import annotations

import math
import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(i?B?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_bytes(value: object) -> int:
    """Bytes in ``value``; raises ``ValueError`` with a sentence when it is not a size."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value} is negative")
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{value} is not a size")
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a size")
    match = _SIZE.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a size such as 512MiB, 8GiB or 6G")
    number, prefix, suffix = match.groups()
    prefix = prefix.upper()
    base = 1000 if (suffix.upper() == "B" and prefix) else 1024
    return int(float(number) * base ** _POWERS[prefix])


def format_bytes(value: int) -> str:
    """Shortest of ``512M``, ``1.25G``, ``30G`` the docs use; powers of 1024."""
    if value < 0:
        return "-" + format_bytes(-value)
    for unit, power in (("T", 4), ("G", 3), ("M", 2), ("K", 1)):
        scaled = value / 1024**power
        if scaled >= 1:
            text = f"{scaled:.2f}".rstrip("0").rstrip(".")
            return f"{text}{unit}"
    return f"{value}B"


def parse_duration(value: object) -> float:
    """Seconds in ``value`` (a number of seconds, or ``90s``, ``2m``, ``1h30m``, ``7d``)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a duration")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration")
    text = value.strip()
    pos = 0
    total = 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"{value!r} is not a duration such as 30s, 2m or 1h30m")
    return total


def format_duration(seconds: float) -> str:
    """The largest whole unit, as ``rungar status`` shows ages and waits: 45s, 5m, 3h, 2d."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{math.ceil(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 86400)}d"


def format_seconds(seconds: float) -> str:
    """To the second, for figures compared with each other: ``45s``, ``1m 10s``, ``2h 03m 10s``."""
    total = max(0, round(seconds))
    minutes, secs = divmod(total, 60)
    if minutes == 0:
        return f"{secs}s"
    hours, minutes = divmod(minutes, 60)
    if hours == 0:
        return f"{minutes}m {secs:02d}s" if secs else f"{minutes}m"
    return f"{hours}h {minutes:02d}m {secs:02d}s"
