"""runnerd's events: what changed on the host, kept in the job history and followed live.

``runnerctl events`` lists them and ``runnerctl events -f`` follows new ones, through the API's
``GET /events?after=ID&wait=SECONDS`` (a long poll: it answers as soon as one is newer than
``after``, or with none after ``wait``). Kinds:

- ``sizing.changed``: auto sizing, ``sizing apply`` or ``sizing undo`` wrote a profile's
  memory, slots or cpus; ``data`` has the profile, the kind of change, what it replaced
  (``old``) and what it wrote (``new``);
- ``sizing.refused``: auto sizing wanted a change the config check or a runner in a slot
  refused;
- ``slice.changed``: the slice's MemoryMax or CPUs read differently (a config applied, or
  ``systemctl daemon-reload``);
- ``runner.stopped``: a waiting runner stopped because its reservation no longer fits.

Table ``events`` in the history's database file (its own connection, as the sizing record):
``id`` INTEGER, ``at`` REAL epoch seconds, ``kind`` TEXT, ``subject`` TEXT, ``message`` TEXT,
``data`` TEXT (JSON). Events older than ``keep`` (30 days) are dropped as new ones come.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rungar.stopping import within

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    message TEXT NOT NULL,
    data TEXT NOT NULL DEFAULT '{}'
);
"""
KEEP = 30 * 86400.0


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    at: float
    kind: str
    subject: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "kind": self.kind,
            "subject": self.subject,
            "message": self.message,
            "data": self.data,
        }


class EventLog:
    """Written by the daemon's event loop only; followers wait on it in the same loop."""

    def __init__(self, path: str | Path, keep: float = KEEP) -> None:
        self._db = sqlite3.connect(Path(path), check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._db.commit()
        self._keep = keep
        self._changed: asyncio.Condition | None = None
        self._notifying: set[asyncio.Task[None]] = set()

    def close(self) -> None:
        self._db.close()

    def record(self, at: float, kind: str, subject: str, message: str, **data: Any) -> Event:
        cursor = self._db.execute(
            "INSERT INTO events (at, kind, subject, message, data) VALUES (?, ?, ?, ?, ?)",
            (at, kind, subject, message, json.dumps(data)),
        )
        self._db.execute("DELETE FROM events WHERE at < ?", (at - self._keep,))
        self._db.commit()
        event = Event(int(cursor.lastrowid or 0), at, kind, subject, message, data)
        self._wake()
        return event

    def after(self, after: int = 0, limit: int = 1000) -> list[Event]:
        rows = self._db.execute(
            "SELECT id, at, kind, subject, message, data FROM events WHERE id > ?"
            " ORDER BY id LIMIT ?",
            (after, limit),
        ).fetchall()
        return [Event(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows]

    def last_id(self) -> int:
        """The newest event's id, 0 when there is none: a new follower starts after it."""
        row = self._db.execute("SELECT MAX(id) FROM events").fetchone()
        return int(row[0] or 0)

    async def wait(self, after: int, timeout: float, poll: float = 1.0) -> list[Event]:
        """Events newer than ``after``; waits up to ``timeout`` seconds for one. The daemon's
        own events wake it at once; another writer's (``runnerctl sizing apply``) within
        ``poll`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        changed = self._condition()
        while True:
            found = self.after(after)
            left = deadline - loop.time()
            if found or left <= 0:
                return found
            async with changed:
                with contextlib.suppress(TimeoutError):
                    await within(changed.wait(), min(poll, left))

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def _wake(self) -> None:
        changed = self._changed
        if changed is None:
            return

        async def notify() -> None:
            async with changed:
                changed.notify_all()

        try:
            task = asyncio.get_running_loop().create_task(notify())
        except RuntimeError:  # recorded outside the loop (a tool): nobody waits here
            return
        self._notifying.add(task)
        task.add_done_callback(self._notifying.discard)
