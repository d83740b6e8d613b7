"""A daemon for the fleet page's browser tests: the emulator, fake providers and ``rungar serve``
with ``dashboard.listen``, run on an event loop of its own thread.

Playwright's sync API refuses to run inside an event loop, and the providers' gRPC servers need
one running the whole time: so the world's loop runs beside the test, and the test asks it
through :meth:`FleetWorld.run`.

The fleet: ``host`` (room for three 1 GiB runners) serves ``small`` (priority 0, three kept idle,
so the host is full) and ``big`` (priority 10): a job for ``big`` finds the host full and holds
it. ``cloud`` (priced) serves ``cloudy``, whose jobs come and go.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld

T = TypeVar("T")
PRICE_PER_HOUR = 0.5


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "hold": "10m"},
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 1, "memory": "1GiB"}},
            {
                "name": "cloud",
                "type": "runnerd",
                "runner": {"vcpus": 1, "memory": "1GiB"},
                "price_per_hour": PRICE_PER_HOUR,
            },
        ],
        "scale_sets": [
            {
                "name": "small",
                "labels": ["small"],
                "min_runners": 3,
                "max_runners": 3,
                "providers": ["host"],
            },
            {
                "name": "big",
                "labels": ["big"],
                "priority": 10,
                "max_runners": 1,
                "providers": ["host"],
            },
            {"name": "cloudy", "labels": ["cloud"], "max_runners": 4, "providers": ["cloud"]},
        ],
    }


class FleetWorld:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.world = DaemonWorld(
            self.root,
            {
                "host": FakeProvider("host", vcpus=8, memory_bytes=3 * GIB),
                "cloud": FakeProvider("cloud", vcpus=64, memory_bytes=64 * GIB),
            },
            dashboard=True,
        )

    def run(self, work: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    def start(self) -> None:
        self._thread.start()
        config = fleet()
        # Samples often, so a test waits a fraction of a second for what it looks for.
        config["dashboard"] = {"listen": f"127.0.0.1:{self.world.dashboard_port}", "refresh": 0.3}
        self.run(self.world.start(config))

    def stop(self) -> None:
        try:
            self.run(self.world.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def url(self) -> str:
        return self.world.dashboard_url

    def queue(self, **spec: Any) -> dict[str, Any]:
        return self.run(self.world.queue_job(memory_bytes=8 << 20, **spec))

    def wait_for(self, check: Any, what: str, seconds: float = 30) -> dict[str, Any]:
        return self.run(self.world.wait_for(check, what, seconds), seconds + 5)


def runners_on(status: dict[str, Any], scale_set: str) -> int:
    return sum(1 for r in status["runners"] if r["scale_set"] == scale_set)
