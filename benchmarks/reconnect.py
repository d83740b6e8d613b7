"""Benchmark: how soon a provider that stopped and started again is answering and back in
placement.

A provider written against the proto (``rungar.testing.scripted_provider``) serves on a unix
socket and stops for a while (the daemon's calls fail meanwhile, growing gRPC's reconnect
backoff), then starts again. Two figures per round, from the moment it listens again:

- ``reconnect_s``: until the daemon's own client (``GrpcProvider``, its channel options)
  has a List answered, asking every 50 ms;
- ``back_in_placement_s``: until the engine, run by ``RunLoop`` with its prober
  (``timing.probe_interval``, 1 s), counts the provider reachable again, with no reconcile
  pass in between.

And how often the daemon's client connects to a provider that answers garbage
(``rungar.testing.hostile_provider.GarbageServer``), four callers asking every 10 ms, counted
where the connections arrive: ``garbage_connections_per_s`` and the shortest time between two
(``garbage_shortest_gap_s``), for garbage after a valid HTTP/2 preface (the connection is made,
then breaks) and garbage in the handshake (no connection can be made).

Usage: ``python benchmarks/reconnect.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rungar.clock import SystemClock  # noqa: E402
from rungar.config.model import (  # noqa: E402
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.daemon.providers import make_provider  # noqa: E402
from rungar.daemon.runloop import RunLoop  # noqa: E402
from rungar.engine.engine import Engine  # noqa: E402
from rungar.engine.report.events import EventLog  # noqa: E402
from rungar.errors import ProviderUnavailable  # noqa: E402
from rungar.store.sqlite import SqliteStore  # noqa: E402
from rungar.testing.fake_github import FakeGitHub  # noqa: E402
from rungar.testing.hostile_provider import GarbageServer  # noqa: E402
from rungar.testing.scripted_provider import ScriptedProvider  # noqa: E402


def emit(metric: str, value: float, unit: str, params: dict[str, Any]) -> None:
    record = {"bench": "reconnect", "metric": metric, "value": round(value, 3), "unit": unit}
    print(json.dumps({**record, "params": params}), flush=True)


async def until(condition: Any, poll: float = 0.05) -> float:
    started = time.monotonic()
    while not await condition():
        await asyncio.sleep(poll)
    return time.monotonic() - started


async def reconnect_round(root: Path, down: float) -> float:
    provider = ScriptedProvider("a", f"unix://{root}/a.sock")
    await provider.start()
    config = ProviderConfig("a", "runnerd", address=provider.address)
    client: Any = make_provider(config, SystemClock(), [], "gh-bench")
    await client.list({})
    await provider.stop()
    end = time.monotonic() + down
    while time.monotonic() < end:
        with contextlib.suppress(ProviderUnavailable):
            await client.list({})
        await asyncio.sleep(0.2)
    await provider.start()

    async def answered() -> bool:
        try:
            await client.list({})
        except ProviderUnavailable:
            return False
        return True

    took = await until(answered)
    await client.close()
    await provider.stop()
    return took


async def placement_round(root: Path, down: float) -> float:
    provider = ScriptedProvider("a", f"unix://{root}/b.sock")
    await provider.start()
    timing = Timing(reconcile_interval=3600, probe_interval=1.0)
    config = ProviderConfig("a", "runnerd", address=provider.address)
    scale_set = ScaleSetConfig("linux", 10, (ScaleSetProvider("a", {"vcpus": 1}),))
    clock = SystemClock()
    client: Any = make_provider(config, clock, [], "gh-bench", timing)
    engine = Engine(
        ScaleSetsFile((config,), (scale_set,), timing),
        {"a": client},
        FakeGitHub(),
        clock=clock,
        store=SqliteStore(root / "state.db"),
        events=EventLog(clock, root / "events.jsonl"),
        installation="gh-bench",
    )
    await provider.stop()
    runloop = RunLoop.of(engine)
    await runloop.start()  # its first pass finds the provider unreachable

    async def unreachable() -> bool:
        return not engine.fleet.is_reachable("a")

    await until(unreachable)
    await asyncio.sleep(down)
    await provider.start()

    async def reachable() -> bool:
        return engine.fleet.is_reachable("a")

    took = await until(reachable, poll=0.01)
    await runloop.stop()
    await client.close()
    await provider.stop()
    engine.store.close()
    return took


async def garbage_round(root: Path, preface: bool, seconds: float) -> tuple[float, float]:
    garbage = GarbageServer(f"unix://{root}/g.sock", preface=preface)
    await garbage.start()
    config = ProviderConfig("g", "runnerd", address=garbage.address)
    client: Any = make_provider(config, SystemClock(), [], "gh-bench")
    end = time.monotonic() + seconds

    async def calling() -> None:
        while time.monotonic() < end:
            with contextlib.suppress(ProviderUnavailable):
                await client.list({})
            await asyncio.sleep(0.01)

    await asyncio.gather(*(calling() for _ in range(4)))
    await client.close()
    await garbage.stop()
    return garbage.connections / seconds, garbage.shortest_gap()


async def run(quick: bool) -> None:
    rounds, down = (1, 3.0) if quick else (5, 6.0)
    params = {"rounds": rounds, "down_s": down}
    reconnects, placements = [], []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="rgb", dir="/tmp") as directory:
            reconnects.append(await reconnect_round(Path(directory), down))
            placements.append(await placement_round(Path(directory), down))
    emit("reconnect_s_max", max(reconnects), "s", params)
    emit("reconnect_s_median", sorted(reconnects)[rounds // 2], "s", params)
    emit("back_in_placement_s_max", max(placements), "s", params)
    emit("back_in_placement_s_median", sorted(placements)[rounds // 2], "s", params)
    seconds = 3.0 if quick else 20.0
    for preface, kind in ((True, "preface_then_garbage"), (False, "garbage_in_handshake")):
        with tempfile.TemporaryDirectory(prefix="rgb", dir="/tmp") as directory:
            rate, gap = await garbage_round(Path(directory), preface, seconds)
        garbage_params = {"garbage": kind, "seconds": seconds, "callers": 4}
        emit("garbage_connections_per_s", rate, "1/s", garbage_params)
        if gap != float("inf"):  # one connection only: no gap to show
            emit("garbage_shortest_gap_s", gap, "s", garbage_params)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    args = parser.parse_args()
    import structlog

    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())  # stdout is for JSON
    asyncio.run(run(args.quick))


if __name__ == "__main__":
    main()
