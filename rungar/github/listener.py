"""A listener per scale set: the long poll that turns GitHub's messages into demand and job events.

docs/github.md, "Message sessions" and "The message queue". Every GET carries
``X-ScaleSetMaxCapacity`` = ``max_runners`` (0 while paused, ARC #3446). The statistics of the
session and of every answer become a :class:`Demand`; on an empty poll the last one is re-asserted
so the engine resyncs. A message is handled before it is acked (GARM's order, made safe by
idempotence): ``JobAvailable`` ids are acquired first (a failed acquire leaves the message unacked
so it comes back), job events go through :class:`JobTracker`, the cursor is persisted, then the
message is acked. A message at or below the persisted cursor is acked and skipped, so a restart
neither replays nor loses. Handler errors are logged, never fatal (GARM PR #812). A deleted scale
set is re-created, with its cursor starting over under the new id; any other failure (an error
answer, an empty or garbled 200) backs off and tries again, and after ``session_recreate_after``
failures in a row the session is deleted and opened anew. A message without statistics keeps the
previous ones (read as zero they would scale runners down); a message of an unknown type is logged,
skipped and left unacknowledged. Polls are never slowed by the REST rate-limit budget: the queue is
not REST. The waits are :class:`GitHubTiming`; docs/github.md describes every case.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import structlog

from rungar.clock import Clock
from rungar.config.model import ScaleSetConfig
from rungar.errors import GitHubError
from rungar.github.client import ScaleSetClient
from rungar.github.exceptions import ScaleSetGone
from rungar.github.interface import (
    CursorStore,
    Demand,
    JobEvent,
    JobEventKind,
    JobTimes,
    SessionPhase,
)
from rungar.github.jobs import JobTracker
from rungar.github.session import MessageSession, SessionStore
from rungar.github.timing import GitHubTiming
from rungar.github.wire import JOB_MESSAGES, JobMessage, Message, Statistics
from rungar.model.machine import JobHint, conclusion_from_github
from rungar.model.phase import Phase

log = structlog.get_logger("rungar.github")

DemandHandler = Callable[[Demand], Awaitable[None]]
JobHandler = Callable[[JobEvent], Awaitable[None]]


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
        timing: GitHubTiming | None = None,
        sessions: SessionStore | None = None,
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
        self._timing = timing or GitHubTiming()
        self._sessions = sessions
        self._failures = 0  # failed turns in a row
        self._warned_no_statistics = False
        self._tracker = JobTracker()
        self._max_capacity = 0 if config.paused else config.max_runners
        self._stopping = asyncio.Event()
        self.scale_set_id = 0
        self.session: MessageSession | None = None
        self.last_demand: Demand | None = None
        self.sessions_recreated = 0
        self.error = ""  # why the last turn failed, until GitHub answers again (for status)

    @property
    def max_capacity(self) -> int:
        return self._max_capacity

    @property
    def phase(self) -> SessionPhase:
        """Where the message session stands, for ``rungar status`` (see SessionPhase)."""
        session = self.session
        if session is not None and session.conflicts:
            # GitHub answers: with a conflict, naming the session's owner
            return SessionPhase(
                Phase.WAITING, holder=session.holder, holder_seen_at=session.holder_seen_at
            )
        if self.error:
            return SessionPhase(Phase.UNREACHABLE, self.error)
        if session is None or session.session is None:
            return SessionPhase(Phase.STARTING)
        return SessionPhase(Phase.LISTENING)

    def set_max_capacity(self, value: int) -> None:
        """Takes effect on the next poll."""
        self._max_capacity = max(0, value)

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        """Listen until :meth:`stop`; survives every GitHub failure."""
        t = self._timing
        try:
            while not self._stopping.is_set():
                try:
                    await self._serve()
                    self._failures = 0
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
                    self._failures += 1
                    failures = self._failures
                    wait = min(t.error_backoff_max, t.error_backoff_first * 2 ** (failures - 1))
                    event = (
                        "github.listener_error"
                        if isinstance(e, GitHubError)
                        else "github.listener_bug"
                    )
                    if isinstance(e, GitHubError):
                        self.error = str(e) or type(e).__name__
                    log.warning(
                        event,
                        scale_set=self.config.name,
                        error=str(e),
                        failures_in_a_row=failures,
                        retry_in_s=wait,
                    )
                    if failures % t.session_recreate_after == 0 and self.session is not None:
                        # The session itself may be what is broken (a queue answering empty
                        # 200s): a new one gets a new queue URL and token.
                        log.warning(
                            "github.session_recreated",
                            scale_set=self.config.name,
                            failures_in_a_row=failures,
                        )
                        await self._drop_session()
                        self.sessions_recreated += 1
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
                store=self._sessions,
                token_refresh_margin=self._timing.message_queue_token_refresh_margin,
            )
            opened = await self.session.open()
            # The service's word on pending work (ARC #3420), when it gave one.
            self.error = ""
            await self._publish_if_present(opened.statistics, "session")
        while not self._stopping.is_set():
            cursor = await self._cursors.get_last_message_id(self.scale_set_id)
            message = await self.session.next_message(cursor, self._max_capacity)
            received = self._clock.now()  # what the message's times are measured against
            self._failures = 0  # a poll that answered (even "nothing new") is a good turn
            self.error = ""
            if message is None:
                if self.last_demand is not None:
                    await self._deliver_demand(self.last_demand)
            else:
                await self._handle(message, cursor, received)

    async def _publish_if_present(self, stats: Statistics | None, where: str) -> None:
        """Publish ``stats``; without them the previous statistics stand (logged once)."""
        if stats is not None:
            await self._publish(stats)
            return
        if not self._warned_no_statistics:
            self._warned_no_statistics = True
            log.warning(
                "github.statistics_missing",
                scale_set=self.config.name,
                answer=where,
                note="the previous statistics are kept; reported once per listener",
            )
        if self.last_demand is not None:
            await self._deliver_demand(self.last_demand)

    async def _handle(self, message: Message, cursor: int, received: float) -> None:
        assert self.session is not None
        if message.message_id <= cursor:
            await self.session.ack(
                message.message_id
            )  # handled before a crash; only the ack was lost
            return
        if message.message_type != JOB_MESSAGES:
            # Not ours to read: skipped (the cursor moves past it) but not acknowledged, so it
            # stays in GitHub's queue rather than vanishing unread; the official clients stop here.
            log.warning(
                "github.unknown_message",
                scale_set=self.config.name,
                message_id=message.message_id,
                message_type=message.message_type,
                note="skipped and left unacknowledged",
            )
            await self._cursors.set_last_message_id(self.scale_set_id, message.message_id)
            return
        available = [j.runner_request_id for j in message.jobs if j.kind.lower() == "jobavailable"]
        if available:
            # On failure this raises before the ack: the message comes back (GARM's rule).
            acquired = await self.session.acquire(available)
            log.info(
                "github.jobs_acquired",
                scale_set=self.config.name,
                offered=len(available),
                acquired=len(acquired),
            )
        offset = clock_offset(message.jobs, received)
        for job in message.jobs:
            kind = self._tracker.accept(job)
            if kind is not None:
                await self._deliver_job(self._event(job, kind, offset))
        await self._cursors.set_last_message_id(self.scale_set_id, message.message_id)
        await self._publish_if_present(message.statistics, "message")
        await self.session.ack(message.message_id)

    def _event(self, job: JobMessage, kind: JobEventKind, offset: float | None) -> JobEvent:
        return JobEvent(
            kind=kind,
            scale_set=self.config.name,
            job_id=job.key,
            hint=job_hint(job, offset),
            runner_name=job.runner_name,
            runner_id=job.runner_id,
            conclusion=conclusion_from_github(job.result),
            at=self._clock.now(),
            times=JobTimes(
                queued=job.queue_time,
                assigned=job.scale_set_assign_time,
                started=job.runner_assign_time,
                finished=job.finish_time,
            ),
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


def clock_offset(jobs: Sequence[JobMessage], received: float) -> float | None:
    """Rungar's clock less GitHub's, from a message that came at ``received``: its arrival less
    the newest of GitHub's times in it (a long poll answers as a message is made, so the
    newest time is GitHub's clock of about then). None when it carries no times."""
    newest = max(
        (
            t
            for j in jobs
            for t in (j.queue_time, j.scale_set_assign_time, j.runner_assign_time, j.finish_time)
            if t > 0
        ),
        default=0.0,
    )
    return received - newest if newest > 0 else None


def job_hint(job: JobMessage, offset: float | None = None) -> JobHint:
    """What the job's runner's provider is told of it: where it comes from and which run, and
    ``offset``, Rungar's clock less GitHub's as measured by the message that brought it."""
    return JobHint(
        repository=f"{job.owner}/{job.repository}" if job.owner else job.repository,
        workflow=job.workflow,
        job=job.display_name,
        job_id=job.key,
        branch=job.branch,
        run_id=str(job.workflow_run_id) if job.workflow_run_id else "",
        queued_at=job.queue_time,
        started_at=job.runner_assign_time,
        completed_at=job.finish_time,
        clock_offset=offset,
    )
