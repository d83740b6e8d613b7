"""Skip backoff per (scale set, provider) (docs/configuration.md, ``timing``).

A refusal of either kind starts or extends a streak; the scale set skips the provider for
``first × 2^(n−1)`` capped at ``max`` (15 s doubling to 2 min by default). One runner created
there forgives the streak; room opening there (a machine deleted) lifts a FULL wait
(:meth:`Backoff.lifted`). A runner that can never be created is therefore retried every
``max``, which is how a fixed runner block heals without anyone noticing.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_DOUBLINGS = 20


def backoff_wait(refusals: int, first: float, maximum: float) -> float:
    """Seconds to skip after ``refusals`` in a row (n ≥ 1)."""
    if refusals < 1:
        return 0.0
    doublings = min(refusals - 1, MAX_DOUBLINGS)
    wait = first * float(2**doublings)
    if wait <= 0 or wait != wait:  # overflow to inf is capped below; NaN cannot order
        return maximum
    return min(wait, maximum)


@dataclass(frozen=True, slots=True)
class Backoff:
    """A scale set's streak of refusals from one provider, and until when it skips it."""

    refusals: int
    until: float
    last_error: str
    full: bool
    resource: str = ""

    def active(self, now: float) -> bool:
        return now < self.until

    def remaining(self, now: float) -> float:
        return max(0.0, self.until - now)

    def lifted(self, now: float) -> Backoff:
        """The wait ended now, the streak kept: room opened where it was refused as full, so
        the next try is an informed one, and a refusal after it still doubles the wait."""
        return Backoff(
            self.refusals, min(self.until, now), self.last_error, self.full, self.resource
        )


def after_refusal(
    previous: Backoff | None,
    *,
    now: float,
    error: str,
    full: bool,
    resource: str,
    first: float,
    maximum: float,
) -> Backoff:
    """The backoff after one more refusal; full and failing refusals share one streak."""
    refusals = (previous.refusals if previous else 0) + 1
    return Backoff(
        refusals=refusals,
        until=now + backoff_wait(refusals, first, maximum),
        last_error=error,
        full=full,
        resource=resource,
    )
