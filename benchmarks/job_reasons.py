"""Benchmark: registrations' pace with the job reasons' writes on and off, and the writes' share
of the REST budget (docs/github.md, "Why a job waits, on GitHub").

GitHub registers an app's runners at about 3 a second: the emulator throttles its JIT route to
180 a minute, counted over ``--window`` seconds (10: 30 a window; the daemon's
``registration_pace_window`` is set to match). The daemon's engine, wired as ``rungar serve``
wires it (:class:`Engine` + :class:`RunLoop`, :class:`ScaleSetGitHub` over HTTP with a personal
access token, ``SqliteStore``, the system clock), serves one scale set on a fake provider with
room for every runner, whose runners never take their jobs: every job waits, so with
``job_reasons`` on each run (ten jobs) is owed a commit status, as many as the share lets
through.

Each mode (off, then on) runs in a fresh emulator (its own throttle and REST budget) for
``--seconds``, with more jobs queued than the pace can register. From the emulator's records:

* ``registrations_per_s``: registrations a second once the throttle's first window is over,
  per mode, with the p50 and p95 of the per-second counts (one sample a second, at least 20);
* ``registrations_per_s_ratio``: on over off (target ≥ 0.95: the writes never delay a
  registration);
* ``rest_writes_share``: the REST calls of the job reasons (run reads, check runs, commit
  statuses, cancels) over the hourly budget (target ≤ 0.05, ``rest_share``), with the most in
  any minute (target ≤ a tenth of the share, ``burst_share``).

Usage: ``python benchmarks/job_reasons.py [--quick]``. ``--quick`` runs each mode 27 s over a
5-second window (22 samples), the full run 45 s over 10 s (35 samples).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PER_MINUTE = 180.0  # GitHub's registrations a minute, per app
RATE_LIMIT = 5000  # a personal access token's hourly REST budget
WRITES = ("R8", "R9", "R10", "R11", "R12")  # run read, check runs, statuses, cancel
LABEL = "reasons-bench"
RUNS, JOBS_PER_RUN = 1000, 10  # the jobs' workflow runs: one status for each run's jobs


def emit(metric: str, value: float | None, unit: str, params: Mapping[str, Any]) -> None:
    shown = None if value is None else round(value, 4)
    record = {"bench": "job_reasons", "metric": metric, "value": shown, "unit": unit}
    print(json.dumps({**record, "params": dict(params)}), flush=True)


def scale_sets_yaml(jobs: int, reasons: bool) -> str:
    text = f"""\
version: 1
providers:
  - name: pool
    type: fake
scale_sets:
  - name: bench
    labels: [{LABEL}]
    max_runners: {jobs}
    providers: [pool]
"""
    if reasons:
        text += "job_reasons: {enabled: true, after: 2s, update_every: 5s}\n"
    return text


def nearest_rank(ordered: Sequence[float], pct: float) -> float:
    return ordered[max(0, math.ceil(pct * len(ordered) / 100) - 1)]


def pace(registered: Sequence[float], start: float, end: float) -> dict[str, float]:
    """Registrations a second over [start, end), and the p50 and p95 of each whole second's
    count (tested in tests/unit/test_bench_job_reasons.py)."""
    seconds = int(end - start)
    counts = [0.0] * seconds
    for at in registered:
        second = int(at - start)
        if start <= at and 0 <= second < seconds:
            counts[second] += 1
    ordered = sorted(counts)
    return {
        "per_s": sum(counts) / seconds if seconds else 0.0,
        "p50": nearest_rank(ordered, 50) if ordered else 0.0,
        "p95": nearest_rank(ordered, 95) if ordered else 0.0,
        "samples": float(seconds),
    }


def most_in_window(times: Sequence[float], window: float) -> int:
    """The most of ``times`` within any ``window`` seconds."""
    ordered = sorted(times)
    most, first = 0, 0
    for last, at in enumerate(ordered):
        while at - ordered[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most


async def run_emulator(window: float) -> None:
    """The emulator in a process of its own, spoken to by lines (``polled``, ``queue N``,
    ``records``)."""
    from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator, JobSpec
    from rungar.testing.line_child import read_commands

    options = EmulatorOptions(
        long_poll_seconds=50.0,
        session_idle_ttl=600.0,
        assignment_timeout=3600.0,
        jit_rate_per_minute=PER_MINUTE,
        jit_rate_window=window,
        rate_limit=RATE_LIMIT,
    )
    async with GitHubEmulator(options) as emu:
        state = emu.state
        print(f"ready {emu.org_url}", flush=True)
        async for command in read_commands():
            words = command.split()
            if not words or words[0] == "quit":
                break
            if words[0] == "polled":
                ready = bool(state.scale_sets) and all(
                    r.polled and state.live_session(r.id) is not None
                    for r in state.scale_sets.values()
                )
                answer: Any = {"polled": ready, "now": state.clock.now()}
            elif words[0] == "queue":
                for n in range(int(words[1])):
                    run_id = RUNS + n // JOBS_PER_RUN
                    state.queue_job(JobSpec(labels=(LABEL,), duration=3600, run_id=run_id))
                answer = {"now": state.clock.now()}
            else:  # records
                answer = {
                    "now": state.clock.now(),
                    "registered": sorted(r.created_at for r in state.runners.values()),
                    "writes": [r["at"] for r in state.requests if r["route"] in WRITES],
                    "statuses": len(state.checks.statuses),
                }
            print(json.dumps(answer), flush=True)


async def one_mode(reasons: bool, seconds: float, window: float, jobs: int) -> dict[str, Any]:
    import structlog

    from rungar.clock import SystemClock
    from rungar.config.loader import load_scale_sets
    from rungar.daemon.runloop import RunLoop
    from rungar.engine.engine import Engine
    from rungar.engine.report.events import EventLog
    from rungar.engine.report.metrics import Metrics
    from rungar.github.auth import PatAuth
    from rungar.github.registrations import RegistrationQueue
    from rungar.github.service import ScaleSetGitHub
    from rungar.logs import configure
    from rungar.store.sqlite import SqliteStore
    from rungar.testing.fake_provider import FakeProvider
    from rungar.testing.line_child import Child

    folder = Path(tempfile.mkdtemp(prefix="rungar-reasons-bench-"))
    log = open(folder / "rungar.log", "w")  # noqa: SIM115 - closed below
    emulator = Child(__file__, "--role", "emulator", "--window", str(window))
    try:
        configure("info", "json")
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=log))
        logging.getLogger("httpx").setLevel(logging.WARNING)  # stdout carries JSON lines only
        org_url = (await emulator.read()).split()[1]
        (folder / "scale_sets.yaml").write_text(scale_sets_yaml(jobs, reasons))
        config = load_scale_sets(folder / "scale_sets.yaml")
        clock = SystemClock()
        store = SqliteStore(folder / "state.db")
        github = ScaleSetGitHub(org_url, PatAuth("emulator-pat"), clock)
        provider = FakeProvider("pool", vcpus=2.0 * jobs, memory_bytes=2 * 1024**3 * jobs)
        engine = Engine(
            config,
            {"pool": provider},
            github,
            clock=clock,
            store=store,
            events=EventLog(clock, folder / "events.jsonl"),
            metrics=Metrics(),
            installation="rungar-reasons-bench",
            registrations=RegistrationQueue(clock, window=window),
        )
        runloop = RunLoop.of(engine)
        await runloop.start()
        deadline = time.monotonic() + 30
        while not (await emulator.ask("polled"))["polled"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the listener never polled")
            await asyncio.sleep(0.05)
        started = float((await emulator.ask(f"queue {jobs}"))["now"])
        await asyncio.sleep(seconds)
        records = await emulator.ask("records")
        await runloop.stop()
        await github.aclose()
        store.close()
    finally:
        emulator.stop()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
    # The throttle's first window lets a burst through; the pace is what follows it.
    found: dict[str, Any] = pace(records["registered"], started + window, float(records["now"]))
    found["registered"] = len(records["registered"])
    found["writes"] = [float(at) for at in records["writes"]]
    found["statuses"] = int(records["statuses"])
    return found


async def run(seconds: float, window: float, jobs: int) -> int:
    off = await one_mode(False, seconds, window, jobs)
    on = await one_mode(True, seconds, window, jobs)
    params = {"limit_per_minute": PER_MINUTE, "window_s": window, "seconds": seconds, "jobs": jobs}
    for mode, found in (("off", off), ("on", on)):
        emit(
            "registrations_per_s",
            found["per_s"],
            "1/s",
            {
                **params,
                "job_reasons": mode,
                "p50": found["p50"],
                "p95": found["p95"],
                "samples": int(found["samples"]),
                "registered": found["registered"],
            },
        )
    ratio = on["per_s"] / off["per_s"] if off["per_s"] else None
    emit("registrations_per_s_ratio", ratio, "ratio", {**params, "target": 0.95})
    hourly = RATE_LIMIT * 5 // 100
    writes = on["writes"]
    emit(
        "rest_writes_share",
        len(writes) / RATE_LIMIT,
        "ratio",
        {
            **params,
            "target": 0.05,
            "rest_writes": len(writes),
            "commit_statuses": on["statuses"],
            "most_in_a_minute": most_in_window(writes, 60.0),
            "minute_target": math.ceil(hourly * 10 / 100),
            "rate_limit": RATE_LIMIT,
            "writes_with_reasons_off": len(off["writes"]),
        },
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="27 s a mode over a 5 s window")
    parser.add_argument("--window", type=float, default=0, help="seconds the limit counts (10)")
    parser.add_argument("--seconds", type=float, default=0, help="each mode's run (45 s)")
    parser.add_argument("--jobs", type=int, default=0, help="jobs queued (300)")
    parser.add_argument("--role", choices=("emulator",), default="")
    args = parser.parse_args()
    window = args.window or (5.0 if args.quick else 10.0)
    if args.role == "emulator":
        asyncio.run(run_emulator(window))
        return 0
    seconds = args.seconds or (27.0 if args.quick else 45.0)
    return asyncio.run(run(seconds, window, args.jobs or 300))


if __name__ == "__main__":
    sys.exit(main())
