"""Reading the history without write access: whether its -wal holds changes the file lacks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from runnerd.history import History, JobStart
from runnerd.sizing import runs as runs_module
from runnerd.sizing.runs import open_read_only
from runnerd.wal import committed_pages, wal_holds_changes


def start(n: int) -> JobStart:
    return JobStart(
        runner=f"r{n}", scale_set="node", profile="node", cap_memory=1, cap_cpus=1.0,
        policy="caps", reserved_memory=1, reserved_cpu=1.0, basis="cap", budget_free=None,
        slice_memory=None, started_at=float(n),
    )  # fmt: skip


def history_with_wal(path: Path) -> History:
    """A daemon's history, open, with rows committed to its -wal and not yet checkpointed."""
    history = History(path)
    history._db.execute("PRAGMA wal_autocheckpoint=0")
    history._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for n in range(3):
        history.start(start(n))
    return history


def test_a_wal_with_committed_rows_holds_changes_the_file_lacks(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    history = history_with_wal(path)
    try:
        assert committed_pages(Path(f"{path}-wal").read_bytes())
        assert wal_holds_changes(path)
        # The file alone, as a reader that may not write reads it, indeed lacks them.
        alone = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        assert alone.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0
        alone.close()
    finally:
        history.close()


def test_a_wal_a_checkpoint_copied_holds_nothing_the_file_lacks(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    history = history_with_wal(path)
    try:
        history._db.execute("PRAGMA wal_checkpoint(PASSIVE)")  # copied; the -wal keeps its frames
        assert committed_pages(Path(f"{path}-wal").read_bytes())
        assert not wal_holds_changes(path)
    finally:
        history.close()


def test_no_wal_file_holds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    History(path).close()  # closing checkpoints and removes the -wal
    assert not wal_holds_changes(path)


def test_reading_the_file_alone_says_so_when_the_wal_holds_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tests run as root, who may always write: the read-only open is made to fail as it does
    # for a user who may not create the -shm file.
    def refused(path: Path) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(runs_module, "_connect_read_only", refused)
    path = tmp_path / "history.db"
    history = history_with_wal(path)
    said: list[str] = []
    try:
        with open_read_only(path, said.append) as db:
            assert db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0
        assert len(said) == 1 and "read without the changes its -wal holds" in said[0]
        history._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        with open_read_only(path, said.append) as db:
            assert db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 3
        assert len(said) == 1  # nothing more to say once the file has them
    finally:
        history.close()
