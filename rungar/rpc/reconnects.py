"""How often the daemon tries a provider whose connection keeps breaking once it is made.

gRPC backs off by itself from a connection that cannot be made (refused, reset at once, a
handshake that times out): the channel waits ``grpc.initial_reconnect_backoff_ms`` between
attempts (rungar.rpc.client's channel options). A connection that *is* made and then breaks (a
peer that answers garbage after a valid HTTP/2 preface, one that resets every stream) leaves
the channel idle instead, and gRPC's next call connects again at once: one connection per call,
hundreds a second. :class:`Reconnects` bounds those: after such a break, calls fail at once
without touching the channel until a wait has passed, 1 s doubling to 30 s, reset by the first
call answered.
"""

from __future__ import annotations

import time
from collections.abc import Callable

FIRST_WAIT = 1.0
MOST_WAIT = 30.0


class Reconnects:
    def __init__(
        self,
        first: float = FIRST_WAIT,
        most: float = MOST_WAIT,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.first = first
        self.most = most
        self._now = now
        self._wait = 0.0  # the wait after the last break; 0 while the connection holds
        self._until = 0.0
        self.why = ""  # the last break's error
        self.attempts = 0  # calls let through to connect again after a break

    def left(self) -> float:
        """Seconds until the next call may try to connect again; 0: it may now."""
        if not self._wait:
            return 0.0
        left = self._until - self._now()
        if left > 0:
            return left
        self.attempts += 1
        return 0.0

    def broke(self, why: str) -> None:
        """A call found the connection broken after it was made: wait before the next."""
        self._wait = min(self.most, self._wait * 2) if self._wait else self.first
        self._until = self._now() + self._wait
        self.why = why

    def answered(self) -> None:
        self._wait = 0.0
        self.why = ""
