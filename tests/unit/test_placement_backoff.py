"""Skip backoff: 15 seconds, doubling each time in a row, up to 2 minutes."""

from __future__ import annotations

from rungar.placement import backoff_wait
from rungar.placement.backoff import after_refusal


def test_backoff_doubles_up_to_its_limit() -> None:
    waits = [backoff_wait(n, 15, 120) for n in range(1, 7)]
    assert waits == [15, 30, 60, 120, 120, 120]


def test_backoff_never_overflows_however_many_refusals() -> None:
    assert backoff_wait(21, 15, 120) == 120
    assert backoff_wait(500, 15, 120) == 120
    assert backoff_wait(500, 1e308, 120) == 120


def test_no_refusal_means_no_wait() -> None:
    assert backoff_wait(0, 15, 120) == 0


def test_full_and_failing_refusals_share_one_streak() -> None:
    first = after_refusal(
        None, now=0, error="no memory", full=True, resource="memory", first=15, maximum=120
    )
    second = after_refusal(
        first, now=15, error="connection reset", full=False, resource="", first=15, maximum=120
    )
    assert (first.refusals, first.until, first.full) == (1, 15, True)
    assert (second.refusals, second.until, second.full) == (2, 45, False)
    assert second.last_error == "connection reset"
