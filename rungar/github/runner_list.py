"""One runner listing per installation, shared by every caller for ``runner_list_max_age``
(15 s), with single flight (docs/github.md, "Runners").

GitHub lists an installation's runners only all together (the REST listing, every scale set's
registrations with their online and busy flags), and the daemon asks for them from several
places: each reconcile pass, the 5-second sync of starting runners, a scale set's own view. One
answer younger than the max age is handed to every caller; when none is, the first caller asks
and every caller that comes while that request is in flight awaits the same answer, so
concurrent callers cost one request, not one each.

While GitHub's REST budget runs low the max age is stretched (twice below 25 % of the budget,
four times below 10 %), so the list is asked for half or a quarter as often.

A failed request is not kept: each of its waiting callers gets the error, and the next caller
asks again. A caller that is cancelled does not cancel the request for the others.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from rungar.clock import Clock

T = TypeVar("T")


class SharedListing(Generic[T]):
    def __init__(
        self,
        fetch: Callable[[], Awaitable[T]],
        clock: Clock,
        max_age: float,
        stretch: Callable[[], float] | None = None,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self.max_age = max_age
        # How many times ``max_age`` an answer is kept: 2 or 4 while the API budget runs low.
        self._stretch = stretch or (lambda: 1.0)
        self._value: T | None = None
        self._asked_at = 0.0
        self._flight: asyncio.Future[T] | None = None
        self.requests = 0  # how many requests were made (tests, metrics)

    async def get(self) -> T:
        """An answer asked for at most ``max_age`` ago, or the one being asked for now."""
        age = self._clock.now() - self._asked_at
        if self._value is not None and age < self.max_age * self._stretch():
            return self._value
        if self._flight is None:
            self._flight = asyncio.ensure_future(self._ask())
            # Retrieved here too, so a request whose callers were all cancelled never logs
            # "exception was never retrieved".
            self._flight.add_done_callback(_retrieve)
        return await asyncio.shield(self._flight)

    def invalidate(self) -> None:
        """The next caller asks anew (a request in flight is still shared)."""
        self._value = None

    async def _ask(self) -> T:
        asked_at = self._clock.now()  # the answer is as old as the question
        self.requests += 1
        try:
            value = await self._fetch()
        finally:
            self._flight = None
        self._value, self._asked_at = value, asked_at
        return value


def _retrieve(future: asyncio.Future[Any]) -> None:
    with contextlib.suppress(asyncio.CancelledError, Exception):
        future.exception()
