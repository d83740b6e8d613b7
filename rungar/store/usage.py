"""The jobs Rungar served, one row each, in the state database: ``rungar usage`` and the fleet
page's Usage tab read them back (docs/usage.md, "Usage").

Rows are kept by age: those that finished more than the retention ago (``usage.retention``
in scale_sets.yaml, 90 days unless set) are deleted when a job is recorded, at most once an
hour, so the table stays bounded without a timer of its own. A job is keyed by GitHub's job id,
so a completion delivered twice is one row.

Readers open a connection of their own, read-only: a dashboard or a usage query over months
of jobs never holds the daemon's own connection (nor its lock) while it reads.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from rungar.errors import StateError
from rungar.store.sqlite import SqliteStore
from rungar.usage.summary import JobUsage

USAGE_SCHEMA = """
CREATE TABLE IF NOT EXISTS job_usage (
    job_id TEXT PRIMARY KEY, finished_at REAL NOT NULL, repository TEXT NOT NULL,
    workflow TEXT NOT NULL, job TEXT NOT NULL, scale_set TEXT NOT NULL, provider TEXT NOT NULL,
    runner TEXT NOT NULL, runner_seconds REAL NOT NULL, conclusion TEXT NOT NULL,
    wait REAL, price_per_hour REAL);
CREATE INDEX IF NOT EXISTS job_usage_finished ON job_usage (finished_at);
"""
DEFAULT_RETENTION = 90 * 86400.0
PRUNE_EVERY = 3600.0  # seconds between two deletions of rows past the retention
INSERT = (
    "INSERT OR REPLACE INTO job_usage (job_id, finished_at, repository, workflow, job, "
    "scale_set, provider, runner, runner_seconds, conclusion, wait, price_per_hour) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
SELECT = (
    "SELECT job_id, finished_at, repository, workflow, job, scale_set, provider, runner, "
    "runner_seconds, conclusion, wait, price_per_hour FROM job_usage WHERE finished_at >= ? "
    "ORDER BY finished_at"
)


class UsageBook:
    """Writes job rows through the daemon's store; reads them on a connection of its own."""

    def __init__(self, store: SqliteStore, retention: float = DEFAULT_RETENTION) -> None:
        self.store = store
        self.retention = retention
        self._pruned_at = float("-inf")
        with store.transaction() as db:
            for statement in USAGE_SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)

    @property
    def path(self) -> Path:
        return self.store.path

    def record(self, row: JobUsage, now: float) -> None:
        with self.store.transaction() as db:
            db.execute(
                INSERT,
                (
                    row.job_id,
                    row.finished_at,
                    row.repository,
                    row.workflow,
                    row.job,
                    row.scale_set,
                    row.provider,
                    row.runner,
                    row.runner_seconds,
                    row.conclusion,
                    row.wait,
                    row.price_per_hour,
                ),
            )
        if now - self._pruned_at >= PRUNE_EVERY:
            self.prune(now)

    def prune(self, now: float) -> int:
        """Delete rows that finished more than the retention before ``now``; how many went."""
        self._pruned_at = now
        with self.store.transaction() as db:
            gone = db.execute(
                "DELETE FROM job_usage WHERE finished_at < ?", (now - self.retention,)
            ).rowcount
        return int(gone)


def read_usage(path: str | Path, since: float) -> list[JobUsage]:
    """The rows that finished at or after ``since``, oldest first, read on a read-only
    connection of their own (any thread; never the daemon's connection)."""
    if not Path(path).exists():
        return []
    try:
        db = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as e:
        raise StateError(f"cannot read the state database {path}: {e}") from e
    try:
        rows = db.execute(
            SELECT,
            (since,),
        ).fetchall()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return []  # a database from before accounting: nothing served yet
        raise StateError(f"cannot read the state database {path}: {e}") from e
    finally:
        db.close()
    return [
        JobUsage(
            job_id=str(r[0]),
            finished_at=float(r[1]),
            repository=str(r[2]),
            workflow=str(r[3]),
            job=str(r[4]),
            scale_set=str(r[5]),
            provider=str(r[6]),
            runner=str(r[7]),
            runner_seconds=float(r[8]),
            conclusion=str(r[9]),
            wait=None if r[10] is None else float(r[10]),
            price_per_hour=None if r[11] is None else float(r[11]),
        )
        for r in rows
    ]
