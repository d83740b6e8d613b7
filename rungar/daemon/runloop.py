"""The engine's long-running loops: a listener per scale set, the reconcile ticker, the
prober that lists unreachable providers between passes, and the sync of starting runners.

Kept apart from :mod:`rungar.engine.engine` so the engine's steps can be driven one by one in
tests, while the daemon runs them here. It drives the concerns the engine composes, handed to
it (:meth:`RunLoop.of` an engine does): the job book, the scaler, the reconciler, the sync of
starting runners and the lease, with the engine's context, never the engine itself. Stopping
cancels the loops and leaves every runner in place: a restart adopts them again.

With a lease (active and standby, :mod:`rungar.daemon.lease`), only the lead scale set listens
from the start; the others listen while this daemon holds the lease, and each term's first
reconcile pass adopts before anything is created.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import structlog

from rungar.daemon.lease import LeaseKeeper, stop_keeper
from rungar.daemon.malloc import give_back_free_memory
from rungar.engine.core.context import EngineContext
from rungar.engine.core.notices import observe_job_wait
from rungar.engine.core.scale_set_state import ScaleSetState
from rungar.engine.create.rooms import Rooms
from rungar.engine.jobs.accounting import Accounting
from rungar.engine.jobs.book import JobBook
from rungar.engine.jobs.reasons import JobReasons
from rungar.engine.jobs.scaler import Scaler
from rungar.engine.reconcile.reconciler import Reconciler
from rungar.engine.reconcile.starting_sync import StartingSync
from rungar.errors import GitHubError
from rungar.github.interface import Demand, JobEvent, JobEventKind
from rungar.model.phase import Phase
from rungar.model.sentences import LEAD_NOTE, UNREACHABLE_NOTE

if TYPE_CHECKING:
    from rungar.engine.engine import Engine

log = structlog.get_logger("rungar.runloop")


class RunLoop:
    def __init__(
        self,
        ctx: EngineContext,
        *,
        jobs: JobBook,
        scaler: Scaler,
        reconciler: Reconciler,
        starting: StartingSync,
        lease: LeaseKeeper | None = None,
        accounting: Accounting | None = None,
        reasons: JobReasons | None = None,
        rooms: Rooms | None = None,
    ) -> None:
        self.ctx = ctx
        self.rooms = rooms  # its waits for a host's expected room end with the loops
        self.jobs = jobs
        self.scaler = scaler
        self.reconciler = reconciler
        self.starting = starting
        self.lease = lease
        self.accounting = accounting  # records each job served (rungar usage)
        self.reasons = reasons  # why a job waits, told on GitHub
        self._reasons: asyncio.Task[None] | None = None
        self._listeners: dict[str, asyncio.Task[None]] = {}
        self._reconciler: asyncio.Task[None] | None = None
        self._prober: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        if lease is not None:
            ctx.guard.lease = lease
            lease.on_active = self.wake  # the term's adoption pass, now
            lease.on_standby = self._restart_followers

    @classmethod
    def of(
        cls,
        engine: Engine,
        lease: LeaseKeeper | None = None,
        accounting: Accounting | None = None,
    ) -> RunLoop:
        """The loops that run ``engine``'s concerns in the daemon, with ``lease`` kept (active
        and standby) and each job served recorded by ``accounting``."""
        return cls(
            engine.ctx,
            jobs=engine.jobs,
            scaler=engine.scaler,
            reconciler=engine.reconciler,
            starting=engine.starting,
            lease=lease,
            accounting=accounting,
            reasons=engine.reasons,
            rooms=engine.rooms,
        )

    async def start(self) -> None:
        if self.lease is not None:
            self._keeper = asyncio.create_task(self.lease.run())
        for name in list(self.ctx.sets):
            self.start_scale_set(name)
        self._reconciler = asyncio.create_task(self._reconcile_forever())
        self._prober = asyncio.create_task(self._probe_forever())
        self._starting = asyncio.create_task(self.starting.forever())
        if self.reasons is not None:
            self._reasons = asyncio.create_task(self.reasons.forever())

    def start_scale_set(self, name: str) -> None:
        if name not in self._listeners:
            self._listeners[name] = asyncio.create_task(self._serve(self.ctx.sets[name]))

    def stop_scale_set(self, name: str) -> None:
        task = self._listeners.pop(name, None)
        if task is not None:
            task.cancel()

    def wake(self) -> None:
        """Run a reconcile pass now (``rungar reconcile``, pause, resume, apply)."""
        self._wake.set()

    def _restart_followers(self) -> None:
        """Standing by: the scale sets other than the lead let their sessions go, and wait."""
        for name in list(self._listeners):
            if self.lease is not None and not self.lease.is_lead(name):
                self.stop_scale_set(name)
                self.start_scale_set(name)

    async def stop(self) -> None:
        await stop_keeper(self._keeper)
        if self.rooms is not None:
            self.rooms.cancel_wakes()
        tasks = [*self._listeners.values()]
        tasks += [
            t
            for t in (self._reconciler, self._prober, self._starting, self._reasons)
            if t is not None
        ]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._listeners.clear()
        self.ctx.save_placement()

    async def _serve(self, state: ScaleSetState) -> None:
        ctx = self.ctx
        timing = ctx.config.timing
        delay = timing.session_retry_first
        lease = self.lease
        if lease is not None and not lease.is_lead(state.config.name):
            if not lease.active.is_set():
                state.phase, state.note = Phase.WAITING, LEAD_NOTE
            await lease.active.wait()
        while True:
            try:
                state.id = await ctx.github.ensure_scale_set(state.config)
                state.phase, state.note = Phase.LISTENING, ""
                delay = timing.session_retry_first
                async for event in ctx.github.listen(state.config):
                    self._dispatch(state, event)
            except asyncio.CancelledError:
                raise
            except GitHubError as e:
                state.phase = Phase.UNREACHABLE
                state.note = f"{UNREACHABLE_NOTE}: {e}"
                log.warning("github.session_failed", scale_set=state.config.name, error=str(e))
            except Exception:
                state.phase = Phase.UNREACHABLE
                log.exception("listener.crashed", scale_set=state.config.name)
            # A scale-set check that can wait: slowed while the API budget runs low.
            await ctx.clock.sleep(delay * ctx.github.budget().stretch)
            delay = min(delay * 2, timing.session_retry_max)

    def _dispatch(self, state: ScaleSetState, event: Demand | JobEvent) -> None:
        jobs = self.jobs
        name = state.config.name
        if self.lease is not None and self.lease.is_lead(name) and not self.lease.acts():
            self.lease.poke()  # the lead's session may have just opened: confirm it now
        if isinstance(event, Demand):
            jobs.on_demand(name, event.assigned)
        elif event.kind is JobEventKind.ASSIGNED:
            jobs.on_job_assigned(name, event.job_id, event.hint, event.times.assigned or event.at)
        elif event.kind is JobEventKind.STARTED:
            if self.accounting is not None:
                self.accounting.job_started(name, event)
            jobs.on_job_started(name, event.job_id, event.runner_name, event.hint, event.times)
            observe_job_wait(self.ctx, name, event.times.queued, event.times.started, event.at)
        elif event.kind is JobEventKind.COMPLETED:
            if self.accounting is not None:
                self.accounting.job_completed(name, event)
            jobs.on_job_completed(
                name, event.job_id, event.runner_name, event.conclusion, event.hint
            )

    async def _reconcile_forever(self) -> None:
        ctx = self.ctx
        while True:
            self._wake.clear()  # cleared before the pass: a wake during it runs another
            term = self.lease.pass_begins() if self.lease is not None else 0
            try:
                await self.reconciler.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reconcile.failed")
            else:
                if self.lease is not None and self.lease.pass_ended(term):
                    # What the last active daemon left is adopted: now what is missing.
                    for name in list(ctx.sets):
                        ctx.spawn(self.scaler.scale(name))
            give_back_free_memory()  # what the answers since the last pass left free
            sleeper = asyncio.ensure_future(ctx.clock.sleep(ctx.config.timing.reconcile_interval))
            waker = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waker.cancel()

    async def _probe_forever(self) -> None:
        """Every ``probe_interval``, one List to each unreachable provider: one that answers is
        back in placement then, not at the next pass."""
        ctx = self.ctx
        while True:
            await ctx.clock.sleep(ctx.config.timing.probe_interval)
            try:
                await self.reconciler.probe_unreachable()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("probe.failed")
