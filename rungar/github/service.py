"""``ScaleSetGitHub``: the real :class:`~rungar.github.interface.GitHub`, over the protocol.

It wires the pieces together (target URL, credentials, the admin chain, one counted transport,
a listener per scale set) and adds the JIT-name recovery of ARC: when generate-jitconfig
says the name is taken, a registration of the same scale set left by a crash is removed and the
call retried; a name owned by another scale set is an error.

With several GitHub Apps of one organisation (``github.apps``), the first App does everything
and the others register runners too: each App has its own installation token, admin
connection and client (on the one transport), and :meth:`generate_jit_config` goes through the
App its registration turn names (docs/github.md, "More than one App").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import structlog

from rungar.clock import Clock
from rungar.config.model import ScaleSetConfig
from rungar.errors import GitHubError
from rungar.github import checks
from rungar.github.auth import AdminChain, AppAuth, Auth, token_source
from rungar.github.client import ScaleSetClient
from rungar.github.exceptions import RunnerBusy, RunnerExists
from rungar.github.http import github_http
from rungar.github.interface import (
    Budget,
    CursorStore,
    InMemoryCursorStore,
    InMemorySessionStore,
    ListenerEvent,
    RemoveOutcome,
    RunnerStatus,
    SessionPhase,
    SessionStore,
)
from rungar.github.listener import Listener
from rungar.github.network import Network
from rungar.github.ratelimit import RequestCounter, budget_note, read_stretch
from rungar.github.releases import LatestRunnerRelease
from rungar.github.runner_list import SharedListing
from rungar.github.scale_set import ensure_scale_set
from rungar.github.timing import GitHubTiming
from rungar.github.transport import Sender, Transport
from rungar.github.urls import parse_config_url
from rungar.github.wire import RunnerReference
from rungar.model.runner_release import RunnerRelease

log = structlog.get_logger("rungar.github")


def owner_name() -> str:
    """The session owner: the host name, or a UUID when there is none (as ARC does)."""
    try:
        return socket.gethostname() or str(uuid.uuid4())
    except OSError:
        return str(uuid.uuid4())


def _status(runner: RunnerReference) -> RunnerStatus:
    return RunnerStatus(runner.name, runner.id, runner.online, runner.busy, runner.scale_set_id)


class ScaleSetGitHub:
    def __init__(
        self,
        url: str,
        auth: Auth,
        clock: Clock,
        *,
        cursors: CursorStore | None = None,
        sessions: SessionStore | None = None,
        counter: RequestCounter | None = None,
        http: Sender | httpx.AsyncClient | None = None,
        session_retry_first: float = 10.0,
        session_retry_max: float = 60.0,
        long_poll_timeout: float = 70.0,
        timing: GitHubTiming | None = None,
        owner: str = "",
        network: Network | None = None,
        more_apps: Sequence[Auth] = (),
    ) -> None:
        self.target = parse_config_url(url)
        # Named in each session it opens; GitHub names it to another daemon's 409s.
        self.owner = owner or owner_name()
        # A scale set's own (first, max) waits between session creates GitHub refuses with a
        # conflict: the lead scale set of a standby daemon asks at a steady pace.
        self.session_retry_for: dict[str, tuple[float, float]] = {}
        self._clock = clock
        self.counter = counter or RequestCounter()
        self.timing = timing or GitHubTiming()
        # Without an HTTP client of the caller's, every call goes by ``network`` (by default
        # the environment's proxy variables and the system's CAs): rungar/github/http.py.
        self._http: Sender | httpx.AsyncClient = http or github_http(
            network or Network.from_settings("", "", "", False, os.environ),
            keepalive_expiry=self.timing.http_keepalive_expiry,
        )
        self._owns_http = http is None
        transport = Transport(self._http, clock, self.counter, timing=self.timing)
        tokens = token_source(auth, self.target, transport, clock)
        admin = AdminChain(self.target, tokens, transport, clock, self.timing)
        self.client = ScaleSetClient(
            self.target, tokens, transport, admin, long_poll_timeout=long_poll_timeout
        )
        # Registration clients, one an App: the first is ``client``.
        self.registering = [self.client]
        for more in more_apps:
            app_tokens = token_source(more, self.target, transport, clock)
            app_admin = AdminChain(self.target, app_tokens, transport, clock, self.timing)
            self.registering.append(
                ScaleSetClient(
                    self.target,
                    app_tokens,
                    transport,
                    app_admin,
                    long_poll_timeout=long_poll_timeout,
                )
            )
        self._app = isinstance(auth, AppAuth)
        self._cursors = cursors or InMemoryCursorStore()
        self._sessions = sessions or InMemorySessionStore()
        self._session_retry = (session_retry_first, session_retry_max)
        # Every caller's runner list: one request per runner_list_max_age, single flight.
        self.runner_listing: SharedListing[list[RunnerStatus]] = SharedListing(
            self._list_runners, clock, self.timing.runner_list_max_age, self.read_stretch
        )
        self._budget_read_at = 0.0
        self._latest_release = LatestRunnerRelease()
        self._ids: dict[str, int] = {}
        self._configs: dict[str, ScaleSetConfig] = {}
        self.listeners: dict[str, Listener] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def sessions(self) -> SessionStore:
        return self._sessions

    async def aclose(self) -> None:
        """Stop every listener (deleting its session) before the HTTP client closes."""
        for listener in self.listeners.values():
            listener.stop()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._owns_http:
            await self._http.aclose()

    async def ensure_scale_set(self, config: ScaleSetConfig) -> int:
        """The scale set's id; created, or updated in place when its group or labels changed."""
        self._configs[config.name] = config  # a re-creation after a 404 uses the latest
        known = self._ids.get(config.name) or await self._sessions.get_scale_set_id(config.name)
        scale_set = await ensure_scale_set(self.client, config, known)
        if scale_set.id != known:
            await self._sessions.set_scale_set_id(config.name, scale_set.id)
        previous = self._ids.get(config.name)
        if previous is not None and previous != scale_set.id:
            log.warning(
                "github.scale_set_recreated",
                scale_set=config.name,
                old_id=previous,
                new_id=scale_set.id,
            )
        self._ids[config.name] = scale_set.id
        return scale_set.id

    async def generate_jit_config(
        self, scale_set_id: int, runner_name: str, app: int = 0
    ) -> tuple[int, str]:
        client = self.registering[app]
        try:
            jit = await client.generate_jit_config(scale_set_id, runner_name)
        except RunnerExists:
            existing = await self.client.get_runner_by_name(runner_name)
            if existing is not None:
                if existing.scale_set_id not in (0, scale_set_id):
                    raise GitHubError(
                        f"runner name {runner_name!r} belongs to scale set {existing.scale_set_id}",
                        409,
                    ) from None
                # A registration left by a crash between generate and record: replace it.
                await self.client.remove_runner(existing.id)
                log.info(
                    "github.stale_registration_removed", runner=runner_name, runner_id=existing.id
                )
            jit = await client.generate_jit_config(scale_set_id, runner_name)
        return jit.runner.id, jit.encoded

    async def rerun_failed_job(self, repository: str, run_id: str, runner_name: str) -> int:
        return await self.client.rerun_failed_job(repository, run_id, runner_name)

    def writes_check_runs(self) -> bool:
        return self._app

    async def head_commit(self, repository: str, run_id: str) -> str:
        return await checks.head_commit(self.client, repository, run_id)

    async def write_check_run(
        self, repository: str, check_run_id: int, body: dict[str, Any]
    ) -> int:
        return await checks.write_check_run(self.client, repository, check_run_id, body)

    async def write_commit_status(self, repository: str, sha: str, body: dict[str, Any]) -> None:
        await checks.write_commit_status(self.client, repository, sha, body)

    async def cancel_workflow_run(self, repository: str, run_id: str) -> None:
        await checks.cancel_workflow_run(self.client, repository, run_id)

    async def remove_runner(self, runner_id: int) -> RemoveOutcome:
        try:
            await self.client.remove_runner(runner_id)
        except RunnerBusy:
            return RemoveOutcome.BUSY
        return RemoveOutcome.REMOVED

    async def get_runner_by_name(self, name: str) -> RunnerStatus | None:
        runner = await self.client.get_runner_by_name(name)
        return _status(runner) if runner is not None else None

    async def list_runners(self, scale_set_id: int) -> list[RunnerStatus]:
        return [r for r in await self.runner_listing.get() if r.scale_set_id == scale_set_id]

    async def list_all_runners(self) -> list[RunnerStatus]:
        """The installation's runners, shared (:mod:`rungar.github.runner_list`), asked for
        half or a quarter as often while the REST budget runs low."""
        await self._read_budget()
        return list(await self.runner_listing.get())

    async def latest_runner_release(self) -> RunnerRelease | None:
        return await self._latest_release.read(self.client)

    def read_stretch(self) -> float:
        """How many times longer reads that can wait wait now (1, 2 or 4), by the budget."""
        return read_stretch(self.client.transport.rate_limit, self._clock.now())

    def budget(self) -> Budget:
        rate = self.client.transport.rate_limit
        now = self._clock.now()
        return Budget(
            remaining=rate.remaining if rate is not None else None,
            limit=rate.limit if rate is not None else None,
            reset_at=rate.reset_at if rate is not None else None,
            stretch=read_stretch(rate, now),
            note=budget_note(rate, now),
            not_modified=self.client.not_modified,
        )

    async def _read_budget(self) -> None:
        """Read the REST budget (free) when no reading is younger than the check interval."""
        interval = self.timing.budget_check_interval
        now = self._clock.now()
        if interval <= 0 or now - self._budget_read_at < interval:
            return
        self._budget_read_at = now
        try:
            await self.client.rate_limit()
        except GitHubError as e:
            log.info("github.budget_unread", error=str(e))

    async def _list_runners(self) -> list[RunnerStatus]:
        return [_status(r) for r in await self.client.list_runners()]

    def session_phase(self, scale_set: str) -> SessionPhase:
        listener = self.listeners.get(scale_set)
        return listener.phase if listener is not None else SessionPhase(None)

    async def renew_session(self, scale_set: str) -> bool:
        listener = self.listeners.get(scale_set)
        if listener is None or listener.session is None:
            return False
        return await listener.session.renew()

    def set_max_capacity(self, scale_set: str, max_capacity: int) -> None:
        listener = self.listeners.get(scale_set)
        if listener is not None:
            listener.set_max_capacity(max_capacity)

    def listener_for(self, config: ScaleSetConfig, queue: asyncio.Queue[ListenerEvent]) -> Listener:
        async def ensure() -> int:
            return await self.ensure_scale_set(self._configs.get(config.name, config))

        retry = self.session_retry_for.get(config.name, self._session_retry)
        return Listener(
            self.client,
            config,
            ensure,
            self._cursors,
            self._clock,
            on_demand=queue.put,
            on_job=queue.put,
            owner_name=self.owner,
            conflict_retry_first=retry[0],
            conflict_retry_max=retry[1],
            timing=self.timing,
            sessions=self._sessions,
        )

    async def listen(self, config: ScaleSetConfig) -> AsyncIterator[ListenerEvent]:
        """Runs one listener for ``config`` while the caller iterates; closing stops it."""
        if config.name in self.listeners:
            raise GitHubError(
                f"scale set {config.name!r} already has a listener "
                "(two would fight over its message session)"
            )
        queue: asyncio.Queue[ListenerEvent] = asyncio.Queue()
        listener = self.listener_for(config, queue)
        self.listeners[config.name] = listener
        task = asyncio.create_task(listener.run(), name=f"listener:{config.name}")
        self._tasks[config.name] = task
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield getter.result()
                    continue
                getter.cancel()
                task.result()  # the listener only ends by stop(); surface why it ended
                return
        finally:
            listener.stop()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.listeners.pop(config.name, None)
            self._tasks.pop(config.name, None)
