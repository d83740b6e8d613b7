"""Rate-limit and retry arithmetic, pure (docs/github.md, "Rate limits").

GitHub's REST answers carry ``x-ratelimit-*`` headers. When the budget is spent, REST calls wait
for the reset (at most 15 minutes); a reading whose reset time has passed is fresh budget. The
message queue is not REST and is never slowed by this budget. A 403/429 that says "rate limit" is
waited out: ``Retry-After`` (seconds or an HTTP date) first, then ``x-ratelimit-reset``, otherwise
at least a minute, doubling with each wait in a row (GitHub's REST guidance). A 429 from the
Actions service or the broker without ``Retry-After`` backs off 1, 2, 4, 8 s with jitter.
Transient failures (connection errors, 5xx except 501) are retried the retryablehttp way:
exponential from 1 s to 30 s, ``Retry-After`` honoured on 503. See docs/github.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

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


def budget_wait(rate: RateLimit | None, now: float, cap: float = MAX_RESET_WAIT) -> float:
    """Seconds to pause every REST call because the budget is spent; 0 when there is budget."""
    if rate is None or rate.remaining > 0 or rate.reset_at <= now:
        return 0.0
    return min(rate.reset_at - now + RESET_MARGIN, cap)


LOW_BUDGET = 0.25  # below this fraction of the budget, reads that can wait: half as often
VERY_LOW_BUDGET = 0.10  # below this: a quarter as often


def read_stretch(rate: RateLimit | None, now: float) -> float:
    """How many times longer reads that can wait (runner lists, scale-set checks) wait between
    them: 1; 2 below 25 % of the REST budget; 4 below 10 % (docs/github.md, "API budget"). A
    reading whose reset time has passed is fresh budget. Registrations are never stretched."""
    if rate is None or rate.reset_at <= now or rate.limit <= 0:
        return 1.0
    left = rate.fraction_left
    if left < VERY_LOW_BUDGET:
        return 4.0
    return 2.0 if left < LOW_BUDGET else 1.0


def budget_note(rate: RateLimit | None, now: float) -> str:
    """The note ``rungar status`` shows while reads are slowed, or ""."""
    stretch = read_stretch(rate, now)
    if rate is None or stretch <= 1.0:
        return ""
    how = "half" if stretch == 2.0 else "a quarter"
    return (
        f"API budget {rate.remaining}/{rate.limit} ({rate.fraction_left:.0%}) left: runner "
        f"lists {how} as often until the reset"
    )


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds ``Retry-After`` asks for: a number of seconds, or an HTTP date (RFC 9110)."""
    value = _header(headers, "retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):  # not a number of seconds: an HTTP date, then
        return max(0.0, float(value))
    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT even when it fails to say so
        return None
    return max(0.0, when.timestamp() - now)


def is_rate_limited(status: int, headers: Mapping[str, str], body: bytes) -> bool:
    """A 403/429 GitHub means as a rate limit (primary or secondary), not a permission refusal."""
    if status not in (403, 429):
        return False
    if status == 429 or _header(headers, "retry-after") is not None:
        return True
    if _header(headers, "x-ratelimit-remaining") == "0":
        return True
    return b"rate limit" in body.lower()


def rate_limit_wait(
    headers: Mapping[str, str],
    now: float,
    waits: int,
    *,
    first: float = SECONDARY_LIMIT_WAIT,
    cap: float = MAX_RESET_WAIT,
) -> float:
    """How long to wait after a rate-limited answer; ``waits`` counts this call's rate-limit
    waits in a row, from 1. Without Retry-After or a reset: ``first``, doubling, up to ``cap``."""
    after = retry_after(headers, now)
    if after is not None:
        return float(min(after, cap))
    rate = parse_rate_limit(headers)
    if rate is not None and rate.remaining == 0 and rate.reset_at > now:
        return min(rate.reset_at - now + RESET_MARGIN, cap)
    return min(first * 2.0 ** max(0, waits - 1), max(cap, first))


def broker_backoff(attempt: int, draw: float, first: float, cap: float, jitter: float) -> float:
    """A 429 of the Actions service or broker without Retry-After: ``first`` doubling up to
    ``cap`` (1, 2, 4, 8 s), made longer by up to ``jitter`` of itself; ``draw`` is in [0, 1)."""
    base = min(first * 2.0 ** max(0, attempt - 1), cap)
    return base * (1.0 + jitter * draw)


def is_transient(status: int) -> bool:
    """retryablehttp's rule: 429 and 5xx except 501 are worth another try."""
    return status == 429 or (status >= 500 and status != 501)


def transient_wait(
    status: int | None,
    headers: Mapping[str, str],
    attempt: int,
    now: float = 0.0,
    *,
    first: float = RETRY_FIRST,
    cap: float = RETRY_MAX,
    after_cap: float = MAX_RESET_WAIT,
) -> float:
    """Exponential 1 s … 30 s, or the server's ``Retry-After`` on 429/503 (up to ``after_cap``)."""
    if status in (429, 503):
        after = retry_after(headers, now)
        if after is not None:
            return float(min(after, after_cap))
    return min(first * 2.0 ** max(0, attempt - 1), cap)


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
