"""The daemon's stop closes every provider connection even when a plugin's stop is cut short: a
gRPC channel left open is torn down whenever it is collected, on no event loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rungar.daemon.providers import close_providers


class SlowPlugin:
    def __init__(self) -> None:
        self.stopping = asyncio.Event()

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.Event().wait()  # a plugin slower to stop than its caller waits


class Connection:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


async def test_a_stop_cancelled_while_a_plugin_stops_still_closes_every_connection() -> None:
    plugin = SlowPlugin()
    connections: list[Any] = [Connection(), Connection()]  # stand-ins: only close is called
    stopping = asyncio.create_task(close_providers([plugin], connections))
    await asyncio.wait_for(plugin.stopping.wait(), 10)
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert [c.closed for c in connections] == [True, True]
