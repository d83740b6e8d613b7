"""When GitHub stops queueing jobs to each provider's runner, and whether to warn of it now.

GitHub stops queueing jobs to a runner that has not installed a new release within 30 days of
it (docs/github.md, "Runner versions"). A provider's window opens with the oldest release Rungar
knows of that is newer than its runner, and closes ``days`` later; from ``warn_days`` before it
closes, Rungar warns (``rungar status``, ``rungar doctor``, an event, a metric and an alert).

A pure decision: a snapshot of the releases known and each provider's runner version, and the
``now`` it is handed; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rungar.model.runner_release import RunnerRelease
from rungar.model.runner_version import RunnerVersion

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class VersionWindow:
    days: float = 30.0  # GitHub's: a new release must be installed within this many days
    warn_days: float = 7.0  # the warning starts this many days before the window closes


@dataclass(frozen=True, slots=True)
class VersionSnapshot:
    releases: tuple[RunnerRelease, ...] = ()  # every release known, GitHub's and configured
    runners: Mapping[str, RunnerVersion] = field(default_factory=dict)  # provider -> its runner


@dataclass(frozen=True, slots=True)
class RunnerDeadline:
    """A provider whose runner is older than the latest release: when GitHub stops queueing
    jobs to it, and whether that is near enough to warn."""

    provider: str
    version: RunnerVersion
    latest: RunnerRelease
    opened_by: RunnerRelease  # the oldest known release newer than its runner
    stops_at: float  # epoch seconds: GitHub queues no more jobs to it from then on
    days_left: float  # until stops_at; 0 or less once it has passed
    warn: bool

    @property
    def stopped(self) -> bool:
        return self.days_left <= 0


def latest_release(releases: tuple[RunnerRelease, ...]) -> RunnerRelease | None:
    """The newest version known; of two records of it, GitHub's."""
    if not releases:
        return None
    return max(releases, key=lambda r: (r.version, r.source == "github"))


def runner_deadlines(
    snapshot: VersionSnapshot, now: float, window: VersionWindow
) -> list[RunnerDeadline]:
    """Every provider whose runner is older than the latest release known, by name."""
    latest = latest_release(snapshot.releases)
    if latest is None:
        return []
    out = []
    for provider in sorted(snapshot.runners):
        version = snapshot.runners[provider]
        newer = [r for r in snapshot.releases if r.version > version]
        if not newer:
            continue
        opened_by = min(newer, key=lambda r: (r.published_at, r.version))
        stops_at = opened_by.published_at + window.days * DAY
        days_left = (stops_at - now) / DAY
        out.append(
            RunnerDeadline(
                provider=provider,
                version=version,
                latest=latest,
                opened_by=opened_by,
                stops_at=stops_at,
                days_left=days_left,
                warn=now >= stops_at - window.warn_days * DAY,
            )
        )
    return out
