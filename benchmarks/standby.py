"""Benchmark: how long a standby daemon takes to take over from the active one.

Two ``rungar serve`` processes of one installation (their own state directories, one
configuration) run against the GitHub emulator and the same loopback providers, as the
end-to-end test tests/e2e/test_daemon_standby.py runs them. During a burst of jobs the active
one is stopped, with SIGKILL or SIGTERM; the figure is the time from the signal until the
standby reports itself active. Every round also checks that every job was served, no runner was
created twice and no machine was left behind.

The emulator frees a session it no longer sees polled after ``session_ttl_s`` of real time (GitHub's
own delay is about a minute), so a SIGKILL take-over is that delay plus at most ``standby_retry``
and the adoption pass. ``takeover_ratio`` divides the worst take-over by 2 × ``reconcile_interval``
(5 s here, its least), the bound docs/operating.md "Running a standby" sets.

Usage: ``python benchmarks/standby.py [--quick]`` (three rounds of each stop; ``--quick``: one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e.test_daemon_standby import (  # noqa: E402
    CLOCK_FACTOR,
    SESSION_TTL,
    fleet,
    kill_the_active_one_during_a_burst,
    make_pair,
)

RECONCILE_INTERVAL = 5.0
JOBS = 6


def emit(metric: str, value: float, unit: str, params: dict[str, Any]) -> None:
    record = {"bench": "standby", "metric": metric, "value": round(value, 3), "unit": unit}
    print(json.dumps({**record, "params": params}), flush=True)


async def one_round(clean: bool) -> float:
    async for world, peer in make_pair(["linux"], max_runners=8):
        # The scenario prints its own progress for the test's -s output: kept off stdout here.
        with contextlib.redirect_stdout(io.StringIO()):
            return await kill_the_active_one_during_a_burst(
                world, peer, ["linux"], jobs=JOBS, sweep=False, clean=clean
            )
    raise AssertionError("no pair was made")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 1 if args.quick else 3
    timing = fleet(["linux"], 8)["timing"]
    params: dict[str, Any] = {
        "rounds": rounds,
        "jobs": JOBS,
        "session_ttl_s": SESSION_TTL / CLOCK_FACTOR,
        "standby_retry": timing["standby_retry"],
        "reconcile_interval": timing["reconcile_interval"],
    }
    worst = 0.0
    for clean, signal in ((False, "sigkill"), (True, "sigterm")):
        times = [await one_round(clean) for _ in range(rounds)]
        worst = max(worst, *times)
        emit(
            f"takeover_{signal}_s", max(times), "s", {**params, "median": statistics.median(times)}
        )
    emit("takeover_ratio", worst / (2 * RECONCILE_INTERVAL), "ratio", params)


if __name__ == "__main__":
    asyncio.run(main())
