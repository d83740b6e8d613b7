"""For process-based benchmarks and soaks: a child spoken to by lines (both sides), and /proc
readings.

A benchmark runs its emulator, providers and daemons as children of its own script (each
started as ``python <script> --role ...``), so each one's CPU and memory are its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any


async def read_commands() -> AsyncIterator[str]:
    """The child's side: lines from stdin, one at a time, without blocking the loop; '' at end
    of file, and then no more."""
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        yield line.strip()
        if not line:
            return


class Child:
    """A helper process running ``script`` with ``args``, spoken to by lines on stdin/stdout."""

    def __init__(self, script: str, *args: str, stop_wait: float = 20.0) -> None:
        self.role = " ".join(args[:4])
        self.stop_wait = stop_wait
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and script
            [sys.executable, script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    async def read(self) -> str:
        assert self.process.stdout is not None
        line = await asyncio.to_thread(self.process.stdout.readline)
        if not line:
            raise RuntimeError(f"helper {self.role} exited")
        return line.strip()

    async def ask(self, command: str) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return json.loads(await self.read())

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout=self.stop_wait)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib_now() -> float:
    """This process's resident memory now, in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
