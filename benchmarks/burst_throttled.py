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

``--apps N`` spreads the registrations over N GitHub Apps of one organisation (``github.apps``),
each App installation throttled on its own to ``--limit``, with ``--low`` and ``--high`` N times
as many by default. It adds, from the emulator's request log (each JIT call's time, App
installation and answer):

* ``app_registrations_per_minute`` and ``app_pace_ratio`` for each App, counted from its own
  first registration after its own first 429's pause (target: each ≥ 0.95 of ``--limit``);
* ``apps_rate_ratio``: the N Apps' ``registrations_per_minute`` over one App's, measured by
  the same script with ``--apps 1`` run beside it at the same time (target ≥ 1.9 for two),
  whose lines are printed too (``params.apps`` 1).

Usage: ``python benchmarks/burst_throttled.py [--quick] [--apps N]``, or ``python
benchmarks/burst.py --throttled [--quick] [--apps N]``. The full run is GitHub's throttle as it
is: 180 a minute over a sliding minute, 100 s. ``--quick`` keeps the same pushback in 20 s: 900
a minute counted over 10 s (``--window``; the daemon's ``registration_pace_window`` is set to
match), so the first 429's pause is at most 10 s instead of a minute and about 300 JIT calls are
made, as in the full run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LIMIT = 180
QUICK_LIMIT, QUICK_WINDOW = 900.0, 10.0
LOW, HIGH = "low", "high"


def app_id(n: int) -> str:
    """The n-th App's client id (from 1); its installation is n."""
    return f"Iv1.burst{n}"


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


def figures_by_app(
    calls: list[tuple[float, str, int]], end: float, limit: float
) -> dict[str, dict[str, float | None]]:
    """Each caller's (App installation's) registrations a minute and their share of
    ``limit``, from every JIT call as (time, caller, status), oldest first: counted from the
    caller's first registration after its own first 429's pause (tested in
    tests/unit/test_bench_burst_throttled.py)."""
    found: dict[str, dict[str, float | None]] = {}
    for caller in sorted({c for _, c, _ in calls}):
        mine = [(t, status) for t, c, status in calls if c == caller]
        refused = next((t for t, status in mine if status == 429), None)
        taken = [t for t, status in mine if status in (200, 201)]
        resumed = None
        if refused is not None:
            resumed = next((t for t in taken if t > refused + 1.0), None)
        per_minute = None
        if resumed is not None and end > resumed:
            per_minute = sum(1 for t in taken if t >= resumed) / (end - resumed) * 60
        found[caller] = {
            "registrations_per_minute": per_minute,
            "pace_ratio": per_minute / limit if per_minute is not None else None,
            "registered": len(taken),
        }
    return found


async def run_emulator(limit: float, window: float, apps: int, keys: str) -> None:
    """The emulator in a process of its own (``--role emulator``), so the daemon's process CPU
    is the daemon's alone; spoken to by lines (``polled``, ``queue N LABEL``, ``refused``,
    ``records``). With ``apps`` above 1 it knows that many Apps, their public keys in the
    folder ``keys`` (``N.pub``), each with an installation of its own."""
    from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator, JobSpec
    from rungar.testing.line_child import read_commands

    more: dict[str, Any] = {}
    if apps > 1:
        more["apps"] = {
            app_id(n): (Path(keys) / f"{n}.pub").read_text() for n in range(1, apps + 1)
        }
        more["installations"] = {n: "octo-org" for n in range(1, apps + 1)}
    options = EmulatorOptions(
        long_poll_seconds=50.0,
        session_idle_ttl=600.0,
        assignment_timeout=3600.0,
        jit_rate_per_minute=limit,
        jit_rate_window=window,
        **more,
    )
    async with GitHubEmulator(options) as emu:
        state = emu.state
        print(f"ready {emu.org_url}", flush=True)
        async for command in read_commands():
            words = command.split()
            if not words or words[0] == "quit":
                break
            throttle = state.faults.throttles.get("A13")
            if words[0] == "polled":
                ready = len(state.scale_sets) >= 2 and all(
                    r.polled and state.live_session(r.id) is not None
                    for r in state.scale_sets.values()
                )
                answer: Any = {"polled": ready, "now": state.clock.now()}
            elif words[0] == "queue":
                for _ in range(int(words[1])):
                    state.queue_job(JobSpec(labels=("self-hosted", words[2]), duration=3600))
                answer = {"now": state.clock.now()}
            elif words[0] == "refused":
                answer = {"refused": throttle.refused if throttle else 0}
            else:  # records
                names = {r.id: r.name for r in state.scale_sets.values()}
                answer = {
                    "now": state.clock.now(),
                    "registered": sorted(
                        (r.created_at, names.get(r.scale_set_id, ""))
                        for r in state.runners.values()
                    ),
                    "jit_calls": sum(1 for r in state.requests if r["route"] == "A13"),
                    "refused": throttle.refused if throttle else 0,
                    "first_refused_at": (throttle.first_refused_at or None) if throttle else None,
                    # every JIT call: (time, App installation, status)
                    "calls": [
                        (
                            r["at"],
                            state.tokens.caller_of(
                                r["headers"].get("authorization", "").partition(" ")[2]
                            ),
                            r["status"],
                        )
                        for r in state.requests
                        if r["route"] == "A13"
                    ],
                }
            print(json.dumps(answer), flush=True)


def write_keys(folder: Path, apps: int) -> dict[int, str]:
    """A key pair for each App: the public keys written to ``folder`` for the emulator, the
    private keys returned for the daemon."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    private = {}
    for n in range(1, apps + 1):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private[n] = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        (folder / f"{n}.pub").write_bytes(public)
    return private


async def run(
    seconds: float, low: int, high: int, limit: float, window: float, apps: int = 1
) -> dict[str, float | None]:
    """One throttled burst; its lines printed, its figures returned."""
    import structlog

    from rungar.clock import SystemClock
    from rungar.config.loader import load_scale_sets
    from rungar.daemon.runloop import RunLoop
    from rungar.engine.engine import Engine
    from rungar.engine.report.events import EventLog
    from rungar.engine.report.metrics import Metrics
    from rungar.github.auth import AppAuth, Auth, PatAuth
    from rungar.github.registrations import RegistrationQueue
    from rungar.github.service import ScaleSetGitHub
    from rungar.logs import configure
    from rungar.store.sqlite import SqliteStore
    from rungar.testing.fake_provider import FakeProvider
    from rungar.testing.line_child import Child, cpu_seconds

    folder = Path(tempfile.mkdtemp(prefix="rungar-throttled-"))
    log = open(folder / "rungar.log", "w")  # noqa: SIM115 - closed below
    keys = write_keys(folder, apps) if apps > 1 else {}
    emulator = Child(
        __file__,
        *("--role", "emulator", "--limit", str(limit), "--window", str(window)),
        *("--apps", str(apps), "--keys", str(folder)),
    )
    try:
        configure("info", "json")
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=log))
        logging.getLogger("httpx").setLevel(logging.WARNING)  # stdout carries JSON lines only
        org_url = (await emulator.read()).split()[1]
        (folder / "scale_sets.yaml").write_text(scale_sets_yaml(low, high))
        config = load_scale_sets(folder / "scale_sets.yaml")
        clock = SystemClock()
        store = SqliteStore(folder / "state.db")
        # The daemon's own client, as rungar serve builds it (the environment's proxy, if any).
        auths: list[Auth] = [AppAuth(app_id(n), n, keys[n]) for n in sorted(keys)]
        auths = auths or [PatAuth("emulator-pat")]
        github = ScaleSetGitHub(org_url, auths[0], clock, more_apps=auths[1:])
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
            registrations=RegistrationQueue(
                clock, window=window, apps=[app_id(n) for n in sorted(keys)] or [""]
            ),
        )
        runloop = RunLoop.of(engine)
        await runloop.start()
        deadline = time.monotonic() + 30
        while not (await emulator.ask("polled"))["polled"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the listeners never polled")
            await asyncio.sleep(0.05)
        cpu = {"daemon": cpu_seconds(os.getpid()), "emulator": cpu_seconds(emulator.process.pid)}
        wall = time.monotonic()
        await emulator.ask(f"queue {low} throttled-low")
        deadline = time.monotonic() + 30
        while (await emulator.ask("refused"))["refused"] == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
        await asyncio.sleep(2.0)  # the rest of low waits in the queue now
        await emulator.ask(f"queue {high} throttled-high")
        pace_seen = engine.registrations.view()
        await asyncio.sleep(max(0.0, seconds - (time.monotonic() - wall)))
        records = await emulator.ask("records")
        wall = time.monotonic() - wall
        used = {
            "daemon": cpu_seconds(os.getpid()) - cpu["daemon"],
            "emulator": cpu_seconds(emulator.process.pid) - cpu["emulator"],
        }
        registered = [(float(t), str(who)) for t, who in records["registered"]]
        jit_calls, refused = int(records["jit_calls"]), int(records["refused"])
        found = figures(
            registered, jit_calls, refused, records["first_refused_at"], records["now"], limit
        )
        calls = [(float(t), str(c), int(status)) for t, c, status in records["calls"]]
        by_app = figures_by_app(calls, records["now"], limit)
        await runloop.stop()
        await engine.registrations.aclose()
        await github.aclose()
        store.close()
    finally:
        emulator.stop()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
    params = {
        "limit_per_minute": limit,
        "window_s": window,
        "low": low,
        "high": high,
        "seconds": seconds,
        **({"apps": apps} if apps > 1 else {}),
    }
    emit("registrations_per_minute", found["registrations_per_minute"], "1/min", params)
    total = found["registrations_per_minute"]
    emit("pace_ratio", total / (limit * apps) if total is not None else None, "ratio", params)
    if apps > 1:
        for caller, mine in by_app.items():
            at = {**params, "app": caller, "registered": mine["registered"]}
            emit("app_registrations_per_minute", mine["registrations_per_minute"], "1/min", at)
            emit("app_pace_ratio", mine["pace_ratio"], "ratio", at)
    emit(
        "throttled_share_after_first",
        found["throttled_share_after_first"],
        "ratio",
        {**params, "jit_calls": jit_calls, "throttled": refused},
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
    emit(
        "daemon_cpu_share",
        used["daemon"] / wall,
        "cores",
        {
            **params,
            "target": 0.02,
            "wall_s": round(wall, 1),
            "cpu_s_by_process": {k: round(v, 2) for k, v in used.items()},
            "registered": len(registered),
        },
    )
    return found


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
    parser.add_argument(
        "--apps",
        type=int,
        default=1,
        help="GitHub Apps to spread the registrations over, each throttled to --limit; above "
        "1, the one-App run goes beside it as the baseline of apps_rate_ratio",
    )
    parser.add_argument("--role", choices=("emulator", "baseline"), default="")
    parser.add_argument("--keys", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    limit = args.limit or (QUICK_LIMIT if args.quick else LIMIT)
    window = args.window or (QUICK_WINDOW if args.quick else 60.0)
    apps = max(1, args.apps)
    if args.role == "emulator":
        asyncio.run(run_emulator(limit, window, apps, args.keys))
        return 0
    seconds = args.seconds or (20.0 if args.quick else 100.0)
    low = args.low or (400 if args.quick else 300) * apps
    high = args.high or int(limit * apps / (9 if args.quick else 3))
    if apps == 1 or args.role == "baseline":
        asyncio.run(run(seconds, low, high, limit, window, apps))
        return 0
    return with_baseline(args, seconds, low, high, limit, window, apps)


def with_baseline(
    args: argparse.Namespace,
    seconds: float,
    low: int,
    high: int,
    limit: float,
    window: float,
    apps: int,
) -> int:
    """The run of ``apps`` Apps, and beside it, at the same time, one App's (the same script,
    ``--apps 1``, in a process of its own): both runs' lines, then ``apps_rate_ratio``."""
    command = [sys.executable, __file__, "--role", "baseline", "--apps", "1"]
    command += ["--limit", str(limit), "--window", str(window), "--seconds", str(seconds)]
    command += ["--low", str(low // apps), "--high", str(high // apps)]
    baseline = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    found = asyncio.run(run(seconds, low, high, limit, window, apps))
    out, _ = baseline.communicate()
    one = None
    for line in out.splitlines():
        print(line, flush=True)
        record = json.loads(line)
        if record.get("metric") == "registrations_per_minute":
            one = record.get("value")
    mine = found.get("registrations_per_minute")
    ratio = mine / one if isinstance(mine, float) and isinstance(one, float) and one else None
    params = {"apps": apps, "limit_per_minute": limit, "window_s": window, "seconds": seconds}
    emit("apps_rate_ratio", ratio, "ratio", {**params, "one_app_per_minute": one})
    return baseline.returncode


if __name__ == "__main__":
    sys.exit(main())
