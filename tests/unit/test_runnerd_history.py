"""The job history in SQLite: WAL, the queries admission needs, read-only use, no secrets."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from runnerd.admission.model import FAILURE, SUCCESS
from runnerd.history import History, JobEnd, JobKey, JobStart

G = 1024**3
KEY = JobKey("node", "octo/app", "ci", "build")


def start(at: float, runner: str = "r") -> JobStart:
    return JobStart(
        runner, "node", "node", 7 * G, 8.0, "measured", 2 * G, 1.0, "basis", 10 * G, None, at
    )


def finished(
    n: int, result: str = SUCCESS, t0: float = 1000.0
) -> list[tuple[JobStart, JobKey, JobEnd]]:
    return [
        (start(t0 + i), KEY, JobEnd(result, (i + 1) * G, 0.5, False, False, None, t0 + i + 0.5))
        for i in range(n)
    ]


def test_the_history_is_a_wal_database(tmp_path: Path) -> None:
    history = History(tmp_path / "h.db")
    history.close()
    with sqlite3.connect(tmp_path / "h.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_last_runs_are_the_last_n_successes_with_the_failures_among_them(tmp_path: Path) -> None:
    history = History(tmp_path / "h.db")
    history.insert_finished(finished(30))
    history.insert_finished(finished(2, FAILURE, t0=1025.2))  # among the last 20 successes
    history.insert_finished(finished(1, FAILURE, t0=900.0))  # older than them
    runs = history.last_runs(KEY, 20, since=0.0)
    assert sum(r.succeeded for r in runs) == 20
    assert sum(r.result == FAILURE for r in runs) == 2
    assert [r.finished_at for r in runs] == sorted(r.finished_at for r in runs)
    assert len(history.finished_since(0.0)) == 33
    history.close()


def test_a_job_is_found_by_its_github_id_or_its_row(tmp_path: Path) -> None:
    history = History(tmp_path / "h.db")
    row = history.start(start(5.0))
    history.took_job(
        row, KEY, "9001", 3 * G, 1.5, "the p95 peak of its job's last 20 runs + the margin"
    )
    history.finish(row, JobEnd(SUCCESS, 2 * G, 1.2, False, False, 3, 60.0))
    by_id = history.job("9001")
    assert by_id is not None and by_id == history.job(str(row))
    assert (by_id["reserved_memory"], by_id["sock_throttled"], by_id["result"]) == (
        3 * G,
        3,
        SUCCESS,
    )
    assert history.open_jobs() == []
    history.close()


def test_read_only_use_cannot_write(tmp_path: Path) -> None:
    History(tmp_path / "h.db").close()
    reader = History(tmp_path / "h.db", read_only=True)
    with pytest.raises(sqlite3.OperationalError):
        reader.start(start(1.0))
    reader.close()


def test_the_schema_has_no_column_for_a_secret(tmp_path: Path) -> None:
    history = History(tmp_path / "h.db")
    history.close()
    with sqlite3.connect(tmp_path / "h.db") as db:
        columns = {r[1] for r in db.execute("PRAGMA table_info(jobs)")}
    assert not {c for c in columns if "jit" in c or "token" in c or "secret" in c}


def test_a_schema_1_history_is_migrated_to_one_conclusion_vocabulary_with_branch_and_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema', '1');"
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY, runner TEXT NOT NULL, scale_set TEXT NOT NULL,"
        " profile TEXT NOT NULL, repository TEXT, workflow TEXT, job_name TEXT, job_id TEXT,"
        " result TEXT, cap_memory INTEGER NOT NULL, cap_cpus REAL NOT NULL,"
        " peak_memory INTEGER NOT NULL DEFAULT 0, avg_cpu REAL,"
        " met_cap INTEGER NOT NULL DEFAULT 0, killed_for_memory INTEGER NOT NULL DEFAULT 0,"
        " sock_throttled INTEGER, slot_wait REAL NOT NULL DEFAULT 0,"
        " host_wait REAL NOT NULL DEFAULT 0, cpu_wait REAL NOT NULL DEFAULT 0,"
        " policy TEXT NOT NULL, reserved_memory INTEGER NOT NULL,"
        " reserved_cpu REAL NOT NULL DEFAULT 0, basis TEXT NOT NULL, budget_free INTEGER,"
        " slice_memory INTEGER, queued_at REAL, started_at REAL NOT NULL, finished_at REAL);"
    )
    for i, result in enumerate(("success", "failure", "cancelled", "timed_out")):
        db.execute(
            "INSERT INTO jobs (runner, scale_set, profile, repository, workflow, job_name,"
            " result, cap_memory, cap_cpus, policy, reserved_memory, basis, started_at,"
            " finished_at) VALUES (?, 's', 'node', 'o/r', 'ci', 'build', ?, 1, 1, 'caps', 1,"
            " '', 0, ?)",
            (f"r{i}", result, float(i)),
        )
    db.commit()
    db.close()
    history = History(path)
    try:
        rows = history.recorded_since(0.0)
        assert [r["result"] for r in rows] == ["succeeded", "failed", "cancelled", "timed_out"]
        assert all(r["branch"] is None and r["exit_code"] is None for r in rows)
    finally:
        history.close()
