"""SQLite state (WAL): backoffs, crash loops, holds, create intents and the creates given up
on with a machine maybe left behind, the runners the daemon tracks, the listeners' last message
ids, scale-set and session ids (in a small key-value ``meta`` table), and when each scale set's
recent jobs were assigned (the warm pool's history, pruned by age), and the jobs lost with their
machine and those re-run (``rerun_lost_jobs``, pruned by age), so a restart never re-runs a job
twice. Its companions keep their own tables in the same database: the jobs served
(:mod:`rungar.store.usage`) and the job reasons standing on GitHub
(:mod:`rungar.store.notices`).

Tables are created when missing, so a database written by an earlier release gains the new ones
on its first start and keeps the rest.

The providers' listings are the truth about machines; this store keeps only what they cannot
tell. The runners are kept for a provider that does not answer when the daemon starts: what it
last knew of them still counts against the limits until that provider lists again. Each
create's intent is written *before* the provider is called, with its idempotency key, so a
crash between intent and answer is settled on restart: the machine is adopted if it exists,
its registration removed if it does not. A create given up on while its machine may still be
made is kept by name and provider until that provider's listings settle it, so a machine that
appears late is deleted, never adopted. Backoffs and holds are kept with absolute
times, so a restart resumes them with their remaining time. No secret is ever stored.

A database that is not one, or fails SQLite's quick check, is moved aside to
``state.db.corrupt-<UTC time>`` (never overwriting an earlier copy) with an error log line, and
a fresh one is started instead of stopping the daemon: every runner is adopted again from the
providers' labels on the next reconcile pass.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from rungar.errors import StateError
from rungar.model.create_intent import CreateIntent as CreateIntent  # its home; kept here too
from rungar.model.create_intent import GivenUpCreate
from rungar.placement.backoff import Backoff
from rungar.placement.holds import Hold
from rungar.store.files import private_database

log = structlog.get_logger("rungar.store")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS backoffs (
    scale_set TEXT NOT NULL, provider TEXT NOT NULL, refusals INTEGER NOT NULL,
    until REAL NOT NULL, last_error TEXT NOT NULL, full INTEGER NOT NULL, resource TEXT NOT NULL,
    PRIMARY KEY (scale_set, provider));
CREATE TABLE IF NOT EXISTS crash_loops (
    scale_set TEXT NOT NULL, provider TEXT NOT NULL, runners INTEGER NOT NULL,
    until REAL NOT NULL, why TEXT NOT NULL, PRIMARY KEY (scale_set, provider));
CREATE TABLE IF NOT EXISTS turned_away (
    scale_set TEXT NOT NULL, provider TEXT NOT NULL, runner_version TEXT NOT NULL,
    PRIMARY KEY (scale_set, provider));
CREATE TABLE IF NOT EXISTS holds (
    provider TEXT PRIMARY KEY, holder TEXT NOT NULL, priority INTEGER NOT NULL,
    since REAL NOT NULL);
CREATE TABLE IF NOT EXISTS intents (
    runner TEXT PRIMARY KEY, scale_set TEXT NOT NULL, request_id TEXT NOT NULL,
    runner_id INTEGER NOT NULL DEFAULT 0, provider TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS given_up (
    runner TEXT PRIMARY KEY, scale_set TEXT NOT NULL, provider TEXT NOT NULL,
    given_up_at REAL NOT NULL, listed_at REAL NOT NULL, seen INTEGER NOT NULL,
    registration TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS runners (
    name TEXT PRIMARY KEY, scale_set TEXT NOT NULL, provider TEXT NOT NULL,
    revision TEXT NOT NULL, created_at REAL NOT NULL, runner_id INTEGER NOT NULL,
    state TEXT NOT NULL, removal_reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS listener (scale_set TEXT PRIMARY KEY, last_message_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS job_history (
    scale_set TEXT NOT NULL, job_id TEXT NOT NULL, assigned_at REAL NOT NULL,
    PRIMARY KEY (scale_set, job_id));
CREATE INDEX IF NOT EXISTS job_history_age ON job_history (assigned_at);
CREATE TABLE IF NOT EXISTS lost_jobs (
    job_id TEXT PRIMARY KEY, scale_set TEXT NOT NULL, runner TEXT NOT NULL,
    repository TEXT NOT NULL, run_id TEXT NOT NULL, job TEXT NOT NULL, lost_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS lost_jobs_age ON lost_jobs (lost_at);
CREATE TABLE IF NOT EXISTS reruns (
    repository TEXT NOT NULL, run_id TEXT NOT NULL, job TEXT NOT NULL, rerun_at REAL NOT NULL,
    PRIMARY KEY (repository, run_id, job));
CREATE INDEX IF NOT EXISTS reruns_age ON reruns (rerun_at);
"""


# A lost job as kept: scale set, runner, repository, run id, job name.
LostJobRow = tuple[str, str, str, str, str]


@dataclass(frozen=True, slots=True)
class KeptRunner:
    """A runner the daemon tracked, as last saved: ``state`` and ``removal_reason`` are the
    engine's words (``leaving`` and why, for a machine not yet deleted)."""

    name: str
    scale_set: str
    provider: str
    revision: str
    created_at: float
    runner_id: int
    state: str
    removal_reason: str = ""


class SqliteStore:
    """One writer (the daemon); every write is its own short transaction, or a part of the
    one :meth:`batch` holds open."""

    def __init__(self, path: str | Path, *, now: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Reentrant: a write within batch() joins the batch's transaction on the same thread.
        self._lock = threading.RLock()
        self._depth = 0  # batch() blocks open on the lock's thread (0: none)
        self._failed = False  # a write within the open batch failed
        self.moved_aside: Path | None = None  # where a corrupt database was kept, if it was
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as e:
            # Corrupt (not a database, a malformed page): keep it for a post-mortem and start
            # afresh. Nothing here is the truth about machines: runners are adopted again from
            # the providers' labels; backoffs, holds, create intents and kept runners are lost.
            self.moved_aside = self._move_aside(now(), e)
            try:
                self._db = self._open()
            except sqlite3.Error as again:
                raise StateError(f"cannot open the state database {self.path}: {again}") from e
        except sqlite3.Error as e:
            raise StateError(f"cannot open the state database {self.path}: {e}") from e

    def _open(self) -> sqlite3.Connection:
        private_database(self.path)  # before SQLite creates it with the umask's mode
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=5000")
            check = db.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(
                    f"integrity check: {check[0] if check else 'no answer'}"
                )
            db.executescript(SCHEMA)
        except sqlite3.Error:
            db.close()
            raise
        return db

    def _move_aside(self, now: float, error: Exception) -> Path:
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
        kept = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while kept.exists():  # never overwrite a copy kept before
            n += 1
            kept = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        try:
            os.replace(self.path, kept)
            for suffix in ("-wal", "-shm"):
                side = self.path.with_name(self.path.name + suffix)
                if side.exists():
                    os.replace(side, kept.with_name(kept.name + suffix))
        except OSError as e:
            raise StateError(
                f"the state database {self.path} is corrupt ({error}) and cannot be moved aside: "
                f"{e.strerror or e}"
            ) from e
        log.error(
            "state.corrupt_moved_aside",
            message=(
                f"the state database {self.path} was corrupt ({error}); kept as {kept} and "
                "started afresh: runners are adopted again from the providers' labels, and "
                "backoffs, holds, create intents and the kept runners start empty"
            ),
            kept=str(kept),
        )
        return kept

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._depth:  # within batch(): its transaction commits or rolls back
                try:
                    yield self._db
                except sqlite3.Error as e:
                    self._failed = True
                    raise StateError(f"state database {self.path}: {e}") from e
                return
            try:
                self._db.execute("BEGIN IMMEDIATE")
                yield self._db
                self._db.execute("COMMIT")
            except sqlite3.Error as e:
                self._db.execute("ROLLBACK")
                raise StateError(f"state database {self.path}: {e}") from e

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Every write within one transaction: all of them on disk, or (on an error) none.
        For writes that belong together and have no outside call between them; the store's
        lock is held throughout, so nothing in the block may wait on another thread's write."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise StateError(f"state database {self.path}: {e}") from e
            self._depth, self._failed = 1, False
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            finally:
                self._depth = 0
            if self._failed:  # a write failed and its caller carried on: keep none of them
                self._db.execute("ROLLBACK")
                raise StateError(f"state database {self.path}: a write in a batch failed")
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as e:
                self._db.execute("ROLLBACK")
                raise StateError(f"state database {self.path}: {e}") from e

    def transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One short write transaction, for the store's companions (rungar.store.usage)."""
        return self._tx()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------ meta

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def scale_set_ids(self) -> dict[str, int]:
        """Every scale set's id on GitHub this installation recorded, by name (kept by the GitHub
        side as ``github.scale_set_id.NAME``), configured or not any more."""
        prefix = "github.scale_set_id."
        with self._lock:
            rows = self._db.execute(
                "SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchall()
        out = {}
        for key, value in rows:
            with contextlib.suppress(ValueError):
                out[str(key)[len(prefix) :]] = int(value)
        return out

    # ------------------------------------------------------------ backoffs and holds

    def save_placement(self, backoffs: list[tuple[str, str, Backoff]], holds: list[Hold]) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM backoffs")
            db.executemany(
                "INSERT INTO backoffs VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (s, p, b.refusals, b.until, b.last_error, int(b.full), b.resource)
                    for s, p, b in backoffs
                ],
            )
            db.execute("DELETE FROM holds")
            db.executemany(
                "INSERT INTO holds VALUES (?, ?, ?, ?)",
                [(h.provider, h.holder, h.priority, h.since) for h in holds],
            )

    def load_placement(self) -> tuple[list[tuple[str, str, Backoff]], list[Hold]]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM backoffs").fetchall()
            hold_rows = self._db.execute("SELECT * FROM holds").fetchall()
        backoffs = [
            (s, p, Backoff(int(n), float(u), str(e), bool(f), str(r)))
            for s, p, n, u, e, f, r in rows
        ]
        holds = [Hold(str(p), str(h), int(pr), float(since)) for p, h, pr, since in hold_rows]
        return backoffs, holds

    def save_crash_loops(self, loops: list[tuple[str, str, Backoff]]) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM crash_loops")
            db.executemany(
                "INSERT INTO crash_loops VALUES (?, ?, ?, ?, ?)",
                [(s, p, b.refusals, b.until, b.last_error) for s, p, b in loops],
            )

    def load_crash_loops(self) -> list[tuple[str, str, Backoff]]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM crash_loops").fetchall()
        return [(s, p, Backoff(int(n), float(u), str(w), False)) for s, p, n, u, w in rows]

    def save_turned_away(self, rows: list[tuple[str, str, str]]) -> None:
        """(scale set, provider, runner version) of each provider skipped because GitHub
        refused its runner as outdated: kept across a restart."""
        with self._tx() as db:
            db.execute("DELETE FROM turned_away")
            db.executemany("INSERT INTO turned_away VALUES (?, ?, ?)", rows)

    def load_turned_away(self) -> list[tuple[str, str, str]]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM turned_away").fetchall()
        return [(str(s), str(p), str(v)) for s, p, v in rows]

    # ------------------------------------------------------------ create intents

    def write_intent(self, intent: CreateIntent) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO intents VALUES (?, ?, ?, ?, ?, ?)",
                (
                    intent.runner,
                    intent.scale_set,
                    intent.request_id,
                    intent.runner_id,
                    intent.provider,
                    intent.created_at,
                ),
            )

    def clear_intent(self, runner: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM intents WHERE runner = ?", (runner,))

    def intents(self) -> list[CreateIntent]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM intents ORDER BY created_at").fetchall()
        return [
            CreateIntent(str(r), str(s), str(q), int(i), str(p), float(c))
            for r, s, q, i, p, c in rows
        ]

    # ------------------------------------------------------------ creates given up on

    def keep_given_up(self, given_up: GivenUpCreate) -> None:
        """Save ``given_up``, replacing what was kept under its runner's name."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO given_up VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    given_up.runner,
                    given_up.scale_set,
                    given_up.provider,
                    given_up.given_up_at,
                    given_up.listed_at,
                    int(given_up.seen),
                    given_up.registration,
                ),
            )

    def forget_given_up(self, runner: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM given_up WHERE runner = ?", (runner,))

    def given_up(self) -> list[GivenUpCreate]:
        with self._lock:
            rows = self._db.execute(
                "SELECT runner, scale_set, provider, given_up_at, listed_at, seen, registration "
                "FROM given_up ORDER BY given_up_at"
            ).fetchall()
        return [
            GivenUpCreate(str(r), str(s), str(p), float(at), float(listed), bool(seen), str(g))
            for r, s, p, at, listed, seen, g in rows
        ]

    # ------------------------------------------------------------ tracked runners

    def forget_runner(self, name: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM runners WHERE name = ?", (name,))

    def keep_runners(self, runners: list[KeptRunner]) -> None:
        """Save ``runners``, each replacing what was kept under its name."""
        with self._tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO runners VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [_row(r) for r in runners],
            )

    def kept_runners(self) -> list[KeptRunner]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM runners ORDER BY created_at, name").fetchall()
        return [
            KeptRunner(str(n), str(s), str(p), str(v), float(c), int(i), str(st), str(r))
            for n, s, p, v, c, i, st, r in rows
        ]

    # ------------------------------------------------------------ listener

    def last_message_id(self, scale_set: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT last_message_id FROM listener WHERE scale_set = ?", (scale_set,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def set_last_message_id(self, scale_set: str, message_id: int) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO listener VALUES (?, ?)", (scale_set, message_id))

    # ------------------------------------------------------------ job history (warm pools)

    def record_job(self, scale_set: str, job_id: str, assigned_at: float) -> bool:
        """Keep a job's assignment time; False when the job was recorded already (a message
        GitHub sent again)."""
        with self._tx() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO job_history VALUES (?, ?, ?)",
                (scale_set, job_id, assigned_at),
            )
            return cursor.rowcount > 0

    def job_history(self, since: float) -> dict[str, list[float]]:
        """Each scale set's assignment times from ``since`` on, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT scale_set, assigned_at FROM job_history WHERE assigned_at >= ? "
                "ORDER BY assigned_at",
                (since,),
            ).fetchall()
        out: dict[str, list[float]] = {}
        for scale_set, at in rows:
            out.setdefault(str(scale_set), []).append(float(at))
        return out

    def prune_job_history(self, before: float) -> int:
        """Forget jobs assigned before ``before``; how many were forgotten."""
        with self._tx() as db:
            return db.execute("DELETE FROM job_history WHERE assigned_at < ?", (before,)).rowcount

    # ------------------------------------------------------------ lost jobs and re-runs

    def keep_lost_job(self, job_id: str, lost: LostJobRow, lost_at: float) -> None:
        """Remember a job whose runner was lost with its machine while it ran it."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO lost_jobs VALUES (?, ?, ?, ?, ?, ?, ?)",
                (job_id, *lost, lost_at),
            )

    def forget_lost_job(self, job_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM lost_jobs WHERE job_id = ?", (job_id,))

    def lost_jobs(self, since: float) -> dict[str, LostJobRow]:
        """The jobs lost from ``since`` on, by job id: (scale set, runner, repository, run id,
        job name)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT job_id, scale_set, runner, repository, run_id, job FROM lost_jobs "
                "WHERE lost_at >= ?",
                (since,),
            ).fetchall()
        return {
            str(j): (str(s), str(r), str(repo), str(run), str(n)) for j, s, r, repo, run, n in rows
        }

    def record_rerun(self, repository: str, run_id: str, job: str, rerun_at: float) -> bool:
        """Keep that a run's job was re-run; False when it was kept already."""
        with self._tx() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO reruns VALUES (?, ?, ?, ?)",
                (repository, run_id, job, rerun_at),
            )
            return cursor.rowcount > 0

    def reruns(self, since: float) -> set[tuple[str, str, str]]:
        """The (repository, run id, job name) of every job re-run from ``since`` on."""
        with self._lock:
            rows = self._db.execute(
                "SELECT repository, run_id, job FROM reruns WHERE rerun_at >= ?", (since,)
            ).fetchall()
        return {(str(repo), str(run), str(job)) for repo, run, job in rows}

    def prune_reruns(self, before: float) -> int:
        """Forget jobs lost, and re-runs made, before ``before``; how many were forgotten."""
        with self._tx() as db:
            lost = db.execute("DELETE FROM lost_jobs WHERE lost_at < ?", (before,)).rowcount
            return lost + db.execute("DELETE FROM reruns WHERE rerun_at < ?", (before,)).rowcount


def _row(runner: KeptRunner) -> tuple[str, str, str, str, float, int, str, str]:
    return (
        runner.name,
        runner.scale_set,
        runner.provider,
        runner.revision,
        runner.created_at,
        runner.runner_id,
        runner.state,
        runner.removal_reason,
    )
