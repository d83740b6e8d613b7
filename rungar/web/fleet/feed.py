"""The fleet page's live view: one sampler on the listener's loop, fanned out to every open page.

Every ``refresh`` the sampler asks the engine, on the engine's own loop (through
:func:`rungar.web.bounded.engine_caller`), for the status document and the events since the last
sample: one question however many pages are open, so a thousand viewers cost the engine what one
does. Each page's stream is a short queue; a page that does not keep up is dropped (it reconnects
and starts again from a fresh snapshot), never waited for.

The runners-over-time series is the status document's provider counts at each sample, kept for
``history``; job waits come from the ``job_started`` events' ``waited_s``, the same numbers
``rungar events`` shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

log = structlog.get_logger("rungar.web.fleet")

# The engine side: (events since, events already seen at that time) -> {"status", "events"}.
EngineRead = Callable[[float, int], dict[str, Any]]
EngineCaller = Callable[[Callable[[], None]], None]

QUEUE_DEPTH = 8  # samples a page may fall behind before it is dropped
RECENT_EVENTS = 200  # events a newly opened page is given
ASK_TIMEOUT = 10.0  # an engine busier than this skips a sample rather than piling them up


@dataclass(slots=True)
class Point:
    """One sample of the runners-over-time chart."""

    time: float
    providers: dict[str, int]

    def document(self) -> dict[str, Any]:
        return {"time": self.time, "providers": self.providers}


@dataclass(slots=True)
class Sample:
    status: dict[str, Any]
    events: list[dict[str, Any]]
    point: Point


@dataclass
class Feed:
    read: EngineRead
    engine_call: EngineCaller
    refresh: float = 2.0
    history: float = 3600.0
    max_streams: int = 16
    latest: dict[str, Any] | None = None
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_EVENTS))
    points: deque[Point] = field(default_factory=deque)
    _streams: set[asyncio.Queue[bytes | None]] = field(default_factory=set)
    _since: float = 0.0
    _seen_at_since: int = 0
    # Set once the first sample was taken (or failed): a page opened at start waits for it.
    _first: asyncio.Event = field(default_factory=asyncio.Event)

    # -- the engine's side, as one call on its loop -------------------------------------

    async def ask(self) -> dict[str, Any]:
        """The engine's answer to ``read``, awaited on the listener's loop."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[str, Any]] = loop.create_future()
        since, seen = self._since, self._seen_at_since

        def settle(result: dict[str, Any] | None, error: BaseException | None) -> None:
            if answer.done():
                return  # the asker gave up waiting
            if error is not None:
                answer.set_exception(error)
            else:
                answer.set_result(result or {})

        def on_engine() -> None:
            try:
                result = self.read(since, seen)
            except Exception as e:  # reported on the listener's side
                loop.call_soon_threadsafe(settle, None, e)
            else:
                loop.call_soon_threadsafe(settle, result, None)

        self.engine_call(on_engine)
        return await asyncio.wait_for(answer, ASK_TIMEOUT)

    # -- the sampler ----------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            try:
                self.absorb(await self.ask())
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("dashboard.sample_failed", error=str(e) or type(e).__name__)
            self._first.set()
            await asyncio.sleep(self.refresh)

    async def ready(self) -> None:
        """Until the first sample was taken (or failed)."""
        await self._first.wait()

    def absorb(self, answer: dict[str, Any]) -> Sample:
        status = answer["status"]
        events = list(answer.get("events", []))
        now = float(status["daemon"]["now"])
        if events:
            last = float(events[-1]["time"])
            same = sum(1 for e in events if float(e["time"]) == last)
            self._seen_at_since = same + (self._seen_at_since if last == self._since else 0)
            self._since = last
        point = Point(now, {p["name"]: int(p["runners"]) for p in status["providers"]})
        self.points.append(point)
        while self.points and self.points[0].time < now - self.history:
            self.points.popleft()
        self.latest = status
        self.recent.extend(events)
        sample = Sample(status, events, point)
        self._broadcast(
            message("update", {"status": status, "events": events, "point": point.document()})
        )
        return sample

    # -- the pages' streams -----------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "status": self.latest,
            "events": list(self.recent),
            "points": [p.document() for p in self.points],
            "refresh": self.refresh,
        }

    def open_stream(self) -> asyncio.Queue[bytes | None] | None:
        """A new page's queue, starting with a snapshot; None when ``max_streams`` are open."""
        if len(self._streams) >= self.max_streams:
            return None
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=QUEUE_DEPTH)
        queue.put_nowait(message("snapshot", self.snapshot()))
        self._streams.add(queue)
        return queue

    def close_stream(self, queue: asyncio.Queue[bytes | None]) -> None:
        self._streams.discard(queue)

    @property
    def streams(self) -> int:
        return len(self._streams)

    def _broadcast(self, data: bytes) -> None:
        for queue in list(self._streams):
            try:
                queue.put_nowait(data)
            except asyncio.QueueFull:
                self._streams.discard(queue)  # too slow: it ends, and the page reconnects
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
                queue.put_nowait(None)


def message(kind: str, data: dict[str, Any]) -> bytes:
    """One server-sent event."""
    return f"event: {kind}\ndata: {json.dumps(data, default=str)}\n\n".encode()


def engine_read(control: Any) -> EngineRead:
    """What the sampler asks of the daemon's :class:`~rungar.daemon.control.Control`: the status
    document (``rungar status --json``) and the events since the last sample
    (``rungar events``). Runs on the engine's loop."""

    def read(since: float, seen: int) -> dict[str, Any]:
        events = control.events(since=since, limit=0 if since else RECENT_EVENTS)
        return {"status": control.status(), "events": events[seen if since else 0 :]}

    return read
