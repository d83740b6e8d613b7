"""Config problems: where each one is, which key, and what is wrong (``file:line:col: key: what``).

Every check of scale_sets.yaml adds to one :class:`Problems` list instead of raising, so a user
fixing a file sees all of it at once: ``scale_sets.yaml:14:5: scale_sets[2].max_runners: must be
at least 1``. Lines and columns are 1-based, as editors count them.
"""

from __future__ import annotations

from dataclasses import dataclass

from rungar.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Mark:
    """A position in the file, 1-based."""

    line: int
    col: int


START = Mark(1, 1)


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    mark: Mark
    path: str  # key path such as scale_sets[2].max_runners; empty for file-level problems
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.mark.line}:{self.mark.col}"
        if self.path:
            return f"{where}: {self.path}: {self.message}"
        return f"{where}: {self.message}"

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.mark.line,
            "col": self.mark.col,
            "path": self.path,
            "message": self.message,
        }


class ScaleSetsError(ConfigError):
    """A ConfigError that also keeps each problem's parts, for ``rungar validate --json``."""

    def __init__(self, problems: list[Problem]) -> None:
        self.details = tuple(problems)
        super().__init__([str(p) for p in problems])


class Problems:
    """Collects problems for one file; :meth:`raise_if_any` sorts them by position."""

    def __init__(self, file: str) -> None:
        self.file = file
        self._items: list[Problem] = []
        self._seen: set[Problem] = set()

    def add(self, mark: Mark, path: str, message: str) -> None:
        problem = Problem(self.file, mark, path, message)
        if problem not in self._seen:  # an anchor used twice must not report its fault twice
            self._seen.add(problem)
            self._items.append(problem)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def error(self) -> ScaleSetsError:
        ordered = sorted(self._items, key=lambda p: (p.mark.line, p.mark.col))
        return ScaleSetsError(ordered)

    def raise_if_any(self) -> None:
        if self._items:
            raise self.error()


def join_path(parent: str, key: str | int) -> str:
    """``scale_sets`` + 2 -> ``scale_sets[2]``; ``scale_sets[2]`` + ``name`` -> ``…name``."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def first_at(first: Mark, here: Mark) -> str:
    """``line 3``, or ``column 17`` when both are on one line (a flow list)."""
    return f"column {first.col}" if first.line == here.line else f"line {first.line}"
