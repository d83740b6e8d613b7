"""Leftover scale sets: scale sets this installation served that are no longer configured, and
whose runners remain (docs/troubleshooting.md).

Each reconcile pass counts, per scale set no longer configured:

- its runners: machines carrying this installation's labels for it, found on the providers
  (adopted, and removed as they go idle; busy ones finish their jobs first);
- its registrations: runners GitHub lists in a scale set this installation created or found
  under that name (its id is in the state database) with no machine the daemon tracks; the
  pass's orphan sweep removes the offline ones after ``start_timeout``.

Every pass that finds any warns about each such scale set with what to do, exports the count
as ``rungar_orphaned_runners{scale_set}`` (0 once it is gone), and ``rungar status`` lists it.
The counting is a pure function of the names configured, the runners tracked and GitHub's
list; this module only wires it to the engine.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from rungar.engine.report.metrics import Metrics
from rungar.github.interface import RunnerStatus
from rungar.model.runner import RunnerState

if TYPE_CHECKING:
    from rungar.engine.core.records import RunnerRecord

log = structlog.get_logger("rungar.engine")


@dataclass(frozen=True, slots=True)
class Leftover:
    scale_set: str
    runners: int  # machines of ours for it, not yet leaving
    busy: int
    registrations: int  # on GitHub, with no machine the daemon tracks

    @property
    def orphaned(self) -> int:
        return self.runners + self.registrations

    @property
    def sentence(self) -> str:
        """``scale set old-ci is no longer configured; 2 runners of it remain (1 busy) and 1
        registration on GitHub: …``."""
        parts = []
        if self.runners:
            busy = f" ({self.busy} busy)" if self.busy else ""
            verb = "remains" if self.runners == 1 else "remain"
            parts.append(f"{_count(self.runners, 'runner')} of it {verb}{busy}")
        if self.registrations:
            parts.append(f"{_count(self.registrations, 'registration')} on GitHub with no machine")
        todo = []
        if self.runners:
            todo.append("its idle runners are removed, busy ones when their jobs end")
        if self.registrations:
            todo.append("offline registrations are removed after start_timeout")
        return (
            f"scale set {self.scale_set} is no longer configured; {' and '.join(parts)}: "
            f"{'; '.join(todo)}"
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def find_leftovers(
    configured: Collection[str],
    runners: Iterable[RunnerRecord],
    listed: Sequence[RunnerStatus],
    recorded: Mapping[str, int],
) -> list[Leftover]:
    """Scale sets not in ``configured`` that still have runners or registrations, by name.

    ``recorded``: the scale-set ids this installation keeps, by name; ``listed``: GitHub's list
    of the installation's runners."""
    machines: dict[str, list[RunnerRecord]] = {}
    tracked: set[str] = set()
    for record in runners:
        tracked.add(record.name)
        if record.scale_set not in configured and record.state is not RunnerState.LEAVING:
            machines.setdefault(record.scale_set, []).append(record)
    names_of = {sid: name for name, sid in recorded.items() if name not in configured and sid}
    registrations: dict[str, int] = {}
    for status in listed:
        name = names_of.get(status.scale_set_id)
        if name is not None and status.name not in tracked:
            registrations[name] = registrations.get(name, 0) + 1
    out = []
    for name in sorted(set(machines) | set(registrations)):
        found = machines.get(name, [])
        busy = sum(1 for r in found if r.view().busy)
        out.append(Leftover(name, len(found), busy, registrations.get(name, 0)))
    return out


def note_leftovers(
    metrics: Metrics, found: Sequence[Leftover], reported: Collection[str]
) -> set[str]:
    """Warn about every leftover scale set and export the counts (0 for one ``reported`` before
    and now gone); the scale sets reported so far, these included."""
    gauge = metrics.orphaned_runners
    for gone in set(reported) - {f.scale_set for f in found}:
        gauge.labels(gone).set(0)
    for leftover in found:
        gauge.labels(leftover.scale_set).set(leftover.orphaned)
        log.warning(
            "leftover scale set: no longer configured, runners of it remain",
            scale_set=leftover.scale_set,
            runners=leftover.runners,
            busy=leftover.busy,
            registrations=leftover.registrations,
            message=leftover.sentence,
        )
    return {f.scale_set for f in found} | set(reported)
