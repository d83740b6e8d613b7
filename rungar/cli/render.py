"""Plain, column-aligned text for the CLI's tables and cells, as the README shows them.

Output is plain text whether or not it goes to a terminal, so what a person reads is what a
script greps. Cells are never wider than their content; columns are separated by two spaces
and indented under their section header.

A table fits its terminal (docs/cli.md, "Tables at any width"): when its widest line would
wrap, long headers give way to short ones first (``PRIORITY`` → ``PRIO``), then whole columns
are left out, the least useful first, and a line under the table names them. A cell is never
cut, since a cut word (``t3.sma``) reads as another word. The width is ``$COLUMNS``, else the
terminal of stdout, stderr or stdin (so ``rungar status | less`` fits the terminal ``less`` runs
in); with no terminal at all (a script, a CI log) nothing is left out.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rungar.model.columns import fitting_columns
from rungar.model.columns import plural as plural  # the CLI's commands import it from here
from rungar.model.units import format_duration

INDENT = "  "
GAP = "  "
NONE = "-"


@dataclass(frozen=True, slots=True)
class Fit:
    """How a table gives way to a narrow terminal: ``short`` headers first, then the columns
    in ``drop``, least useful first. A column in neither is always shown whole."""

    drop: tuple[str, ...] = ()
    short: Mapping[str, str] = field(default_factory=dict)


def terminal_width() -> int | None:
    """The columns a table must fit in: ``$COLUMNS``, else the width of the terminal stdout,
    stderr or stdin is on; None when there is no terminal (nothing is left out then)."""
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    for stream in (sys.stdout, sys.stderr, sys.stdin):
        try:
            if stream is not None and stream.isatty():
                return os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            continue
    return None


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[object]],
    indent: str = INDENT,
    *,
    width: int | None = None,
    fit: Fit | None = None,
    paint: Callable[[str, str], str] | None = None,
) -> list[str]:
    """Lines of a table: the header row then one line per row, every column aligned. With a
    ``width`` and a ``fit``, the table gives way to that width (module docstring) and a last
    line names what it left out. ``paint(header, cell)`` gives a body cell its colour (the
    cell as it is when colour is off); columns are aligned on the text alone."""
    body = [[cell(v) for v in row] for row in rows]
    keep, names = fitting_columns(
        headers,
        body,
        None if width is None or fit is None else width - len(indent),
        fit.drop if fit else (),
        short=fit.short if fit else None,
    )
    cells = [names] + [[r[i] for i in keep] for r in body]
    widths = [max(len(r[k]) for r in cells) for k in range(len(keep))]
    kept_headers = [headers[i] for i in keep]

    def shown(row: int, k: int, text: str) -> str:
        padding = " " * (widths[k] - len(text))
        if paint is None or row == 0:
            return text + padding
        return paint(kept_headers[k], text) + padding

    lines = [
        (indent + GAP.join(shown(n, k, c) for k, c in enumerate(r))).rstrip()
        for n, r in enumerate(cells)
    ]
    left_out = [h for i, h in enumerate(headers) if i not in keep]
    if left_out:
        lines.append(f"{indent}(left out at {width} columns: {', '.join(left_out)})")
    return lines


def cell(value: object) -> str:
    """A table cell: nothing known shows as ``-``."""
    if value is None or value == "":
        return NONE
    return str(value)


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


# ``rungar status --json`` carries stable values; these are their words in the table.
WORDS = {"not_registered": "Not registered", "not_listed": "Not listed yet"}


def word(value: object) -> str:
    """A status value as the table says it: ``busy`` is Busy, ``not_listed`` Not listed yet."""
    text = str(value or "")
    return WORDS.get(text, text.replace("_", " ").capitalize())


def runner_rows(runners: Iterable[dict[str, Any]]) -> list[list[object]]:
    return [
        [
            r["name"],
            r["scale_set"],
            r["provider"],
            word(r.get("state")),
            word(r.get("machine")),
            word(r.get("github")),
            format_age(r.get("age")),
            r.get("job"),
        ]
        for r in runners
    ]


RUNNER_HEADERS = ("RUNNER", "SCALE SET", "PROVIDER", "STATE", "MACHINE", "GITHUB", "AGE", "JOB")
# The runner's own STATE says what GITHUB and MACHINE detail; the scale set is in its name.
RUNNER_FIT = Fit(drop=("MACHINE", "GITHUB", "AGE", "SCALE SET", "JOB", "PROVIDER"))
