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

import json
import random
from collections.abc import Mapping
from typing import Any, Protocol

import httpx
import structlog

from rungar import __version__
from rungar.clock import Clock
from rungar.errors import GitHubUnavailable
from rungar.github.exceptions import GitHubUnreachable
from rungar.github.http import HttpxSender, Response
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

log = structlog.get_logger("rungar.github")

DEFAULT_TIMEOUT = 30.0
MAX_TRANSIENT_RETRIES = 4
MAX_RATE_LIMIT_WAITS = 6
USER_AGENT = f"rungar/{__version__} (scaleset)"


class Sender(Protocol):
    """Sends one HTTP request and reads its answer: no retries, no counting (those are the
    :class:`Transport`'s). The body is sent as given; ``params`` replace the URL's query.
    A request that got no answer raises :class:`~rungar.github.exceptions.GitHubUnreachable`.

    Every process's is :func:`rungar.github.http.github_http`'s; an ``httpx.AsyncClient`` given
    instead (tests with ``httpx.MockTransport``) is wrapped in the same
    :class:`~rungar.github.http.HttpxSender`."""

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes = b"",
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response: ...

    async def aclose(self) -> None: ...


def encode_json(value: Any) -> bytes:
    """A JSON body: compact, UTF-8, no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


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
        http: Sender | httpx.AsyncClient,
        clock: Clock,
        counter: RequestCounter | None = None,
        *,
        max_retries: int = MAX_TRANSIENT_RETRIES,
        timing: GitHubTiming | None = None,
        user_agent: str = USER_AGENT,
        rng: random.Random | None = None,
    ) -> None:
        if isinstance(http, httpx.AsyncClient):
            http = HttpxSender(http)
        self._http: Sender = http
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
        if content is not None:
            body = content
        elif json_body is not None:
            body = encode_json(json_body)
            if not any(name.lower() == "content-type" for name in headers):
                headers = {**headers, "Content-Type": "application/json"}
        else:
            body = b""
        headers = {"User-Agent": self.user_agent, **headers}
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
                    method, url, headers, body, params, timeout, rest, retry, rate_limits
                )
            except _Retry as limited:
                # Only rate limits escape the transient loop: they have their own, longer budget.
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
        body: bytes,
        params: Mapping[str, str] | None,
        timeout: float,
        rest: bool,
        retry: bool,
        rate_limits: bool,
    ) -> Response:
        """The first attempt, and up to ``max_retries`` more after a transient failure, each
        after the wait that failure named. The last failure's answer is returned, or, when
        there was none (a connection error, a timeout), :class:`GitHubUnavailable` raised."""
        attempts = 1 + (self._max_retries if retry else 0)
        attempt = 1
        while True:
            try:
                return await self._once(
                    method, url, headers, body, params, timeout, rest, attempt, rate_limits
                )
            except _TransientRetry as failed:
                if attempt >= attempts:
                    if failed.response is not None:
                        return failed.response
                    raise GitHubUnavailable(f"{method} {_path(url)}: {failed}") from failed
                await self._clock.sleep(failed.wait)
                attempt += 1

    async def _once(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        params: Mapping[str, str] | None,
        timeout: float,
        rest: bool,
        attempt: int,
        rate_limits: bool,
    ) -> Response:
        t = self.timing
        try:
            response = await self._http.send(method, url, headers, body, params, timeout)
        except GitHubUnreachable as e:
            self.counter.count("error")
            wait = transient_wait(None, {}, attempt, first=t.retry_first, cap=t.retry_max)
            raise _TransientRetry(wait, None, str(e)) from e
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
    """Internal: a transient failure, retried within the transient budget."""


def _path(url: str) -> str:
    """The URL without its query string, which may carry a session id."""
    return url.split("?", 1)[0]
