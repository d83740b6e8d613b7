"""What a developer sees of the demo's waiting jobs on GitHub: the commit statuses Rungar wrote on
their workflow runs' head commits, and the runs it cancelled (docs/github.md, "Why a job waits,
on GitHub"). Read from the GitHub emulator's record, as a developer reads the commit's checks.

For each scale set it keeps one run's statuses: a run whose job waited on a hold when there is
one (its reason names a provider held), else the run told longest; what it said while the job
waited, then how it ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "rungar: "


@dataclass(frozen=True, slots=True)
class Told:
    """One scale set's notice on a run's commit, as GitHub shows it."""

    scale_set: str
    waiting: str  # the description while its job waited ("" when none was written pending)
    ended: str  # the last description written
    state: str  # the last state: pending, success or failure
    held: bool  # what it said while waiting names a held provider

    def text(self) -> str:
        parts = [f'pending "{self.waiting}"'] if self.waiting else []
        if self.state != "pending":
            parts.append(f'{self.state} "{self.ended}"')
        return " → ".join(parts)


def told_on_github(statuses: Iterable[Mapping[str, Any]]) -> list[Told]:
    """One :class:`Told` per scale set, by name, from the commit statuses in the order they
    were written."""
    runs: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for status in statuses:
        context = str(status.get("context", ""))
        if context.startswith(PREFIX):
            runs.setdefault((context.removeprefix(PREFIX), str(status["sha"])), []).append(status)
    best: dict[str, Told] = {}
    for (scale_set, _), written in runs.items():
        pending = [str(s["description"]) for s in written if s["state"] == "pending"]
        held = [d for d in pending if " held" in d]
        told = Told(
            scale_set,
            waiting=(held or pending or [""])[-1],
            ended=str(written[-1]["description"]),
            state=str(written[-1]["state"]),
            held=bool(held),
        )
        known = best.get(scale_set)
        if known is None or (told.held, len(told.waiting)) > (known.held, len(known.waiting)):
            best[scale_set] = told
    return [best[name] for name in sorted(best)]
