"""How often the daemon tries a provider whose connection keeps breaking once it is made.

gRPC alone connects again far too often to a peer that fails: a connection that is made and
then breaks (a peer that answers garbage after a valid HTTP/2 preface, one that resets every
stream) leaves the channel idle, and its next call connects again at once: one connection per
call, hundreds a second, and even one call can connect several times before it fails; a
connection that cannot be made (garbage during the handshake, say) is tried in the background
on gRPC's backoff. :class:`Reconnects` bounds both: after a failure the channel is closed and
calls fail at once without a new one until a wait has passed: 1 s after a connection that
could not be made (so a provider that comes back is reached within about a second), 1 s
doubling to 30 s after one that broke once made; the first call answered resets it. The next
channel then makes one connection attempt, shared by every call that waits for it
(``GrpcProvider._open``), so a provider is connected to at most once a second.
"""

from __future__ import annotations

import time
from collections.abc import Callable

BROKE = "its connection broke"
NOT_MADE = "no connection could be made"
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
        self.why = ""  # the last failure's error
        self.what = ""  # what failed: BROKE or NOT_MADE
        self.attempts = 0  # connections tried again after a failure

    @property
    def failing(self) -> bool:
        """A connection failed, and no call has been answered since."""
        return bool(self._wait)

    def left(self) -> float:
        """Seconds until the next call may try to connect again; 0: it may now."""
        if not self._wait:
            return 0.0
        return max(0.0, self._until - self._now())

    def attempted(self) -> None:
        """A new connection is tried after a failure (rungar_provider_reconnects_total)."""
        self.attempts += 1

    def broke(self, why: str) -> None:
        """A call found the connection broken after it was made: wait before the next, 1 s
        doubling to 30 s."""
        again = self._wait and self.what == BROKE
        self._wait = min(self.most, self._wait * 2) if again else self.first
        self._until = self._now() + self._wait
        self.why = why
        self.what = BROKE

    def not_made(self, why: str) -> None:
        """A call found that no connection could be made (refused, reset at once, a handshake
        that failed): try again a second later, so a provider that comes back is reached
        within about a second; after a break, the break's wait keeps doubling."""
        if self._wait and self.what == BROKE:
            self.broke(why)
            return
        self._wait = self.first
        self._until = self._now() + self._wait
        self.why = why
        self.what = NOT_MADE

    def answered(self) -> None:
        self._wait = 0.0
        self.why = ""
