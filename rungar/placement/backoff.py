"""Skip backoff per (scale set, provider) (docs/configuration.md, ``timing``).

A refusal of either kind starts or extends a streak; the scale set skips the provider for
``first × 2^(n−1)`` capped at ``max`` (15 s doubling to 2 min by default). One runner created
there forgives the streak; room opening there (a machine deleted) lifts a FULL wait
(:meth:`Backoff.lifted`). A runner that can never be created is therefore retried every
``max``, which is how a fixed runner block heals without anyone noticing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from rungar.config.model import Timing
from rungar.model.machine import Refusal, RefusalKind
from rungar.model.sentences import FULL, crash_reason, failing_reason

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
    # The last refusal was INVALID: the runner fits nowhere on the provider, whatever room it
    # has (kept until a restart; the state database does not keep it).
    invalid: bool = False

    def active(self, now: float) -> bool:
        return now < self.until

    def remaining(self, now: float) -> float:
        return max(0.0, self.until - now)

    def lifted(self, now: float) -> Backoff:
        """The wait ended now, the streak kept: room opened where it was refused as full, so
        the next try is an informed one, and a refusal after it still doubles the wait."""
        return Backoff(
            self.refusals,
            min(self.until, now),
            self.last_error,
            self.full,
            self.resource,
            self.invalid,
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
    invalid: bool = False,
) -> Backoff:
    """The backoff after one more refusal; full and failing refusals share one streak."""
    refusals = (previous.refusals if previous else 0) + 1
    return Backoff(
        refusals=refusals,
        until=now + backoff_wait(refusals, first, maximum),
        last_error=error,
        full=full,
        resource=resource,
        invalid=invalid,
    )


class Backoffs:
    """Every (scale set, provider) pair's refusal backoff and crash loop, apart: a create that
    succeeds forgives the refusals, only a runner that connects forgives the crash loop.

    A crash loop begins at the ``crash_backoff_after``-th runner in a row that ends before it
    ever connects (the second, by default) and waits ``crash_backoff_first`` doubling to
    ``crash_backoff_max``; the failures before it are counted, not backed off."""

    def __init__(self) -> None:
        self._refusals: dict[tuple[str, str], Backoff] = {}
        self._crash_loops: dict[tuple[str, str], Backoff] = {}

    def keep_only(self, pairs: set[tuple[str, str]]) -> None:
        """A new configuration: the pairs it no longer has are forgotten."""
        self._refusals = {k: v for k, v in self._refusals.items() if k in pairs}
        self._crash_loops = {k: v for k, v in self._crash_loops.items() if k in pairs}

    # ----------------------------------------------------------------- refusals

    def refused(
        self, scale_set: str, provider: str, refusal: Refusal, now: float, timing: Timing
    ) -> Backoff:
        """A refusal of any kind backs the scale set off the provider (``backoff_first``
        doubling to ``backoff_max``); only a FULL one is waited out as full."""
        backoff = after_refusal(
            self._refusals.get((scale_set, provider)),
            now=now,
            error=refusal.message,
            full=refusal.kind is RefusalKind.FULL,
            resource=refusal.resource,
            first=timing.backoff_first,
            maximum=timing.backoff_max,
            invalid=refusal.kind is RefusalKind.INVALID,
        )
        self._refusals[(scale_set, provider)] = backoff
        return backoff

    def retry_at(self, scale_set: str, provider: str, at: float) -> Backoff:
        """The scale set tries the provider again at ``at`` (when it said room comes), not
        when its backoff would have it; the streak is kept."""
        backoff = replace(self._refusals[(scale_set, provider)], until=at)
        self._refusals[(scale_set, provider)] = backoff
        return backoff

    def created(self, scale_set: str, provider: str) -> None:
        """A runner created there forgives the streak of refusals."""
        self._refusals.pop((scale_set, provider), None)

    def get(self, scale_set: str, provider: str) -> Backoff | None:
        return self._refusals.get((scale_set, provider))

    def waiting(self, scale_set: str, provider: str, now: float) -> Backoff | None:
        """The scale set's backoff on the provider while it lasts, else None."""
        backoff = self._refusals.get((scale_set, provider))
        return backoff if backoff is not None and backoff.active(now) else None

    def not_waiting(self, scale_set: str, providers: Iterable[str], now: float) -> Iterator[str]:
        """Of ``providers``, in their order, those the scale set is not backed off now (a
        decision's walk passes over the others without wording why)."""
        refusals = self._refusals
        for provider in providers:
            backoff = refusals.get((scale_set, provider))
            if backoff is None or not backoff.active(now):
                yield provider

    def skip_reason(self, scale_set: str, provider: str, now: float) -> str | None:
        """Why the scale set skips the provider now for its refusals (full, or failing with
        the last error) or its crash loop, in that order; None when it does not."""
        key = (scale_set, provider)
        backoff = self._refusals.get(key)
        if backoff is not None and backoff.active(now):
            return FULL if backoff.full else failing_reason(backoff.last_error)
        crashes = self._crash_loops.get(key)
        if crashes is not None and crashes.active(now):
            return crash_reason(crashes.last_error, crashes.refusals)
        return None

    def waiting_full(self, scale_set: str, provider: str, now: float) -> bool:
        """The scale set waits out a FULL refusal there now."""
        backoff = self.waiting(scale_set, provider, now)
        return backoff is not None and backoff.full

    def lift_full(self, scale_set: str, provider: str, now: float) -> bool:
        """Room opened on the provider: the scale set's FULL wait there ends now (the streak
        kept). True when it was waiting one out."""
        backoff = self.waiting(scale_set, provider, now)
        if backoff is None or not backoff.full:
            return False
        self._refusals[(scale_set, provider)] = backoff.lifted(now)
        return True

    def active(self, now: float) -> list[tuple[str, str, Backoff]]:
        return [(s, p, b) for (s, p), b in self._refusals.items() if b.active(now)]

    def every(self) -> list[tuple[str, str, Backoff]]:
        return [(s, p, b) for (s, p), b in self._refusals.items()]

    def restore(self, scale_set: str, provider: str, backoff: Backoff) -> None:
        self._refusals[(scale_set, provider)] = backoff

    # ----------------------------------------------------------------- crash loops

    def crashed(
        self, scale_set: str, provider: str, why: str, now: float, timing: Timing
    ) -> Backoff:
        """A runner ended, or never connected in time, before it ever connected: one more in
        the scale set's crash loop on the provider (``why`` is EXITED or NEVER_CONNECTED)."""
        previous = self._crash_loops.get((scale_set, provider))
        refusals = (previous.refusals if previous else 0) + 1
        # The first failures (``crash_backoff_after`` less one) are counted, not backed off:
        # a runner that dies once is bad luck; two in a row is a loop. The skip then starts at
        # ``crash_backoff_first`` and doubles with each failure after it.
        streak = refusals - max(1, timing.crash_backoff_after) + 1
        backoff = Backoff(
            refusals=refusals,
            until=now + backoff_wait(streak, timing.crash_backoff_first, timing.crash_backoff_max),
            last_error=why,
            full=False,
            resource="",
        )
        self._crash_loops[(scale_set, provider)] = backoff
        return backoff

    def uncount(self, scale_set: str, provider: str, now: float, timing: Timing) -> None:
        """One failure counted in the crash loop was no crash: the loop is one shorter, its
        wait no longer than one that length would have (none below ``crash_backoff_after``)."""
        current = self._crash_loops.get((scale_set, provider))
        if current is None:
            return
        refusals = current.refusals - 1
        if refusals < 1:
            del self._crash_loops[(scale_set, provider)]
            return
        streak = refusals - max(1, timing.crash_backoff_after) + 1
        wait = backoff_wait(streak, timing.crash_backoff_first, timing.crash_backoff_max)
        until = min(current.until, now + wait) if wait > 0 else now
        self._crash_loops[(scale_set, provider)] = replace(current, refusals=refusals, until=until)

    def connected(self, scale_set: str, provider: str) -> bool:
        """A runner connected: the crash loop is forgiven; True when there was one."""
        return self._crash_loops.pop((scale_set, provider), None) is not None

    def crash_loop(self, scale_set: str, provider: str) -> Backoff | None:
        return self._crash_loops.get((scale_set, provider))

    def active_crash_loops(self, now: float) -> list[tuple[str, str, Backoff]]:
        return [(s, p, b) for (s, p), b in self._crash_loops.items() if b.active(now)]

    def every_crash_loop(self) -> list[tuple[str, str, Backoff]]:
        return [(s, p, b) for (s, p), b in self._crash_loops.items()]

    def restore_crash_loop(self, scale_set: str, provider: str, backoff: Backoff) -> None:
        self._crash_loops[(scale_set, provider)] = backoff
