"""The numbered ``examples/``, each run for real on the demo's loopback world (README).

An example is a folder holding a scale_sets.yaml (and a runnerd.toml when it has hosts) written
as templates with the demo's placeholders, and the world it runs in: its hosts and their memory
budgets, the GCE zones out of stock, and the jobs queued in waves. :func:`run_example` brings
the world up with :class:`rungar.demo.stack.Stack`, queues the waves on the GitHub emulator,
waits for every job, and answers where each job's runner was placed (by the daemon's own
events), what each cloud machine was (the booters' record) and which GCE zones refused.

Run one from a shell: ``python -m rungar.demo.examples 03-hosts-then-cloud``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rungar.demo.cloudboot import Booted
from rungar.demo.files import examples_root
from rungar.demo.learning import settled_learning
from rungar.demo.scenario import Summary, collect
from rungar.demo.stack import Host, Stack, StackStopped
from rungar.testing.github_emulator.model import JobSpec, JobState

EXAMPLES_DIR = examples_root()
MIB = 1024 * 1024


def jobs(n: int, scale_set: str, *, duration: float, memory_mib: int) -> tuple[JobSpec, ...]:
    """``n`` jobs for ``scale_set``; durations vary by ±20% so they do not all end at once."""
    return tuple(
        JobSpec(
            labels=("self-hosted", scale_set),
            repository="octo-org/app",
            workflow="ci.yml",
            name=f"{scale_set}-{i + 1}",
            duration=duration * (0.8 + 0.4 * i / max(1, n - 1)),
            memory_bytes=memory_mib * MIB,
            cpu=0.05,
        )
        for i in range(n)
    )


@dataclass(frozen=True, slots=True)
class Wave:
    """Jobs queued together, once ``after_started`` jobs of the earlier waves have started."""

    jobs: tuple[JobSpec, ...]
    after_started: int = 0


@dataclass(frozen=True, slots=True)
class Example:
    name: str  # the folder under examples/
    waves: tuple[Wave, ...]
    hosts: tuple[Host, ...] = ()
    gcp_out_of_stock: tuple[str, ...] = ()
    aws_spot_capacity: int | None = None
    deadline: float = 60.0  # real seconds for every job to finish

    @property
    def folder(self) -> Path:
        return EXAMPLES_DIR / self.name


EXAMPLES: dict[str, Example] = {
    e.name: e
    for e in (
        Example(
            "01-single-host",
            hosts=(Host("host1", "512M"),),
            waves=(Wave(jobs(5, "ci", duration=60, memory_mib=48)),),
        ),
        Example(
            "02-sizes-with-priority",
            hosts=(Host("compute1", "1024M"), Host("compute2", "1024M")),
            waves=(
                Wave(jobs(24, "rungar-c2-m4", duration=120, memory_mib=48)),
                Wave(jobs(2, "rungar-c8-m16", duration=60, memory_mib=96), after_started=12),
            ),
        ),
        Example(
            "03-hosts-then-cloud",
            hosts=(Host("host1", "512M"), Host("host2", "512M")),
            waves=(Wave(jobs(10, "ci", duration=100, memory_mib=48)),),
        ),
        Example(
            "04-gcp-zones-spot",
            gcp_out_of_stock=("us-central1-a",),
            waves=(Wave(jobs(6, "ci", duration=60, memory_mib=32)),),
        ),
        Example(
            "05-aws-spot-fallback",
            aws_spot_capacity=2,
            waves=(Wave(jobs(5, "ci", duration=100, memory_mib=32)),),
        ),
    )
}


@dataclass
class ExampleRun:
    """What happened in one run of an example."""

    example: str
    summary: Summary
    job_providers: list[tuple[str, str]] = field(default_factory=list)  # (scale set, provider)
    cloud_machines: dict[str, Booted] = field(default_factory=dict)  # by instance id or name
    # every GCE insert in order: (runner, "zone/machine type", refused as out of stock)
    gce_inserts: list[tuple[str, str, bool]] = field(default_factory=list)
    spot_refused: int = 0  # Spot launches the loopback Spot market refused

    def providers_of(self, scale_set: str) -> Counter[str]:
        """Jobs of ``scale_set`` by the provider of the runner that ran them."""
        return Counter(p for s, p in self.job_providers if s == scale_set)

    def lines(self) -> list[str]:
        s = self.summary
        out = [
            f"{self.example}: {s.completed} of {s.jobs} jobs finished in {s.seconds:.0f}s",
            "  runners per provider: "
            + ", ".join(f"{p} {n}" for p, n in sorted(s.runners_by_provider.items())),
        ]
        for scale_set in sorted({s for s, _ in self.job_providers}):
            by = self.providers_of(scale_set)
            out.append(
                f"  jobs of {scale_set} ran on: "
                + ", ".join(f"{p} {n}" for p, n in sorted(by.items()))
            )
        refusals = ", ".join(f"{k} {r or '-'}: {n}" for (k, r), n in sorted(s.refusals.items()))
        out.append(f"  refusals seen by rungar: {refusals or 'none'}")
        if s.holds:
            out.append(f"  priority holds: {s.holds_text()}")
        for host in s.learning:
            out.append(f"  {host.host} learnt: {host.text()}")
        for machine in sorted(self.cloud_machines.values(), key=lambda m: m.machine):
            market = "spot" if machine.spot else "on-demand"
            out.append(f"  cloud machine {machine.machine}: {machine.place}, {market}")
        if self.spot_refused:
            out.append(f"  spot launches refused for capacity: {self.spot_refused}")
        for runner, path in _insert_paths(self.gce_inserts).items():
            out.append(f"  gcp inserts for {runner}: {path}")
        return out


def _insert_paths(inserts: Sequence[tuple[str, str, bool]]) -> dict[str, str]:
    paths: dict[str, list[str]] = {}
    for runner, where, refused in inserts:
        paths.setdefault(runner, []).append(f"{where} ({'out of stock' if refused else 'created'})")
    return {runner: " → ".join(steps) for runner, steps in paths.items()}


async def run_example(
    example: Example, *, keep_dir: bool = False, stop: asyncio.Event | None = None
) -> ExampleRun:
    """Bring the example's world up, run its waves to the end, and say what happened; ``stop``
    ends it early, with everything it started stopped (docs/commands.md, "Stopping")."""

    stack = Stack(
        example=example.folder,
        hosts=example.hosts,
        gcp_out_of_stock=example.gcp_out_of_stock,
        aws_spot_capacity=example.aws_spot_capacity,
        keep_dir=keep_dir,
        stop_event=stop or asyncio.Event(),
    )
    async with stack:
        assert stack.emulator is not None
        state = stack.emulator.state
        started = time.monotonic()
        pending = list(example.waves)
        queued = 0
        while time.monotonic() - started < example.deadline and not stack.stop_event.is_set():
            begun = sum(1 for j in state.jobs.values() if j.started_at)
            while pending and begun >= pending[0].after_started:
                for spec in pending.pop(0).jobs:
                    state.queue_job(spec)
                    queued += 1
            done = sum(1 for j in state.jobs.values() if j.state is JobState.COMPLETED)
            if not pending and done == queued:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stack.stop_event.wait(), 0.25)
        control = stack.control
        events = control.ctx.events.recent() if control is not None else []
        learning = await settled_learning(
            [(h.name, stack.dir / h.name / "history.db") for h in stack.hosts]
        )
        outcome = ExampleRun(example.name, collect(stack, events, started))
        outcome.summary.learning = learning
        outcome.summary.stopped = stack.stop_event.is_set() and not stack_done(
            state, queued, pending
        )
        placed = {
            e.name: e.provider
            for e in events
            if e.kind == "runner" and e.action in ("created", "adopted")
        }
        for job in state.jobs.values():
            scale_set = job.spec.labels[-1]
            outcome.job_providers.append((scale_set, placed.get(job.runner_name, "?")))
        for booter in (stack.booter, stack.gce_booter):
            if booter is not None:
                outcome.cloud_machines.update(booter.machines)
        if stack.spot_market is not None:
            outcome.spot_refused = stack.spot_market.refused
        if stack.gce is not None:
            refused = set(example.gcp_out_of_stock)
            outcome.gce_inserts = [
                (call.name, f"{call.zone}/{call.machine_type}", call.zone in refused)
                for call in stack.gce.insert_requests
            ]
    return outcome


def stack_done(state: Any, queued: int, pending: list[Any]) -> bool:
    done = sum(1 for j in state.jobs.values() if j.state is JobState.COMPLETED)
    return not pending and done == queued


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rungar.demo.examples", description="run one of examples/ on loopback"
    )
    parser.add_argument("example", choices=sorted(EXAMPLES), help="the example's folder name")
    parser.add_argument("--keep-dir", action="store_true", help="keep its files and logs")
    args = parser.parse_args(argv)
    from rungar import logs

    logs.configure("error")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request

    async def until_done_or_stopped() -> ExampleRun | None:
        from rungar.stopping import stop_on_signals

        stop = asyncio.Event()
        stop_on_signals(stop, at_once=Stack.terminate_all_now)
        try:
            return await run_example(EXAMPLES[args.example], keep_dir=args.keep_dir, stop=stop)
        except StackStopped:
            return None

    outcome = asyncio.run(until_done_or_stopped())
    if outcome is None or outcome.summary.stopped:
        return 0  # asked to stop: everything it started is stopped
    print("\n".join(outcome.lines()))
    return 0 if outcome.summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
