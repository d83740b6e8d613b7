"""Benchmark: a burst against a GitHub that throttles registrations (``burst.py --throttled``).

GitHub limits how fast an installation registers runners (its JIT-config route answers 429 with
``Retry-After`` past the limit). The emulator throttles its JIT route to ``--limit`` a minute
(180 by default), and the daemon's engine, wired as ``rungar serve`` wires it
(:class:`Engine` + :class:`RunLoop`, :class:`ScaleSetGitHub` over HTTP, ``SqliteStore``, the
system clock), serves two scale sets on one fake provider with room for all:

* ``low`` (priority 0): ``--low`` jobs queued first, more than the first minute can register;
* ``high`` (priority 10): ``--high`` jobs queued a few seconds later, once the throttle has
  answered its first 429 and the rest of ``low`` is waiting.

It measures, from the emulator's own records (each registration's time, every JIT call, the
429s the throttle answered):

* ``registrations_per_minute``: registrations from the first one after the pause the first 429
  asked for until the end of the run, per minute, and its ratio to the limit (target ≥ 0.95);
* ``throttled_share_after_first``: 429 answers after the first, over JIT calls (target ≤ 0.02);
* ``low_registered_among_high``: ``low`` registrations between the first and the last ``high``
  one (target 0: every ``high`` runner is registered before any ``low`` one still waiting),
  with ``high_registered`` (all of them, in the run's time).

Usage: ``python benchmarks/burst_throttled.py [--quick]``, or ``python benchmarks/burst.py
--throttled [--quick]``. The full run is GitHub's throttle as it is: 180 a minute over a
sliding minute, 100 s. ``--quick`` keeps the same pushback in 20 s: 900 a minute counted over
10 s (``--window``; the daemon's ``registration_pace_window`` is set to match), so the first
429's pause is at most 10 s instead of a minute and about 300 JIT calls are made, as in the
full run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LIMIT = 180
QUICK_LIMIT, QUICK_WINDOW = 900.0, 10.0
LOW, HIGH = "low", "high"


def emit(metric: str, value: float | None, unit: str, params: Mapping[str, Any]) -> None:
    shown = None if value is None else round(value, 4)
    record = {"bench": "burst_throttled", "metric": metric, "value": shown, "unit": unit}
    print(json.dumps({**record, "params": dict(params)}), flush=True)


def scale_sets_yaml(low: int, high: int) -> str:
    return f"""\
version: 1
providers:
  - name: pool
    type: fake
scale_sets:
  - name: {LOW}
    labels: [throttled-low]
    max_runners: {low}
    priority: 0
    providers: [pool]
  - name: {HIGH}
    labels: [throttled-high]
    max_runners: {high}
    priority: 10
    providers: [pool]
"""


def figures(
    registered: list[tuple[float, str]],
    jit_calls: int,
    refused: int,
    first_refused_at: float | None,
    end: float,
    limit: float,
) -> dict[str, float | None]:
    """The run's figures from the emulator's records: ``registered`` is (time, scale set) of
    every registration, oldest first (tested in tests/unit/test_bench_burst_throttled.py)."""
    times = [t for t, _ in registered]
    resumed = None
    if first_refused_at is not None:
        resumed = next((t for t in times if t > first_refused_at + 1.0), None)
    paced = [t for t in times if resumed is not None and t >= resumed]
    per_minute = (
        len(paced) / (end - resumed) * 60 if resumed is not None and end > resumed else None
    )
    highs = [i for i, (_, who) in enumerate(registered) if who == HIGH]
    among = (
        sum(1 for _, who in registered[highs[0] : highs[-1] + 1] if who == LOW) if highs else None
    )
    return {
        "registrations_per_minute": per_minute,
        "pace_ratio": per_minute / limit if per_minute is not None else None,
        "throttled_share_after_first": max(0, refused - 1) / jit_calls if jit_calls else None,
        "low_registered_among_high": among,
        "high_registered": len(highs),
    }


async def run(seconds: float, low: int, high: int, limit: float, window: float) -> int:
    import structlog

    from rungar.clock import SystemClock
    from rungar.config.loader import load_scale_sets
    from rungar.daemon.runloop import RunLoop
    from rungar.engine.engine import Engine
    from rungar.engine.report.events import EventLog
    from rungar.engine.report.metrics import Metrics
    from rungar.github.auth import PatAuth
    from rungar.github.http import http_client
    from rungar.github.registrations import RegistrationQueue
    from rungar.github.service import ScaleSetGitHub
    from rungar.logs import configure
    from rungar.store.sqlite import SqliteStore
    from rungar.testing.fake_provider import FakeProvider
    from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator, JobSpec

    folder = Path(tempfile.mkdtemp(prefix="rungar-throttled-"))
    log = open(folder / "rungar.log", "w")  # noqa: SIM115 - closed below
    try:
        configure("info", "json")
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=log))
        logging.getLogger("httpx").setLevel(logging.WARNING)  # stdout carries JSON lines only
        options = EmulatorOptions(
            long_poll_seconds=50.0,
            session_idle_ttl=600.0,
            assignment_timeout=3600.0,
            jit_rate_per_minute=limit,
            jit_rate_window=window,
        )
        async with GitHubEmulator(options) as emu:
            state = emu.state
            (folder / "scale_sets.yaml").write_text(scale_sets_yaml(low, high))
            config = load_scale_sets(folder / "scale_sets.yaml")
            clock = SystemClock()
            store = SqliteStore(folder / "state.db")
            github = ScaleSetGitHub(emu.org_url, PatAuth("emulator-pat"), clock, http=http_client())
            room = low + high
            provider = FakeProvider("pool", vcpus=2.0 * room, memory_bytes=2 * 1024**3 * room)
            engine = Engine(
                config,
                {"pool": provider},
                github,
                clock=clock,
                store=store,
                events=EventLog(clock, folder / "events.jsonl"),
                metrics=Metrics(),
                installation="rungar-throttled",
                registrations=RegistrationQueue(clock, window=window),
            )
            runloop = RunLoop.of(engine)
            await runloop.start()
            deadline = time.monotonic() + 30
            while (
                not all(
                    r.polled and state.live_session(r.id) is not None
                    for r in state.scale_sets.values()
                )
                or len(state.scale_sets) < 2
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError("the listeners never polled")
                await asyncio.sleep(0.05)
            started = state.clock.now()
            for _ in range(low):
                state.queue_job(JobSpec(labels=("self-hosted", "throttled-low"), duration=3600))
            throttle = state.faults.throttles["A13"]
            deadline = time.monotonic() + 30
            while throttle.refused == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(2.0)  # the rest of low waits in the queue now
            for _ in range(high):
                state.queue_job(JobSpec(labels=("self-hosted", "throttled-high"), duration=3600))
            pace_seen = engine.registrations.view()
            await asyncio.sleep(max(0.0, seconds - (state.clock.now() - started)))
            end = state.clock.now()
            names = {r.id: r.name for r in state.scale_sets.values()}
            registered = sorted(
                (r.created_at, names.get(r.scale_set_id, "")) for r in state.runners.values()
            )
            jit_calls = sum(1 for r in state.requests if r["route"] == "A13")
            first_refused = throttle.first_refused_at or None
            found = figures(registered, jit_calls, throttle.refused, first_refused, end, limit)
            await runloop.stop()
            await github.aclose()
            store.close()
    finally:
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
    params = {
        "limit_per_minute": limit,
        "window_s": window,
        "low": low,
        "high": high,
        "seconds": seconds,
    }
    emit("registrations_per_minute", found["registrations_per_minute"], "1/min", params)
    emit("pace_ratio", found["pace_ratio"], "ratio", params)
    emit(
        "throttled_share_after_first",
        found["throttled_share_after_first"],
        "ratio",
        {**params, "jit_calls": jit_calls, "throttled": throttle.refused},
    )
    emit(
        "low_registered_among_high",
        found["low_registered_among_high"],
        "runners",
        {**params, "high_registered": found["high_registered"]},
    )
    emit(
        "pace_learned",
        pace_seen.per_minute,
        "1/min",
        {**params, "sentence": pace_seen.sentence()},
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="20 s, 900 a minute over 10 s")
    parser.add_argument("--limit", type=float, default=0, help="registrations a minute (180)")
    parser.add_argument(
        "--window", type=float, default=0, help="seconds GitHub counts them over (60)"
    )
    parser.add_argument("--seconds", type=float, default=0, help="the run (100 s)")
    parser.add_argument("--low", type=int, default=0, help="default 300 (quick 400)")
    parser.add_argument(
        "--high", type=int, default=0, help="default: 20 s of the pace (quick: 6.7 s of it)"
    )
    args = parser.parse_args()
    limit = args.limit or (QUICK_LIMIT if args.quick else LIMIT)
    window = args.window or (QUICK_WINDOW if args.quick else 60.0)
    seconds = args.seconds or (20.0 if args.quick else 100.0)
    low = args.low or (400 if args.quick else 300)
    high = args.high or int(limit / (9 if args.quick else 3))
    return asyncio.run(run(seconds, low, high, limit, window))


if __name__ == "__main__":
    sys.exit(main())
