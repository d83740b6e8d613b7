"""docs/json.md's status document, read as a schema, and a real document checked against it.

The page writes the document as keys in braces (``{"name", "status", ...}``), a nested object as
``"key": {...}``, a list of objects as ``"key": [{...}]``, a value that may be null as
``null | {...}``, and a key present only sometimes as ``"key"?``. :func:`read_schema` turns that
block into a tree and :func:`mismatches` names every key the real document has that the page
does not, and every key the page promises that the document lacks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1] / "docs" / "json.md"
TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[{}\[\]:,|?]|null|-?\d+(?:\.\d+)?)')


@dataclass
class Shape:
    """An object's documented keys: each maps to whether it may be absent, and its own shape
    (an object, a list of objects, or None for a plain value)."""

    keys: dict[str, tuple[bool, Shape | list[Shape] | None]] = field(default_factory=dict)


def status_block(text: str) -> str:
    """The code block after "The status document" heading line of docs/json.md."""
    start = text.index("The status document")
    found = re.search(r"```\n(.*?)```", text[start:], re.S)
    assert found, "docs/json.md: no code block after 'The status document'"
    return found.group(1)


def tokens(text: str) -> list[str]:
    out, at = [], 0
    text = text.rstrip()
    while at < len(text):
        found = TOKEN.match(text, at)
        if not found:
            raise ValueError(f"docs/json.md: cannot read {text[at : at + 30]!r}")
        out.append(found.group(1))
        at = found.end()
    return out


class _Reader:
    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.at = 0

    def peek(self) -> str:
        return self.words[self.at] if self.at < len(self.words) else ""

    def take(self, wanted: str | None = None) -> str:
        word = self.peek()
        if wanted is not None and word != wanted:
            raise ValueError(f"docs/json.md: expected {wanted!r}, found {word!r}")
        self.at += 1
        return word

    def value(self) -> Shape | list[Shape] | None:
        """A value: an object, a list, null (``| value`` after it), a number or a string."""
        word = self.peek()
        if word == "{":
            return self.object()
        if word == "[":
            self.take("[")
            inner = self.value()
            self.take("]")
            return [inner] if isinstance(inner, Shape) else None
        self.take()
        if word == "null" and self.peek() == "|":
            self.take("|")
            return self.value()
        return None

    def object(self) -> Shape:
        shape = Shape()
        self.take("{")
        while self.peek() != "}":
            key = self.take().strip('"')
            optional = self.peek() == "?"
            if optional:
                self.take("?")
            child = None
            if self.peek() == ":":
                self.take(":")
                child = self.value()
            shape.keys[key] = (optional, child)
            if self.peek() == ",":
                self.take(",")
        self.take("}")
        return shape


def read_schema(text: str | None = None) -> Shape:
    """The status document's shape as docs/json.md writes it (``text``: the page)."""
    block = status_block(DOCS.read_text() if text is None else text)
    return _Reader(tokens(block)).object()


def mismatches(document: Any, shape: Shape, path: str = "") -> list[str]:
    """Where ``document`` and ``shape`` disagree: ``undocumented: daemon.budget`` for a key
    the page does not name, ``missing: providers[].state`` for one it names that is absent."""
    found: list[str] = []
    for key in sorted(set(document) - set(shape.keys)):
        found.append(f"undocumented: {path}{key}")
    for key, (optional, child) in shape.keys.items():
        if key not in document:
            if not optional:
                found.append(f"missing: {path}{key}")
            continue
        value = document[key]
        if isinstance(child, Shape) and isinstance(value, dict):
            found += mismatches(value, child, f"{path}{key}.")
        elif isinstance(child, list) and isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    found += mismatches(item, child[0], f"{path}{key}[].")
    return sorted(set(found))
