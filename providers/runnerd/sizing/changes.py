"""The record of sizing changes: table ``sizing_changes`` in the job history's database file.

docs/admission.md, "Auto sizing": "Each change is recorded in the job history before the file is
written … one a crash interrupted is settled from the file at the next start … runnerctl sizing undo
<profile> writes the old values back, cpus included." This module owns the table; it opens its own
connection to the history file (SQLite serialises it with the daemon's writer; sizing writes a few
rows an hour at most). Schema:

    id            INTEGER  row id
    profile       TEXT     the [profiles.NAME] changed
    at            REAL     epoch seconds the change was decided
    source        TEXT     auto | apply | undo
    kind          TEXT     lower | raise | slots | cpus | take_back | undo
    reason        TEXT     the sentence runnerctl sizing shows
    old_memory, old_slots, old_cpus   what it replaced (INTEGER bytes, INTEGER, REAL)
    new_memory, new_slots, new_cpus   what it wrote
    floor_memory  INTEGER  a lowering taken back: no lowering goes under this …
    floor_until   REAL     … until then (30 days)
    undoes        INTEGER  the change an undo reverted
    state         TEXT     pending (recorded, not yet written) | done | unsure (a crash
                           interrupted it and the file lacks its values: it may not have been
                           written, and it still holds the interval)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rungar.model.units import format_bytes

PENDING = "pending"
DONE = "done"
UNSURE = "unsure"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sizing_changes (
    id INTEGER PRIMARY KEY,
    profile TEXT NOT NULL,
    at REAL NOT NULL,
    source TEXT NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT NOT NULL,
    old_memory INTEGER NOT NULL, old_slots INTEGER NOT NULL, old_cpus REAL NOT NULL,
    new_memory INTEGER NOT NULL, new_slots INTEGER NOT NULL, new_cpus REAL NOT NULL,
    floor_memory INTEGER, floor_until REAL,
    undoes INTEGER,
    state TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sizing_changes_profile ON sizing_changes (profile, at);
"""


@dataclass(frozen=True, slots=True)
class Values:
    """A profile's sized values."""

    memory: int
    slots: int
    cpus: float

    def describe(self) -> str:
        return f"memory {format_bytes(self.memory)}, slots {self.slots}, cpus {self.cpus:g}"


@dataclass(frozen=True, slots=True)
class Change:
    profile: str
    at: float
    source: str
    kind: str
    reason: str
    old: Values
    new: Values
    floor_memory: int | None = None
    floor_until: float | None = None
    undoes: int | None = None
    state: str = PENDING
    id: int = 0

    def event_data(self) -> dict[str, object]:
        """What a ``sizing.changed`` event carries of it."""

        def values(v: Values) -> dict[str, float]:
            return {"memory": v.memory, "slots": v.slots, "cpus": v.cpus}

        return {
            "source": self.source,
            "change": self.kind,
            "reason": self.reason,
            "old": values(self.old),
            "new": values(self.new),
        }

    def describe(self) -> str:
        """``node: memory 7G → 6G (auto lower); replaced memory 7G, slots 2, cpus 8``."""
        parts = []
        if self.new.memory != self.old.memory:
            parts.append(
                f"memory {format_bytes(self.old.memory)} → {format_bytes(self.new.memory)}"
            )
        if self.new.slots != self.old.slots:
            parts.append(f"slots {self.old.slots} → {self.new.slots}")
        if self.new.cpus != self.old.cpus:
            parts.append(f"cpus {self.old.cpus:g} → {self.new.cpus:g}")
        what = ", ".join(parts) or "no change"
        text = f"{self.profile}: {what} ({self.source} {self.kind}): {self.reason}"
        if self.state == UNSURE:
            text += "; may not have been written"
        return text

    def to_record(self) -> dict[str, Any]:
        """Its fields, for a copy with some changed."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "profile": self.profile,
            "at": self.at,
            "source": self.source,
            "kind": self.kind,
            "reason": self.reason,
            "old": {"memory": self.old.memory, "slots": self.old.slots, "cpus": self.old.cpus},
            "new": {"memory": self.new.memory, "slots": self.new.slots, "cpus": self.new.cpus},
            "floor_memory": self.floor_memory,
            "floor_until": self.floor_until,
            "undoes": self.undoes,
            "state": self.state,
        }


class ChangeLog:
    """Read and write ``sizing_changes``; ``read_only`` opens it without creating anything."""

    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if read_only:
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                self._db.execute("SELECT 1 FROM sqlite_master LIMIT 1")
            except sqlite3.OperationalError:
                # A reader that may not create -shm next to a WAL database reads the file alone,
                # as the runs are read (runnerd.sizing.runs.open_read_only).
                self._db.close()
                self._db = sqlite3.connect(f"file:{self.path}?immutable=1", uri=True)
        else:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=10.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
            self._db.commit()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ChangeLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(self, change: Change) -> Change:
        """Store ``change`` (durably: the file is written only after this returns)."""
        cursor = self._db.execute(
            "INSERT INTO sizing_changes (profile, at, source, kind, reason, old_memory,"
            " old_slots, old_cpus, new_memory, new_slots, new_cpus, floor_memory, floor_until,"
            " undoes, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                change.profile, change.at, change.source, change.kind, change.reason,
                change.old.memory, change.old.slots, change.old.cpus, change.new.memory,
                change.new.slots, change.new.cpus, change.floor_memory, change.floor_until,
                change.undoes, change.state,
            ),
        )  # fmt: skip
        self._db.commit()
        return _with(change, id=int(cursor.lastrowid or 0))

    def mark(self, ident: int, state: str) -> None:
        self._db.execute("UPDATE sizing_changes SET state = ? WHERE id = ?", (state, ident))
        self._db.commit()

    def changes(self, profile: str | None = None, since: float = 0.0) -> list[Change]:
        """Changes oldest first; none when the table does not exist yet (read-only)."""
        try:
            rows = self._db.execute(
                "SELECT id, profile, at, source, kind, reason, old_memory, old_slots, old_cpus,"
                " new_memory, new_slots, new_cpus, floor_memory, floor_until, undoes, state"
                " FROM sizing_changes WHERE (? IS NULL OR profile = ?) AND at >= ?"
                " ORDER BY at, id",
                (profile, profile, since),
            ).fetchall()
        except sqlite3.OperationalError:
            return []
        return [_change(r) for r in rows]

    def pending(self) -> list[Change]:
        return [c for c in self.changes() if c.state == PENDING]


def _with(change: Change, **values: Any) -> Change:
    from dataclasses import replace

    return replace(change, **values)


def _change(r: Sequence[Any]) -> Change:
    return Change(
        id=int(r[0]),
        profile=r[1],
        at=float(r[2]),
        source=r[3],
        kind=r[4],
        reason=r[5],
        old=Values(int(r[6]), int(r[7]), float(r[8])),
        new=Values(int(r[9]), int(r[10]), float(r[11])),
        floor_memory=None if r[12] is None else int(r[12]),
        floor_until=None if r[13] is None else float(r[13]),
        undoes=None if r[14] is None else int(r[14]),
        state=r[15],
    )


def last_undoable(changes: Sequence[Change]) -> Change | None:
    """The newest written change of a profile that no undo has reverted yet."""
    undone = {c.undoes for c in changes if c.undoes is not None}
    for change in reversed(changes):
        if change.source != "undo" and change.state != PENDING and change.id not in undone:
            return change
    return None
