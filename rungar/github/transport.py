"""The one door every GitHub HTTP call goes through: counting, retries, rate limits.

Retries follow go-retryablehttp as ARC and the scaleset library configure it: four retries,
exponential 1–30 s, on connection errors, timeouts and 5xx except 501, ``Retry-After``
honoured. A 403/429 that is a rate limit is waited out (``Retry-After``, the reset time, or at
least a minute doubling with each wait in a row) and tried again; a 429 from the Actions service
or the broker without ``Retry-After`` backs off 1, 2, 4, 8 s with jitter instead. While the last
REST reading says the budget is spent, REST calls wait for the reset; the message queue never
does. Every call carries Rungar's User-Agent, and every attempt is counted by status code. All
waiting goes through the injected :class:`Clock`; the waits are :class:`GitHubTiming`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import structlog
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from rungar import __version__
from rungar.clock import Clock
from rungar.errors import GitHubUnavailable
from rungar.github.ratelimit import (
    RateLimit,
    RequestCounter,
    broker_backoff,
    budget_wait,
    is_rate_limited,
    is_transient,
    parse_rate_limit,
    rate_limit_wait,
    transient_wait,
)
from rungar.github.timing import GitHubTiming
from rungar.github.wire import decode_json

log = structlog.get_logger("rungar.github")

DEFAULT_TIMEOUT = 30.0
MAX_TRANSIENT_RETRIES = 4
MAX_RATE_LIMIT_WAITS = 6
USER_AGENT = f"rungar/{__version__} (scaleset)"


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes = field(repr=False)

    def json(self) -> Any:
        return decode_json(self.body)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class _Retry(Exception):
    """Internal: this attempt's answer should be retried after ``wait`` seconds."""

    def __init__(self, wait: float, response: Response | None, cause: str) -> None:
        super().__init__(cause)
        self.wait = wait
        self.response = response


class Transport:
    """Sends requests, retries what is worth retrying, and counts every attempt."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        clock: Clock,
        counter: RequestCounter | None = None,
        *,
        max_retries: int = MAX_TRANSIENT_RETRIES,
        timing: GitHubTiming | None = None,
        user_agent: str = USER_AGENT,
        rng: random.Random | None = None,
    ) -> None:
        self._http = http
        self._clock = clock
        self.counter = counter or RequestCounter()
        self._max_retries = max_retries
        self.timing = timing or GitHubTiming()
        self.user_agent = user_agent
        self._rng = rng or random.Random()
        self.rate_limit: RateLimit | None = None

    @property
    def clock(self) -> Clock:
        return self._clock

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        json_body: Any = None,
        content: bytes | None = None,
        params: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        rest: bool = False,
        retry: bool = True,
        rate_limits: bool = True,
    ) -> Response:
        """The final answer after retries. Raises :class:`GitHubUnavailable` when none came.

        With ``rate_limits`` False a rate-limited answer (429, or a 403 that is a rate limit)
        is returned, not waited out: the registration queue paces those calls itself."""
        limit_waits = 0
        while True:
            if rest:
                wait = budget_wait(
                    self.rate_limit, self._clock.now(), self.timing.rate_limit_wait_max
                )
                if wait > 0:
                    log.warning("github.budget_spent", wait_s=round(wait, 1))
                    await self._clock.sleep(wait)
                    self.rate_limit = None  # the reset happened; the next answer tells the truth
            try:
                return await self._attempt_with_retries(
                    method,
                    url,
                    headers,
                    json_body,
                    content,
                    params,
                    timeout,
                    rest,
                    retry,
                    rate_limits,
                )
            except _Retry as limited:
                # Only rate limits escape the tenacity loop: they have their own, longer budget.
                limit_waits += 1
                if limit_waits > MAX_RATE_LIMIT_WAITS or limited.response is None:
                    if limited.response is not None:
                        return limited.response
                    raise GitHubUnavailable(str(limited)) from limited
                wait = rate_limit_wait(
                    limited.response.headers,
                    self._clock.now(),
                    limit_waits,
                    first=self.timing.rate_limit_wait_first,
                    cap=self.timing.rate_limit_wait_max,
                )
                log.warning("github.rate_limited", wait_s=round(wait, 1), url=_path(url))
                await self._clock.sleep(wait)

    async def _attempt_with_retries(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        json_body: Any,
        content: bytes | None,
        params: Mapping[str, str] | None,
        timeout: float,
        rest: bool,
        retry: bool,
        rate_limits: bool = True,
    ) -> Response:
        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            return exc.wait if isinstance(exc, _Retry) else 1.0

        retrying = AsyncRetrying(
            stop=stop_after_attempt(1 + (self._max_retries if retry else 0)),
            wait=wait,
            retry=retry_if_exception_type(_TransientRetry),
            sleep=self._clock.sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    n = attempt.retry_state.attempt_number
                    return await self._once(
                        method,
                        url,
                        headers,
                        json_body,
                        content,
                        params,
                        timeout,
                        rest,
                        n,
                        rate_limits,
                    )
        except _TransientRetry as exhausted:
            if exhausted.response is not None:
                return exhausted.response
            raise GitHubUnavailable(f"{method} {_path(url)}: {exhausted}") from exhausted
        raise AssertionError("unreachable: tenacity either returns or raises")

    async def _once(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        json_body: Any,
        content: bytes | None,
        params: Mapping[str, str] | None,
        timeout: float,
        rest: bool,
        attempt: int,
        rate_limits: bool = True,
    ) -> Response:
        t = self.timing
        try:
            raw = await self._http.request(
                method,
                url,
                headers={"User-Agent": self.user_agent, **headers},
                json=json_body,
                content=content,
                params=params,
                timeout=timeout,
            )
        except httpx.HTTPError as e:
            self.counter.count("error")
            wait = transient_wait(None, {}, attempt, first=t.retry_first, cap=t.retry_max)
            raise _TransientRetry(wait, None, type(e).__name__) from e
        response = Response(
            raw.status_code, {k.lower(): v for k, v in raw.headers.items()}, raw.content
        )
        self.counter.count(response.status)
        if rest:
            reading = parse_rate_limit(response.headers)
            if reading is not None:
                self.rate_limit = reading
        if not rate_limits and (
            response.status == 429
            or is_rate_limited(response.status, response.headers, response.body)
        ):
            return response
        if response.status == 429 and not rest and "retry-after" not in response.headers:
            # The Actions service or broker pushing back without saying for how long: a short
            # jittered backoff, not the REST API's minute (its budget is not the REST budget).
            wait = broker_backoff(
                attempt,
                self._rng.random(),
                t.broker_retry_first,
                t.broker_retry_max,
                t.broker_retry_jitter,
            )
            raise _TransientRetry(wait, response, "HTTP 429")
        if is_rate_limited(response.status, response.headers, response.body):
            raise _Retry(0.0, response, "rate limited")  # the wait is the caller's (a series)
        if is_transient(response.status):
            wait = transient_wait(
                response.status,
                response.headers,
                attempt,
                self._clock.now(),
                first=t.retry_first,
                cap=t.retry_max,
                after_cap=t.rate_limit_wait_max,
            )
            raise _TransientRetry(wait, response, f"HTTP {response.status}")
        return response


class _TransientRetry(_Retry):
    """Internal: a transient failure, retried by tenacity within the transient budget."""


def _path(url: str) -> str:
    """The URL without its query string, which may carry a session id."""
    return url.split("?", 1)[0]
