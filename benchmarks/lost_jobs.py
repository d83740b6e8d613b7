"""Benchmark: how soon a job lost with its machine is running again (``rerun_lost_jobs``).

Through the real daemon and the GitHub emulator, as tests/e2e/test_daemon_rerun_lost_jobs.py
runs them: a batch of jobs runs, one per runner, on a scale set with ``rerun_lost_jobs`` on;
then every one of their machines is lost at once. For each job the figure runs from the moment
Rungar has seen its runner lost (``rungar status`` no longer lists it; GitHub is then told the
runner is gone, through the emulator's ``lost`` route, and fails the job, as GitHub does once
it stops hearing from a runner) until the job's re-run attempt is running on a new runner:
GitHub's report of the failure, Rungar's re-run, a new runner made, booted and given the job.

Four kinds of loss:

- ``fake``: the loopback fake provider of the end-to-end tests deletes the machine (its runner
  process is killed);
- ``runnerd``: a real ``runnerd serve`` host (process runtime): the runner's process group is
  killed with SIGKILL, as the kernel's OOM killer or a crash would;
- ``gcp``: the gcp plugin on the local GCE fake; the instance is deleted through the fake's
  REST API (``instances.delete``), as an operator would;
- ``aws``: the aws plugin on moto's server; the instance is terminated through boto3
  (TerminateInstances), as the console or a Spot reclaim would.

The clouds' machines are booted as in the demo: a booter (``rungar.demo.cloudboot``) reads each
new instance's JIT config over the cloud's API and runs ``rungar fake-runner`` with it, and
stops that runner when the instance is gone (tests/e2e/cloud_world.py).

``lost_to_running_s`` p50, p95 and max over 20 jobs of each kind (four batches of five);
``--quick``: one batch of five, and its p95 null (fewer than 20 samples).

Usage: ``python benchmarks/lost_jobs.py [--quick] [--kind KIND]...`` (every kind by default).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rungar.simulate.report import nearest_rank  # noqa: E402
from rungar.testing.fake_provider import GIB, FakeProvider  # noqa: E402
from rungar.testing.github_emulator.model import Job, JobState  # noqa: E402
from tests.e2e.cloud_world import AWS_CREDENTIALS, AwsCloud, Cloud, GcpCloud  # noqa: E402
from tests.e2e.daemon_world import DaemonWorld  # noqa: E402
from tests.e2e.test_runnerd_job_times import runnerd_toml  # noqa: E402
from tests.e2e.test_runnerd_learning import Host  # noqa: E402

BATCH = 5
FEWEST = 20  # samples a p95 needs to be quoted
WAIT = 180.0


def emit(metric: str, value: float | None, unit: str, params: dict[str, Any]) -> None:
    """One JSON line; ``value`` None (null) when there is no honest figure to give."""
    rounded = None if value is None else round(value, 3)
    record = {"bench": "lost_jobs", "metric": metric, "value": rounded, "unit": unit}
    print(json.dumps({**record, "params": params}), flush=True)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def timing() -> dict[str, str]:
    return {
        "reconcile_interval": "5s",
        "starting_sync_interval": "1s",
        "left_grace": "1s",
        "backoff_first": "1s",
        "backoff_max": "1s",
    }


def scale_set(provider: dict[str, Any] | str) -> dict[str, Any]:
    return {
        "name": "linux",
        "labels": ["linux"],
        "max_runners": BATCH * 2,
        "start_timeout": "60s",
        "rerun_lost_jobs": True,
        "providers": [provider],
    }


async def until(check: Callable[[], Awaitable[Any]], what: str, every: float = 0.05) -> Any:
    end = time.monotonic() + WAIT
    while time.monotonic() < end:
        found = await check()
        if found:
            return found
        await asyncio.sleep(every)
    raise TimeoutError(f"never {what} within {WAIT:g} s")


class Loss(Protocol):
    """A kind of machine loss: the world it runs in, and how it loses a runner's machine."""

    name: str
    world: DaemonWorld

    def started(self, root: Path) -> contextlib.AbstractAsyncContextManager[Loss]: ...

    async def lose(self, runner: str) -> None: ...


class FakeLoss:
    name = "fake"

    @contextlib.asynccontextmanager
    async def started(self, root: Path) -> AsyncIterator[Loss]:
        fake = FakeProvider("host", vcpus=64, memory_bytes=128 * GIB)
        self.world = DaemonWorld(root, {"host": fake})
        provider = {"name": "host", "type": "runnerd", "runner": {"vcpus": 1, "memory": "1GiB"}}
        try:
            await self.world.start(
                {
                    "version": 1,
                    "timing": timing(),
                    "providers": [provider],
                    "scale_sets": [scale_set("host")],
                }
            )
            yield self
        finally:
            await self.world.stop()

    async def lose(self, runner: str) -> None:
        await self.world.providers["host"].delete(runner)


class RunnerdLoss:
    name = "runnerd"

    @contextlib.asynccontextmanager
    async def started(self, root: Path) -> AsyncIterator[Loss]:
        self.host = Host(root)
        self.host.config.write_text(
            runnerd_toml(self.host.dir).replace("slots = 3", f"slots = {BATCH * 2}")
        )
        self.world = DaemonWorld(root, {}, clock_factor=1)
        provider = {
            "name": "host1",
            "type": "runnerd",
            "address": f"unix://{self.host.dir}/provider.sock",
        }
        try:
            self.host.start()
            await self.host.wait_ready()
            await self.world.start(
                {
                    "version": 1,
                    "timing": timing(),
                    "providers": [provider],
                    "scale_sets": [scale_set({"name": "host1", "runner": {"profile": "ci"}})],
                }
            )
            yield self
        finally:
            await self.world.stop()
            await self.host.stop()

    async def lose(self, runner: str) -> None:
        record = json.loads((self.host.dir / "runners" / f"{runner}.json").read_text())
        os.killpg(int(record["pid"]), signal.SIGKILL)


class CloudLoss:
    """A cloud's plugin, started by the daemon, on that cloud's fake with its booter."""

    def __init__(self, name: str, cloud: Callable[[Path], Cloud]) -> None:
        self.name = name
        self.make_cloud = cloud

    @contextlib.asynccontextmanager
    async def started(self, root: Path) -> AsyncIterator[Loss]:
        self.cloud = self.make_cloud(root)
        self.world = DaemonWorld(root, {})
        try:
            self.cloud.start()
            await self.world.start(
                {
                    "version": 1,
                    "timing": timing(),
                    "providers": [self.cloud.provider(self.name)],
                    "scale_sets": [scale_set(self.name)],
                }
            )
            yield self
        finally:
            await self.world.stop()
            self.cloud.stop()

    async def lose(self, runner: str) -> None:
        await asyncio.to_thread(self.cloud.lose, runner)


def aws_cloud(root: Path) -> Cloud:
    os.environ.update(AWS_CREDENTIALS)  # the booter's boto3, and the plugin's by inheritance
    return AwsCloud(root)


def jobs(world: DaemonWorld) -> list[Job]:
    return list(world.emulator.state.jobs.values())


async def batch(loss: Loss, round_: int) -> list[float]:
    """BATCH jobs run, their machines are lost at once: each one's seconds from its loss seen
    to its re-run attempt running."""
    world = loss.world
    names = [f"build-{round_}-{i}" for i in range(BATCH)]
    for name in names:
        await world.queue_job(labels=["linux"], name=name, duration=3600)

    async def all_running() -> list[Job]:
        found = [j for j in jobs(world) if j.spec.name in names and j.state is JobState.RUNNING]
        return found if len(found) == BATCH else []

    running = await until(all_running, f"batch {round_} running")
    by_runner = {j.runner_name: j for j in running}
    for runner in by_runner:
        await loss.lose(runner)
    seen: dict[str, float] = {}
    again: dict[str, float] = {}
    control = world.emulator.base_url
    async with httpx.AsyncClient(timeout=30) as http:
        while len(again) < BATCH:
            status = await world.status()
            listed = {r["name"] for r in (status or {}).get("runners", [])}
            for runner in by_runner:
                if runner not in seen and runner not in listed:
                    seen[runner] = time.monotonic()
                    # GitHub stops hearing from the runner, and fails its job.
                    await http.post(f"{control}/_fake/runners/{runner}/lost")
            for runner, job in by_runner.items():
                if runner in again or runner not in seen:
                    continue
                if any(
                    j.run_id == job.run_id and j.attempt == 2 and j.state is JobState.RUNNING
                    for j in jobs(world)
                ):
                    again[runner] = time.monotonic()
            if time.monotonic() - min(seen.values(), default=time.monotonic()) > WAIT:
                raise TimeoutError(f"batch {round_}: {len(again)} of {BATCH} running again")
            await asyncio.sleep(0.05)
    # The re-runs end, so the next batch finds free room.
    async with httpx.AsyncClient(timeout=30) as http:
        for job in jobs(world):
            if job.state is JobState.RUNNING and job.spec.name in names:
                await http.post(f"{control}/_fake/jobs/{job.job_id}/complete")
    return [again[r] - seen[r] for r in by_runner]


KINDS: dict[str, Callable[[], Loss]] = {
    "fake": FakeLoss,
    "runnerd": RunnerdLoss,
    "gcp": lambda: CloudLoss("gcp", GcpCloud),
    "aws": lambda: CloudLoss("aws", aws_cloud),
}


async def run(quick: bool, kinds: list[str]) -> None:
    rounds = 1 if quick else 4
    for kind in kinds:
        loss = KINDS[kind]()
        root = Path(tempfile.mkdtemp(prefix="rg-lost-", dir="/tmp"))
        samples: list[float] = []
        try:
            async with loss.started(root):
                for round_ in range(rounds):
                    samples += await batch(loss, round_)
                    progress(f"{loss.name}: round {round_ + 1}: {samples[-BATCH:]}")
        finally:
            shutil.rmtree(root, ignore_errors=True)
        params = {"loss": loss.name, "samples": len(samples), "batch": BATCH}
        emit("lost_to_running_s_p50", nearest_rank(samples, 0.5), "s", params)
        # A p95 of fewer than FEWEST samples would only be their largest: null (--quick).
        p95 = nearest_rank(samples, 0.95) if len(samples) >= FEWEST else None
        emit("lost_to_running_s_p95", p95, "s", params)
        emit("lost_to_running_s_max", max(samples), "s", params)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="one batch of five per kind")
    parser.add_argument(
        "--kind", choices=sorted(KINDS), action="append", help="only this kind (repeatable)"
    )
    args = parser.parse_args()
    import logging

    import structlog

    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())  # stdout is for JSON
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    asyncio.run(run(args.quick, args.kind or list(KINDS)))


if __name__ == "__main__":
    main()
