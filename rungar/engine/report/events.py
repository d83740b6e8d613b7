"""The event log: JSONL on disk with retention by count, bytes and age, and a live feed for
followers.

One object per line: ``time, kind, name, action, scale_set, provider, message, attributes``
(docs/events.md). History only: never read back for decisions. No secret is ever written.
The file format and every ``(kind, action)`` in :data:`EVENT_ACTIONS` are stable, documented
in docs/events.md and ``rungar events --help``; new actions and attributes may be added.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any, TextIO

from rungar.clock import Clock
from rungar.errors import FollowerBehind
from rungar.model.bounded import cut
from rungar.model.event_kinds import EVENT_ACTIONS
from rungar.store.files import private_file

__all__ = ["EVENT_ACTIONS", "Event", "EventLog", "FollowerBehind"]


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    kind: str  # runner | provider | scale_set
    name: str
    action: str  # created, adopted, removed, lost, full, failing, paused, …
    scale_set: str = ""
    provider: str = ""
    message: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        # A flat dict rather than dataclasses.asdict, which deep-copies every attribute: this
        # runs for every event on the create path. A dataclass among the attributes (none is
        # recorded today) still serialises as asdict would.
        attributes = self.attributes
        if any(is_dataclass(v) for v in attributes.values()):
            return json.dumps(asdict(self), sort_keys=True, default=str)
        record = {
            "action": self.action,
            "attributes": attributes,
            "kind": self.kind,
            "message": self.message,
            "name": self.name,
            "provider": self.provider,
            "scale_set": self.scale_set,
            "time": self.time,
        }
        return json.dumps(record, sort_keys=True, default=str)


MAX_BYTES = 16 * 1024 * 1024  # events kept, in memory and in the file between compactions
MESSAGE_MAX = 4096  # an event's message, cut past this (rungar.model.bounded)


def _decode(line: str) -> Event:
    return Event(**json.loads(line))


class EventLog:
    def __init__(
        self,
        clock: Clock,
        path: Path | None = None,
        *,
        max_count: int = 10_000,
        max_age: float | None = None,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.clock = clock
        self.path = path
        self.max_count = max_count
        self.max_age = max_age
        self.max_bytes = max_bytes
        # The kept events, oldest first, each once: as its line (its JSON and a newline), the
        # form a compaction writes and the form whose size the byte bound counts. An event is
        # decoded again only when read (recent), which is rare next to recording.
        self._lines: deque[str] = deque()
        self._bytes = 0  # the kept lines' total length
        self._followers: set[asyncio.Queue[Event | None]] = set()
        self.follow_buffer = 1000
        self._written = 0
        self._written_bytes = 0  # written to the file since it was last compacted
        self._file: TextIO | None = None  # kept open: an event is on the create path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        if not self.path.exists():
            return
        for line in self.path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError, TypeError):
                Event(**json.loads(line))  # a line that is not an event is not kept
                self._keep(line + "\n")

    def record(
        self,
        kind: str,
        name: str,
        action: str,
        *,
        scale_set: str = "",
        provider: str = "",
        message: str = "",
        **attributes: Any,
    ) -> Event:
        if len(message) > MESSAGE_MAX:
            message = cut(message, MESSAGE_MAX)
        event = Event(
            self.clock.now(), kind, name, action, scale_set, provider, message, attributes
        )
        line = event.to_json() + "\n"
        self._keep(line)
        if self.path is not None:
            if self._file is None:
                private_file(self.path)  # 0600 whatever the umask: events name jobs and repos
                self._file = self.path.open("a", buffering=1)  # line-buffered: whole lines
            self._file.write(line)
            self._written += 1
            self._written_bytes += len(line)
            if self._written % 500 == 0 or self._written_bytes > self.max_bytes // 4:
                self.compact()
        for queue in list(self._followers):
            if queue.qsize() >= self.follow_buffer:
                self._followers.discard(queue)  # a slow follower is cut off, and told so
                queue.put_nowait(None)
            else:
                queue.put_nowait(event)
        return event

    def _keep(self, line: str) -> None:
        """Keep an event's ``line`` among the recent ones; the oldest go once there are
        ``max_count`` or their lines take more than ``max_bytes`` (the newest is always kept)."""
        self._lines.append(line)
        self._bytes += len(line)
        while len(self._lines) > 1 and (
            len(self._lines) > self.max_count or self._bytes > self.max_bytes
        ):
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        self._bytes -= len(self._lines.popleft())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def compact(self) -> None:
        """Keep at most ``max_count`` events and ``max_bytes``, none older than ``max_age``."""
        if self.max_age is not None:
            horizon = self.clock.now() - self.max_age
            while self._lines and _decode(self._lines[0]).time < horizon:
                self._drop_oldest()
        self._written_bytes = 0
        if self.path is not None:
            tmp = private_file(self.path.with_suffix(".tmp"))
            tmp.write_text("".join(self._lines))
            tmp.replace(self.path)
            self.close()  # the next event opens the compacted file

    def recent(
        self,
        *,
        scale_set: str = "",
        provider: str = "",
        since: float = 0.0,
        limit: int = 0,
    ) -> list[Event]:
        found = [
            e
            for e in map(_decode, self._lines)
            if e.time >= since
            and (not scale_set or e.scale_set == scale_set)
            and (not provider or e.provider == provider)
        ]
        return found[-limit:] if limit else found

    async def follow(self) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._followers.add(queue)
        try:
            while True:
                event = await queue.get()
                if event is None:
                    raise FollowerBehind("the event follower fell behind and was cut off")
                yield event
        finally:
            self._followers.discard(queue)
