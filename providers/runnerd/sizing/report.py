"""``runnerctl sizing``: the advice, the auto changes with what they replaced, as text or JSON.

docs/admission.md, "Sizing" and "Auto sizing". Reads the config and the history read-only; ``apply``
and ``undo`` write through :mod:`runnerd.sizing.apply`. A daemon's API can serve
:func:`sizing_report` as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rungar.model.units import format_bytes
from runnerd.config import RunnerdConfig
from runnerd.sizing.advise import ProfileAdvice, advise
from runnerd.sizing.apply import apply_advice, undo
from runnerd.sizing.auto import ProfileHistory, plan
from runnerd.sizing.changes import Change, ChangeLog
from runnerd.sizing.runs import DAY, open_read_only, read_runs


@dataclass(frozen=True, slots=True)
class SizingReport:
    advice: tuple[ProfileAdvice, ...]
    changes: tuple[Change, ...]
    notes: tuple[str, ...]
    memory_max: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "memory_max": self.memory_max,
            "profiles": [a.to_json() for a in self.advice],
            "changes": [c.to_json() for c in self.changes],
            "notes": list(self.notes),
        }

    def text(self) -> str:
        budget = format_bytes(self.memory_max) if self.memory_max else "none"
        lines = [
            f"MemoryMax {budget}. Need = largest peak + the margin, at least 1G, in 256M steps.",
            "",
            f"{'PROFILE':<12}{'MEMORY':>8}{'SLOTS':>7}{'RUNS':>7}{'PEAK P50':>10}{'PEAK P95':>10}"
            f"{'PEAK MAX':>10}{'NEED':>9}{'WAIT P95':>10}{'BUSY':>6}",
        ]
        for a in self.advice:
            need = format_bytes(a.need) if a.need else "-"
            lines.append(
                f"{a.profile:<12}{format_bytes(a.memory):>8}{a.slots:>7}{a.runs:>7}"
                f"{format_bytes(a.p50) if a.runs else '-':>10}"
                f"{format_bytes(a.p95) if a.runs else '-':>10}"
                f"{format_bytes(a.largest) if a.runs else '-':>10}{need:>9}"
                f"{a.wait_p95:>9.0f}s{a.busy:>6.0%}"
            )
            lines.append(f"  {a.line}")
        if self.changes:
            lines += ["", "Changes:"]
            for c in self.changes:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.at))
                lines.append(f"  {when}  {c.describe()}; replaced {c.old.describe()}")
        for note in self.notes:
            lines.append(note)
        return "\n".join(lines)


def memory_since(changes: list[Change]) -> dict[str, float]:
    """When each profile got its current memory, from the changes that set it."""
    since: dict[str, float] = {}
    for c in changes:
        if c.new.memory != c.old.memory:
            since[c.profile] = c.at
    return since


def sizing_report(
    config: RunnerdConfig,
    db: Path,
    memory_max: int | None,
    now: float,
    window: float = 30 * DAY,
    on_stale: Callable[[str], None] | None = None,
    slice_cpus: float | None = None,
) -> SizingReport:
    """Advice per profile, the changes written, and with auto sizing on the notes on changes
    it holds back ("No CPU raise: ..."), read against the slice's CPUs (``slice_cpus``, as
    read from its cgroup; ``[host] cpus`` when not given)."""
    with open_read_only(db, on_stale) as conn:
        runs = read_runs(conn, now - window, now)
    with ChangeLog(db, read_only=True) as log:
        changes = log.changes(since=now - window)
    advice = advise(config, runs, memory_max, now, memory_since(changes), window)
    notes: tuple[str, ...] = ()
    if config.sizing.auto:
        histories = {
            n: ProfileHistory(changes=tuple(c for c in changes if c.profile == n))
            for n in config.profiles
        }
        cpus = slice_cpus if slice_cpus is not None else config.host.cpus
        notes = plan(config, runs, memory_max, cpus, histories, now).notes
    return SizingReport(tuple(advice), tuple(changes), notes, memory_max)


def apply_command(
    path: Path,
    db: Path,
    config: RunnerdConfig,
    profile: str,
    memory_max: int | None,
    cpus: float | None,
    now: float,
) -> Change:
    report = sizing_report(config, db, memory_max, now, slice_cpus=cpus)
    advice = next(a for a in report.advice if a.profile == profile)
    with ChangeLog(db) as log:
        return apply_advice(path, advice, log, memory_max, cpus, now)


def undo_command(
    path: Path, db: Path, profile: str, memory_max: int | None, cpus: float | None, now: float
) -> Change:
    with ChangeLog(db) as log:
        return undo(path, profile, log, memory_max, cpus, now)
