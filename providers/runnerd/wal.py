"""Whether a WAL database's ``-wal`` file holds committed changes its main file lacks.

A reader that may not write next to the history cannot open it as a WAL database (SQLite must
create the ``-shm`` file), so it reads the main file alone. That file lacks whatever the daemon
committed since the last checkpoint. This module reads the ``-wal`` file as SQLite documents its
format: a 32-byte header (magic, version, page size, checkpoint sequence, two salts, checksum),
then frames of a 24-byte header (page number, the database's size in pages after a commit or 0,
the salts, a running checksum) and a page. Only frames whose salts match and whose checksums
chain are valid, and only those up to the last commit count. A committed page whose bytes differ
from the main file's page (or lies past its end) is a change the file lacks; a page a checkpoint
already copied is not, so a ``-wal`` left full after a checkpoint reads as nothing missing.
"""

from __future__ import annotations

import struct
from pathlib import Path

HEADER = 32
FRAME_HEADER = 24
MAGIC_LE = 0x377F0682  # checksums over little-endian words
MAGIC_BE = 0x377F0683  # checksums over big-endian words
MASK = 0xFFFFFFFF


def _checksum(data: bytes, big_endian: bool, s0: int, s1: int) -> tuple[int, int]:
    words = struct.unpack((">" if big_endian else "<") + f"{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & MASK
        s1 = (s1 + words[i + 1] + s0) & MASK
    return s0, s1


def committed_pages(wal: bytes) -> dict[int, bytes]:
    """Each page's newest committed content in the ``-wal`` bytes (pure)."""
    if len(wal) < HEADER:
        return {}
    magic, _version, page_size, _seq, salt1, salt2, c0, c1 = struct.unpack(">8I", wal[:HEADER])
    if magic not in (MAGIC_LE, MAGIC_BE) or page_size < 512:
        return {}
    big = magic == MAGIC_BE
    s0, s1 = _checksum(wal[:24], big, 0, 0)
    if (s0, s1) != (c0, c1):
        return {}
    pages: dict[int, bytes] = {}
    pending: dict[int, bytes] = {}
    offset = HEADER
    while offset + FRAME_HEADER + page_size <= len(wal):
        head = wal[offset : offset + FRAME_HEADER]
        page_no, commit, f_salt1, f_salt2, f0, f1 = struct.unpack(">6I", head)
        if (f_salt1, f_salt2) != (salt1, salt2):
            break
        page = wal[offset + FRAME_HEADER : offset + FRAME_HEADER + page_size]
        s0, s1 = _checksum(head[:8], big, s0, s1)
        s0, s1 = _checksum(page, big, s0, s1)
        if (s0, s1) != (f0, f1):
            break
        pending[page_no] = page
        if commit:
            pages.update(pending)
            pending = {}
        offset += FRAME_HEADER + page_size
    return pages


def wal_holds_changes(database: str | Path) -> bool:
    """True when ``database``'s ``-wal`` holds a committed page its main file lacks."""
    path = Path(database)
    try:
        wal = Path(f"{path}-wal").read_bytes()
    except FileNotFoundError:
        return False
    pages = committed_pages(wal)
    if not pages:
        return False
    page_size = struct.unpack(">I", wal[8:12])[0]
    with path.open("rb") as main:
        for page_no, content in pages.items():
            main.seek((page_no - 1) * page_size)
            if main.read(page_size) != content:
                return True
    return False
