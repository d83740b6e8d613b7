"""A listener per scale set: the long poll that turns GitHub's messages into demand and job events.

Protocol spec §4.2–§4.4 with the lessons of §6. Every GET carries ``X-ScaleSetMaxCapacity`` =
``max_runners`` (0 while paused, ARC #3446). The statistics of the session and of every answer
become a :class:`Demand`; on an empty poll the last one is re-asserted so the engine resyncs.
A message is handled before it is acked (GARM's order, made safe by idempotence): ``JobAvailable``
ids are acquired first (a failed acquire leaves the message unacked so it comes back), job events
go through :class:`JobTracker`, the cursor is persisted, then the message is acked. A message at
or below the persisted cursor is acked and skipped, so a restart neither replays nor loses.
Handler errors are logged, never fatal (GARM PR #812). A deleted scale set is re-created, with its
cursor starting over under the new id; any other failure backs off and tries again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from rungar.clock import Clock
from rungar.config.model import ScaleSetConfig
from rungar.errors import GitHubError
from rungar.github.client import ScaleSetClient
from rungar.github.exceptions import ScaleSetGone
from rungar.github.interface import CursorStore, Demand, JobEvent, JobEventKind
from rungar.github.jobs import JobTracker
from rungar.github.ratelimit import poll_stretch
from rungar.github.session import MessageSession
from rungar.github.wire import JOB_MESSAGES, JobMessage, Message, Statistics
from rungar.model.machine import JobHint

log = structlog.get_logger("rungar.github")

DemandHandler = Callable[[Demand], Awaitable[None]]
JobHandler = Callable[[JobEvent], Awaitable[None]]
ERROR_BACKOFF_FIRST = 1.0
ERROR_BACKOFF_MAX = 60.0


def demand_from(config: ScaleSetConfig, scale_set_id: int, stats: Statistics, now: float) -> Demand:
    return Demand(
        scale_set=config.name,
        scale_set_id=scale_set_id,
        assigned=stats.assigned,
        running=stats.running,
        available=stats.available,
        acquired=stats.acquired,
        registered=stats.registered,
        busy=stats.busy,
        idle=stats.idle,
        at=now,
    )


class Listener:
    def __init__(
        self,
        client: ScaleSetClient,
        config: ScaleSetConfig,
        ensure: Callable[[], Awaitable[int]],
        cursors: CursorStore,
        clock: Clock,
        *,
        on_demand: DemandHandler,
        on_job: JobHandler,
        owner_name: str,
        conflict_retry_first: float = 10.0,
        conflict_retry_max: float = 60.0,
        budget_poll_pause: float = 30.0,
    ) -> None:
        self._client = client
        self.config = config
        self._ensure = ensure
        self._cursors = cursors
        self._clock = clock
        self._on_demand = on_demand
        self._on_job = on_job
        self._owner = owner_name
        self._conflict = (conflict_retry_first, conflict_retry_max)
        self._budget_poll_pause = budget_poll_pause
        self._tracker = JobTracker()
        self._max_capacity = 0 if config.paused else config.max_runners
        self._stopping = asyncio.Event()
        self.scale_set_id = 0
        self.session: MessageSession | None = None
        self.last_demand: Demand | None = None
        self.messages_handled = 0

    @property
    def max_capacity(self) -> int:
        return self._max_capacity

    def set_max_capacity(self, value: int) -> None:
        """Takes effect on the next poll."""
        self._max_capacity = max(0, value)

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        """Listen until :meth:`stop`; survives every GitHub failure."""
        failures = 0
        try:
            while not self._stopping.is_set():
                try:
                    await self._serve()
                    failures = 0
                except ScaleSetGone:
                    log.warning(
                        "github.scale_set_gone",
                        scale_set=self.config.name,
                        scale_set_id=self.scale_set_id,
                    )
                    await self._drop_session()
                    self.scale_set_id = 0  # re-created on the next turn, with a cursor of its own
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # a listener must never die of one bad answer
                    failures += 1
                    wait = min(ERROR_BACKOFF_MAX, ERROR_BACKOFF_FIRST * 2 ** (failures - 1))
                    event = (
                        "github.listener_error"
                        if isinstance(e, GitHubError)
                        else "github.listener_bug"
                    )
                    log.warning(event, scale_set=self.config.name, error=str(e), retry_in_s=wait)
                    await self._clock.sleep(wait)
        finally:
            await self._drop_session()

    async def _drop_session(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None

    async def _serve(self) -> None:
        if not self.scale_set_id:
            self.scale_set_id = await self._ensure()
        if self.session is None or self.session.scale_set_id != self.scale_set_id:
            self.session = MessageSession(
                self._client,
                self.scale_set_id,
                self._owner,
                self._clock,
                conflict_retry_first=self._conflict[0],
                conflict_retry_max=self._conflict[1],
            )
            opened = await self.session.open()
            await self._publish(opened.statistics)  # the service's word on pending work (ARC #3420)
        while not self._stopping.is_set():
            cursor = await self._cursors.get_last_message_id(self.scale_set_id)
            message = await self.session.next_message(cursor, self._max_capacity)
            if message is None:
                if self.last_demand is not None:
                    await self._deliver_demand(self.last_demand)
            else:
                await self._handle(message, cursor)
            await self._pause_for_budget()

    async def _pause_for_budget(self) -> None:
        stretch = poll_stretch(self._client.transport.rate_limit)
        if stretch > 1:
            await self._clock.sleep(self._budget_poll_pause * (stretch - 1))

    async def _handle(self, message: Message, cursor: int) -> None:
        assert self.session is not None
        if message.message_id <= cursor:
            await self.session.ack(
                message.message_id
            )  # handled before a crash; only the ack was lost
            return
        if message.message_type != JOB_MESSAGES:
            log.warning(
                "github.unknown_message",
                scale_set=self.config.name,
                message_type=message.message_type,
            )
        else:
            available = [
                j.runner_request_id for j in message.jobs if j.kind.lower() == "jobavailable"
            ]
            if available:
                # On failure this raises before the ack: the message comes back (GARM's rule).
                acquired = await self.session.acquire(available)
                log.info(
                    "github.jobs_acquired",
                    scale_set=self.config.name,
                    offered=len(available),
                    acquired=len(acquired),
                )
            for job in message.jobs:
                kind = self._tracker.accept(job)
                if kind is not None:
                    await self._deliver_job(self._event(job, kind))
        await self._cursors.set_last_message_id(self.scale_set_id, message.message_id)
        self.messages_handled += 1
        await self._publish(message.statistics)
        await self.session.ack(message.message_id)

    def _event(self, job: JobMessage, kind: JobEventKind) -> JobEvent:
        return JobEvent(
            kind=kind,
            scale_set=self.config.name,
            job_id=job.key,
            hint=JobHint(
                repository=f"{job.owner}/{job.repository}" if job.owner else job.repository,
                workflow=job.workflow_ref,
                job=job.display_name,
                job_id=job.key,
            ),
            runner_name=job.runner_name,
            runner_id=job.runner_id,
            result=job.result.lower(),
            at=self._clock.now(),
            queued_at=job.queue_time,
            runner_assigned_at=job.runner_assign_time,
        )

    async def _publish(self, stats: Statistics) -> None:
        self.last_demand = demand_from(self.config, self.scale_set_id, stats, self._clock.now())
        await self._deliver_demand(self.last_demand)

    async def _deliver_demand(self, demand: Demand) -> None:
        try:
            await self._on_demand(demand)
        except Exception as e:  # the engine's trouble is not the listener's
            log.error("github.demand_handler_failed", scale_set=self.config.name, error=str(e))

    async def _deliver_job(self, event: JobEvent) -> None:
        try:
            await self._on_job(event)
        except Exception as e:
            log.error(
                "github.job_handler_failed",
                scale_set=self.config.name,
                job_id=event.job_id,
                error=str(e),
            )
