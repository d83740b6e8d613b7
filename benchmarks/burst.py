"""Benchmark: a burst of jobs assigned at once, through the real daemon engine.

Each burst size runs in a fresh process (so its peak RSS is its own) that wires the daemon as
``rungar serve`` does: :class:`Engine` + :class:`RunLoop`, :class:`ScaleSetGitHub` over HTTP,
``SqliteStore`` and the JSONL event log in a temporary folder, structlog at info level to a
file, and the system clock. Around it, each in a process of its own:

* the GitHub emulator (one scale set's jobs are queued on it in one go, all matching one scale
  set whose ``max_runners`` equals the burst);
* five fake providers served over gRPC on unix sockets: ``full`` refuses FULL always, ``slow``
  answers every call after 50 ms, ``a``, ``b`` and ``c`` answer at once. The four that take
  runners have limits (``max_runners``) that hold 1.25 × the burst between them, ``a`` one
  small enough to be reached, and room of their own for twice their limit, so a limit that
  Rungar overshot would show as machines rather than as refusals.

It measures the seconds from queueing until every runner is created, creates/s, GitHub calls
per runner created (``ScaleSetGitHub.counter``; also split by the emulator's route names, so
message-queue polls and acks can be told apart from REST calls), peak RSS of the daemon's
process, and whether any limit was exceeded: Rungar's own counts are sampled every 5 ms while
the burst runs, and each provider records the most machines it ever held.

Usage: ``python benchmarks/burst.py [--quick]`` (500 and 2,000 jobs; quick: 300).
``--throttled`` runs :mod:`burst_throttled` instead: a GitHub that registers 180 runners a
minute, two scale sets of different priority; ``--throttled --apps 2`` spreads the registrations
over two GitHub Apps, each throttled on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rungar.github.timing import GitHubTiming
from rungar.testing.line_child import Child, cpu_seconds, rss_mib_now

SCALE_SET = "burst"
LABEL = "rungar-burst"
RUNNER = {"vcpus": 2, "memory": "4GiB"}
RUNNER_VCPUS = 2
RUNNER_MEMORY = 4 * 1024**3
SLOW_LATENCY = 0.05
SAMPLE_EVERY = 0.005
# The emulator's route names that are message-queue traffic, not REST.
MQ_ROUTES = frozenset({"MQ_GET", "MQ_DELETE"})


def emit(metric: str, value: float | None, unit: str, params: Mapping[str, Any]) -> None:
    shown = None if value is None else round(value, 4)
    record = {"bench": "burst", "metric": metric, "value": shown, "unit": unit}
    print(json.dumps({**record, "params": dict(params)}), flush=True)


# --- the fleet: pure helpers (tested in tests/unit/test_bench_burst.py) -----------------------


@dataclass(frozen=True, slots=True)
class ProviderPlan:
    name: str
    max_runners: int  # 0: no limit of Rungar's own
    room: int  # runners the fake has room for
    latency: float = 0.0
    refuse_full: bool = False


def fleet_plan(jobs: int) -> tuple[ProviderPlan, ...]:
    """Five providers for a burst of ``jobs``: one always full, one slow, three quick."""
    a = math.ceil(0.2 * jobs)
    slow = math.ceil(0.25 * jobs)
    b = c = math.ceil(0.4 * jobs)
    return (
        ProviderPlan("full", 0, room=2 * jobs, refuse_full=True),
        ProviderPlan("slow", slow, room=2 * slow, latency=SLOW_LATENCY),
        ProviderPlan("a", a, room=2 * a),
        ProviderPlan("b", b, room=2 * b),
        ProviderPlan("c", c, room=2 * c),
    )


def scale_sets_yaml(jobs: int, plans: tuple[ProviderPlan, ...], socket_dir: Path) -> str:
    """The scale_sets.yaml the daemon loads: one scale set spread over every provider."""
    lines = ["version: 1", "providers:"]
    for plan in plans:
        lines += [
            f"  - name: {plan.name}",
            "    type: fake",
            f'    address: "unix://{socket_dir / plan.name}.sock"',
            *([f"    max_runners: {plan.max_runners}"] if plan.max_runners else []),
            f"    runner: {{ vcpus: {RUNNER['vcpus']}, memory: {RUNNER['memory']} }}",
        ]
    lines += [
        "scale_sets:",
        f"  - name: {SCALE_SET}",
        f"    labels: [{LABEL}]",
        f"    max_runners: {jobs}",
        "    placement: spread",
        f"    providers: [{', '.join(p.name for p in plans)}]",
    ]
    return "\n".join(lines) + "\n"


@dataclass
class LimitWatch:
    """Most ever counted against each limit; a limit of 0 is none."""

    limits: dict[str, int]  # "provider:NAME" or "scale_set:NAME" -> limit
    peaks: dict[str, int] = field(default_factory=dict)
    samples: int = 0

    def observe(self, counts: Mapping[str, int]) -> None:
        self.samples += 1
        for key, count in counts.items():
            if count > self.peaks.get(key, 0):
                self.peaks[key] = count

    def exceeded(self) -> list[str]:
        return [
            f"{key}: {self.peaks.get(key, 0)} > {limit}"
            for key, limit in sorted(self.limits.items())
            if limit > 0 and self.peaks.get(key, 0) > limit
        ]


def calls_per_runner(calls: int, runners: int) -> float | None:
    return calls / runners if runners else None


# --- the provider process --------------------------------------------------------------------


def quiet_structlog(file: TextIO) -> None:
    import logging

    import structlog

    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(file=file),
    )


async def read_commands(profile: str = "") -> Any:
    """Lines from stdin, one at a time, without blocking the loop; '' at EOF.

    ``profile on`` and ``profile off`` are answered here: they start and stop a cProfile of
    this process's CPU (written to ``profile`` when it stops; nothing without ``--profile``).
    """
    loop = asyncio.get_running_loop()
    profiler = cProfile.Profile(time.process_time) if profile else None
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        command = line.strip()
        if command in ("profile on", "profile off"):
            if profiler is not None and command == "profile on":
                profiler.enable()
            elif profiler is not None:
                profiler.disable()
                profiler.dump_stats(profile)
            print("{}", flush=True)
            continue
        yield command
        if not line:
            return


async def run_provider(plan: ProviderPlan, address: str, profile: str) -> None:
    from rungar.model.machine import Created, CreateRequest, Refusal, RefusalKind
    from rungar.rpc.server import serve
    from rungar.testing.fake_provider import FakeProvider

    class PeakFake(FakeProvider):
        """The fake, remembering the most machines it ever held at once."""

        peak = 0
        refused = 0

        async def create(self, request: CreateRequest) -> Created | Refusal:
            answer = await super().create(request)
            self.refused += isinstance(answer, Refusal)
            self.peak = max(self.peak, self.live)
            return answer

    quiet_structlog(open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the process
    fake = PeakFake(
        plan.name, vcpus=RUNNER_VCPUS * plan.room, memory_bytes=RUNNER_MEMORY * plan.room
    )
    fake.latency = plan.latency
    if plan.refuse_full:
        fake.refuse(
            RefusalKind.FULL, always=True, resource="memory", message="no memory left (scripted)"
        )
    server = await serve(fake, address)
    print("ready", flush=True)
    async for command in read_commands(profile):
        if command == "stats":
            stats = {
                "peak": fake.peak,
                "machines": len(fake.machines),
                "created": fake.created,
                "refused": fake.refused,
                "calls": dict(fake.calls),
            }
            print(json.dumps(stats), flush=True)
        elif command in ("", "quit"):
            break
    await server.stop(0)


# --- the emulator process --------------------------------------------------------------------


async def run_emulator(profile: str) -> None:
    from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator, JobSpec

    options = EmulatorOptions(
        long_poll_seconds=50.0,  # GitHub's own long poll
        session_idle_ttl=600.0,
        assignment_timeout=3600.0,  # no job is withdrawn while the burst is measured
    )
    async with GitHubEmulator(options) as emu:
        state = emu.state
        print(f"ready {emu.org_url}", flush=True)
        async for command in read_commands(profile):
            words = command.split()
            if not words or words[0] == "quit":
                break
            if words[0] == "polled":
                ready = any(
                    r.name == words[1] and r.polled and state.live_session(r.id) is not None
                    for r in state.scale_sets.values()
                )
                print(json.dumps({"polled": ready}), flush=True)
            elif words[0] == "queue":
                started = time.perf_counter()
                # All jobs are queued before the dispatcher runs once, as GitHub assigns a
                # burst: the emulator's per-job dispatch re-sorts every job each time, a
                # quadratic cost of the emulator that is not the daemon's to measure.
                # why the ignore[method-assign] below: on purpose: see the comment above
                state.dispatch = lambda: None  # type: ignore[method-assign]
                try:
                    for _ in range(int(words[1])):
                        state.queue_job(JobSpec(labels=("self-hosted", LABEL), duration=600))
                finally:
                    del state.dispatch
                state.dispatch()
                took = time.perf_counter() - started
                assigned = sum(1 for j in state.jobs.values() if j.scale_set_id)
                print(json.dumps({"seconds": took, "assigned": assigned}), flush=True)
            elif words[0] == "stats":
                routes = Counter(str(r["route"]) for r in state.requests)
                stats = {"registrations": len(state.runners), "routes": dict(routes)}
                print(json.dumps(stats), flush=True)


# --- the daemon process: one burst, measured -------------------------------------------------


async def wait_until(check: Any, seconds: float, what: str) -> None:
    end = time.monotonic() + seconds
    while not await check():
        if time.monotonic() > end:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@dataclass
class Measured:
    """What one burst showed; turned into JSON lines by :func:`report`."""

    jobs: int
    params: dict[str, Any]
    elapsed: float | None  # None: not every runner was created in time
    created: int
    machines: int
    demand_seen: float | None
    first_runner: float | None
    emulator_queue: float
    calls_total: int
    calls_in_burst: int
    mq_calls: int
    routes: dict[str, int]
    by_code: dict[str, int]
    refused: dict[str, int]
    cpu: dict[str, float]
    peak_rss_mib: float
    rss_before_mib: float
    exceeded: list[str]
    samples: int
    peaks: dict[str, int]


def report(m: Measured) -> list[tuple[str, float | None, str, dict[str, Any]]]:
    """The JSON lines of one burst: (metric, value, unit, params)."""
    p = m.params
    per_runner = m.cpu.get("daemon", 0.0) * 1000 / m.created if m.created else None
    return [
        ("seconds_to_all_created", m.elapsed, "s", p),
        ("creates_per_s", m.created / m.elapsed if m.elapsed else None, "1/s", p),
        ("runners_created", m.created, "runners", p),
        ("machines_on_providers", m.machines, "machines", p),
        ("seconds_to_demand_seen", m.demand_seen, "s", p),
        ("seconds_to_first_runner", m.first_runner, "s", p),
        ("emulator_queue_seconds", m.emulator_queue, "s", p),
        ("daemon_cpu_ms_per_runner", per_runner, "ms", {**p, "cpu_s_by_process": m.cpu}),
        ("github_calls_per_runner", calls_per_runner(m.calls_total, m.created), "calls", p),
        (
            "github_calls_per_runner_in_burst",
            calls_per_runner(m.calls_in_burst, m.created),
            "calls",
            p,
        ),
        (
            "github_calls_per_runner_without_mq",
            calls_per_runner(m.calls_total - m.mq_calls, m.created),
            "calls",
            p,
        ),
        (
            "github_calls_total",
            m.calls_total,
            "calls",
            {**p, "routes": m.routes, "by_code": m.by_code},
        ),
        ("provider_refusals", sum(m.refused.values()), "calls", {**p, "by_provider": m.refused}),
        (
            "peak_rss",
            m.peak_rss_mib,
            "MiB",
            {**p, "rss_before_burst_mib": round(m.rss_before_mib, 1)},
        ),
        (
            "limit_exceeded",
            1 if m.exceeded else 0,
            "bool",
            {**p, "samples": m.samples, "exceeded": m.exceeded, "peaks": m.peaks},
        ),
    ]


class Burst:
    """The daemon's engine wired as ``rungar serve`` wires it, and its helper processes."""

    def __init__(
        self, jobs: int, folder: Path, log: TextIO, in_flight: int, profile: str = ""
    ) -> None:
        self.jobs = jobs
        self.in_flight = in_flight  # registrations sent and unanswered, at most (0: no bound)
        self.folder = folder
        self.log = log
        self.plans = fleet_plan(jobs)
        self.children: list[Child] = []
        self.profile = profile
        self.emulator = self._child("emulator", "--role", "emulator")
        self.providers = {
            plan.name: self._child(
                f"provider-{plan.name}",
                "--role",
                "provider",
                "--name",
                plan.name,
                "--jobs",
                str(jobs),
                "--socket-dir",
                str(folder),
            )
            for plan in self.plans
        }

    def _child(self, who: str, *args: str) -> Child:
        """A helper process; with a profile, it profiles itself into ``<profile>.<who>``."""
        if self.profile:
            args = (*args, "--profile", f"{self.profile}.{who}")
        child = Child(__file__, *args, stop_wait=10)
        self.children.append(child)
        return child

    async def start(self) -> None:
        import structlog

        from rungar.clock import SystemClock
        from rungar.config.loader import load_scale_sets
        from rungar.daemon.daemon import StoreCursors
        from rungar.daemon.providers import make_provider
        from rungar.daemon.runloop import RunLoop
        from rungar.daemon.settings import DaemonSettings
        from rungar.engine.engine import Engine
        from rungar.engine.report.events import EventLog
        from rungar.engine.report.metrics import Metrics
        from rungar.github.auth import PatAuth
        from rungar.github.http import http_client
        from rungar.github.registrations import RegistrationQueue
        from rungar.github.service import ScaleSetGitHub
        from rungar.logs import configure
        from rungar.store.sqlite import SqliteStore

        url = (await self.emulator.read()).split()[1]
        for child in self.providers.values():
            await child.read()
        configure("info", "json")  # the daemon's logging, into a file rather than stderr
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=self.log))
        (self.folder / "scale_sets.yaml").write_text(
            scale_sets_yaml(self.jobs, self.plans, self.folder)
        )
        config = load_scale_sets(self.folder / "scale_sets.yaml")
        clock = SystemClock()
        self.store = SqliteStore(self.folder / "state.db")
        cursors = StoreCursors(self.store)
        self.github = ScaleSetGitHub(
            url, PatAuth("emulator-pat"), clock, cursors=cursors, http=http_client()
        )
        plugins: list[Any] = []
        self.grpc = {p.name: make_provider(p, clock, plugins) for p in config.providers}
        self.max_parallel = int(DaemonSettings.model_fields["max_parallel_creates"].default)
        self.engine = Engine(
            config,
            self.grpc,
            self.github,
            clock=clock,
            store=self.store,
            events=EventLog(clock, self.folder / "events.jsonl"),
            metrics=Metrics(),
            installation="rungar-burst",
            max_parallel_creates=self.max_parallel,
            registrations=RegistrationQueue(clock, most_in_flight=self.in_flight),
        )
        limits = {f"provider:{p.name}": p.max_runners for p in config.providers}
        limits[f"scale_set:{SCALE_SET}"] = self.jobs
        self.watch = LimitWatch(limits)
        self.runloop = RunLoop.of(self.engine)
        await self.runloop.start()
        await wait_until(self._listening, 30, "the listener's first poll")
        await wait_until(self._listed, 30, "the first reconcile pass")
        await asyncio.sleep(0.2)  # let that pass finish its bookkeeping

    async def _listening(self) -> bool:
        return bool((await self.emulator.ask(f"polled {SCALE_SET}"))["polled"])

    async def _listed(self) -> bool:
        for child in self.providers.values():
            if (await child.ask("stats"))["calls"].get("list", 0) < 1:
                return False
        return True

    def sample(self, *, records: bool) -> None:
        """Rungar's own counts against its limits; ``records`` adds a walk of every runner."""
        fleet = self.engine.fleet
        counts = {f"provider:{p}": fleet.provider_count(p) for p in fleet.providers}
        counts[f"scale_set:{SCALE_SET}"] = fleet.runners_of(SCALE_SET) + fleet.creating_of(
            SCALE_SET
        )
        if records:
            for p, n in Counter(r.provider for r in self.engine.runners).items():
                counts[f"provider:{p}"] = max(counts.get(f"provider:{p}", 0), n)
            live = len(self.engine.runners.live(SCALE_SET))
            counts[f"scale_set:{SCALE_SET}"] = max(counts[f"scale_set:{SCALE_SET}"], live)
        self.watch.observe(counts)

    async def measure(self) -> Measured:
        engine, state = self.engine, self.engine.sets[SCALE_SET]
        profile = self.profile
        pids = {"daemon": os.getpid(), "emulator": self.emulator.process.pid}
        pids.update({f"provider {n}": c.process.pid for n, c in self.providers.items()})
        rss_before = rss_mib_now()
        calls_before = self.github.counter.total
        profiler = cProfile.Profile(time.process_time) if profile else None  # CPU, not wall
        if profile:
            for child in self.children:
                await child.ask("profile on")
        cpu_before = {who: cpu_seconds(pid) for who, pid in pids.items()}
        if profiler is not None:
            profiler.enable()
        started = time.perf_counter()
        queued = await self.emulator.ask(f"queue {self.jobs}")
        demand_seen = first_runner = elapsed = None
        deadline = started + max(60.0, self.jobs * 0.1)
        tick = 0
        while time.perf_counter() < deadline:
            tick += 1
            self.sample(records=tick % 10 == 0)
            now = time.perf_counter() - started
            if demand_seen is None and state.assigned >= self.jobs:
                demand_seen = now
            if first_runner is None and len(engine.runners):
                first_runner = now
            if (
                len(engine.runners) >= self.jobs
                and len(engine.runners.live(SCALE_SET)) >= self.jobs
            ):
                elapsed = now
                break
            await asyncio.sleep(SAMPLE_EVERY)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        cpu = {who: round(cpu_seconds(pid) - cpu_before[who], 2) for who, pid in pids.items()}
        calls_in_burst = self.github.counter.total - calls_before
        if profile:
            for child in self.children:
                await child.ask("profile off")
        for _ in range(100):  # a surplus create still in flight would show now
            self.sample(records=True)
            await asyncio.sleep(SAMPLE_EVERY)
        surplus = engine.runners.creating.count(state.config.name)
        created = len(engine.runners.live(SCALE_SET))
        await self.stop_daemon()

        gh = await self.emulator.ask("stats")
        stats = {name: await child.ask("stats") for name, child in self.providers.items()}
        machines = sum(int(s["machines"]) for s in stats.values())
        truth = {f"provider:{name}": int(s["peak"]) for name, s in stats.items()}
        truth[f"scale_set:{SCALE_SET}"] = machines
        self.watch.observe(truth)  # the providers' own peaks: the limits as the fleet saw them
        exceeded = self.watch.exceeded()
        if gh["registrations"] > self.jobs or surplus:
            exceeded.append(f"{gh['registrations']} registrations, {surplus} creates in flight")
        routes: dict[str, int] = gh["routes"]
        return Measured(
            jobs=self.jobs,
            params={
                "jobs": self.jobs,
                "providers": len(self.plans),
                "max_parallel_creates": self.max_parallel,
            },
            elapsed=elapsed,
            created=created,
            machines=machines,
            demand_seen=demand_seen,
            first_runner=first_runner,
            emulator_queue=float(queued["seconds"]),
            calls_total=self.github.counter.total,
            calls_in_burst=calls_in_burst,
            mq_calls=sum(n for route, n in routes.items() if route in MQ_ROUTES),
            routes=routes,
            by_code=self.github.counter.snapshot(),
            refused={name: int(s["refused"]) for name, s in stats.items() if s["refused"]},
            cpu=cpu,
            peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            rss_before_mib=rss_before,
            exceeded=exceeded,
            samples=self.watch.samples,
            peaks=dict(self.watch.peaks),
        )

    async def stop_daemon(self) -> None:
        await self.runloop.stop()
        await self.github.aclose()
        for provider in self.grpc.values():
            close = getattr(provider, "close", None)
            if close is not None:
                await close()
        self.store.close()

    def stop_children(self) -> None:
        for child in self.children:
            child.stop()


async def run_burst(jobs: int, profile: str, in_flight: int) -> int:
    folder = Path(tempfile.mkdtemp(prefix="rungar-burst-"))
    try:
        with open(folder / "rungar.log", "w") as log:
            burst = Burst(jobs, folder, log, in_flight, profile)
            try:
                await burst.start()
                measured = await burst.measure()
            finally:
                burst.stop_children()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for metric, value, unit, params in report(measured):
        emit(metric, value, unit, params)
    return 0 if measured.elapsed is not None and not measured.exceeded else 1


# --- entry point -----------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="300 jobs")
    parser.add_argument("--jobs", type=int, nargs="*", help="burst sizes (default 500 2000)")
    parser.add_argument(
        "--profile",
        default="",
        help="cProfile the burst into this file (PATH.JOBS), the emulator's and each provider's "
        "CPU beside it (PATH.JOBS.emulator, PATH.JOBS.provider-NAME)",
    )
    parser.add_argument(
        "--registrations-in-flight",
        type=int,
        default=GitHubTiming().registrations_in_flight,
        help="registrations sent and unanswered, at most (0: no bound; the daemon's default)",
    )
    parser.add_argument("--role", choices=("burst", "provider", "emulator"), default="")
    parser.add_argument("--name", default="")
    parser.add_argument("--socket-dir", default="")
    parser.add_argument(
        "--throttled",
        action="store_true",
        help="the throttled run instead: GitHub registering 180 a minute (burst_throttled.py)",
    )
    parser.add_argument(
        "--apps",
        type=int,
        default=1,
        help="with --throttled: GitHub Apps the registrations are spread over, each throttled "
        "on its own (burst_throttled.py --apps)",
    )
    args = parser.parse_args()
    if args.throttled:
        throttled = [sys.executable, str(Path(__file__).with_name("burst_throttled.py"))]
        throttled += ["--quick"] if args.quick else []
        throttled += ["--apps", str(args.apps)] if args.apps > 1 else []
        return subprocess.run(throttled, check=False).returncode
    if args.role == "provider":
        plan = next(p for p in fleet_plan(args.jobs[0]) if p.name == args.name)
        address = f"unix://{Path(args.socket_dir) / plan.name}.sock"
        asyncio.run(run_provider(plan, address, args.profile))
        return 0
    if args.role == "emulator":
        asyncio.run(run_emulator(args.profile))
        return 0
    if args.role == "burst":
        return asyncio.run(run_burst(args.jobs[0], args.profile, args.registrations_in_flight))
    sizes = args.jobs or ([300] if args.quick else [500, 2000])
    failed = 0
    for jobs in sizes:
        command = [sys.executable, __file__, "--role", "burst", "--jobs", str(jobs)]
        command += ["--registrations-in-flight", str(args.registrations_in_flight)]
        if args.profile:
            command += ["--profile", f"{args.profile}.{jobs}"]
        failed += subprocess.run(command, check=False).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
