"""Reading the history as a user who may not write next to it: the file alone, and a sizing
check skipped while the daemon's -wal holds changes the file lacks. Runs a real reader as
``nobody`` against a history the daemon (this process, as root) holds open."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.test_runnerd_wal import history_with_wal

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to read as another user",
)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory others may read but not write (pytest's own is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="runnerd-reader-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*NOBODY, sys.executable, "-m", *argv], capture_output=True, text=True, timeout=60
    )


def test_a_reader_who_may_not_write_skips_the_sizing_check_while_the_wal_holds_changes(
    shared_dir: Path,
) -> None:
    db = shared_dir / "history.db"
    config = shared_dir / "runnerd.toml"
    config.write_text(
        f'[host]\nmemory_max = "8G"\nhistory = "{db}"\nstate_dir = "{shared_dir / "state"}"\n\n'
        '[profiles.node]\ncommand = ["true"]\ncpus = 1\nmemory = "1G"\nslots = 2\n'
    )
    config.chmod(0o644)
    history = history_with_wal(db)  # the daemon, writing; its -shm is its own
    (shared_dir / "history.db-shm").chmod(0o600)
    # runnerd makes its history private (0600); an operator lets a reader in by hand.
    db.chmod(0o644)
    (shared_dir / "history.db-wal").chmod(0o644)
    try:
        doctor = as_nobody("runnerd.cli", "doctor", "-c", str(config), "--json")
        assert doctor.returncode in (0, 1), doctor.stderr
        (sizing,) = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "sizing"]
        assert sizing["level"] == "warning"
        assert sizing["message"].startswith(f"sizing check skipped: {db}: read without the changes")
        history._db.execute("PRAGMA wal_checkpoint(PASSIVE)")  # the file has them now
        doctor = as_nobody("runnerd.cli", "doctor", "-c", str(config), "--json")
        (sizing,) = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "sizing"]
        assert sizing["level"] == "ok"
    finally:
        history.close()
