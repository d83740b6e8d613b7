"""Checking the located YAML tree against the declared schema (rungar.config.schema).

Each check adds a problem and returns :data:`INVALID` instead of raising, so one pass finds every
wrong value in the file. Values come back converted (durations in seconds, sizes in bytes);
mappings come back as :class:`Record`, which keeps each key's position for the loader's checks
between keys.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Final

from rungar.config.problems import Mark, Problems, join_path
from rungar.config.schema import (
    AnyMapping,
    Bool,
    Duration,
    Enum,
    Int,
    ListOf,
    NameOrObj,
    Obj,
    PositiveNumber,
    Size,
    Str,
    Type,
)
from rungar.config.yaml_safe import YEntry, YMap, YNode, YScalar, YSeq, read_as
from rungar.model.units import format_duration, parse_bytes, parse_duration


class _Invalid:
    def __repr__(self) -> str:
        return "INVALID"


INVALID: Final = _Invalid()


@dataclass(frozen=True, slots=True)
class Item:
    """A list item that passed its checks; ``index`` is its place in the file's list."""

    index: int
    mark: Mark
    value: Any


@dataclass(slots=True)
class Record:
    """A checked mapping: the valid keys' values, and where every key was written."""

    mark: Mark
    path: str
    values: dict[str, Any] = field(default_factory=dict)
    marks: dict[str, Mark] = field(default_factory=dict)
    extra: dict[str, YEntry] = field(default_factory=dict)  # keys the schema leaves to the type
    nodes: dict[str, YNode] = field(default_factory=dict)  # each key's value as written

    def has(self, name: str) -> bool:
        return name in self.values

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def mark_of(self, name: str) -> Mark:
        return self.marks.get(name, self.mark)

    def path_of(self, name: str) -> str:
        return join_path(self.path, name)


def to_plain(node: YNode) -> Any:
    """Plain data (dict, list, scalars) of a node, for free-form blocks."""
    if isinstance(node, YMap):
        return {k: to_plain(e.value) for k, e in node.entries.items()}
    if isinstance(node, YSeq):
        return [to_plain(n) for n in node.items]
    return node.value


def _kind(node: YNode) -> str:
    if isinstance(node, YMap):
        return "a mapping"
    if isinstance(node, YSeq):
        return "a list"
    if node.value is None:
        return "empty"
    if isinstance(node.value, bool):
        return f"the boolean {node.text}"
    if isinstance(node.value, int | float):
        return f"the number {node.text}"
    return f"the string {node.text!r}"


def seconds_text(value: float) -> str:
    """``30s``, ``5m``, or ``90.5s`` when no whole unit says it exactly."""
    whole = format_duration(value)
    return whole if parse_duration(whole) == value else f"{value:g}s"


class Checker:
    def __init__(self, problems: Problems) -> None:
        self.problems = problems

    def fail(self, mark: Mark, path: str, message: str) -> _Invalid:
        self.problems.add(mark, path, message)
        return INVALID

    def check(self, node: YNode, t: Type, path: str, at: Mark | None = None) -> Any:
        """Checked value of ``node``, or INVALID; ``at`` is where to report (a value's key)."""
        mark = at or node.mark
        if isinstance(t, Obj):
            return self.record(node, t, path, at)
        if isinstance(t, NameOrObj):
            if isinstance(node, YMap):
                return self.record(node, t.obj, path)
            if isinstance(node, YSeq):
                return self.fail(mark, path, "must be a name or a mapping, not a list")
            name = self.check(node, t.name, path, at)
            if name is INVALID:
                return INVALID
            return Record(node.mark, path, {"name": name}, {"name": node.mark})
        if isinstance(t, ListOf):
            return self._list(node, t, path, mark)
        if isinstance(t, AnyMapping):
            if not isinstance(node, YMap):
                return self.fail(mark, path, f"must be a mapping, not {_kind(node)}")
            return to_plain(node)
        if not isinstance(node, YScalar):
            return self.fail(mark, path, f"must be {_expected(t)}, not {_kind(node)}")
        return self._scalar(node, t, path, mark)

    def record(self, node: YNode, obj: Obj, path: str, at: Mark | None = None) -> Record | _Invalid:
        if not isinstance(node, YMap):
            return self.fail(at or node.mark, path, f"must be a mapping, not {_kind(node)}")
        record = Record(node.mark, path)
        known = [f.name for f in obj.fields]
        for key, entry in node.entries.items():
            record.marks[key] = entry.key_mark
            record.nodes[key] = entry.value
            spec = obj.field(key)
            if obj.free_prefix and key.startswith(obj.free_prefix):
                continue
            if spec is None:
                if obj.extra:
                    record.extra[key] = entry
                else:
                    self.fail(entry.key_mark, join_path(path, key), _unknown(key, known))
                continue
            value = self.check(entry.value, spec.type, join_path(path, key), entry.key_mark)
            if value is not INVALID:
                record.values[key] = value
        for spec in obj.fields:
            if spec.required and spec.name not in record.marks:
                self.fail(node.mark, join_path(path, spec.name), "is required")
        return record

    def _list(self, node: YNode, t: ListOf, path: str, mark: Mark) -> list[Item] | _Invalid:
        if not isinstance(node, YSeq):
            return self.fail(mark, path, f"must be a list, not {_kind(node)}")
        if len(node.items) < t.min_items:
            return self.fail(mark, path, f"must have at least {t.min_items} item")
        items: list[Item] = []
        seen: dict[Any, int] = {}
        for i, child in enumerate(node.items):
            value = self.check(child, t.item, join_path(path, i))
            if value is INVALID:
                continue
            if t.unique and isinstance(value, str):
                if value in seen:
                    self.fail(child.mark, join_path(path, i), f"{value} is listed twice")
                    continue
                seen[value] = i
            items.append(Item(i, child.mark, value))
        return items

    def _scalar(self, node: YScalar, t: Type, path: str, mark: Mark) -> Any:
        value = node.value
        if isinstance(t, Str | Enum):
            if not isinstance(value, str):
                if node.plain and value is not None:
                    return self.fail(mark, path, f"{read_as(node)}; quote it")
                return self.fail(mark, path, f"must be {_expected(t)}, not {_kind(node)}")
            return self._string(mark, value, t, path)
        if isinstance(t, Bool):
            if not isinstance(value, bool):
                return self.fail(mark, path, f"must be true or false, not {_kind(node)}")
            return value
        if isinstance(t, Int):
            return self._int(node, t, path, mark)
        if isinstance(t, PositiveNumber):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return self.fail(mark, path, f"must be a number, not {_kind(node)}")
            if not math.isfinite(value):
                return self.fail(mark, path, f"{node.text} is not a finite number")
            if value <= 0:
                return self.fail(mark, path, f"must be positive, not {node.text}")
            return value
        if isinstance(t, Duration):
            return self._duration(node, t, path, mark)
        if isinstance(t, Size):
            try:
                return parse_bytes(value)
            except ValueError as e:
                return self.fail(mark, path, str(e))
        raise AssertionError(f"no scalar check for {t!r}")  # a schema bug, not an input problem

    def _string(self, mark: Mark, value: str, t: Str | Enum, path: str) -> str | _Invalid:
        if isinstance(t, Enum):
            if value not in t.values:
                return self.fail(mark, path, f"{value!r} is not one of {', '.join(t.values)}")
            return value
        if not value.strip():
            return self.fail(mark, path, "must not be empty")
        if t.max_length is not None and len(value) > t.max_length:
            return self.fail(
                mark, path, f"{value!r} is {len(value)} characters; at most {t.max_length}"
            )
        if t.pattern and not re.fullmatch(t.pattern, value):
            return self.fail(mark, path, f"{value!r} is not valid: {t.hint}")
        return value

    def _int(self, node: YScalar, t: Int, path: str, mark: Mark) -> int | _Invalid:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and math.isfinite(value) and value.is_integer():
                value = int(value)  # 4.0 is a whole number
            else:
                return self.fail(mark, path, f"must be a whole number, not {_kind(node)}")
        if t.minimum is not None and t.minimum == t.maximum and value != t.minimum:
            return self.fail(mark, path, f"must be {t.minimum}")
        if t.minimum is not None and value < t.minimum:
            return self.fail(mark, path, f"must be at least {t.minimum}")
        if t.maximum is not None and value > t.maximum:
            return self.fail(mark, path, f"must be at most {t.maximum}")
        return value

    def _duration(
        self, node: YScalar, t: Duration, path: str, mark: Mark
    ) -> float | _Invalid | None:
        if node.value is None and t.nullable:
            return None
        try:
            seconds = parse_duration(node.value)
        except ValueError as e:
            return self.fail(mark, path, str(e))
        if seconds < 0:
            return self.fail(mark, path, f"must not be negative, not {node.text}")
        if t.above_minimum and seconds <= t.minimum:
            return self.fail(mark, path, f"must be more than {seconds_text(t.minimum)}")
        if seconds < t.minimum:
            return self.fail(
                mark, path, f"is {node.text}; must be at least {seconds_text(t.minimum)}"
            )
        return seconds


def _expected(t: Type) -> str:
    if isinstance(t, Enum):
        return "one of " + ", ".join(t.values)
    names = {
        Str: "a string",
        Int: "a whole number",
        PositiveNumber: "a number",
        Bool: "true or false",
        Duration: "a duration such as 30s or 2m",
        Size: "a size such as 8GiB",
    }
    return names.get(type(t), "a value")


def _unknown(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]}?"
    return "unknown key; known keys are " + ", ".join(known)


def closest(name: str, candidates: list[str]) -> str:
    """`` (did you mean gcp?)`` or nothing: for names that refer to something that is not there."""
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""
