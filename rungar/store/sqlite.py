"""SQLite state (WAL): backoffs, holds, create intents, the listeners' last message ids, and a
small key-value ``meta`` table.

The providers' listings are the truth about machines; this store keeps only what they cannot
tell. Each create's intent is written *before* the provider is called, with its idempotency
key, so a crash between intent and answer is settled on restart: the machine is adopted if it
exists, its registration removed if it does not. Backoffs and holds are kept with absolute
times, so a restart resumes them with their remaining time. No secret is ever stored.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rungar.errors import StateError
from rungar.placement.backoff import Backoff
from rungar.placement.holds import Hold

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS backoffs (
    scale_set TEXT NOT NULL, provider TEXT NOT NULL, refusals INTEGER NOT NULL,
    until REAL NOT NULL, last_error TEXT NOT NULL, full INTEGER NOT NULL, resource TEXT NOT NULL,
    PRIMARY KEY (scale_set, provider));
CREATE TABLE IF NOT EXISTS holds (
    provider TEXT PRIMARY KEY, holder TEXT NOT NULL, priority INTEGER NOT NULL,
    since REAL NOT NULL);
CREATE TABLE IF NOT EXISTS intents (
    runner TEXT PRIMARY KEY, scale_set TEXT NOT NULL, request_id TEXT NOT NULL,
    runner_id INTEGER NOT NULL DEFAULT 0, provider TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS listener (scale_set TEXT PRIMARY KEY, last_message_id INTEGER NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class CreateIntent:
    """A runner being created: registered (``runner_id``) and maybe being asked of ``provider``."""

    runner: str
    scale_set: str
    request_id: str
    runner_id: int = 0
    provider: str = ""
    created_at: float = 0.0


class SqliteStore:
    """One writer (the daemon); every write is its own short transaction."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(SCHEMA)
        except sqlite3.Error as e:
            raise StateError(f"cannot open the state database {self.path}: {e}") from e

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                yield self._db
                self._db.execute("COMMIT")
            except sqlite3.Error as e:
                self._db.execute("ROLLBACK")
                raise StateError(f"state database {self.path}: {e}") from e

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
