"""The demo's story: a realistic burst of jobs through the whole system, watched live.

The hosts start as hosts that have run these workflows before, with a short job history each
(:mod:`rungar.demo.past`). Small jobs arrive in two pushes. The first fills the three hosts one
after another (pack), and AWS takes what every host refuses: their runners have no job yet, so
no host can say when room comes. The second comes once a host's first job has ended: the full
hosts now say when they expect room, and a runner whose room is expected soon waits for a host
rather than go to AWS (``overflow: when_host_is_later``), AWS still below its limit. Large jobs
(priority 10) arrive into the full fleet: a host refusing one holds the small runners off it
until the large runner has its room. One job asks for a runner larger than every host: each
refuses it INVALID, so its run is cancelled with the reason. Jobs that wait say why on their
commit (a commit status). Every job's runner is a real process that allocates the memory the
job asks for. At the end a summary says what happened, from the daemon's own events and
GitHub's (the emulator's) record of every job and of what a developer sees on the commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from rungar.demo.learning import HostLearning, settled_learning
from rungar.demo.on_github import Told, told_on_github
from rungar.demo.past import host_pasts
from rungar.demo.stack import DEFAULT_HOSTS, Stack, StackStopped
from rungar.engine.report.events import Event
from rungar.testing.github_emulator.model import JobSpec, JobState
from rungar.usage.summary import percentile

MIB = 1024 * 1024
SMALL_RUNS = 100  # a small job's workflow run: its repository's, four jobs to a run
LARGE_RUN = 200  # the large jobs: one run, a matrix
HUGE_RUN = 300
CLOCK_FACTOR = 20.0  # GitHub's clock (the emulator's) runs this much faster than real time
# Each scale set's host profile, as examples/demo/scale_sets.yaml gives them.
PROFILE_OF = {"demo-small": "small", "demo-large": "large"}


@dataclass
class Burst:
    small: int = 28
    large: int = 4
    huge: int = 1  # jobs whose runner fits on no provider
    seed: int = 7
    # The hosts start with a share each of an earlier burst of the same jobs (this seed), as
    # hosts that have run them before: they say when room comes back from their first refusal.
    past_seed: int | None = 6
    # The small jobs come in two pushes. The first fills the hosts, and AWS takes what they
    # refuse (none of their runners has a job yet, so no host can say when room comes); the
    # second comes once a host's first job has ended: its room opened, the hosts are tried
    # again, full, and from their running jobs' past durations expect room soon, so a runner
    # waits for a host rather than go to AWS, which is still below its limit.
    first_push: int = 13
    second_push_by: float = 15.0  # real seconds: the second push comes by then at the latest
    large_after: float = 4.0  # real seconds after the second push
    deadline: float = 110.0  # real seconds for every job to finish

    def small_jobs(self, rng: random.Random) -> list[JobSpec]:
        repos = ["octo-org/web", "octo-org/api", "octo-org/docs"]
        jobs = [
            JobSpec(
                labels=("demo-small",),
                repository=rng.choice(repos),
                workflow="ci.yml",
                name=rng.choice(["lint", "unit", "build", "typecheck"]),
                duration=rng.uniform(60, 200),
                memory_bytes=rng.randint(40, 130) * MIB,
                cpu=0.05,
                # Every tenth fails on GitHub, though its runner exits 0 like the others: the
                # hosts record GitHub's conclusion, not the runner's exit status.
                result="failed" if i % 10 == 9 else "succeeded",
            )
            for i in range(self.small)
        ]
        # The jobs of one repository pushed together are one run (one status on its commit).
        return [
            replace(job, run_id=SMALL_RUNS + 10 * repos.index(job.repository) + i // 4)
            for i, job in enumerate(jobs)
        ]

    def large_jobs(self, rng: random.Random) -> list[JobSpec]:
        return [
            JobSpec(
                labels=("demo-large",),
                repository="octo-org/monolith",
                workflow="build.yml",
                name="integration",
                duration=rng.uniform(80, 160),
                memory_bytes=rng.randint(220, 380) * MIB,
                cpu=0.1,
                run_id=LARGE_RUN,
            )
            for _ in range(self.large)
        ]

    def huge_jobs(self) -> list[JobSpec]:
        return [
            JobSpec(
                labels=("demo-huge",),
                repository="octo-org/models",
                workflow="train.yml",
                name="train",
                duration=60,
                memory_bytes=64 * MIB,
                cpu=0.1,
                run_id=HUGE_RUN,
            )
            for _ in range(self.huge)
        ]


@dataclass
class Summary:
    jobs: int = 0
    completed: int = 0
    cancelled: int = 0  # of the completed, by a cancel of their run
    # GitHub's seconds (the emulator's clock), each started job's wait: assigned to its scale
    # set until a runner took it (``rungar usage`` shows waits on Rungar's clock instead)
    waits: list[float] = field(default_factory=list)
    runners_by_provider: Counter[str] = field(default_factory=Counter)
    refusals: Counter[tuple[str, str]] = field(default_factory=Counter)
    holds: list[str] = field(default_factory=list)
    # scale set -> its started jobs' waits, as ``waits``
    waits_by_scale_set: dict[str, list[float]] = field(default_factory=dict)
    held_room_idle: list[float] = field(default_factory=list)  # daemon's seconds, per room taken
    # Runners kept off AWS to wait for a host's expected room (AWS not at its own limit then):
    # the status line of each wait, and where each such scale set's next runner went.
    host_waits: list[tuple[str, float]] = field(default_factory=list)  # (line, room in s)
    after_host_waits: Counter[str] = field(default_factory=Counter)
    learning: list[HostLearning] = field(default_factory=list)  # per runnerd host
    on_github: list[Told] = field(default_factory=list)  # per scale set, what a developer sees
    statuses: int = 0  # commit statuses written
    runs_cancelled: list[int] = field(default_factory=list)  # workflow runs, as GitHub has them
    seconds: float = 0.0  # real seconds the burst took
    clock_factor: float = 1.0  # how much faster the emulator's (GitHub's) clock runs
    stopped: bool = False  # asked to stop (Ctrl-C, SIGTERM) before every job finished

    @property
    def ok(self) -> bool:
        return self.jobs > 0 and self.completed == self.jobs

    def table(self) -> Table:
        table = Table(title="rungar demo: what happened", show_header=False, title_justify="left")
        table.add_column("what", style="bold")
        table.add_column("value")
        table.add_row("jobs run", self.jobs_text())
        if self.waits:
            table.add_row(
                "wait for a runner",
                f"{_percentiles(self.waits)} (GitHub's clock, {self.clock_factor:g}x real time: "
                "from assigned to a scale set until a runner took the job, nearest rank; "
                "rungar usage shows waits on Rungar's clock, beside runner time)",
            )
        table.add_row(
            "runners per provider",
            ", ".join(f"{p} {n}" for p, n in sorted(self.runners_by_provider.items())) or "none",
        )
        table.add_row(
            "refusals",
            ", ".join(
                f"{kind} {resource or '-'}: {n}"
                for (kind, resource), n in sorted(self.refusals.items())
            )
            or "none",
        )
        for name, waits in sorted(self.waits_by_scale_set.items()):
            table.add_row(f"wait, {name}", _percentiles(waits))
        table.add_row("priority holds", self.holds_text())
        table.add_row("waited for a host", self.host_waits_text())
        table.add_row("held room stood empty", self.held_room_text())
        for host in self.learning:
            table.add_row(f"{host.host} learnt", host.text())
        table.add_row("said on GitHub", self.github_text())
        for told in self.on_github:
            table.add_row(f"on GitHub, {told.scale_set}", told.text())
        return table

    def github_text(self) -> str:
        """How many commit statuses were written, and the runs cancelled."""
        text = (
            f"{self.statuses} commit statuses on the waiting runs' commits"
            if self.statuses
            else "nothing: no job waited long enough"
        )
        if self.runs_cancelled:
            runs = ", ".join(str(run) for run in self.runs_cancelled)
            text += f"; run {runs} cancelled: no provider can take its runner"
        return text

    def jobs_text(self) -> str:
        """How many jobs ran, in real time and on GitHub's (the emulator's) faster clock."""
        text = f"{self.completed} of {self.jobs} in {self.seconds:.0f}s real time"
        if self.clock_factor != 1.0:
            text += f" ({_minutes(self.seconds * self.clock_factor)} on GitHub's clock)"
        if self.cancelled:
            text += f"; {self.cancelled} of them cancelled"
        return text

    def held_room_text(self) -> str:
        """How long room opened on a held provider stood empty before its holder took it."""
        if not self.held_room_idle:
            return "no held room was taken"
        ordered = sorted(self.held_room_idle)
        return (
            f"p50 {_rank(ordered, 50):.1f}s, longest {ordered[-1]:.1f}s, over "
            f"{len(ordered)} rooms taken by their holder (the daemon's clock)"
        )

    def host_waits_text(self) -> str:
        """Runners that waited for a host's expected room instead of going to AWS."""
        if not self.host_waits:
            return "no runner waited for a host's expected room instead of going to AWS"
        # The wait furthest ahead says most: a room expected "in 0s" is a job past its time.
        shown = max(self.host_waits, key=lambda wait: wait[1])[0]
        went = ", ".join(f"{p} {n}" for p, n in sorted(self.after_host_waits.items()))
        times = "once" if len(self.host_waits) == 1 else f"{len(self.host_waits)} times"
        return (
            f'{times} instead of going to AWS, as "{shown}"; the runner after each wait '
            f"went to {went or 'no provider before the end'}"
        )

    def holds_text(self) -> str:
        """Each hold once, with how many times it was taken: ``host1 for big (4 times)``."""
        counted = Counter(self.holds)  # keeps the order holds were first taken in
        return (
            "; ".join(hold if n == 1 else f"{hold} ({n} times)" for hold, n in counted.items())
            or "none"
        )


# Fewer waits than this and a p95 is only the largest of them: the longest is shown instead.
P95_SAMPLES = 20


def _percentiles(waits: list[float]) -> str:
    ordered = sorted(waits)
    jobs = f"{len(ordered)} {'job' if len(ordered) == 1 else 'jobs'}"
    if len(ordered) < P95_SAMPLES:
        return f"p50 {_rank(ordered, 50):.0f}s, longest {ordered[-1]:.0f}s of {jobs}"
    return f"p50 {_rank(ordered, 50):.0f}s, p95 {_rank(ordered, 95):.0f}s of {jobs}"


def _minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}m {whole % 60:02d}s" if whole >= 60 else f"{whole}s"


def _rank(ordered: list[float], pct: float) -> float:
    """``rungar usage``'s nearest-rank percentile of values known not to be empty."""
    value = percentile(ordered, pct)
    return 0.0 if value is None else value


def collect(stack: Stack, events: list[Event], started: float) -> Summary:
    assert stack.emulator is not None
    summary = Summary(seconds=time.monotonic() - started, clock_factor=stack.clock_factor)
    jobs = list(stack.emulator.state.jobs.values())
    summary.jobs = len(jobs)
    summary.completed = sum(1 for j in jobs if j.state is JobState.COMPLETED)
    summary.cancelled = sum(1 for j in jobs if j.result == "canceled")
    book = stack.emulator.state.checks
    summary.statuses = len(book.statuses)
    summary.on_github = told_on_github(book.statuses)
    summary.runs_cancelled = [int(run["run_id"]) for run in book.cancelled_runs]
    for job in jobs:
        if job.started_at and job.assigned_at and job.started_at >= job.assigned_at:
            summary.waits.append(job.started_at - job.assigned_at)
            if job.spec.labels:  # the demo's scale sets are named as their label
                waits = summary.waits_by_scale_set.setdefault(job.spec.labels[0], [])
                waits.append(job.started_at - job.assigned_at)
    for event in events:
        if event.kind == "runner" and event.action == "created":
            summary.runners_by_provider[event.provider] += 1
            if "held_room_idle" in event.attributes:
                summary.held_room_idle.append(float(event.attributes["held_room_idle"]))
        elif event.kind == "provider" and event.action in ("full", "failing"):
            kind = str(event.attributes.get("refusal", event.action))
            summary.refusals[(kind.upper(), str(event.attributes.get("resource", "")))] += 1
        elif event.kind == "provider" and event.action == "held":
            summary.holds.append(f"{event.provider} for {event.scale_set}")
    waiting: set[str] = set()  # scale sets whose next runner follows a wait for a host
    for event in events:
        if event.kind == "scale_set" and event.action == "waits_for_host":
            if not event.attributes.get("at_limit"):
                room_in = float(event.attributes.get("room_in", 0.0))
                summary.host_waits.append((event.message, room_in))
                waiting.add(event.scale_set)
        elif event.kind == "runner" and event.action == "created" and event.scale_set in waiting:
            waiting.discard(event.scale_set)
            summary.after_host_waits[event.provider] += 1
    return summary


async def run_demo(
    console: Console,
    *,
    keep: bool = False,
    burst: Burst | None = None,
    live: bool = True,
    stop: asyncio.Event | None = None,
    render: Callable[[dict[str, Any]], str] = lambda document: "",
) -> Summary:
    """Run the burst, then (``keep``) wait; ``stop`` ends either early, and everything the demo
    started is stopped and removed on the way out (a kept folder stays). ``render`` draws the
    daemon's status document for the live view (``rungar demo`` hands it ``rungar status``'s
    own rendering); by default none is drawn."""
    burst = burst or Burst()
    stop = stop or asyncio.Event()
    try:
        return await _run(console, keep, burst, live, stop, render)
    except StackStopped:
        return Summary(stopped=True)


async def _run(
    console: Console,
    keep: bool,
    burst: Burst,
    live: bool,
    stop: asyncio.Event,
    render_status: Callable[[dict[str, Any]], str],
) -> Summary:
    rng = random.Random(burst.seed)
    past = None
    if burst.past_seed is not None:
        earlier = random.Random(burst.past_seed)
        specs = [*burst.small_jobs(earlier), *burst.large_jobs(earlier)]
        past = host_pasts(
            specs, PROFILE_OF, len(DEFAULT_HOSTS), CLOCK_FACTOR, time.time(), burst.past_seed
        )
    # its folder goes at the end
    async with Stack(
        stop_event=stop, dashboards=True, clock_factor=CLOCK_FACTOR, past=past
    ) as stack:
        assert stack.emulator is not None
        console.print(f"[bold]rungar demo[/] on loopback, files in {stack.dir}")
        console.print(
            "GitHub emulator, 3 runnerd hosts (1000M, 800M, 600M), AWS on moto for overflow; "
            f"a clock {stack.clock_factor:g}x faster than real time"
        )
        # soft_wrap: a link longer than the terminal is one line the terminal wraps, still
        # whole when copied or clicked.
        console.print(dashboards_text(stack) + "\n", highlight=False, soft_wrap=True)
        started = time.monotonic()
        demo_began = time.time()  # the hosts' job histories are on the wall clock
        small = burst.small_jobs(rng)
        for spec in small[: burst.first_push]:
            stack.emulator.state.queue_job(spec)
        for spec in burst.huge_jobs():
            stack.emulator.state.queue_job(spec)
        second = small[burst.first_push :]
        large = burst.large_jobs(rng)
        progress = Progress(
            TextColumn("jobs"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        task = progress.add_task("jobs", total=len(large) + burst.small + burst.huge)
        queued_large = False
        pushed: float | None = None  # when the second push came
        with Live(console=console, refresh_per_second=4, transient=True, auto_refresh=live) as view:
            while time.monotonic() - started < burst.deadline and not stop.is_set():
                now = time.monotonic()
                if pushed is None and (
                    host_job_ended(stack) or now - started > burst.second_push_by
                ):
                    for spec in second:
                        stack.emulator.state.queue_job(spec)
                    pushed = now
                if not queued_large and pushed is not None and now - pushed > burst.large_after:
                    for spec in large:
                        stack.emulator.state.queue_job(spec)
                    queued_large = True
                jobs = list(stack.emulator.state.jobs.values())
                done = sum(1 for j in jobs if j.state is JobState.COMPLETED)
                progress.update(task, completed=done)
                control = stack.control
                status = render_status(control.status()) if control else ""
                if live:
                    view.update(Group(Text(status), progress))
                if queued_large and done == len(jobs):
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
        control = stack.control
        # A stop ends the daemon at once: then its events as it stopped, kept by the stack.
        events = control.ctx.events.recent() if control else stack.last_events
        learning = await settled_learning(
            [(h.name, stack.dir / h.name / "history.db") for h in stack.hosts],
            wait=0.0 if stop.is_set() else 10.0,  # stopped: what the hosts recorded until now
            since=demo_began,  # the demo's own jobs, not those the hosts ran before it
        )
        summary = collect(stack, events, started)
        summary.learning = learning
        summary.stopped = stop.is_set()
        console.print(Text(render_status(control.status())) if control else "")
        console.print(summary.table())
        if keep and not stop.is_set():
            host = stack.dir / stack.hosts[0].name / "runnerd.toml"
            console.print(
                "\nStill running. In another shell:\n"
                f"  {command('rungar')} status --socket {stack.socket}\n"
                f"  {command('runnerctl')} -c {host} status\n"
                f"{dashboards_text(stack, kept=True)}\nPress Ctrl-C to stop.",
                highlight=False,
                soft_wrap=True,
            )
            await stop.wait()
        if stop.is_set():
            console.print("Stopping: the daemon, the hosts and their runners, the clouds.")
    return summary


def host_job_ended(stack: Stack) -> bool:
    """Whether the daemon has removed a runner from a host (its job ended, its room opened)."""
    control = stack.control
    if control is None:
        return False
    hosts = {host.name for host in stack.hosts}
    return any(
        event.kind == "runner" and event.action == "removed" and event.provider in hosts
        for event in control.ctx.events.recent()
    )


def dashboards_text(stack: Stack, kept: bool = False) -> str:
    """Where to look: the fleet page and each host's runnerd dashboard (the link with its login
    token), one per line, and how long they last."""
    lines = ["Dashboards:"] + [f"  {what:<16} {url}" for what, url in stack.dashboard_urls]
    if not any(what.startswith("runnerd") for what, _ in stack.dashboard_urls):
        lines.append("  runnerd          (this runnerd serves no dashboard)")
    if kept:
        lines.append("They stop when the demo stops.")
    else:
        lines.append(
            "They stop with the demo, after its summary: `rungar demo --keep` keeps them running."
        )
    return "\n".join(lines)


def command(name: str) -> str:
    """``name`` as a full path when it is installed beside this Python (``.venv/bin/rungar``):
    a fresh shell has no virtual environment on its PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name
