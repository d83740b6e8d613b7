"""Waiting in tests: on a condition, polled, within one generous deadline.

A test that waits for a socket, a file, a process or another thread's state polls for it here
rather than counting loop turns of a fixed sleep: the deadline is long enough for a machine
running other builds on every CPU (``make test-busy``), and a wait that succeeds returns at
once, so a quiet machine pays nothing for it. ``RUNGAR_TEST_WAIT`` (seconds) changes the
deadline; the default is 60.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

WAIT = float(os.environ.get("RUNGAR_TEST_WAIT", "60"))
POLL = 0.05


async def until(check: Callable[[], T], what: str, seconds: float = WAIT, every: float = POLL) -> T:
    """Poll ``check`` until it returns a true value, and return that value; fail naming
    ``what`` after ``seconds``."""

    async def awaited() -> T:
        return check()

    return await until_awaited(awaited, what, seconds, every)


async def until_awaited(
    check: Callable[[], Awaitable[T]], what: str, seconds: float = WAIT, every: float = POLL
) -> T:
    """:func:`until` for a check that is itself a coroutine (asks a daemon, samples a runner)."""
    deadline = time.monotonic() + seconds
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what} (within {seconds:g} s)")
        await asyncio.sleep(every)


def until_sync(check: Callable[[], T], what: str, seconds: float = WAIT, every: float = POLL) -> T:
    """:func:`until` for a test without an event loop (polling another thread or process)."""
    deadline = time.monotonic() + seconds
    pause = threading.Event()  # never set: its wait is the poll interval
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what} (within {seconds:g} s)")
        pause.wait(every)


def accepting(path: Path) -> bool:
    """Whether a server takes connections on the unix socket at ``path``. Its file alone says
    less: a server binds it before it listens, and a connection in between is refused."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            return False
    return True
