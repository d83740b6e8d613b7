"""Benchmark: the daemon in steady state at fleet scale (hundreds of scale sets, thousands of
runners), with jobs finishing and arriving.

The daemon runs in this process, wired as ``rungar serve`` wires it (Engine, RunLoop, the real
GitHub client over HTTP, GrpcProviders, SQLite state, the JSONL event log, structlog at info
level into a file). Around it, each in a process of its own:

* the GitHub emulator with a *driver* that plays GitHub's and the runners' side at this scale:
  it keeps ``runners`` jobs in the system (queued, assigned or running), spread over the scale
  sets; a runner registered by the daemon connects a second later and takes its scale set's
  oldest assigned job; a job runs for its duration (uniform between half and one and a half
  times ``--job-seconds``) and completes, which ends its ephemeral runner, and a new job
  arrives in its place. The emulator's own bookkeeping walks every job and runner on each poll
  and tick, fine for tests and far too slow for 10,000 runners; the driver replaces its
  dispatcher, ticker and statistics with indexed equivalents that say the same;
* every loopback provider (a FakeProvider with room for all its runners, served over gRPC on
  a unix socket), all served from one process.

Phases: *ramp* (every scale set listening, then the jobs queued, until the daemon tracks as many
runners as there are jobs), *steady* (``--seconds``: jobs finish and arrive), *idle*
(``--idle-seconds``: the driver stops completing and queueing, runners keep their jobs).

Figures (JSON lines): daemon CPU and wall time per reconcile pass (each pass timed by wrapping
the pass the run loop calls; its CPU is the process's over the pass, so in *steady* it includes
whatever else the event loop ran meanwhile; *idle* passes are the pass alone), the daemon's CPU
share of one core in *steady* and in *idle*, RSS (peak and at the end), GitHub calls per minute
by route in *steady* (the emulator's request log), GitHub REST calls per runner created and per
pass, provider ``List`` calls per minute, creates per second, daemon CPU per runner created, and
the latency from a job's queueing to a runner's creation for its scale set (p50/p99; the n-th
runner created for a scale set is matched with the n-th job queued for it, the order in which
ephemeral runners take jobs). CPU figures are process CPU seconds (/proc), not wall time.

Usage: ``python benchmarks/scale.py [--quick]`` (200 scale sets, 50 providers, 10,000 runners;
quick: 20, 10, 500 and short phases).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import cProfile
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from rungar.testing.line_child import Child, cpu_seconds, read_commands, rss_mib_now

RUNNER = {"vcpus": 2, "memory": "4GiB"}
PROVIDERS_PER_SCALE_SET = 5
CONNECT_AFTER = 1.0  # seconds from registration until the runner connects
DRIVER_TICK = 0.25
MQ_ROUTES = frozenset({"MQ_GET", "MQ_DELETE"})


@dataclass(frozen=True)
class Size:
    scale_sets: int
    providers: int
    runners: int
    job_seconds: float
    steady: float
    idle: float
    reconcile_interval: float


FULL = Size(200, 50, 10_000, 300.0, 120.0, 65.0, 30.0)
QUICK = Size(20, 10, 500, 20.0, 10.0, 10.5, 5.0)


def progress(message: str) -> None:
    print(f"scale: {message}", file=sys.stderr, flush=True)


def emit(metric: str, value: float | None, unit: str, params: Mapping[str, Any]) -> None:
    shown = None if value is None else round(value, 4)
    record = {"bench": "scale", "metric": metric, "value": shown, "unit": unit}
    print(json.dumps({**record, "params": dict(params)}), flush=True)


def scale_set_name(i: int) -> str:
    return f"s{i:03d}"


def label_of(i: int) -> str:
    return f"rungar-scale-{i:03d}"


def providers_of(i: int, providers: int) -> list[str]:
    """Each scale set spreads over a few providers; together they cover every provider."""
    count = min(PROVIDERS_PER_SCALE_SET, providers)
    return [f"p{(i + k) % providers:02d}" for k in range(count)]


def scale_sets_yaml(size: Size, socket_dir: Path) -> str:
    lines = ["version: 1", "timing:", f"  reconcile_interval: {size.reconcile_interval}"]
    lines.append("providers:")
    for p in range(size.providers):
        lines += [
            f"  - name: p{p:02d}",
            "    type: fake",
            f'    address: "unix://{socket_dir}/p{p:02d}.sock"',
            f"    runner: {{ vcpus: {RUNNER['vcpus']}, memory: {RUNNER['memory']} }}",
        ]
    lines.append("scale_sets:")
    per_set = size.runners // size.scale_sets
    for i in range(size.scale_sets):
        lines += [
            f"  - name: {scale_set_name(i)}",
            f"    labels: [{label_of(i)}]",
            f"    max_runners: {4 * per_set + 10}",
            "    placement: spread",
            f"    providers: [{', '.join(providers_of(i, size.providers))}]",
        ]
    return "\n".join(lines) + "\n"


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pass_to_pass(passes: list[Pass]) -> float | None:
    """CPU share over whole reconcile intervals: from the first pass's start to the last's."""
    if len(passes) < 2:
        return None
    first, last = passes[0], passes[-1]
    return (last.cpu_at_start - first.cpu_at_start) / (last.began - first.began)


def match_latencies(
    queued: Mapping[str, list[float]],
    created: Mapping[str, list[float]],
    since: float,
    until: float,
) -> list[float]:
    """Per scale set, the n-th job queued is served by the n-th runner created; the latency of
    each job queued in [since, until) whose runner was created."""
    out = []
    for name, times in queued.items():
        made = sorted(created.get(name, []))
        for n, at in enumerate(sorted(times)):
            if since <= at < until and n < len(made):
                out.append(max(0.0, made[n] - at))
    return out


# --- helper processes ------------------------------------------------------------------------


def quiet_structlog(file: TextIO) -> None:
    import logging

    import structlog

    structlog.configure(
        processors=[structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(file=file),
    )


async def run_providers(count: int, runners: int, socket_dir: str) -> None:
    from rungar.rpc.server import serve
    from rungar.testing.fake_provider import FakeProvider

    quiet_structlog(open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the process
    room = 4 * runners // count + 50
    fakes = [
        FakeProvider(f"p{p:02d}", vcpus=RUNNER["vcpus"] * room, memory_bytes=4 * 1024**3 * room)  # type: ignore[operator]
        for p in range(count)
    ]
    servers = [await serve(f, f"unix://{socket_dir}/{f.name}.sock") for f in fakes]
    print("ready", flush=True)
    async for command in read_commands():
        if command == "stats":
            calls: Counter[str] = Counter()
            for fake in fakes:
                calls.update(fake.calls)
            machines = sum(len(f.machines) for f in fakes)
            print(json.dumps({"calls": dict(calls), "machines": machines}), flush=True)
        elif command in ("", "quit"):
            break
    for server in servers:
        await server.stop(0)


class Driver:
    """GitHub's and the runners' side at fleet scale, with indexes the emulator lacks."""

    def __init__(self, state: Any, size: Size) -> None:
        from rungar.testing.github_emulator.model import JobState

        self.state = state
        self.size = size
        self.JobState = JobState
        self.rng = random.Random(7)
        self.by_label: dict[str, Any] = {}
        self.pending: deque[Any] = deque()  # queued, not yet assigned
        self.assigned: dict[int, deque[Any]] = {}  # scale set id -> assigned jobs, oldest first
        self.running: list[tuple[float, str]] = []  # (ends at, job id), kept sorted
        self.new_runners: deque[tuple[float, Any]] = deque()
        self.waiting_runners: dict[int, deque[Any]] = {}
        self.counts: dict[int, Counter[str]] = {}
        self.names: set[str] = set()
        self.queued_at: dict[str, list[float]] = {}  # scale set name -> wall times
        self.active = 0
        self.churn = False
        self.completed = 0
        self._patch()

    def _patch(self) -> None:
        import uuid

        from rungar.testing.github_emulator.model import Runner

        state = self.state

        def register_runner(scale_set_id: int, name: str) -> Any:
            """As the emulator's, with the name looked up in a set rather than a walk."""
            if name in self.names:
                return None
            record = state.scale_sets[scale_set_id]
            runner = Runner(
                state.next_id(),
                name,
                scale_set_id,
                "rc_" + uuid.uuid4().hex,
                state.clock.now(),
                labels=tuple(record.labels),
            )
            state.runners[runner.id] = runner
            state.runners_created += 1
            self.names.add(name)
            self.new_runners.append((time.monotonic(), runner))
            return runner

        remove = state.remove_runner

        def remove_runner(runner_id: int) -> str:
            runner = state.runners.get(runner_id)
            answer = remove(runner_id)
            if answer == "removed" and runner is not None:
                self.names.discard(runner.name)
                if runner.online:
                    self.counter(runner.scale_set_id)["online"] -= 1
            return str(answer)

        state.register_runner = register_runner
        state.remove_runner = remove_runner
        state.dispatch = self.dispatch
        state.tick = self.dispatch  # nothing is withdrawn: assignment_timeout is long
        state.statistics = self.statistics

    def counter(self, scale_set_id: int) -> Counter[str]:
        return self.counts.setdefault(scale_set_id, Counter())

    def statistics(self, scale_set_id: int) -> dict[str, int]:
        c = self.counter(scale_set_id)
        return {
            "totalAvailableJobs": 0,
            "totalAcquiredJobs": 0,
            "totalAssignedJobs": c["assigned"] + c["running"],
            "totalRunningJobs": c["running"],
            "totalRegisteredRunners": c["online"],
            "totalBusyRunners": c["running"],
            "totalIdleRunners": c["online"] - c["running"],
        }

    def all_polled(self) -> bool:
        records = list(self.state.scale_sets.values())
        return len(records) >= self.size.scale_sets and all(
            r.polled and self.state.live_session(r.id) is not None for r in records
        )

    def queue(self, n: int) -> None:
        from rungar.testing.github_emulator.model import JobSpec

        per = self.size.job_seconds
        for _ in range(n):
            i = self.rng.randrange(self.size.scale_sets)
            duration = self.rng.uniform(0.5 * per, 1.5 * per)
            job = self.state.queue_job(
                JobSpec(labels=("self-hosted", label_of(i)), duration=duration)
            )
            self.pending.append(job)
            self.queued_at.setdefault(scale_set_name(i), []).append(time.time())
            self.active += 1
        self.dispatch()

    def dispatch(self) -> None:
        kept: deque[Any] = deque()
        while self.pending:
            job = self.pending.popleft()
            label = job.spec.labels[1].lower()
            if label not in self.by_label:
                self.by_label = {
                    x.lower(): r for r in self.state.scale_sets.values() for x in r.labels
                }
            record = self.by_label.get(label)
            if record is None or not record.polled or self.state.live_session(record.id) is None:
                kept.append(job)
                continue
            job.scale_set_id = record.id
            job.assigned_at = self.state.clock.now()
            job.state = self.JobState.ASSIGNED
            self.assigned.setdefault(record.id, deque()).append(job)
            self.counter(record.id)["assigned"] += 1
            self.state.emit(record.id, job.event("JobAssigned"))
        self.pending = kept
        self.match()

    def match(self) -> None:
        for scale_set_id, runners in self.waiting_runners.items():
            jobs = self.assigned.get(scale_set_id)
            while runners and jobs:
                runner = runners.popleft()
                if runner.id in self.state.runners:  # not removed meanwhile
                    self.start(runner, jobs.popleft())

    def start(self, runner: Any, job: Any) -> None:
        c = self.counter(runner.scale_set_id)
        c["assigned"] -= 1
        c["running"] += 1
        job.state = self.JobState.RUNNING
        job.runner_id, job.runner_name = runner.id, runner.name
        job.started_at = self.state.clock.now()
        runner.job_id = job.job_id
        self.state.emit(
            runner.scale_set_id, job.event("JobStarted", runnerId=runner.id, runnerName=runner.name)
        )
        bisect.insort(self.running, (time.monotonic() + job.spec.duration, job.job_id))

    def step(self) -> None:
        now = time.monotonic()
        while self.new_runners and now - self.new_runners[0][0] >= CONNECT_AFTER:
            _, runner = self.new_runners.popleft()
            if runner.id not in self.state.runners:
                continue  # removed before it connected
            runner.jit_used = runner.online = True
            self.counter(runner.scale_set_id)["online"] += 1
            self.waiting_runners.setdefault(runner.scale_set_id, deque()).append(runner)
        self.match()
        if not self.churn:
            return
        ended = 0
        while self.running and self.running[0][0] <= now:
            _, job_id = self.running.pop(0)
            job = self.state.jobs.get(job_id)
            if job is None:
                continue
            c = self.counter(job.scale_set_id)
            c["running"] -= 1
            c["online"] -= 1
            runner = self.state.runners.get(job.runner_id)
            if runner is not None:
                self.names.discard(runner.name)
            self.state.complete(job, "succeeded")  # its ephemeral runner is gone with it
            self.state.jobs.pop(job_id, None)  # keep the emulator's job table bounded
            ended += 1
        self.completed += ended
        self.active -= ended
        if self.active < self.size.runners:
            self.queue(self.size.runners - self.active)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(DRIVER_TICK)
            self.step()


async def run_emulator(size: Size) -> None:
    from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator

    options = EmulatorOptions(
        long_poll_seconds=50.0,
        session_idle_ttl=600.0,
        assignment_timeout=36_000.0,
        rate_limit=10**9,  # the calls are counted and compared with the budget instead
    )
    async with GitHubEmulator(options) as emu:
        driver = Driver(emu.state, size)
        task = asyncio.create_task(driver.run())
        print(f"ready {emu.org_url}", flush=True)
        async for command in read_commands():
            words = command.split()
            if not words or words[0] == "quit":
                break
            if words[0] == "polled":
                print(json.dumps({"polled": driver.all_polled()}), flush=True)
            elif words[0] == "fill":
                driver.queue(size.runners - driver.active)
                print(json.dumps({"active": driver.active}), flush=True)
            elif words[0] == "churn":
                driver.churn = words[1] == "on"
                print(json.dumps({"churn": driver.churn}), flush=True)
            elif words[0] == "stats":
                routes = Counter(str(r["route"]) for r in emu.state.requests)
                stats = {
                    "routes": dict(routes),
                    "completed": driver.completed,
                    "active": driver.active,
                    "queued_at": driver.queued_at if len(words) > 1 else {},
                }
                print(json.dumps(stats), flush=True)
        task.cancel()


@dataclass
class Pass:
    began: float
    cpu: float
    wall: float
    runners: int
    cpu_at_start: float  # the process's CPU clock when the pass began


# --- the daemon --------------------------------------------------------------------------------


async def run_scale(size: Size, params: dict[str, Any], profile: str = "") -> int:
    import structlog

    from rungar.clock import SystemClock
    from rungar.config.loader import load_scale_sets
    from rungar.daemon.daemon import StoreCursors
    from rungar.daemon.providers import make_provider
    from rungar.daemon.runloop import RunLoop
    from rungar.engine.engine import Engine
    from rungar.engine.reconcile.reconciler import Reconciler
    from rungar.engine.report.events import EventLog
    from rungar.engine.report.metrics import Metrics
    from rungar.github.auth import PatAuth
    from rungar.github.http import http_client
    from rungar.github.service import ScaleSetGitHub
    from rungar.logs import configure
    from rungar.store.sqlite import SqliteStore

    folder = Path(tempfile.mkdtemp(prefix="rungar-scale-"))
    children: list[Child] = []
    log = open(folder / "rungar.log", "w")  # noqa: SIM115 - closed below
    passes: list[Pass] = []
    # The pass the run loop calls, timed: the reconciler's own method is replaced.
    real_reconcile = Reconciler.reconcile

    profiler = cProfile.Profile(time.process_time) if profile else None

    async def timed_reconcile(reconciler: Reconciler) -> None:
        began, cpu = time.monotonic(), time.process_time()
        if profiler is not None:
            profiler.enable()
        try:
            await real_reconcile(reconciler)
        finally:
            if profiler is not None:
                profiler.disable()
            passes.append(
                Pass(
                    began,
                    time.process_time() - cpu,
                    time.monotonic() - began,
                    len(reconciler.ctx.runners),
                    cpu_at_start=cpu,
                )
            )

    setattr(Reconciler, "reconcile", timed_reconcile)  # noqa: B010 - timed for this run
    try:
        emulator = Child(__file__, "--role", "emulator", *size_args(size))
        providers = Child(
            __file__, "--role", "providers", *size_args(size), "--socket-dir", str(folder)
        )
        children += [emulator, providers]
        url = (await emulator.read()).split()[1]
        await providers.read()
        configure("info", "json")
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=log))
        (folder / "scale_sets.yaml").write_text(scale_sets_yaml(size, folder))
        config = load_scale_sets(folder / "scale_sets.yaml")
        clock = SystemClock()
        store = SqliteStore(folder / "state.db")
        github = ScaleSetGitHub(
            url, PatAuth("emulator-pat"), clock, cursors=StoreCursors(store), http=http_client()
        )
        grpc = {p.name: make_provider(p, clock, []) for p in config.providers}
        engine = Engine(
            config,
            grpc,
            github,
            clock=clock,
            store=store,
            events=EventLog(clock, folder / "events.jsonl"),
            metrics=Metrics(),
            installation="rungar-scale",
        )
        created_at: dict[str, list[float]] = {}
        real_record = engine.events.record

        def record(kind: str, name: str, action: str, **kw: Any) -> Any:
            if kind == "runner" and action == "created":
                created_at.setdefault(str(kw.get("scale_set", "")), []).append(time.time())
            return real_record(kind, name, action, **kw)

        engine.events.record = record  # type: ignore[method-assign]
        runloop = RunLoop.of(engine)
        me = os.getpid()
        started = time.monotonic()
        await runloop.start()
        while not (await emulator.ask("polled"))["polled"]:
            if time.monotonic() - started > 300:
                raise RuntimeError("not every scale set listened within 300 s")
            await asyncio.sleep(0.5)
            phases = Counter(s.phase for s in engine.sets.values())
            progress(f"waiting for every scale set to listen: {dict(phases)}")
        listening = time.monotonic() - started
        progress(f"{size.scale_sets} scale sets listening after {listening:.1f}s")

        # ramp: every job queued at once; until the daemon tracks a runner for each
        ramp_cpu, ramp_began = cpu_seconds(me), time.monotonic()
        created_before = 0
        await emulator.ask("fill")
        while len(engine.runners) < size.runners:
            if time.monotonic() - ramp_began > 600:
                break
            await asyncio.sleep(0.5)
            if int(time.monotonic() - ramp_began) % 10 == 0:
                progress(f"ramp: {len(engine.runners)} runners")
        ramp_wall = time.monotonic() - ramp_began
        ramp_cpu = cpu_seconds(me) - ramp_cpu
        ramp_runners = len(engine.runners) - created_before

        # steady: jobs finish and arrive
        await emulator.ask("churn on")
        gh0 = await emulator.ask("stats")
        prov0 = await providers.ask("stats")
        created0 = sum(len(v) for v in created_at.values())
        cpu0, wall0, t0 = cpu_seconds(me), time.monotonic(), time.time()
        calls0 = github.counter.total
        await asyncio.sleep(size.steady)
        steady_cpu = cpu_seconds(me) - cpu0
        steady_wall = time.monotonic() - wall0
        t1 = time.time()
        gh1 = await emulator.ask("stats full")
        prov1 = await providers.ask("stats")
        created1 = sum(len(v) for v in created_at.values())
        calls1 = github.counter.total
        steady_passes = [p for p in passes if wall0 <= p.began < wall0 + steady_wall]

        # idle: no job ends or arrives
        await emulator.ask("churn off")
        await asyncio.sleep(2.0)  # the last completions settle
        cpu2, wall2 = cpu_seconds(me), time.monotonic()
        await asyncio.sleep(size.idle)
        idle_cpu = cpu_seconds(me) - cpu2
        idle_wall = time.monotonic() - wall2
        idle_passes = [p for p in passes if wall2 <= p.began < wall2 + idle_wall]
        rss_end = rss_mib_now()
        runners_end = len(engine.runners)

        await runloop.stop()
        await engine.drain_tasks()
        await github.aclose()
        for provider in grpc.values():
            close = getattr(provider, "close", None)
            if close is not None:
                await close()
        store.close()
        if profiler is not None:
            profiler.dump_stats(profile)
    finally:
        setattr(Reconciler, "reconcile", real_reconcile)  # noqa: B010 - as it was
        for child in children:
            child.stop()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)

    minutes = steady_wall / 60
    routes = {
        r: round((gh1["routes"].get(r, 0) - gh0["routes"].get(r, 0)) / minutes, 1)
        for r in sorted(set(gh1["routes"]) | set(gh0["routes"]))
        if gh1["routes"].get(r, 0) - gh0["routes"].get(r, 0)
    }
    rest_steady = sum(v for r, v in routes.items() if r not in MQ_ROUTES) * minutes
    created_steady = created1 - created0
    lists = (prov1["calls"].get("list", 0) - prov0["calls"].get("list", 0)) / minutes
    latencies = match_latencies(gh1["queued_at"], created_at, t0, t1 - 5.0)
    all_passes = steady_passes + idle_passes
    cpu_pass = [p.cpu for p in all_passes]
    p = params
    figures: list[tuple[str, float | None, str, dict[str, Any]]] = [
        ("seconds_to_listen", listening, "s", p),
        ("ramp_seconds", ramp_wall, "s", {**p, "runners": ramp_runners}),
        (
            "ramp_cpu_ms_per_runner",
            1000 * ramp_cpu / ramp_runners if ramp_runners else None,
            "ms",
            p,
        ),
        ("runners_tracked", runners_end, "runners", p),
        ("steady_creates_per_s", created_steady / steady_wall, "1/s", p),
        ("steady_jobs_completed", gh1["completed"] - gh0["completed"], "jobs", p),
        ("steady_cpu_share", steady_cpu / steady_wall, "cores", p),
        (
            "steady_cpu_ms_per_runner_created",
            1000 * steady_cpu / created_steady if created_steady else None,
            "ms",
            p,
        ),
        ("idle_cpu_share", idle_cpu / idle_wall, "cores", {**p, "seconds": round(idle_wall, 1)}),
        (
            "idle_cpu_share_pass_to_pass",
            pass_to_pass(idle_passes),
            "cores",
            {**p, "meaning": "from the first idle pass's start to the last's: whole intervals"},
        ),
        (
            "reconcile_pass_cpu_s_idle",
            max((x.cpu for x in idle_passes), default=None),
            "s",
            {**p, "passes": [round(x.cpu, 3) for x in idle_passes]},
        ),
        (
            "reconcile_pass_cpu_s_p50",
            percentile(cpu_pass, 0.5),
            "s",
            {**p, "passes": len(all_passes), "note": "steady passes include concurrent work"},
        ),
        ("reconcile_pass_cpu_s_max", max(cpu_pass, default=None), "s", p),
        (
            "reconcile_pass_wall_s_p50",
            percentile([x.wall for x in all_passes], 0.5),
            "s",
            {**p, "walls": [round(x.wall, 2) for x in all_passes]},
        ),
        ("peak_rss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "MiB", p),
        ("rss_at_end", rss_end, "MiB", p),
        ("github_calls_per_minute", sum(routes.values()), "1/min", {**p, "routes": routes}),
        (
            "github_rest_calls_per_runner_created",
            rest_steady / created_steady if created_steady else None,
            "calls",
            {**p, "passes": len(steady_passes), "daemon_counted": calls1 - calls0},
        ),
        (
            "github_rest_calls_per_pass_beyond_one_per_runner",
            (rest_steady - created_steady) / len(steady_passes) if steady_passes else None,
            "calls",
            p,
        ),
        ("provider_list_calls_per_minute", lists, "1/min", p),
        (
            "job_to_runner_created_p50",
            percentile(latencies, 0.5),
            "s",
            {**p, "jobs": len(latencies)},
        ),
        ("job_to_runner_created_p99", percentile(latencies, 0.99), "s", p),
    ]
    for metric, value, unit, params_ in figures:
        emit(metric, value, unit, params_)
    return 0 if runners_end >= 0.95 * size.runners else 1


def size_args(size: Size) -> list[str]:
    return [
        "--scale-sets",
        str(size.scale_sets),
        "--providers",
        str(size.providers),
        "--runners",
        str(size.runners),
        "--job-seconds",
        str(size.job_seconds),
        "--seconds",
        str(size.steady),
        "--idle-seconds",
        str(size.idle),
        "--reconcile-interval",
        str(size.reconcile_interval),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="20 scale sets, 500 runners")
    parser.add_argument("--role", choices=("emulator", "providers"), default="")
    parser.add_argument("--socket-dir", default="")
    parser.add_argument("--scale-sets", type=int)
    parser.add_argument("--providers", type=int)
    parser.add_argument("--runners", type=int)
    parser.add_argument("--job-seconds", type=float)
    parser.add_argument("--seconds", type=float, help="length of the steady phase")
    parser.add_argument("--idle-seconds", type=float)
    parser.add_argument("--reconcile-interval", type=float)
    parser.add_argument(
        "--profile", default="", help="cProfile every reconcile pass (CPU time) into this file"
    )
    args = parser.parse_args()
    base = QUICK if args.quick else FULL
    size = Size(
        args.scale_sets or base.scale_sets,
        args.providers or base.providers,
        args.runners or base.runners,
        args.job_seconds or base.job_seconds,
        args.seconds or base.steady,
        args.idle_seconds or base.idle,
        args.reconcile_interval or base.reconcile_interval,
    )
    if args.role == "providers":
        asyncio.run(run_providers(size.providers, size.runners, args.socket_dir))
        return 0
    if args.role == "emulator":
        asyncio.run(run_emulator(size))
        return 0
    params = {
        "scale_sets": size.scale_sets,
        "providers": size.providers,
        "runners": size.runners,
        "job_seconds": size.job_seconds,
        "reconcile_interval": size.reconcile_interval,
    }
    return asyncio.run(run_scale(size, params, args.profile))


if __name__ == "__main__":
    sys.exit(main())
