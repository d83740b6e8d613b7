"""One scale set's message session, kept alive through everything the service does to it.

docs/github.md, "Message sessions": a 409 on create means another (perhaps
crashed) listener still has the session, so we stand by and retry with capped backoff for as
long as it takes (GARM #700; ARC 0.9–0.13 crashed here). A 401 from the queue refreshes the
session (A9) and retries once; a refresh that 404s, or a queue that 404s, means the service evicted
the session (scaleset #123), so a new one is opened. The queue token is refreshed proactively
when under 10 minutes remain, as GARM does (ARC #3204). ``ScaleSetGone`` is left to the caller,
which must re-create the scale set.

The id of the session held is recorded in a :class:`SessionStore` (the daemon's state database).
Before opening a session, one recorded earlier (left by a crash) is deleted: it is this
installation's own, and waiting for it to expire would hold every job for minutes. A 409 after
that comes from a session of another installation, which is waited for as above.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from rungar.clock import Clock
from rungar.errors import GitHubError
from rungar.github.auth import jwt_expiry
from rungar.github.client import ScaleSetClient
from rungar.github.exceptions import MessageQueueTokenExpired, SessionConflict, SessionGone
from rungar.github.interface import SessionStore
from rungar.github.wire import Message, Session

__all__ = ["MessageSession", "SessionStore", "conflict_backoff"]

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
        store: SessionStore | None = None,
        token_refresh_margin: float = MQ_REFRESH_MARGIN,
    ) -> None:
        self._client = client
        self._store = store
        self._refresh_margin = token_refresh_margin
        self.scale_set_id = scale_set_id
        self._owner = owner_name
        self._clock = clock
        self._first = conflict_retry_first
        self._cap = conflict_retry_max
        self.session: Session | None = None
        self.conflicts = 0  # consecutive 409s, for status and alerting
        self.holder = ""  # the owner the last 409 named
        self.holder_seen_at = 0.0  # when it was answered
        self.opened = 0

    async def open(self) -> Session:
        """Create the session, standing by through 409s indefinitely."""
        await self._delete_recorded()
        attempt = 0
        while True:
            try:
                self.session = await self._client.create_session(self.scale_set_id, self._owner)
            except SessionConflict as e:
                attempt += 1
                self.conflicts = attempt
                self.holder, self.holder_seen_at = e.holder, self._clock.now()
                wait = conflict_backoff(attempt, self._first, self._cap)
                log.warning(
                    "github.session_conflict",
                    scale_set_id=self.scale_set_id,
                    holder=e.holder,
                    attempt=attempt,
                    retry_in_s=round(wait, 1),
                    hint="another listener owns the scale set, or a crashed one's session lingers",
                )
                await self._clock.sleep(wait)
                continue
            self.conflicts = 0
            self.opened += 1
            await self._record(self.session.session_id)
            log.info("github.session_opened", scale_set_id=self.scale_set_id)
            return self.session

    async def _record(self, session_id: str) -> None:
        if self._store is not None:
            await self._store.set_session_id(self.scale_set_id, session_id)

    async def _delete_recorded(self) -> None:
        """Delete the session this installation recorded and no longer holds (a crash's)."""
        if self._store is None:
            return
        stale = await self._store.get_session_id(self.scale_set_id)
        if not stale or (self.session is not None and self.session.session_id == stale):
            return
        try:
            await self._client.delete_session(self.scale_set_id, stale)
        except GitHubError as e:  # it may linger; the 409s that follow are waited out
            log.warning(
                "github.stale_session_not_deleted", scale_set_id=self.scale_set_id, error=str(e)
            )
        else:
            log.info("github.stale_session_deleted", scale_set_id=self.scale_set_id)
        await self._record("")

    async def _current(self) -> Session:
        if self.session is None:
            return await self.open()
        expiry = jwt_expiry(self.session.message_queue_token)
        if expiry and expiry - self._clock.now() < self._refresh_margin:
            await self.refresh()
        assert self.session is not None
        return self.session

    async def refresh(self) -> Session:
        """A9; an evicted session is replaced by a new one."""
        if self.session is None:
            return await self.open()
        try:
            refreshed = await self._client.refresh_session(
                self.scale_set_id, self.session.session_id
            )
        except SessionGone:
            log.warning("github.session_evicted", scale_set_id=self.scale_set_id)
            self.session = None
            return await self.open()
        if refreshed.session_id != self.session.session_id:
            await self._record(refreshed.session_id)
        self.session = refreshed
        return self.session

    async def renew(self) -> bool:
        """A9 on the session held, to learn whether it is still ours: True when GitHub confirms
        it, False when it is gone (nothing is opened in its place here: the listener's next
        poll does that, and stands by through the 409s if another session holds the scale
        set). Raises :class:`GitHubError` when GitHub does not answer."""
        if self.session is None:
            return False
        try:
            refreshed = await self._client.refresh_session(
                self.scale_set_id, self.session.session_id
            )
        except SessionGone:
            log.warning("github.session_evicted", scale_set_id=self.scale_set_id)
            self.session = None
            return False
        if refreshed.session_id != self.session.session_id:
            await self._record(refreshed.session_id)
        self.session = refreshed
        return True

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
        """A10, best effort: a stale session left behind costs the next start 409s."""
        session, self.session = self.session, None
        if session is None:
            return
        try:
            await self._client.delete_session(self.scale_set_id, session.session_id)
        except Exception as e:  # shutdown must finish whatever GitHub says
            log.warning(
                "github.session_delete_failed", scale_set_id=self.scale_set_id, error=str(e)
            )
            return  # still recorded: the next start deletes it
        await self._record("")
