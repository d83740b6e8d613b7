"""State files created private, whatever the umask (they may hold secrets).

The state database and the event log name runners, providers and repositories; the event log
may carry job names. They are created 0600, or 0640 where a group must read them, by an
explicit ``chmod`` after creation: a umask only ever removes bits, so a loose umask (0022)
would leave them world-readable and a strict one (0277) unwritable by their owner. A file that
already exists with more permission than wanted is tightened, never loosened.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PRIVATE = 0o600
GROUP_READABLE = 0o640
# SQLite's companions, created beside the database (they take its mode, but may predate it).
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_file(path: str | Path, mode: int = PRIVATE) -> Path:
    """Create ``path`` empty with ``mode`` if absent, or tighten it to ``mode``; the path."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        current = path.stat().st_mode & 0o777
        if current & ~mode:
            path.chmod(current & mode)
        return path
    try:
        os.fchmod(fd, mode)  # just created: give back what the umask took, take what it left
    finally:
        os.close(fd)
    return path


def private_database(path: str | Path, mode: int = PRIVATE) -> Path:
    """:func:`private_file` for an SQLite database and the companions it already has."""
    path = private_file(path, mode)
    for suffix in SQLITE_COMPANIONS:
        companion = Path(f"{path}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            if companion.stat().st_mode & 0o777 & ~mode:
                companion.chmod(mode)
    return path
