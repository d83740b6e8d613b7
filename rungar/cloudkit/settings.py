"""Reading a cloud provider's settings and runner block: the checks both clouds make (pure).

A provider's settings and each runner block are checked offline and every
problem is reported at once, so each helper appends to a ``problems`` list and answers a usable
value instead of raising. The cloud-specific rules (regions, disks, tags) stay in each
provider's ``settings`` module.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Any

from rungar.model.runner_block import RunnerBlock
from rungar.model.runner_version import parse_runner_version, version_problem
from rungar.model.units import parse_bytes, parse_duration

GIB = 1024**3
DEFAULT_DISK = 50 * GIB
DEFAULT_TIMEOUT = 30.0


class SettingsProblems(ValueError):
    """Every problem of a provider's settings; ``str()`` joins them with ``"; "``. The process
    that serves the provider says where each came from (:mod:`rungar.cloudkit.serve`)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def unknown_keys(raw: Mapping[str, Any], known: Collection[str], prefix: str = "") -> list[str]:
    """A problem for every key not in ``known``, sorted, as the first problems found, with the
    known key it resembles when there is one."""
    out = []
    for key in sorted(set(raw) - set(known)):
        near = difflib.get_close_matches(str(key), sorted(known), 1, 0.6)
        out.append(f"{prefix}{key}: unknown key" + (f"; did you mean {near[0]}?" if near else ""))
    return out


def require_strings(raw: Mapping[str, Any], keys: Collection[str], problems: list[str]) -> None:
    for key in keys:
        if not isinstance(raw.get(key), str) or not raw.get(key):
            problems.append(f"{key}: required")


def runner_version(extra: Mapping[str, Any], problems: list[str]) -> str:
    """A runner block's ``runner_version``: the GitHub Actions runner version baked into the
    image (``2.329.0``), "" when unset. Rungar reads it to place nothing on an image GitHub
    refuses (docs/github.md, "Runner versions")."""
    value = extra.get("runner_version")
    if value is None:
        return ""
    problem = version_problem(value)
    if problem:
        problems.append(f"runner.runner_version: {problem}")
        return ""
    return str(parse_runner_version(value))


def string_list(value: Any, key: str, problems: list[str]) -> tuple[str, ...]:
    """A non-empty string or a list of them as a tuple; ``None`` is the empty tuple."""
    if value is None:
        return ()
    if isinstance(value, str) and value:
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    problems.append(f"{key}: must be a string or a list of strings")
    return ()


def string_map(value: Any, key: str, problems: list[str]) -> dict[str, str]:
    """A mapping of strings to strings; ``None`` is the empty mapping."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        problems.append(f"{key}: must map strings to strings")
        return {}
    return dict(value)


def flag(
    raw: Mapping[str, Any], key: str, default: bool, problems: list[str], prefix: str = ""
) -> bool:
    """A true/false key; any other value given (``null`` too) is a problem."""
    value = raw.get(key, default)
    if not isinstance(value, bool):
        problems.append(f"{prefix}{key}: must be true or false")
        return default
    return value


def timeout(raw: Mapping[str, Any], problems: list[str]) -> float:
    """``timeout`` as seconds (``30s`` when unset)."""
    try:
        return parse_duration(raw.get("timeout", "30s"))
    except ValueError as e:
        problems.append(f"timeout: {e}")
        return DEFAULT_TIMEOUT


def types_and_template(
    block: RunnerBlock,
    type_key: str,
    template_key: str,
    template_form: str,
    problems: list[str],
) -> tuple[tuple[str, ...], str]:
    """The runner's machine types and template: one of them is needed, and an image unless
    the template brings its own."""
    extra = block.extra
    types = string_list(extra.get(type_key), f"runner.{type_key}", problems)
    template = extra.get(template_key) or ""
    if not isinstance(template, str):
        problems.append(f"runner.{template_key}: must be {template_form}")
        template = ""
    if not types and not template:
        problems.append(f"runner.{type_key}: required unless {template_key} is set")
    if not block.image and not template:
        problems.append(f"runner.image: required unless {template_key} is set")
    return types, template


def disk_bytes(block: RunnerBlock, problems: list[str]) -> int:
    """The boot disk: ``disk_size`` when given, else the block's ``disk``, else 50GiB."""
    disk = block.disk_bytes
    if "disk_size" in block.extra:
        try:
            disk = parse_bytes(block.extra["disk_size"])
        except ValueError as e:
            problems.append(f"runner.disk_size: {e}")
    return disk or DEFAULT_DISK
