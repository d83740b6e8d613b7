"""The job history: one SQLite database, WAL, one writer (docs/admission.md).

This docstring is the schema's one description; sizing and ``runnerd simulate`` read it too.

Table ``jobs`` — one row per runner runnerd started. A runner Rungar removes without a job
(scaled down, never connected, drained, ...) leaves no row: it ran no job. A runner whose job
ran but never became known has empty job columns and is left out of predictions:

    id                 INTEGER  row id; ``runnerctl job ID`` takes it, or the GitHub job id
    runner             TEXT     runner name (unique per start)
    scale_set          TEXT     the Rungar scale set that asked for it
    profile            TEXT     the [profiles.NAME] it ran in
    repository, workflow, job_name, job_id   TEXT  the job it took (UpdateRunner), or NULL
    branch, run_id     TEXT     the job's branch and workflow run id, when Rungar sent them
    result             TEXT     succeeded | failed | cancelled | timed_out, as GitHub concluded
                                (Rungar's Delete says); NULL until Rungar removes the runner
    exit_code          INTEGER  how its runner's process or container exited; NULL: stopped
    cap_memory         INTEGER  its memory limit, bytes;  cap_cpus REAL  its CPU limit
    peak_memory        INTEGER  largest sampled job memory (memory.current − file LRU), bytes
    avg_cpu            REAL     CPU time ÷ run time, CPUs; NULL when not measured
    peak_cpu           REAL     the most CPUs it used between two samples; NULL: not measured
    met_cap            INTEGER  1 when its own limit ran out of memory (events.local oom)
    killed_for_memory  INTEGER  1 when an oom kill hit it while its own limit held
    sock_throttled     INTEGER  sockets throttled during reclaim; NULL where the kernel lacks it
    slot_wait, host_wait  REAL  seconds this job was held back by this host refusing its scale
                                set, for a slot (or the budget) and for the host's memory: the
                                refusals between the job's queue time and its runner's start
                                (host_wait is left out of slot waits); 0 for a job a runner
                                already waited for
    cpu_wait           REAL     seconds admission held its runner for CPU
    policy             TEXT     caps | measured
    reserved_memory    INTEGER  what admission reserved, bytes;  reserved_cpu REAL
    basis              TEXT     why, as the admission record's phrase
    budget_free        INTEGER  what of the budget was free before it, bytes; NULL: unbounded
    slice_memory       INTEGER  the slice (docker stats count) at admission; NULL: no sample
    queued_at          REAL     when the job was queued, by runnerd's clock: GitHub's queue time
                                moved onto runnerd's clock by the job's start, else when a
                                create first listed it; NULL when not known
    started_at         REAL     when runnerd started the runner (its slot taken), runnerd's clock
    job_started_at     REAL     when the runner took its job (UpdateRunner), runnerd's clock;
                                NULL when the job never became known
    finished_at        REAL     when the runner ended (exited, or was stopped), runnerd's clock
    github_queued_at, github_started_at, github_completed_at  REAL  GitHub's own times of the
                                job, by GitHub's clock, as Rungar passed them on; NULL unknown
    slots              INTEGER  the profile's slots when the runner started (busy shares of past
                                jobs are read against these, not today's)

Every figure read from these (wait, idle, duration, average CPU) is defined once, in
:mod:`runnerd.figures` and docs/runnerd.md, "Every figure, defined once".

Table ``meta`` (key, value): ``schema`` = 3. Schema 1 (results ``success``/``failure``, no
branch, run id or exit code) and schema 2 (no job start, GitHub times or slots) are migrated
when the daemon opens it. No secret is ever stored: no
JIT config, no token.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rungar.model.job_key import JobKey as JobKey  # its home; kept importable from here
from rungar.store.files import private_database
from runnerd.admission.model import Run

SCHEMA_VERSION = 3
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    runner TEXT NOT NULL,
    scale_set TEXT NOT NULL,
    profile TEXT NOT NULL,
    repository TEXT, workflow TEXT, job_name TEXT, job_id TEXT,
    branch TEXT, run_id TEXT,
    result TEXT, exit_code INTEGER,
    cap_memory INTEGER NOT NULL, cap_cpus REAL NOT NULL,
    peak_memory INTEGER NOT NULL DEFAULT 0,
    avg_cpu REAL, peak_cpu REAL,
    met_cap INTEGER NOT NULL DEFAULT 0,
    killed_for_memory INTEGER NOT NULL DEFAULT 0,
    sock_throttled INTEGER,
    slot_wait REAL NOT NULL DEFAULT 0, host_wait REAL NOT NULL DEFAULT 0,
    cpu_wait REAL NOT NULL DEFAULT 0,
    policy TEXT NOT NULL,
    reserved_memory INTEGER NOT NULL, reserved_cpu REAL NOT NULL DEFAULT 0,
    basis TEXT NOT NULL,
    budget_free INTEGER, slice_memory INTEGER,
    queued_at REAL, started_at REAL NOT NULL, finished_at REAL,
    job_started_at REAL, github_queued_at REAL, github_started_at REAL,
    github_completed_at REAL, slots INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_key ON jobs (profile, repository, workflow, job_name, finished_at);
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished_at);
CREATE INDEX IF NOT EXISTS jobs_job_id ON jobs (job_id);
"""
# Schema 1 to 2: one vocabulary for a job's conclusion (GitHub's, as Rungar passes it on), and
# the branch and run id auto sizing's take-back reads.
_MIGRATE_1_TO_2 = """
ALTER TABLE jobs ADD COLUMN branch TEXT;
ALTER TABLE jobs ADD COLUMN run_id TEXT;
ALTER TABLE jobs ADD COLUMN exit_code INTEGER;
ALTER TABLE jobs ADD COLUMN peak_cpu REAL;
UPDATE jobs SET result = 'succeeded' WHERE result = 'success';
UPDATE jobs SET result = 'failed' WHERE result = 'failure';
UPDATE meta SET value = '2' WHERE key = 'schema';
"""
# Schema 2 to 3: the job's own start and GitHub's times beside runnerd's, and the slots of the
# day. Older rows keep NULL: their duration runs from the runner's start, as it was recorded.
_MIGRATE_2_TO_3 = """
ALTER TABLE jobs ADD COLUMN job_started_at REAL;
ALTER TABLE jobs ADD COLUMN github_queued_at REAL;
ALTER TABLE jobs ADD COLUMN github_started_at REAL;
ALTER TABLE jobs ADD COLUMN github_completed_at REAL;
ALTER TABLE jobs ADD COLUMN slots INTEGER;
UPDATE meta SET value = '3' WHERE key = 'schema';
"""


@dataclass(frozen=True, slots=True)
class JobStart:
    runner: str
    scale_set: str
    profile: str
    cap_memory: int
    cap_cpus: float
    policy: str
    reserved_memory: int
    reserved_cpu: float
    basis: str
    budget_free: int | None
    slice_memory: int | None
    started_at: float
    queued_at: float | None = None
    slot_wait: float = 0.0
    host_wait: float = 0.0
    cpu_wait: float = 0.0
    slots: int | None = None


@dataclass(frozen=True, slots=True)
class JobTimes:
    """What runnerd learns when the runner takes its job: the job's times by both clocks and
    its waits on this host (docs/runnerd.md, "Every figure, defined once")."""

    job_started_at: float
    queued_at: float | None
    slot_wait: float
    host_wait: float
    github_queued_at: float | None = None
    github_started_at: float | None = None


@dataclass(frozen=True, slots=True)
class JobEnd:
    result: str
    peak_memory: int
    avg_cpu: float | None
    met_cap: bool
    killed_for_memory: bool
    sock_throttled: int | None
    finished_at: float
    exit_code: int | None = None
    peak_cpu: float | None = None
    github_completed_at: float | None = None


class History:
    """The daemon's one writer. Sync methods for tests and tools; ``run`` for the event loop."""

    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        self.path = Path(path)
        if read_only:
            self._db = sqlite3.connect(
                f"file:{self.path}?mode=ro", uri=True, check_same_thread=False
            )
        else:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            private_database(self.path)  # 0600 whatever the umask
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            _migrate(self._db)
            self._db.executescript(_SCHEMA)
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)",
                (str(SCHEMA_VERSION),),
            )
            self._db.commit()
        self._db.row_factory = sqlite3.Row
        version = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if version is None or int(version[0]) != SCHEMA_VERSION:
            self._db.close()
            raise ValueError(
                f"{self.path}: job history schema {version and version[0]} is not {SCHEMA_VERSION}"
            )
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="runnerd-history")

    async def run(self, call: Callable[..., T], *args: Any) -> T:
        """Run a method on the one writer thread, so the event loop never waits on disk."""
        return await asyncio.get_running_loop().run_in_executor(self._writer, call, *args)

    def close(self) -> None:
        self._writer.shutdown(wait=True)
        self._db.close()

    # ---- writes ------------------------------------------------------------------------

    def start(self, job: JobStart) -> int:
        cursor = self._db.execute(
            "INSERT INTO jobs (runner, scale_set, profile, cap_memory, cap_cpus, policy,"
            " reserved_memory, reserved_cpu, basis, budget_free, slice_memory, started_at,"
            " queued_at, slot_wait, host_wait, cpu_wait, slots)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job.runner, job.scale_set, job.profile, job.cap_memory, job.cap_cpus, job.policy,
                job.reserved_memory, job.reserved_cpu, job.basis, job.budget_free,
                job.slice_memory, job.started_at, job.queued_at, job.slot_wait, job.host_wait,
                job.cpu_wait, job.slots,
            ),
        )  # fmt: skip
        self._db.commit()
        return int(cursor.lastrowid or 0)

    def took_job(
        self,
        row: int,
        key: JobKey,
        job_id: str,
        reserved: int,
        reserved_cpu: float,
        basis: str,
        branch: str = "",
        run_id: str = "",
    ) -> None:
        self._db.execute(
            "UPDATE jobs SET repository = ?, workflow = ?, job_name = ?, job_id = ?,"
            " reserved_memory = ?, reserved_cpu = ?, basis = ?, branch = ?, run_id = ?"
            " WHERE id = ?",
            (
                key.repository, key.workflow, key.job, job_id, reserved, reserved_cpu, basis,
                branch or None, run_id or None, row,
            ),
        )  # fmt: skip
        self._db.commit()

    def job_times(self, row: int, times: JobTimes) -> None:
        """The runner took its job: when, by both clocks, and what it waited for here."""
        self._db.execute(
            "UPDATE jobs SET job_started_at = ?, queued_at = COALESCE(?, queued_at),"
            " slot_wait = ?, host_wait = ?, github_queued_at = ?, github_started_at = ?"
            " WHERE id = ?",
            (
                times.job_started_at, times.queued_at, times.slot_wait, times.host_wait,
                times.github_queued_at, times.github_started_at, row,
            ),
        )  # fmt: skip
        self._db.commit()

    def ended(self, row: int, end: JobEnd) -> None:
        """The runner ended: its peaks, exit code and end time, kept while its result waits for
        Rungar's word (``end.result`` is not written)."""
        self._db.execute(
            "UPDATE jobs SET peak_memory = ?, avg_cpu = ?, met_cap = ?, killed_for_memory = ?,"
            " sock_throttled = ?, finished_at = ?, exit_code = ?, peak_cpu = ? WHERE id = ?",
            (
                end.peak_memory, end.avg_cpu, int(end.met_cap), int(end.killed_for_memory),
                end.sock_throttled, end.finished_at, end.exit_code, end.peak_cpu, row,
            ),
        )  # fmt: skip
        self._db.commit()

    def finish(self, row: int, end: JobEnd) -> None:
        self._db.execute(
            "UPDATE jobs SET result = ?, peak_memory = ?, avg_cpu = ?, met_cap = ?,"
            " killed_for_memory = ?, sock_throttled = ?, finished_at = ?, exit_code = ?,"
            " peak_cpu = ?, github_completed_at = COALESCE(?, github_completed_at)"
            " WHERE id = ?",
            (
                end.result, end.peak_memory, end.avg_cpu, int(end.met_cap),
                int(end.killed_for_memory), end.sock_throttled, end.finished_at, end.exit_code,
                end.peak_cpu, end.github_completed_at, row,
            ),
        )  # fmt: skip
        self._db.commit()

    def drop(self, row: int) -> None:
        """The runner ran no job: it leaves no job run behind."""
        self._db.execute("DELETE FROM jobs WHERE id = ?", (row,))
        self._db.commit()

    def insert_finished(self, rows: Iterable[tuple[JobStart, JobKey, JobEnd]]) -> None:
        """Bulk import of finished jobs (fixtures, benchmarks, a later history generator)."""
        self._db.executemany(
            "INSERT INTO jobs (runner, scale_set, profile, repository, workflow, job_name,"
            " result, cap_memory, cap_cpus, peak_memory, avg_cpu, met_cap, killed_for_memory,"
            " sock_throttled, policy, reserved_memory, reserved_cpu, basis, started_at,"
            " finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    s.runner, s.scale_set, s.profile, k.repository, k.workflow, k.job,
                    e.result, s.cap_memory, s.cap_cpus, e.peak_memory, e.avg_cpu,
                    int(e.met_cap), int(e.killed_for_memory), e.sock_throttled, s.policy,
                    s.reserved_memory, s.reserved_cpu, s.basis, s.started_at, e.finished_at,
                )
                for s, k, e in rows
            ],
        )  # fmt: skip
        self._db.commit()

    # ---- reads -------------------------------------------------------------------------

    def finished_since(self, since: float) -> list[tuple[JobKey, Run]]:
        """Every finished run with a known job since ``since``, oldest first."""
        rows = self._db.execute(
            "SELECT profile, repository, workflow, job_name, finished_at, result, peak_memory,"
            " cap_memory, avg_cpu, met_cap, killed_for_memory, reserved_memory,"
            " finished_at - COALESCE(job_started_at, started_at) FROM jobs"
            " WHERE finished_at >= ? AND result IS NOT NULL AND repository IS NOT NULL"
            " ORDER BY finished_at",
            (since,),
        ).fetchall()
        return [(JobKey(r[0], r[1], r[2], r[3]), _run(r[4:])) for r in rows]

    def last_runs(self, key: JobKey, successes: int, since: float) -> list[Run]:
        """The last ``successes`` successful runs of ``key``, with failed ones among them."""
        args = (key.profile, key.repository, key.workflow, key.job, since)
        oldest = self._db.execute(
            "SELECT finished_at FROM jobs WHERE profile = ? AND repository = ? AND workflow = ?"
            " AND job_name = ? AND finished_at >= ? AND result = 'succeeded'"
            " ORDER BY finished_at DESC LIMIT 1 OFFSET ?",
            (*args, successes - 1),
        ).fetchone()
        start = max(since, oldest[0]) if oldest else since
        rows = self._db.execute(
            "SELECT finished_at, result, peak_memory, cap_memory, avg_cpu, met_cap,"
            " killed_for_memory, reserved_memory,"
            " finished_at - COALESCE(job_started_at, started_at) FROM jobs"
            " WHERE profile = ? AND repository = ?"
            " AND workflow = ? AND job_name = ? AND finished_at >= ? AND result IS NOT NULL"
            " ORDER BY finished_at",
            (*args[:4], start),
        ).fetchall()
        return [_run(r) for r in rows]

    def job(self, ident: str) -> dict[str, Any] | None:
        """One job by row id or GitHub job id, newest first."""
        row = self._db.execute(
            "SELECT * FROM jobs WHERE job_id = ? OR (CAST(id AS TEXT) = ? AND job_id IS NULL)"
            " ORDER BY id DESC LIMIT 1",
            (ident, ident),
        ).fetchone()
        if row is None and ident.isdigit():
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (int(ident),)).fetchone()
        return dict(row) if row is not None else None

    def open_jobs(self) -> list[dict[str, Any]]:
        """Rows without a result: runners a previous daemon left running."""
        rows = self._db.execute("SELECT * FROM jobs WHERE result IS NULL").fetchall()
        return [dict(r) for r in rows]

    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])

    def recorded_since(self, since: float) -> list[dict[str, Any]]:
        """Every job recorded (with a result) that finished since ``since``, oldest first."""
        rows = self._db.execute(
            "SELECT * FROM jobs WHERE result IS NOT NULL AND finished_at >= ?"
            " ORDER BY finished_at, id",
            (since,),
        ).fetchall()
        return [dict(r) for r in rows]


def _migrate(db: sqlite3.Connection) -> None:
    """Bring an older history up to this schema, in one transaction."""
    exists = db.execute("SELECT name FROM sqlite_master WHERE name = 'meta'").fetchone()
    version = (
        db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() if exists else None
    )
    if version is not None and version[0] == "1":
        db.executescript("BEGIN;" + _MIGRATE_1_TO_2 + "COMMIT;")  # SQLite's DDL is transactional
        version = ("2",)
    if version is not None and version[0] == "2":
        db.executescript("BEGIN;" + _MIGRATE_2_TO_3 + "COMMIT;")


def _run(r: Sequence[Any]) -> Run:
    """A row as predictions read it; its duration from its job's start (its runner's when the
    job's is not known) to its end."""
    return Run(
        finished_at=r[0],
        result=r[1],
        peak=r[2],
        cap=r[3],
        avg_cpu=r[4],
        met_cap=bool(r[5]),
        killed_for_memory=bool(r[6]),
        reserved=r[7],
        duration=r[8] if len(r) > 8 and r[8] is not None and r[8] >= 0 else None,
    )
