"""Test harness around the emulator: start it, point a real client at it, run a listener.

Shared by the GitHub integration tests and usable by anyone testing against the emulator.
Everything binds 127.0.0.1 on a free port; client-side waits go through :class:`InstantClock`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from rungar.config.model import ScaleSetConfig, ScaleSetProvider
from rungar.github.auth import Auth, PatAuth
from rungar.github.http import http_client
from rungar.github.interface import Demand, InMemoryCursorStore, JobEvent, JobEventKind
from rungar.github.listener import Listener
from rungar.github.service import ScaleSetGitHub
from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator, InstantClock


def scale_set(
    name: str = "linux", max_runners: int = 10, labels: tuple[str, ...] = ("rungar",), **kw: object
) -> ScaleSetConfig:
    return ScaleSetConfig(
        name=name,
        max_runners=max_runners,
        providers=(ScaleSetProvider("p"),),
        labels=labels,
        **kw,  # type: ignore[arg-type]  # kw forwards the caller's typed options
    )


def fast_options(**kw: object) -> EmulatorOptions:
    """Short long polls, so a listener stops at once. Sessions keep the emulator's own idle
    lifetime (two minutes): a listener that a busy machine holds up between two polls keeps its
    session, and a test that needs a session to expire ends it itself (``evict_session``)."""
    defaults: dict[str, object] = {"long_poll_seconds": 0.3}
    defaults.update(kw)
    # why the ignore[arg-type] below: defaults holds typed option values
    return EmulatorOptions(**defaults)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def emulator(**kw: object) -> AsyncIterator[GitHubEmulator]:
    async with GitHubEmulator(fast_options(**kw)) as emu:
        yield emu


@contextlib.asynccontextmanager
async def github(
    emu: GitHubEmulator, auth: Auth | None = None, clock: InstantClock | None = None, **kw: object
) -> AsyncIterator[ScaleSetGitHub]:
    gh = ScaleSetGitHub(
        emu.org_url,
        auth or PatAuth("emulator-pat"),
        clock or InstantClock(),
        http=http_client(timeout=10.0),
        **kw,  # type: ignore[arg-type]  # kw forwards the caller's typed options
    )
    try:
        yield gh
    finally:
        await gh.aclose()


@dataclass
class Recorder:
    demands: list[Demand] = field(default_factory=list)
    jobs: list[JobEvent] = field(default_factory=list)

    async def on_demand(self, demand: Demand) -> None:
        self.demands.append(demand)

    async def on_job(self, event: JobEvent) -> None:
        self.jobs.append(event)

    def kinds(self, job_id: str) -> list[JobEventKind]:
        return [e.kind for e in self.jobs if e.job_id == job_id]


async def eventually(
    check: Callable[[], bool], timeout: float = 60.0, what: str = "condition"
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def running_listener(
    gh: ScaleSetGitHub,
    config: ScaleSetConfig,
    recorder: Recorder,
    cursors: InMemoryCursorStore | None = None,
    *,
    owner: str = "test-host",
) -> AsyncIterator[Listener]:
    async def ensure() -> int:
        return await gh.ensure_scale_set(config)

    listener = Listener(
        gh.client,
        config,
        ensure,
        cursors or InMemoryCursorStore(),
        gh.clock,
        on_demand=recorder.on_demand,
        on_job=recorder.on_job,
        owner_name=owner,
        conflict_retry_first=0.05,
        conflict_retry_max=0.2,
        timing=gh.timing,
        sessions=gh.sessions,
    )
    task = asyncio.create_task(listener.run())
    try:
        yield listener
    finally:
        listener.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
