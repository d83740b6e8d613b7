"""The job reasons standing on GitHub, kept in the state database so a restarted daemon goes on
with them (docs/github.md, "Why a job waits, on GitHub"): each notice's check run id (0: a
commit status), the head commit it is on, the reason last written and when, and the jobs
waiting under it with when each was assigned.

A notice's row is written when it is published or rewritten and deleted when it is concluded;
its jobs are written when they change. The times are the daemon's clock (seconds since the
epoch), so a restart resumes them as they were.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rungar.store.sqlite import SqliteStore

NOTICES_SCHEMA = """
CREATE TABLE IF NOT EXISTS job_notices (
    repository TEXT NOT NULL, run_id TEXT NOT NULL, scale_set TEXT NOT NULL,
    check_run_id INTEGER NOT NULL, head_sha TEXT NOT NULL, written_at REAL NOT NULL,
    reason TEXT NOT NULL, since REAL NOT NULL, PRIMARY KEY (repository, run_id, scale_set));
CREATE TABLE IF NOT EXISTS job_notice_jobs (
    job_id TEXT PRIMARY KEY, repository TEXT NOT NULL, run_id TEXT NOT NULL,
    scale_set TEXT NOT NULL, assigned_at REAL NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class KeptNotice:
    repository: str
    run_id: str
    scale_set: str
    check_run_id: int
    head_sha: str
    written_at: float
    reason: str
    since: float


@dataclass(frozen=True, slots=True)
class KeptJob:
    job_id: str
    repository: str
    run_id: str
    scale_set: str
    assigned_at: float


class NoticeBook:
    """Reads and writes the notices through the daemon's store."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        with store.transaction() as db:
            for statement in NOTICES_SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)

    def keep(self, notice: KeptNotice) -> None:
        with self.store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO job_notices VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    notice.repository,
                    notice.run_id,
                    notice.scale_set,
                    notice.check_run_id,
                    notice.head_sha,
                    notice.written_at,
                    notice.reason,
                    notice.since,
                ),
            )

    def forget(self, repository: str, run_id: str, scale_set: str) -> None:
        """The notice is concluded: it and its jobs go."""
        with self.store.transaction() as db:
            key = (repository, run_id, scale_set)
            db.execute(
                "DELETE FROM job_notices WHERE repository = ? AND run_id = ? AND scale_set = ?",
                key,
            )
            db.execute(
                "DELETE FROM job_notice_jobs WHERE repository = ? AND run_id = ? AND scale_set = ?",
                key,
            )

    def keep_jobs(self, jobs: Iterable[KeptJob]) -> None:
        """The jobs waiting under the notices, all of them: those not named any more go."""
        rows = [(j.job_id, j.repository, j.run_id, j.scale_set, j.assigned_at) for j in jobs]
        with self.store.transaction() as db:
            db.execute("DELETE FROM job_notice_jobs")
            db.executemany("INSERT OR REPLACE INTO job_notice_jobs VALUES (?, ?, ?, ?, ?)", rows)

    def notices(self) -> list[KeptNotice]:
        with self.store.transaction() as db:
            rows = db.execute(
                "SELECT repository, run_id, scale_set, check_run_id, head_sha, written_at, "
                "reason, since FROM job_notices"
            ).fetchall()
        return [
            KeptNotice(str(r), str(n), str(s), int(c), str(h), float(w), str(why), float(since))
            for r, n, s, c, h, w, why, since in rows
        ]

    def jobs(self) -> list[KeptJob]:
        with self.store.transaction() as db:
            rows = db.execute(
                "SELECT job_id, repository, run_id, scale_set, assigned_at FROM job_notice_jobs"
            ).fetchall()
        return [KeptJob(str(j), str(r), str(n), str(s), float(at)) for j, r, n, s, at in rows]
