"""Reading scale_sets.yaml safely into a tree that remembers where every key and value was.

Hostile or broken YAML is refused with a message, never a traceback: files over
1 MiB (checked before parsing), input that is not UTF-8, an empty file, tags other than the plain
YAML ones (``!!python/object`` above all), duplicate keys, nesting deeper than 32 and alias
expansion bombs. PyYAML's pure-Python ``SafeLoader`` composes the node graph (keeping marks); we
then expand it ourselves into :class:`YMap`/:class:`YSeq`/:class:`YScalar`, counting every node
an alias or ``<<`` merge key copies, so a billion-laughs file stops at :data:`MAX_NODES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from rungar.config.problems import START, Mark, Problems, join_path

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 32
MAX_NODES = 100_000

_Y = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = _Y + "str", _Y + "int", _Y + "float", _Y + "bool", _Y + "null"
TIMESTAMP, MAP, SEQ, MERGE = _Y + "timestamp", _Y + "map", _Y + "seq", _Y + "merge"
_SCALAR_TAGS = frozenset({STR, INT, FLOAT, BOOL, NULL, TIMESTAMP})

Scalar = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class YScalar:
    value: Scalar
    mark: Mark
    text: str  # as written, so "no" can be told apart from "false"
    plain: bool  # unquoted: only plain scalars are resolved to booleans and numbers


@dataclass(frozen=True, slots=True)
class YEntry:
    key: str
    key_mark: Mark
    value: YNode


@dataclass(frozen=True, slots=True)
class YMap:
    entries: dict[str, YEntry]
    mark: Mark


@dataclass(frozen=True, slots=True)
class YSeq:
    items: tuple[YNode, ...]
    mark: Mark


YNode = YScalar | YMap | YSeq


class _TooDeep(Exception):
    def __init__(self, mark: Mark) -> None:
        self.mark = mark


class _TooMany(Exception):
    pass


def _mark(m: yaml.Mark | None) -> Mark:
    return Mark(m.line + 1, m.column + 1) if m is not None else START


class _MarkedLoader(yaml.SafeLoader):
    """SafeLoader that refuses deep nesting while composing, before Python's recursion limit."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        # why the ignore[no-untyped-call] below: types-PyYAML leaves peek_event unannotated
        event = self.peek_event()  # type: ignore[no-untyped-call]
        opens = isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent)
        if opens and self._depth >= MAX_DEPTH:
            raise _TooDeep(_mark(event.start_mark))
        self._depth += opens
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= opens


def decode(data: bytes, problems: Problems) -> str | None:
    """Text of ``data``, or None after adding why it cannot be read."""
    if len(data) > MAX_BYTES:
        problems.add(START, "", f"the file is {len(data)} bytes; at most 1 MiB is read")
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        before = data[: e.start]
        line = before.count(b"\n") + 1
        col = len(before) - (before.rfind(b"\n") + 1) + 1
        problems.add(Mark(line, col), "", f"is not UTF-8: byte 0x{data[e.start]:02x}")
        return None
    return text


def read_yaml(text: str, problems: Problems) -> YNode | None:
    """The expanded tree of ``text``, or None when it cannot be read at all."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        problems.add(START, "", "the file is larger than 1 MiB")
        return None
    try:
        loader = _MarkedLoader(text)  # the reader checks every character here
    except yaml.reader.ReaderError as e:
        _unreadable(text, e, problems)
        return None
    try:
        root = loader.get_single_node()
    except _TooDeep as e:
        problems.add(e.mark, "", f"nesting is deeper than {MAX_DEPTH} levels")
        return None
    except yaml.MarkedYAMLError as e:
        where = e.problem_mark or e.context_mark
        what = e.problem or e.context or "cannot be parsed"
        problems.add(_mark(where), "", f"YAML syntax: {what}")
        return None
    except yaml.reader.ReaderError as e:
        _unreadable(text, e, problems)
        return None
    except yaml.YAMLError as e:  # any other refusal of PyYAML's, still without a traceback
        problems.add(START, "", f"YAML: {e}")
        return None
    finally:
        loader.dispose()
    if root is None or (root.tag == NULL and not root.value):  # nothing, or a bare "---"
        problems.add(START, "", "the file is empty; it needs providers and scale_sets")
        return None
    expander = _Expander(loader, problems)
    try:
        return expander.node(root, "", 0)
    except _TooMany:
        problems.add(
            _mark(root.start_mark),
            "",
            f"more than {MAX_NODES} nodes once aliases are expanded (an alias bomb?)",
        )
        return None


def _unreadable(text: str, e: yaml.reader.ReaderError, problems: Problems) -> None:
    before = text[: e.position]
    line, col = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
    what = f"U+{e.character:04X}" if isinstance(e.character, int) else repr(e.character)
    problems.add(Mark(line, col), "", f"character {what} is not allowed in YAML")


class _Expander:
    """Turns the composed node graph into a tree, copying what aliases and merge keys share."""

    def __init__(self, loader: _MarkedLoader, problems: Problems) -> None:
        self._loader = loader
        self._problems = problems
        self._count = 0
        self._open: set[int] = set()  # nodes being expanded: an alias to one of them is a cycle

    def node(self, n: yaml.Node, path: str, depth: int) -> YNode | None:
        self._count += 1
        if self._count > MAX_NODES:
            raise _TooMany
        mark = _mark(n.start_mark)
        if isinstance(n, yaml.ScalarNode):
            return self._scalar(n, path)
        if depth >= MAX_DEPTH:
            self._problems.add(mark, path, f"nesting is deeper than {MAX_DEPTH} levels")
            return None
        if id(n) in self._open:
            self._problems.add(mark, path, "an alias refers to a node that contains it")
            return None
        if not self._tag_ok(n, MAP if isinstance(n, yaml.MappingNode) else SEQ, path):
            return None
        self._open.add(id(n))
        try:
            if isinstance(n, yaml.MappingNode):
                return self._mapping(n, path, depth)
            items = []
            for i, child in enumerate(n.value):
                item = self.node(child, join_path(path, i), depth + 1)
                if item is not None:
                    items.append(item)
            return YSeq(tuple(items), mark)
        finally:
            self._open.discard(id(n))

    def _tag_ok(self, n: yaml.Node, expected: str, path: str) -> bool:
        if n.tag == expected:
            return True
        tag = n.tag.replace(_Y, "!!")
        self._problems.add(_mark(n.start_mark), path, f"the tag {tag} is not allowed here")
        return False

    def _scalar(self, n: yaml.ScalarNode, path: str) -> YScalar | None:
        mark = _mark(n.start_mark)
        if n.tag not in _SCALAR_TAGS:
            self._tag_ok(n, STR, path)
            return None
        text = str(n.value)
        value: Scalar
        try:
            if n.tag == INT:
                value = self._loader.construct_yaml_int(n)
            elif n.tag == FLOAT:
                value = self._loader.construct_yaml_float(n)
            elif n.tag == BOOL:
                value = self._loader.construct_yaml_bool(n)
            elif n.tag == NULL:
                value = None
            else:  # str, and timestamps, which nothing in this file is: kept as written
                value = text
        except (ValueError, KeyError, TypeError, ArithmeticError, yaml.YAMLError):
            tag = n.tag.replace(_Y, "!!")
            self._problems.add(mark, path, f"{text!r} is not a valid {tag}")
            return None
        return YScalar(value, mark, text, plain=n.style is None)

    def _mapping(self, n: yaml.MappingNode, path: str, depth: int) -> YMap:
        own: dict[str, YEntry] = {}
        merged: dict[str, YEntry] = {}
        for key_node, value_node in n.value:
            if key_node.tag == MERGE:
                for source in self._merge_sources(value_node, path, depth):
                    for merged_key, entry in source.entries.items():
                        merged.setdefault(merged_key, entry)  # earlier sources win, as YAML says
                continue
            key = self._key(key_node, path)
            if key is None:
                continue
            key_mark = _mark(key_node.start_mark)
            if key in own:
                first = own[key].key_mark.line
                self._problems.add(
                    key_mark, join_path(path, key), f"duplicate key (first at line {first})"
                )
                continue
            value = self.node(value_node, join_path(path, key), depth + 1)
            if value is not None:
                own[key] = YEntry(key, key_mark, value)
        entries = {**merged, **own}
        return YMap(entries, _mark(n.start_mark))

    def _merge_sources(self, value: yaml.Node, path: str, depth: int) -> list[YMap]:
        nodes: list[Any] = value.value if isinstance(value, yaml.SequenceNode) else [value]
        sources = []
        for source in nodes:
            if not isinstance(source, yaml.MappingNode):
                self._problems.add(
                    _mark(source.start_mark), path, "<< must merge a mapping or a list of mappings"
                )
                continue
            expanded = self.node(source, path, depth)
            if isinstance(expanded, YMap):
                sources.append(expanded)
        return sources

    def _key(self, key_node: yaml.Node, path: str) -> str | None:
        mark = _mark(key_node.start_mark)
        if not isinstance(key_node, yaml.ScalarNode):
            if key_node.tag in (MAP, SEQ):
                self._problems.add(mark, path, "a key must be a string, not a mapping or list")
            else:
                self._tag_ok(key_node, STR, path)
            return None
        scalar = self._scalar(key_node, path)
        if scalar is None:
            return None
        if isinstance(scalar.value, str):
            return scalar.value
        self._problems.add(mark, path, f"key {read_as(scalar)}; quote it")
        return None


def read_as(scalar: YScalar) -> str:
    """``no is read as the boolean false``: why a plain scalar is not the string it looks like."""
    value = scalar.value
    if isinstance(value, bool):
        return f"{scalar.text} is read as the boolean {str(value).lower()}"
    if value is None:
        return f"{scalar.text} is read as null" if scalar.text else "is empty"
    return f"{scalar.text} is read as the number {value}"
