"""The GitHub Actions runner's version, as providers report it and GitHub enforces it.

GitHub refuses a runner older than its minimum version and stops queueing jobs to a runner that
has not installed a release within 30 days of it (docs/github.md, "Runner versions"). A version
comes from a provider (its ``Info``, a runner block's ``runner_version``) or from GitHub: it is
untrusted, so its form is checked and its length bounded before it is compared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VERSION_MAX = 32  # characters of a version string read from anyone
_FORM = re.compile(r"v?(\d{1,9})\.(\d{1,9})\.(\d{1,9})")
FORM_PROBLEM = "must be a runner version such as 2.329.0"


@dataclass(frozen=True, slots=True, order=True)
class RunnerVersion:
    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def parse_runner_version(text: object) -> RunnerVersion | None:
    """``2.329.0`` (or ``v2.329.0``) as a value; None for anything else, too long included."""
    if not isinstance(text, str) or len(text) > VERSION_MAX:
        return None
    found = _FORM.fullmatch(text.strip())
    if found is None:
        return None
    major, minor, patch = (int(part) for part in found.groups())
    return RunnerVersion(major, minor, patch)


def version_problem(text: object) -> str:
    """Why ``text`` is not a runner version (empty when it is one)."""
    return "" if parse_runner_version(text) is not None else FORM_PROBLEM


# How a runner names itself to GitHub (``GitHubActionsRunner-linux-x64/2.329.0``), and GitHub's
# answer to one below its minimum, which the runner prints before it exits for good.
_USER_AGENT = re.compile(r"GitHubActionsRunner[\w.-]{0,40}/(v?\d{1,9}\.\d{1,9}\.\d{1,9})")
_DEPRECATED = re.compile(r"Runner version (v?\d{1,9}\.\d{1,9}\.\d{1,9}) is deprecated")


def runner_version_of(user_agent: str) -> RunnerVersion | None:
    """The version a runner's User-Agent names, if it names one."""
    found = _USER_AGENT.search(user_agent[:512])
    return parse_runner_version(found.group(1)) if found else None


def deprecated_message(version: RunnerVersion | None) -> str:
    """GitHub's refusal of a runner below its minimum, in its words."""
    return f"Runner version v{version} is deprecated and cannot receive messages."


def refused_version(lines: list[str] | tuple[str, ...]) -> RunnerVersion | None:
    """The version GitHub refused, when a runner's last output says it did."""
    for line in reversed(lines):
        found = _DEPRECATED.search(line[:1000])
        if found:
            return parse_runner_version(found.group(1))
    return None
