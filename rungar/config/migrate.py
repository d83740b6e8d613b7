"""``rungar config migrate``: bring an older scale_sets.yaml to the current format, as text.

The file's format is its ``version:`` key (docs/stability.md). Each step below rewrites the
lines it must and nothing else, so comments, anchors, order and spacing stay as written; the
result is checked like any other file before it is written. A file with no ``version:`` is
format 0: the same keys as format 1, which adds the key itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

CURRENT = 1
_VERSION = re.compile(r"^version:\s*(\S+)\s*(#.*)?$")
_TOP_KEY = re.compile(r"^[A-Za-z_][\w-]*\s*:")


@dataclass(frozen=True, slots=True)
class Step:
    to: int
    what: str
    rewrite: Callable[[list[str]], list[str]]


def version_of(text: str) -> int:
    """The ``version:`` the file states at the top level; 0 when it states none."""
    for line in text.splitlines():
        found = _VERSION.match(line)
        if found:
            try:
                return int(found.group(1))
            except ValueError:
                return -1
    return 0


def _add_version(lines: list[str]) -> list[str]:
    """``version: 1`` above the first top-level key, after the file's opening comments."""
    for i, line in enumerate(lines):
        if _TOP_KEY.match(line):
            return [*lines[:i], f"version: {CURRENT}\n", "\n", *lines[i:]]
    return [*lines, f"version: {CURRENT}\n"]


STEPS = (Step(1, "states its format (version: 1)", _add_version),)


@dataclass(frozen=True, slots=True)
class Migration:
    text: str
    source: int
    target: int
    done: tuple[str, ...]  # one line per step taken

    @property
    def changed(self) -> bool:
        return bool(self.done)


def migrate(text: str) -> Migration:
    """``text`` brought to the current format; raises ValueError for a version it cannot read."""
    source = version_of(text)
    if source < 0 or source > CURRENT:
        raise ValueError(
            f"version: this Rungar reads formats up to {CURRENT}; upgrade Rungar for a newer one"
        )
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    done = []
    for step in STEPS:
        if step.to > source:
            lines = step.rewrite(lines)
            done.append(f"to format {step.to}: {step.what}")
    return Migration("".join(lines) if done else text, source, CURRENT, tuple(done))
