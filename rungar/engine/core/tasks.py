"""The engine's work in flight: creates, removals and provider updates started by an event
and left to run, kept so none is collected early and a clean stop (or a test) can wait for
them all."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class Tasks:
    def __init__(self) -> None:
        self._running: set[asyncio.Task[object]] = set()

    def spawn(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        task = asyncio.ensure_future(coro)
        self._running.add(task)  # kept: the loop holds tasks weakly
        task.add_done_callback(self._running.discard)
        return task

    async def drain(self) -> None:
        """Wait for every task in flight, and for those they start."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    async def cancel(self) -> None:
        """Cancel every task in flight and wait until they have ended."""
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
