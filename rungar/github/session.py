"""One scale set's message session, kept alive through everything the service does to it.

Protocol spec §4.2, §4.6 and the pain points of §6: a 409 on create means another (perhaps
crashed) listener still holds the session, so we stand by and retry with capped backoff for as
long as it takes (GARM #700; ARC 0.9–0.13 crashed here). A 401 from the queue refreshes the
session (A9) and retries once; a refresh that 404s, or a queue that 404s, means the service evicted
the session (scaleset #123), so a new one is opened. The queue token is refreshed proactively
when under 10 minutes remain, as GARM does (ARC #3204). ``ScaleSetGone`` is left to the caller,
which must re-create the scale set.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from rungar.clock import Clock
from rungar.github.auth import jwt_expiry
from rungar.github.client import ScaleSetClient
from rungar.github.exceptions import MessageQueueTokenExpired, SessionConflict, SessionGone
from rungar.github.wire import Message, Session

log = structlog.get_logger("rungar.github")

MQ_REFRESH_MARGIN = 10 * 60.0
CONFLICT_GROWTH = 1.5


def conflict_backoff(attempt: int, first: float, cap: float) -> float:
    """Seconds before session-create attempt ``attempt + 1`` after ``attempt`` conflicts (≥ 1)."""
    return min(cap, first * CONFLICT_GROWTH ** max(0, attempt - 1))


class MessageSession:
    def __init__(
        self,
        client: ScaleSetClient,
        scale_set_id: int,
        owner_name: str,
        clock: Clock,
        *,
        conflict_retry_first: float = 10.0,
        conflict_retry_max: float = 60.0,
    ) -> None:
        self._client = client
        self.scale_set_id = scale_set_id
        self._owner = owner_name
        self._clock = clock
        self._first = conflict_retry_first
        self._cap = conflict_retry_max
        self.session: Session | None = None
        self.conflicts = 0  # consecutive 409s, for status and alerting
        self.opened = 0

    async def open(self) -> Session:
        """Create the session, standing by through 409s indefinitely."""
        attempt = 0
        while True:
            try:
                self.session = await self._client.create_session(self.scale_set_id, self._owner)
            except SessionConflict:
                attempt += 1
                self.conflicts = attempt
                wait = conflict_backoff(attempt, self._first, self._cap)
                log.warning(
                    "github.session_conflict",
                    scale_set_id=self.scale_set_id,
                    attempt=attempt,
                    retry_in_s=round(wait, 1),
                    hint="another listener holds the scale set, or a crashed one's session lingers",
                )
                await self._clock.sleep(wait)
                continue
            self.conflicts = 0
            self.opened += 1
            log.info("github.session_opened", scale_set_id=self.scale_set_id)
            return self.session

    async def _current(self) -> Session:
        if self.session is None:
            return await self.open()
        expiry = jwt_expiry(self.session.message_queue_token)
        if expiry and expiry - self._clock.now() < MQ_REFRESH_MARGIN:
            await self.refresh()
        assert self.session is not None
        return self.session

    async def refresh(self) -> Session:
        """A9; an evicted session is replaced by a new one."""
        if self.session is None:
            return await self.open()
        try:
            self.session = await self._client.refresh_session(
                self.scale_set_id, self.session.session_id
            )
        except SessionGone:
            log.warning("github.session_evicted", scale_set_id=self.scale_set_id)
            self.session = None
            return await self.open()
        return self.session

    async def next_message(self, last_message_id: int, max_capacity: int) -> Message | None:
        session = await self._current()
        try:
            return await self._client.get_message(session, last_message_id, max_capacity)
        except MessageQueueTokenExpired:
            session = await self.refresh()
        except SessionGone:
            log.warning("github.session_evicted", scale_set_id=self.scale_set_id)
            self.session = None
            session = await self.open()
        try:
            return await self._client.get_message(session, last_message_id, max_capacity)
        except SessionGone:
            self.session = None  # gone again at once: the next poll opens a new one
            return None
        # A second 401 right after a fresh token propagates: the caller backs off and polls again
        # with the same session (dropping it here would leave it alive and 409 our own next open).

    async def ack(self, message_id: int) -> None:
        session = await self._current()
        try:
            await self._client.delete_message(session, message_id)
        except MessageQueueTokenExpired:
            await self._client.delete_message(await self.refresh(), message_id)

    async def acquire(self, request_ids: Sequence[int]) -> list[int]:
        session = await self._current()
        try:
            return await self._client.acquire_jobs(self.scale_set_id, session, request_ids)
        except MessageQueueTokenExpired:
            return await self._client.acquire_jobs(
                self.scale_set_id, await self.refresh(), request_ids
            )

    async def close(self) -> None:
        """A10, best effort: a stale session left behind costs the next start 409s (§4.6)."""
        session, self.session = self.session, None
        if session is None:
            return
        try:
            await self._client.delete_session(self.scale_set_id, session.session_id)
        except Exception as e:  # shutdown must finish whatever GitHub says
            log.warning(
                "github.session_delete_failed", scale_set_id=self.scale_set_id, error=str(e)
            )
