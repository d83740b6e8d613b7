"""Rate-limit and retry arithmetic, pure (protocol spec §1.6, §7.5; seed 001 "API budget").

GitHub's REST answers carry ``x-ratelimit-*`` headers. Like kinhin, Rungar polls half as often
below 25% of the budget, a quarter as often below 10%, and waits for the reset (at most 15
minutes) when the budget is spent. A 403/429 that says "rate limit" is waited out: ``Retry-After``
first, then ``x-ratelimit-reset``, otherwise at least 60 s, growing exponentially.
Transient failures (connection errors, 429, 5xx except 501) are retried the retryablehttp way:
exponential from 1 s to 30 s, ``Retry-After`` honoured on 429 and 503.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MAX_RESET_WAIT = 15 * 60.0
RESET_MARGIN = 1.0  # x-ratelimit-reset is whole seconds: waiting to it exactly can be early
SECONDARY_LIMIT_WAIT = 60.0
RETRY_FIRST = 1.0
RETRY_MAX = 30.0


@dataclass(frozen=True, slots=True)
class RateLimit:
    """One reading of the REST budget."""

    limit: int
    remaining: int
    reset_at: float  # epoch seconds
    resource: str = "core"

    @property
    def fraction_left(self) -> float:
        return self.remaining / self.limit if self.limit > 0 else 1.0


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = headers.get(name.lower())
    return value


def parse_rate_limit(headers: Mapping[str, str]) -> RateLimit | None:
    limit, remaining = (
        _header(headers, "x-ratelimit-limit"),
        _header(headers, "x-ratelimit-remaining"),
    )
    if limit is None or remaining is None:
        return None
    try:
        return RateLimit(
            limit=int(limit),
            remaining=int(remaining),
            reset_at=float(_header(headers, "x-ratelimit-reset") or 0),
            resource=_header(headers, "x-ratelimit-resource") or "core",
        )
    except ValueError:
        return None


def poll_stretch(rate: RateLimit | None) -> float:
    """How many times longer than normal to wait between polls, from the budget left."""
    if rate is None:
        return 1.0
    left = rate.fraction_left
    if left < 0.10:
        return 4.0
    if left < 0.25:
        return 2.0
    return 1.0


def budget_wait(rate: RateLimit | None, now: float) -> float:
    """Seconds to hold every REST call because the budget is spent; 0 when there is budget."""
    if rate is None or rate.remaining > 0 or rate.reset_at <= now:
        return 0.0
    return min(rate.reset_at - now + RESET_MARGIN, MAX_RESET_WAIT)


def retry_after(headers: Mapping[str, str]) -> float | None:
    value = _header(headers, "retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def is_rate_limited(status: int, headers: Mapping[str, str], body: bytes) -> bool:
    """A 403/429 GitHub means as a rate limit (primary or secondary), not a permission refusal."""
    if status not in (403, 429):
        return False
    if status == 429 or retry_after(headers) is not None:
        return True
    if _header(headers, "x-ratelimit-remaining") == "0":
        return True
    return b"rate limit" in body.lower()


def rate_limit_wait(headers: Mapping[str, str], now: float, attempt: int) -> float:
    """How long to wait after a rate-limited answer (attempt counts from 1)."""
    after = retry_after(headers)
    if after is not None:
        return float(min(after, MAX_RESET_WAIT))
    rate = parse_rate_limit(headers)
    if rate is not None and rate.remaining == 0 and rate.reset_at > now:
        return min(rate.reset_at - now + RESET_MARGIN, MAX_RESET_WAIT)
    return min(SECONDARY_LIMIT_WAIT * 2.0 ** max(0, attempt - 1), MAX_RESET_WAIT)


def is_transient(status: int) -> bool:
    """retryablehttp's rule: 429 and 5xx except 501 are worth another try."""
    return status == 429 or (status >= 500 and status != 501)


def transient_wait(status: int | None, headers: Mapping[str, str], attempt: int) -> float:
    """Exponential 1 s … 30 s, or the server's ``Retry-After`` on 429/503."""
    if status in (429, 503):
        after = retry_after(headers)
        if after is not None:
            return float(min(after, MAX_RESET_WAIT))
    return min(RETRY_FIRST * 2.0 ** max(0, attempt - 1), RETRY_MAX)


class RequestCounter:
    """Every HTTP call to GitHub, counted by status code ("error" when nothing answered).

    The daemon exports it as ``rungar_github_requests_total{code}``; ``benchmarks/burst.py``
    divides it by runners created.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def count(self, code: int | str) -> None:
        key = str(code)
        self._counts[key] = self._counts.get(key, 0) + 1

    def snapshot(self) -> dict[str, int]:
        return dict(self._counts)

    @property
    def total(self) -> int:
        return sum(self._counts.values())
