"""Rate-limit and retry arithmetic (docs/github.md, "Rate limits")."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from rungar.github.ratelimit import (
    RateLimit,
    RequestCounter,
    broker_backoff,
    budget_wait,
    is_rate_limited,
    is_transient,
    parse_rate_limit,
    rate_limit_wait,
    retry_after,
    transient_wait,
)

NOW = 1_800_000_000.0


def test_a_spent_budget_waits_for_the_reset_but_never_more_than_fifteen_minutes() -> None:
    assert budget_wait(RateLimit(5000, 0, NOW + 100), NOW) == 101.0
    assert budget_wait(RateLimit(5000, 0, NOW + 3000), NOW) == 900.0
    assert budget_wait(RateLimit(5000, 1, NOW + 100), NOW) == 0.0
    assert budget_wait(RateLimit(5000, 0, NOW - 1), NOW) == 0.0


def test_rate_limit_headers_are_read() -> None:
    headers = {
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "12",
        "x-ratelimit-reset": "1800000100",
    }
    assert parse_rate_limit(headers) == RateLimit(5000, 12, 1800000100.0, "core")
    assert parse_rate_limit({}) is None


@pytest.mark.parametrize(
    ("status", "headers", "body", "limited"),
    [
        (403, {"x-ratelimit-remaining": "0"}, b"", True),
        (403, {"retry-after": "30"}, b"", True),
        (403, {}, b'{"message": "You have exceeded a secondary rate limit"}', True),
        (429, {}, b"", True),
        (403, {"x-ratelimit-remaining": "10"}, b'{"message": "Resource not accessible"}', False),
        (500, {"retry-after": "3"}, b"", False),
    ],
)
def test_a_403_is_a_rate_limit_only_when_github_says_so(
    status: int, headers: dict[str, str], body: bytes, limited: bool
) -> None:
    assert is_rate_limited(status, headers, body) is limited


def test_rate_limit_waits_prefer_retry_after_then_the_reset_then_a_minute_growing() -> None:
    assert rate_limit_wait({"retry-after": "42"}, NOW, 1) == 42.0
    reset = {
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": str(int(NOW + 30)),
    }
    assert rate_limit_wait(reset, NOW, 1) == 31.0
    assert [rate_limit_wait({}, NOW, n) for n in (1, 2, 3)] == [60.0, 120.0, 240.0]
    assert rate_limit_wait({}, NOW, 1, first=5.0, cap=8.0) == 5.0
    assert rate_limit_wait({}, NOW, 4, first=5.0, cap=8.0) == 8.0


def test_retry_after_as_an_http_date_is_read_as_the_seconds_until_then() -> None:
    # Broken once (the date read as unreadable): the wait fell back to a minute.
    when = format_datetime(datetime.fromtimestamp(NOW + 90, UTC), usegmt=True)
    assert retry_after({"retry-after": when}, NOW) == 90.0
    assert rate_limit_wait({"retry-after": when}, NOW, 1) == 90.0
    assert transient_wait(503, {"retry-after": when}, 1, NOW) == 90.0
    past = format_datetime(datetime.fromtimestamp(NOW - 90, UTC), usegmt=True)
    assert retry_after({"retry-after": past}, NOW) == 0.0
    assert retry_after({"retry-after": "soon"}, NOW) is None


def test_a_broker_429_without_retry_after_backs_off_one_two_four_eight_seconds_with_jitter() -> (
    None
):
    assert [broker_backoff(n, 0.0, 1.0, 8.0, 0.25) for n in (1, 2, 3, 4, 5)] == [
        1.0,
        2.0,
        4.0,
        8.0,
        8.0,
    ]
    assert broker_backoff(3, 0.999, 1.0, 8.0, 0.25) == pytest.approx(4.0 * 1.24975)


def test_transient_statuses_follow_retryablehttp() -> None:
    assert [s for s in (400, 401, 404, 409, 429, 500, 501, 502, 503, 504) if is_transient(s)] == [
        429,
        500,
        502,
        503,
        504,
    ]
    assert [transient_wait(500, {}, n) for n in range(1, 8)] == [
        1.0,
        2.0,
        4.0,
        8.0,
        16.0,
        30.0,
        30.0,
    ]
    assert transient_wait(503, {"retry-after": "9"}, 1) == 9.0
    assert transient_wait(500, {}, 3, first=0.5, cap=1.0) == 1.0
    assert transient_wait(500, {"retry-after": "9"}, 1) == 1.0


def test_the_counter_counts_by_code() -> None:
    counter = RequestCounter()
    for code in (200, 200, 401, "error"):
        counter.count(code)
    assert counter.snapshot() == {"200": 2, "401": 1, "error": 1}
    assert counter.total == 4
