"""Auto sizing's effectful shell: settle, look every 5 minutes, record, write.

docs/admission.md, "Auto sizing": "Each change is recorded in the job history before the file is
written … A change the history cannot record is not written; one a crash interrupted is settled from
the file at the next start, with auto on or off: done if the profile has its values, else listed as
one that may not have been written, still holding the interval … A change is never written over a
file you edited on disk: until runnerd runs with your edit, auto sizing changes nothing and logs
why." The decisions are :func:`runnerd.sizing.auto.plan`'s; this class only reads the files, asks
it, and writes what it says through :func:`runnerd.sizing.apply.write`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from rungar.clock import Clock
from rungar.errors import ConfigError
from runnerd.config import RunnerdConfig, parse_config
from runnerd.sizing.apply import values_of, write
from runnerd.sizing.auto import AutoPlan, ProfileHistory, plan
from runnerd.sizing.changes import DONE, PENDING, UNSURE, Change, ChangeLog
from runnerd.sizing.runs import DAY, open_read_only, read_runs

log = structlog.get_logger("runnerd.sizing")
LOOK_EVERY = 300.0


@dataclass(frozen=True, slots=True)
class LookResult:
    written: tuple[Change, ...] = ()
    refused: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    skipped: str = ""  # why the look changed nothing at all


def settle(path: Path, changes: ChangeLog) -> list[Change]:
    """At start, with auto on or off: each pending change is done if the file has its values,
    else unsure (it may not have been written; it still holds the interval)."""
    settled = []
    try:
        config = parse_config(path.read_text(), str(path))
    except (OSError, ConfigError):
        config = None
    for change in changes.pending():
        has = (
            config is not None
            and change.profile in config.profiles
            and values_of(config, change.profile) == change.new
        )
        state = DONE if has else UNSURE
        changes.mark(change.id, state)
        log.info("sizing.settled", profile=change.profile, change=change.id, state=state)
        settled.append(Change(**{**change.to_record(), "state": state}))
    return settled


@dataclass
class AutoSizer:
    """Runs inside the daemon. ``running_text`` is the config text the daemon runs with;
    ``on_written`` hands it a change's new config (to run with it and send sizing.changed)."""

    config_path: Path
    history_path: Path
    clock: Clock
    running_text: str
    limits: Callable[[], tuple[int | None, float | None]]  # MemoryMax and CPUs, read each look
    running: Callable[[], Mapping[str, int]] = dict  # runners running now, per profile
    on_written: Callable[[RunnerdConfig, Change], None] | None = None
    on_refused: Callable[[Change, str], None] | None = None  # a change not written, and why
    started_at: float = 0.0  # since when runnerd runs the current cpus
    window: float = 30 * DAY
    before_write: Callable[[Change], None] | None = None  # tests crash here
    _edited_logged: bool = field(default=False, init=False)

    def start(self) -> list[Change]:
        with ChangeLog(self.history_path) as changes:
            return settle(self.config_path, changes)

    def look(self) -> LookResult:
        now = self.clock.now()
        text = self.config_path.read_text()
        if text != self.running_text:
            if not self._edited_logged:
                log.warning(
                    "sizing.waiting",
                    reason="the config file was edited on disk; auto sizing changes nothing "
                    "until runnerd runs with the edit",
                )
                self._edited_logged = True
            return LookResult(skipped="the config file was edited on disk")
        self._edited_logged = False
        config = parse_config(text, str(self.config_path))
        if not config.sizing.auto:
            return LookResult(skipped="auto sizing is off")
        memory_max, cpus = self.limits()
        with open_read_only(self.history_path) as db:
            runs = read_runs(db, now - self.window, now)
        with ChangeLog(self.history_path) as changes:
            running = self.running()
            histories = {
                name: ProfileHistory(
                    changes=tuple(c for c in changes.changes(name) if c.state != PENDING),
                    cpus_since=self.started_at,
                    running=running.get(name, 0),
                )
                for name in config.profiles
            }
            decided: AutoPlan = plan(config, runs, memory_max, cpus, histories, now)
            return self._write(decided, changes, memory_max, cpus)

    def _write(
        self, decided: AutoPlan, changes: ChangeLog, memory_max: int | None, cpus: float | None
    ) -> LookResult:
        written: list[Change] = []
        refused: list[str] = []
        for change in decided.changes:
            text = self.config_path.read_text()
            in_use = self.running().get(change.profile, 0)
            try:
                if change.new.slots < in_use:  # as it writes: runners may have started since
                    raise ConfigError(
                        [f"it would drop slots to {change.new.slots}; {in_use} runners run"]
                    )
                done, config = write(
                    self.config_path, text, change, changes, memory_max, cpus, self.before_write
                )
            except ConfigError as e:
                why = "; ".join(e.problems)
                refused.append(f"{change.profile}: {why}")
                log.warning("sizing.refused", profile=change.profile, problems=e.problems)
                if self.on_refused is not None:
                    self.on_refused(change, why)
                continue
            self.running_text = self.config_path.read_text()
            log.info("sizing.changed", profile=done.profile, change=done.describe())
            if self.on_written is not None:
                self.on_written(config, done)
            written.append(done)
        for note in decided.notes:
            log.info("sizing.held", note=note)
        return LookResult(tuple(written), tuple(refused), decided.notes)

    async def run_forever(self) -> None:
        """A look at start and every 5 minutes after; :meth:`start` settles before."""
        while True:
            try:
                self.look()
            except (OSError, ConfigError, sqlite3.Error) as e:
                log.warning("sizing.look_failed", error=str(e))
            await self.clock.sleep(LOOK_EVERY)
