"""Plain, column-aligned text for the CLI's tables and cells, as the README shows them.

Output is plain text whether or not it goes to a terminal, so what a person reads is what a
script greps. Cells are never wider than their content; columns are separated by two spaces
and indented under their section header.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from rungar.model.units import format_duration

INDENT = "  "
GAP = "  "
NONE = "-"


def table(
    headers: Sequence[str], rows: Iterable[Sequence[object]], indent: str = INDENT
) -> list[str]:
    """Lines of a table: the header row then one line per row, every column aligned."""
    cells = [[str(h) for h in headers]] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return [
        (indent + GAP.join(c.ljust(w) for c, w in zip(r, widths, strict=True))).rstrip()
        for r in cells
    ]


def cell(value: object) -> str:
    """A table cell: nothing known shows as ``-``."""
    if value is None or value == "":
        return NONE
    return str(value)


def plural(count: int, noun: str, many: str | None = None) -> str:
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def format_age(seconds: float | None) -> str:
    """Largest whole unit, rounded down: 45s, 5m, 3h, 2d."""
    if seconds is None:
        return NONE
    if seconds < 60:
        return f"{max(0, math.floor(seconds))}s"
    return format_duration(seconds)


def format_time(epoch: float) -> str:
    """Local wall-clock time, to the second, as the daemon's host shows it."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def print_lines(lines: Iterable[str]) -> None:
    for line in lines:
        print(line)


def fields(pairs: Iterable[tuple[str, object]], indent: str = INDENT) -> list[str]:
    """``  Label:  value`` lines with the values aligned; empty values are left out."""
    shown = [(label, value) for label, value in pairs if value is not None and value != ""]
    width = max((len(label) for label, _ in shown), default=0) + 2
    return [f"{indent}{(label + ':').ljust(width)}{value}" for label, value in shown]


def runner_count(runners: int, busy: int = 0, idle: int = 0, starting: int = 0) -> str:
    """``18 (17 busy, 1 starting)``: the breakdown names only what is there."""
    parts = [
        f"{n} {word}" for n, word in ((busy, "busy"), (idle, "idle"), (starting, "starting")) if n
    ]
    return f"{runners} ({', '.join(parts)})" if parts else str(runners)


def count_of_max(count: int, maximum: int | None) -> str:
    """``8/12`` when a maximum is set, else ``8``."""
    return f"{count}/{maximum}" if maximum else str(count)


def runner_rows(runners: Iterable[dict[str, Any]]) -> list[list[object]]:
    return [
        [
            r["name"],
            r["scale_set"],
            r["provider"],
            r.get("state"),
            r.get("machine"),
            r.get("github"),
            format_age(r.get("age")),
            r.get("job"),
        ]
        for r in runners
    ]


RUNNER_HEADERS = ("RUNNER", "SCALE SET", "PROVIDER", "STATE", "MACHINE", "GITHUB", "AGE", "JOB")
