"""Writes grouped in one transaction of the state database (``SqliteStore.batch``): a created
runner is kept and its create intent cleared together, so no moment on disk holds one without
the other, and a batch that fails keeps none of its writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rungar.errors import StateError
from rungar.model.create_intent import CreateIntent
from rungar.store.sqlite import KeptRunner, SqliteStore

INTENT = CreateIntent("r-1", "linux", "req-1", runner_id=7, provider="a", created_at=1.0)
RUNNER = KeptRunner("r-1", "linux", "a", "rev", 1.0, 7, "starting")


def test_a_batch_s_writes_reach_the_disk_together_at_its_end(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    store.write_intent(INTENT)
    other = SqliteStore(tmp_path / "state.db")  # another process's view of the file
    with store.batch():
        store.keep_runners([RUNNER])
        store.clear_intent("r-1")
        assert other.kept_runners() == [] and other.intents() == [INTENT]
    assert other.kept_runners() == [RUNNER] and other.intents() == []
    store.close()
    other.close()


def test_a_batch_that_raises_keeps_none_of_its_writes(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    store.write_intent(INTENT)
    with pytest.raises(RuntimeError), store.batch():
        store.keep_runners([RUNNER])
        raise RuntimeError("the process dies here")
    assert store.kept_runners() == [] and store.intents() == [INTENT]
    store.write_intent(INTENT)  # the store takes writes again
    store.close()


def test_a_write_that_fails_in_a_batch_fails_the_batch_even_when_its_caller_carries_on(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "state.db")
    with pytest.raises(StateError), store.batch():
        store.keep_runners([RUNNER])
        with pytest.raises(StateError), store.transaction() as db:
            db.execute("INSERT INTO nowhere VALUES (1)")
    assert store.kept_runners() == []
    store.close()


def test_batches_nest_into_the_outermost(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    other = SqliteStore(tmp_path / "state.db")
    with store.batch():
        with store.batch():
            store.keep_runners([RUNNER])
        assert other.kept_runners() == []
    assert other.kept_runners() == [RUNNER]
    store.close()
    other.close()
