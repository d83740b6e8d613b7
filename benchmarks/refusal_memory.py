"""Benchmark: how much the daemon's memory grows while a provider refuses every Create with
200 KB texts.

The real daemon (``rungar serve``) and the GitHub emulator, as the end-to-end tests run them
(tests/e2e/daemon_world.py), with one provider: the hostile kit's ``huge_texts`` scenario
(``rungar.testing.hostile_provider``), which refuses every Create ``FULL`` with a 200 KB
``resource`` and a 200 KB message full of control characters. Twenty jobs wait, and refused
creates are tried again after 10 ms, so the refusals come as fast as the daemon places.

Each daemon's resident memory (``VmRSS`` from /proc) is read after a warm-up of 300 refusals
(the memory a daemon takes as it starts and meets its first answers) and again after 1,000
more: what a long-running daemon gains per 1,000 refusals. A daemon's growth depends on where
its allocations happened to fall, so five daemons are measured, each fresh, side by side (they
wait on each other's answers more than on the CPU); the figures are the median and the largest
growth per 1,000 refusals (``rss_growth_mib_per_1000_median``, ``_max``), then the largest
resident size and events file at the end. ``--quick``: two daemons, 100 refusals, then 300.

Usage: ``python benchmarks/refusal_memory.py [--quick] [--daemons N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rungar.testing.fake_provider import GIB  # noqa: E402
from rungar.testing.hostile_provider import HostileProvider  # noqa: E402
from tests.e2e.daemon_world import DaemonWorld  # noqa: E402

JOBS = 20
MIB = 1024 * 1024
DEADLINE = 900.0  # seconds for one daemon's refusals, however busy the machine


def emit(metric: str, value: float, unit: str, params: dict[str, Any]) -> None:
    record = {"bench": "refusal_memory", "metric": metric, "value": round(value, 3), "unit": unit}
    print(json.dumps({**record, "params": params}), flush=True)


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "backoff_first": "10ms", "backoff_max": "10ms"},
        "providers": [
            {"name": "b", "type": "runnerd", "runner": {"vcpus": 1, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {"name": "linux", "labels": ["linux"], "max_runners": JOBS, "providers": ["b"]},
        ],
    }


def resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def refusals_reach(hostile: HostileProvider, count: int) -> None:
    end = time.monotonic() + DEADLINE
    while hostile.huge_refusals < count:
        if time.monotonic() > end:
            raise TimeoutError(f"{hostile.huge_refusals} refusals of {count} in {DEADLINE} s")
        await asyncio.sleep(0.05)


@dataclass(frozen=True)
class Measured:
    before: int  # VmRSS after the warm-up, bytes
    after: int  # and after the refusals counted
    refusals: int  # counted between the two readings (at least the number asked for)
    events_file: int  # bytes, at the end

    @property
    def growth_mib_per_1000(self) -> float:
        return (self.after - self.before) / MIB * 1000 / self.refusals


async def one_daemon(warm_up: int, refusals: int) -> Measured:
    root = Path(tempfile.mkdtemp(prefix="rg-memory-", dir="/tmp"))
    hostile = HostileProvider("b", scenarios={"huge_texts"}, vcpus=64, memory_bytes=128 * GIB)
    world = DaemonWorld(root, {"b": hostile})
    try:
        await world.start(fleet())
        assert world.daemon is not None
        pid = world.daemon.pid
        for i in range(JOBS):
            await world.queue_job(labels=["linux"], name=f"job-{i}", duration=10.0)
        await refusals_reach(hostile, warm_up)
        before, counted = resident_bytes(pid), hostile.huge_refusals
        await refusals_reach(hostile, counted + refusals)
        after, counted = resident_bytes(pid), hostile.huge_refusals - counted
        events = (root / "state" / "events.jsonl").stat().st_size
    finally:
        await world.stop()
        shutil.rmtree(root, ignore_errors=True)
    return Measured(before, after, counted, events)


async def run(quick: bool, daemons: int) -> None:
    warm_up, refusals = (100, 300) if quick else (300, 1_000)
    runs = await asyncio.gather(*(one_daemon(warm_up, refusals) for _ in range(daemons)))
    growths = [r.growth_mib_per_1000 for r in runs]
    params = {
        "daemons": daemons,
        "warm_up": warm_up,
        "refusals": refusals,
        "text_bytes": 200 * 1024,
        "each": [round(g, 1) for g in growths],
    }
    emit("rss_growth_mib_per_1000_median", statistics.median(growths), "MiB", params)
    emit("rss_growth_mib_per_1000_max", max(growths), "MiB", params)
    emit("rss_after_mib_max", max(r.after for r in runs) / MIB, "MiB", params)
    emit("events_file_mib_max", max(r.events_file for r in runs) / MIB, "MiB", params)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="two daemons, 100 refusals, then 300")
    parser.add_argument("--daemons", type=int, default=0, help="daemons measured (default 5)")
    args = parser.parse_args()
    import structlog

    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())  # stdout is for JSON
    asyncio.run(run(args.quick, args.daemons or (2 if args.quick else 5)))


if __name__ == "__main__":
    main()
