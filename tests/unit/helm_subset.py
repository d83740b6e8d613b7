"""Render the chart's templates without helm, for the subset of the template language they use.

Understood: ``{{ PATH }}`` (``.Values.a.b``, ``.Release.Name``, ``.Release.Namespace``,
``.Chart.*``), ``| quote``, ``| nindent N`` (also after ``toYaml``), ``if PATH`` / ``if not
PATH`` / ``else`` / ``end``, and the ``{{-``/``-}}`` trimming of whitespace. Anything else
raises :class:`Unsupported`, so a template that outgrows this subset fails its test instead of
rendering wrongly. helm itself renders far more; where it is installed, the test uses it too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import yaml

ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)


class Unsupported(Exception):
    """A template uses something this renderer does not understand."""


def _lookup(path: str, scope: Mapping[str, Any]) -> Any:
    if not path.startswith("."):
        raise Unsupported(f"not a value path: {path!r}")
    value: Any = scope
    for part in path[1:].split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _truthy(value: Any) -> bool:
    return bool(value)  # helm: false, 0, "", nil, empty map and list are false


def _to_yaml(value: Any) -> str:
    if value is None:
        return "null"
    return yaml.safe_dump(value, sort_keys=True, default_flow_style=False).rstrip("\n")


def _evaluate(expression: str, scope: Mapping[str, Any]) -> str:
    stages = [s.strip() for s in expression.split("|")]
    head = stages[0]
    if head.startswith("toYaml "):
        value: Any = _to_yaml(_lookup(head.removeprefix("toYaml ").strip(), scope))
    else:
        value = _lookup(head, scope)
    for stage in stages[1:]:
        if stage == "quote":
            value = json.dumps("" if value is None else str(value))
        elif stage.startswith("nindent "):
            pad = " " * int(stage.split()[1])
            value = "\n" + "\n".join(
                pad + line if line else line for line in str(value).split("\n")
            )
        else:
            raise Unsupported(f"pipeline stage {stage!r}")
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render(
    template: str, values: Mapping[str, Any], release: str, namespace: str, chart: Mapping[str, Any]
) -> str:
    scope = {
        "Values": values,
        "Release": {"Name": release, "Namespace": namespace},
        "Chart": {
            "Name": chart["name"],
            "Version": chart["version"],
            "AppVersion": chart["appVersion"],
        },
    }
    # Split into text and actions, applying the trim markers to the neighbouring text.
    pieces: list[tuple[str, str]] = []  # ("text", s) or ("action", expression)
    position = 0
    trim_next = False
    for match in ACTION.finditer(template):
        text = template[position : match.start()]
        if trim_next:
            text = text.lstrip()
        if match.group(1):
            text = text.rstrip()
        pieces.append(("text", text))
        pieces.append(("action", match.group(2)))
        trim_next = bool(match.group(3))
        position = match.end()
    tail = template[position:]
    pieces.append(("text", tail.lstrip() if trim_next else tail))
    out: list[str] = []
    showing = [True]  # one entry per open if: whether its branch is shown
    taken = [True]
    for kind, body in pieces:
        if kind == "text":
            if all(showing):
                out.append(body)
            continue
        if body.startswith("if "):
            condition = body[3:].strip()
            negate = condition.startswith("not ")
            result = _truthy(_lookup(condition.removeprefix("not ").strip(), scope)) != negate
            showing.append(result)
            taken.append(result)
        elif body == "else":
            if len(showing) == 1:
                raise Unsupported("else without if")
            showing[-1] = not taken[-1]
        elif body == "end":
            if len(showing) == 1:
                raise Unsupported("end without if")
            showing.pop()
            taken.pop()
        elif body.startswith("#") or body.startswith("/*"):
            continue
        elif all(showing):
            out.append(_evaluate(body, scope))
    if len(showing) != 1:
        raise Unsupported("an if without its end")
    return "".join(out)


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """helm's ``--set``/``-f`` layering: maps merge deeply, anything else replaces."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged
