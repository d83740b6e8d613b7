"""Runner names and revisions: one string names the machine, the runner and the host.

A runner's name is ``<scale set>-<8 hex>``: the machine name, the runner name and the host name
are the same string, so it must be a valid RFC 1123 label (≤ 63 characters).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Mapping
from typing import Any

SUFFIX_HEX = 8
LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def runner_name(scale_set: str, token: str | None = None) -> str:
    suffix = token if token is not None else secrets.token_hex(SUFFIX_HEX // 2)
    base = re.sub(r"[^a-z0-9-]", "-", scale_set.lower()).strip("-")
    base = base[: 63 - SUFFIX_HEX - 1].rstrip("-") or "runner"
    name = f"{base}-{suffix}"
    if not LABEL.match(name):
        raise ValueError(f"{name!r} is not a valid host name")
    return name


def belongs_to(name: str, scale_set: str) -> bool:
    """Whether a registration's name follows this scale set's naming pattern."""
    base = runner_name(scale_set, "0" * SUFFIX_HEX)[:-SUFFIX_HEX]
    rest = name[len(base) :]
    return (
        name.startswith(base)
        and len(rest) == SUFFIX_HEX
        and all(c in "0123456789abcdef" for c in rest)
    )


def revision(runner_block: Mapping[str, Any]) -> str:
    """The first 12 hex digits of SHA-256 of the merged runner block's canonical JSON."""
    text = json.dumps(runner_block, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def installation_id(github_url: str) -> str:
    """``gh-`` + 12 hex digits of SHA-256 of the normalised GitHub URL."""
    normalised = github_url.strip().lower().rstrip("/")
    return "gh-" + hashlib.sha256(normalised.encode()).hexdigest()[:12]
