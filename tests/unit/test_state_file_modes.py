"""State files are created 0600 whatever the umask, and a looser existing one is tightened."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from runnerd.history import History

from rungar.clock import SystemClock
from rungar.engine.report.events import EventLog
from rungar.store.files import GROUP_READABLE, private_database, private_file
from rungar.store.sqlite import SqliteStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o000, 0o022, 0o277], ids=["umask000", "umask022", "umask277"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_the_state_database_and_its_wal_are_0600(tmp_path: Path, umask: int) -> None:
    store = SqliteStore(tmp_path / "state.db")
    store.set_last_message_id("1", 7)  # a write: the WAL exists now
    try:
        assert mode(tmp_path / "state.db") == 0o600
        assert mode(tmp_path / "state.db-wal") == 0o600
    finally:
        store.close()


def test_the_event_log_and_its_compacted_copy_are_0600(tmp_path: Path, umask: int) -> None:
    events = EventLog(SystemClock(), tmp_path / "events.jsonl", max_count=10)
    events.record("runner", "r1", "created")
    assert mode(tmp_path / "events.jsonl") == 0o600
    events.compact()
    events.record("runner", "r2", "created")
    assert mode(tmp_path / "events.jsonl") == 0o600
    events.close()


def test_runnerds_history_is_0600(tmp_path: Path, umask: int) -> None:
    history = History(tmp_path / "history.db")
    try:
        assert mode(tmp_path / "history.db") == 0o600
    finally:
        history.close()


def test_an_existing_world_readable_file_is_tightened_never_loosened(tmp_path: Path) -> None:
    loose = tmp_path / "loose.db"
    loose.write_text("")
    loose.chmod(0o644)
    Path(f"{loose}-wal").write_text("")
    Path(f"{loose}-wal").chmod(0o666)
    private_database(loose)
    assert mode(loose) == 0o600 and mode(Path(f"{loose}-wal")) == 0o600
    strict = tmp_path / "strict"
    strict.write_text("")
    strict.chmod(0o400)
    private_file(strict)
    assert mode(strict) == 0o400


def test_a_file_the_group_must_read_is_0640(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        assert mode(private_file(tmp_path / "shared", GROUP_READABLE)) == 0o640
    finally:
        os.umask(old)
