"""A release of the GitHub Actions runner: its version and when it was published.

GitHub stops queueing jobs to a runner that has not installed a new release within 30 days of
it (docs/github.md, "Runner versions"), so Rungar keeps the releases it knows of: the latest
one GitHub's REST API names (``GET /repos/actions/runner/releases/latest``) and the one
rungar.yaml names (``github.runner_versions.latest``). GitHub's answer is untrusted: its tag
and date are checked for their form and bounded before they are believed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rungar.model.runner_version import RunnerVersion, parse_runner_version

DATE_MAX = 40  # characters of a date read from anyone
DATE_PROBLEM = "must be a date such as 2026-11-20 or 2026-11-20T17:04:05Z"
_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?(?:Z|[+-]\d{2}:\d{2})?"
)


@dataclass(frozen=True, slots=True, order=True)
class RunnerRelease:
    version: RunnerVersion
    published_at: float  # epoch seconds
    source: str = "github"  # "github" (its REST API) or "configured" (rungar.yaml)

    @property
    def date(self) -> str:
        return day_of(self.published_at)


def day_of(at: float) -> str:
    """``2026-11-20``: the UTC day of epoch seconds ``at``."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")


def parse_date(text: object) -> float | None:
    """Epoch seconds of ``2026-11-20`` (midnight UTC) or an ISO 8601 time; None for anything
    else, too long included. A time without a zone is UTC, as GitHub writes them."""
    if not isinstance(text, str) or len(text) > DATE_MAX or not _DATE.fullmatch(text.strip()):
        return None
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def date_problem(text: object) -> str:
    """Why ``text`` is not a date (empty when it is one)."""
    return "" if parse_date(text) is not None else DATE_PROBLEM


def release_of(answer: Any) -> RunnerRelease | None:
    """The release GitHub's ``releases/latest`` answer names (``tag_name`` ``v2.330.0``,
    ``published_at``), or None when it names no runner version or no date. Drafts and
    prereleases are no release a runner must install."""
    if not isinstance(answer, dict) or answer.get("draft") or answer.get("prerelease"):
        return None
    version = parse_runner_version(answer.get("tag_name"))
    published = parse_date(answer.get("published_at"))
    if version is None or published is None:
        return None
    return RunnerRelease(version, published, "github")
