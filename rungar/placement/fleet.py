"""The placement state of one installation, and every placement decision taken from it.

Pure: no I/O, no clock reads, no logging; ``now`` is an argument of every time-dependent call.
Callers (the actuator, the reconciler, the simulation) report what happened — a runner
created, a refusal, a provider that did not answer, machines listed or deleted — and ask:
which providers can this scale set try, in which order, and may it claim a place on one.

Skip reasons, checked in this order, are user-facing sentences shared by logs, errors and
``rungar status`` (README, "Troubleshooting from `rungar status`"):

1. ``disabled``
2. ``unreachable``
3. ``full``
4. ``failing to create its runner: <last error>``
5. ``its runners exit before connecting (N in a row)`` (or ``never connect within
   start_timeout``): a crash loop, learned from runners that ended before they ever connected
6. ``held for scale set <name>``
7. ``kept for the assigned jobs of scale set <name>`` (only for an idle-reserve refill)
8. ``at its limit of N runners``

Real work comes before reserves. A create is either for an assigned job or for the idle
reserve (``min_runners`` in force). Only work may take a priority hold; a scale set whose
assigned jobs find a provider full marks it as *waited on* for ``hold_duration`` (renewed while
it keeps asking, dropped when it places a runner), and every other scale set's reserve refill
skips a provider so marked, whatever the priorities. So a higher-priority scale set refilling
its reserve never takes the room a lower-priority scale set's queued job is waiting for; a
reserve that already exists is not pre-empted either (no idle runner is removed for it).

A crash loop is kept apart from the refusal backoff: a create that succeeds does not forgive
it (the runner it made may crash too), only a runner that connects does. It waits
``crash_backoff_first`` doubling to ``crash_backoff_max`` (30 s to 10 min).

Limits count every scale set's runners on the provider, the creates in flight (claims), and
the machines of runners that have gone but are not yet deleted. A claim is checked and taken
in one synchronous call, so placements running concurrently on one event loop never overshoot.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rungar.config.model import ProviderConfig, ScaleSetConfig, Timing
from rungar.model.machine import Refusal, RefusalKind
from rungar.model.sentences import (
    DISABLED,
    FULL,
    UNREACHABLE,
    crash_reason,
    failing_reason,
    held_reason,
    kept_for_reason,
    limit_reason,
    nothing_to_try,
    scale_set_limit_reason,
)
from rungar.placement.backoff import Backoff, after_refusal
from rungar.placement.holds import Hold, place_hold
from rungar.placement.order import order_providers


@dataclass(frozen=True, slots=True)
class Skip:
    """A provider this scale set will not try now, and why (a skip reason of
    :mod:`rungar.model.sentences`)."""

    provider: str
    reason: str

    def __str__(self) -> str:
        return f"{self.provider}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Candidates:
    """Providers to try, in order, and those skipped with their reasons."""

    order: tuple[str, ...]
    skips: tuple[Skip, ...]
    scale_set_limit: int = 0  # > 0: the scale set itself is at this limit; nothing is tried

    @property
    def any(self) -> bool:
        return bool(self.order)

    def why_none(self) -> str:
        if self.scale_set_limit:
            return scale_set_limit_reason(self.scale_set_limit)
        if not self.skips:
            return "the scale set has no providers"
        return nothing_to_try(self.skips)


@dataclass(frozen=True, slots=True)
class Claim:
    """A place taken on a provider for one create in flight."""

    id: int
    scale_set: str
    provider: str


class Fleet:
    """Placement state: counts, claims, backoffs, holds, reachability and runtime switches."""

    def __init__(
        self,
        providers: Sequence[ProviderConfig],
        scale_sets: Sequence[ScaleSetConfig],
        timing: Timing | None = None,
    ) -> None:
        self.timing = timing or Timing()
        self.providers: dict[str, ProviderConfig] = {}
        self.scale_sets: dict[str, ScaleSetConfig] = {}
        # Counts kept three ways so every decision costs O(providers of the scale set).
        self._runners: defaultdict[tuple[str, str], int] = defaultdict(int)
        self._runners_by_set: defaultdict[str, int] = defaultdict(int)
        self._runners_by_provider: defaultdict[str, int] = defaultdict(int)
        self._claims_by_set: defaultdict[str, int] = defaultdict(int)
        self._leaving: defaultdict[str, int] = defaultdict(int)
        self._claims: dict[int, Claim] = {}
        self._claims_by_provider: defaultdict[str, int] = defaultdict(int)
        self._claims_by_pair: defaultdict[tuple[str, str], int] = defaultdict(int)
        self._backoffs: dict[tuple[str, str], Backoff] = {}
        self._crash_loops: dict[tuple[str, str], Backoff] = {}
        self._holds: dict[str, Hold] = {}
        self._work_waits: dict[str, dict[str, float]] = {}  # provider -> scale set -> since
        self._unreachable: set[str] = set()
        self._runtime_disabled: set[str] = set()
        self._runtime_enabled: set[str] = set()
        self._ids = itertools.count(1)
        self.new_holds: list[Hold] = []  # holds placed (not renewals), for the caller to report
        self.configure(providers, scale_sets, self.timing)

    # ----------------------------------------------------------------- configuration

    def configure(
        self,
        providers: Sequence[ProviderConfig],
        scale_sets: Sequence[ScaleSetConfig],
        timing: Timing,
    ) -> None:
        """Apply a new configuration live; state of surviving pairs is kept."""
        self.timing = timing
        self.providers = {p.name: p for p in providers}
        self.scale_sets = {s.name: s for s in scale_sets}
        pairs = {(s.name, p.name) for s in scale_sets for p in s.providers}
        self._lowest_priority: dict[str, int] = {}
        for s in scale_sets:
            for p in s.providers:
                lowest = self._lowest_priority.get(p.name, s.priority)
                self._lowest_priority[p.name] = min(lowest, s.priority)
        self._backoffs = {k: v for k, v in self._backoffs.items() if k in pairs}
        self._crash_loops = {k: v for k, v in self._crash_loops.items() if k in pairs}
        self._holds = {k: v for k, v in self._holds.items() if k in self.providers}
        self._work_waits = {
            p: {s: t for s, t in waits.items() if (s, p) in pairs}
            for p, waits in self._work_waits.items()
        }

    def set_disabled(self, provider: str, disabled: bool) -> None:
        """A runtime switch (``rungar providers disable|enable|drain``), kept until restart."""
        self._runtime_disabled.discard(provider)
        self._runtime_enabled.discard(provider)
        configured = self.providers[provider].disabled
        if disabled and not configured:
            self._runtime_disabled.add(provider)
        elif not disabled and configured:
            self._runtime_enabled.add(provider)

    def is_disabled(self, provider: str) -> bool:
        if provider in self._runtime_disabled:
            return True
        if provider in self._runtime_enabled:
            return False
        return self.providers[provider].disabled

    def disabled_at_runtime(self, provider: str) -> bool | None:
        """True/False when a runtime switch overrides the configuration, else None."""
        if provider in self._runtime_disabled:
            return True
        if provider in self._runtime_enabled:
            return False
        return None

    # ----------------------------------------------------------------- what is counted

    def set_runners(self, counts: Iterable[tuple[str, str, int]]) -> None:
        """Replace the counted runners with ``(scale_set, provider, n)`` from the tracked fleet."""
        self._runners.clear()
        self._runners_by_set.clear()
        self._runners_by_provider.clear()
        for scale_set, provider, n in counts:
            if n:
                self._runners[(scale_set, provider)] += n
                self._runners_by_set[scale_set] += n
                self._runners_by_provider[provider] += n

    def add_runner(self, scale_set: str, provider: str) -> None:
        self._runners[(scale_set, provider)] += 1
        self._runners_by_set[scale_set] += 1
        self._runners_by_provider[provider] += 1

    def remove_runner(self, scale_set: str, provider: str, *, leaving: bool) -> None:
        """A runner stops counting for its scale set; ``leaving`` keeps its machine counted."""
        key = (scale_set, provider)
        if self._runners[key] > 0:
            self._runners[key] -= 1
            self._runners_by_set[scale_set] -= 1
            self._runners_by_provider[provider] -= 1
        if leaving:
            self._leaving[provider] += 1

    def machine_deleted(self, provider: str) -> None:
        """A leaving machine was deleted: its place on the provider is free."""
        if self._leaving[provider] > 0:
            self._leaving[provider] -= 1

    def set_leaving(self, provider: str, n: int) -> None:
        self._leaving[provider] = n

    def runners_of(self, scale_set: str, provider: str | None = None) -> int:
        if provider is not None:
            return self._runners[(scale_set, provider)]
        return self._runners_by_set[scale_set]

    def creating_of(self, scale_set: str) -> int:
        return self._claims_by_set[scale_set]

    def provider_count(self, provider: str) -> int:
        """Everything counted against a provider's limit: runners, claims, leaving machines."""
        return (
            self._runners_by_provider[provider]
            + self._claims_by_provider[provider]
            + self._leaving[provider]
        )

    def leaving_on(self, provider: str) -> int:
        return self._leaving[provider]

    # ----------------------------------------------------------------- reachability

    def set_reachable(self, provider: str, reachable: bool) -> bool:
        """Record a List's answer (or any call's silence); returns True when its state changed.

        Only an answered List makes a provider reachable again (a reconcile pass's or a probe's).
        """
        was = provider not in self._unreachable
        if reachable:
            self._unreachable.discard(provider)
        else:
            self._unreachable.add(provider)
        return was != reachable

    def is_reachable(self, provider: str) -> bool:
        return provider not in self._unreachable

    # ----------------------------------------------------------------- decisions

    def skip_reason(
        self, scale_set: str, provider: str, now: float, *, reserve: bool = False
    ) -> str | None:
        """Why ``scale_set`` will not try ``provider`` now, or None; in the order above.

        ``reserve``: the runner would refill the idle reserve, not serve an assigned job."""
        config = self.scale_sets[scale_set]
        if self.is_disabled(provider):
            return DISABLED
        if provider in self._unreachable:
            return UNREACHABLE
        backoff = self._backoffs.get((scale_set, provider))
        if backoff is not None and backoff.active(now):
            return FULL if backoff.full else failing_reason(backoff.last_error)
        crashes = self._crash_loops.get((scale_set, provider))
        if crashes is not None and crashes.active(now):
            return crash_reason(crashes.last_error, crashes.refusals)
        hold = self._holds.get(provider)
        if (
            hold is not None
            and hold.holder != scale_set
            and hold.holds_back(config.priority, now, self.timing.hold_duration)
        ):
            return held_reason(hold.holder)
        if reserve:
            waiting = self.waiting_for_room(provider, now, besides=scale_set)
            if waiting:
                return kept_for_reason(waiting[0])
        limit = self.providers[provider].max_runners
        if limit > 0 and self.provider_count(provider) >= limit:
            return limit_reason(limit)
        return None

    def candidates(self, scale_set: str, now: float, *, reserve: bool = False) -> Candidates:
        """Providers this scale set may try now, in its placement's order, without asking any."""
        config = self.scale_sets[scale_set]
        if self.runners_of(scale_set) + self.creating_of(scale_set) >= config.max_runners:
            return Candidates((), (), scale_set_limit=config.max_runners)
        tryable: list[str] = []
        skips: list[Skip] = []
        for entry in config.providers:
            reason = self.skip_reason(scale_set, entry.name, now, reserve=reserve)
            if reason is None:
                tryable.append(entry.name)
            else:
                skips.append(Skip(entry.name, reason))
        own = {
            name: self._runners[(scale_set, name)] + self._claims_by_pair[(scale_set, name)]
            for name in tryable
        }
        weights = {name: self.providers[name].weight for name in tryable}
        ordered = order_providers(tryable, config.placement, weights, own)
        return Candidates(tuple(ordered), tuple(skips))

    def can_place(self, scale_set: str, now: float, *, reserve: bool = False) -> Candidates:
        """Like :meth:`candidates`; when nothing can be tried for assigned work, renews this
        scale set's holds and marks (see :meth:`hold_full_providers`). A reserve refill never
        does: it waits for room without keeping anyone off.

        Called before anything is registered with GitHub: when it finds no provider, nothing is.
        """
        found = self.candidates(scale_set, now, reserve=reserve)
        if not found.any and not found.scale_set_limit and not reserve:
            self.hold_full_providers(scale_set, now)
        return found

    def cannot_place(self, scale_set: str, now: float, *, reserve: bool = False) -> str:
        """Empty when :meth:`can_place` would find a provider to try, else why it finds none.

        The engine's check before a runner is registered: it stops at the first provider that
        can be tried rather than ordering them all, as the create that follows orders them
        afresh when it tries them. When none can be tried it does what :meth:`can_place` does
        (holds renewed) and returns its reason."""
        config = self.scale_sets[scale_set]
        if self.runners_of(scale_set) + self.creating_of(scale_set) < config.max_runners:
            for entry in config.providers:
                if self.skip_reason(scale_set, entry.name, now, reserve=reserve) is None:
                    return ""
        found = self.can_place(scale_set, now, reserve=reserve)
        return "" if found.any else found.why_none()

    def claim(
        self, scale_set: str, provider: str, now: float, *, reserve: bool = False
    ) -> Claim | Skip:
        """Take a place on ``provider`` for one create, or say why it cannot be tried now."""
        config = self.scale_sets[scale_set]
        if self.runners_of(scale_set) + self.creating_of(scale_set) >= config.max_runners:
            return Skip(provider, scale_set_limit_reason(config.max_runners))
        reason = self.skip_reason(scale_set, provider, now, reserve=reserve)
        if reason is not None:
            return Skip(provider, reason)
        claim = Claim(next(self._ids), scale_set, provider)
        self._claims[claim.id] = claim
        self._claims_by_provider[provider] += 1
        self._claims_by_pair[(scale_set, provider)] += 1
        self._claims_by_set[scale_set] += 1
        return claim

    def release(self, claim: Claim) -> None:
        """Give a claim back (its create failed or was settled elsewhere). Idempotent."""
        if self._claims.pop(claim.id, None) is None:
            return
        self._claims_by_provider[claim.provider] -= 1
        self._claims_by_pair[(claim.scale_set, claim.provider)] -= 1
        self._claims_by_set[claim.scale_set] -= 1

    def record_created(self, claim: Claim, now: float) -> None:
        """The claim's create succeeded: the runner counts, the streak is forgiven, holds lift.

        An unreachable provider stays so: a create settled by asking again says nothing of
        whether it can take more, and only an answered List (:meth:`set_reachable`) brings it
        back into placement, as the log line and ``rungar status`` promise."""
        self.release(claim)
        self.add_runner(claim.scale_set, claim.provider)
        self._backoffs.pop((claim.scale_set, claim.provider), None)
        self.release_holds(claim.scale_set)
        for waits in self._work_waits.values():
            waits.pop(claim.scale_set, None)

    def record_refusal(
        self, scale_set: str, provider: str, refusal: Refusal, now: float
    ) -> Backoff:
        """A refusal of any kind backs the scale set off the provider; only FULL may hold."""
        backoff = after_refusal(
            self._backoffs.get((scale_set, provider)),
            now=now,
            error=refusal.message,
            full=refusal.kind is RefusalKind.FULL,
            resource=refusal.resource,
            first=self.timing.backoff_first,
            maximum=self.timing.backoff_max,
        )
        self._backoffs[(scale_set, provider)] = backoff
        return backoff

    def record_crash(self, scale_set: str, provider: str, why: str, now: float) -> Backoff:
        """A runner ended, or never connected in time, before it ever connected: one more in
        the scale set's crash loop on that provider (``why`` is EXITED or NEVER_CONNECTED)."""
        backoff = after_refusal(
            self._crash_loops.get((scale_set, provider)),
            now=now,
            error=why,
            full=False,
            resource="",
            first=self.timing.crash_backoff_first,
            maximum=self.timing.crash_backoff_max,
        )
        self._crash_loops[(scale_set, provider)] = backoff
        return backoff

    def record_connected(self, scale_set: str, provider: str) -> bool:
        """A runner connected: its scale set's crash loop on the provider is forgiven."""
        return self._crash_loops.pop((scale_set, provider), None) is not None

    def crash_loop(self, scale_set: str, provider: str) -> Backoff | None:
        return self._crash_loops.get((scale_set, provider))

    def active_crash_loops(self, now: float) -> list[tuple[str, str, Backoff]]:
        return [(s, p, b) for (s, p), b in self._crash_loops.items() if b.active(now)]

    def record_unanswered(self, provider: str) -> bool:
        """The provider did not answer: every scale set skips it until it answers again."""
        return self.set_reachable(provider, False)

    def hold_full_providers(self, scale_set: str, now: float) -> list[Hold]:
        """Mark the providers this scale set is skipping as full as waited on by its assigned
        work, and place or renew its hold on one of them. Only for work: never for a reserve.

        One provider is held, not every one that refused: the room a runner needs opens on one
        provider first, and a hold on each would keep lower priorities off all of them while
        only one is needed. The one held is the one this scale set already holds, else the one
        with the fewest runners counted on it (the most room freed already), the first in the
        scale set's order on a tie."""
        config = self.scale_sets[scale_set]
        full: list[str] = []
        for entry in config.providers:
            backoff = self._backoffs.get((scale_set, entry.name))
            if backoff is None or not backoff.active(now) or not backoff.full:
                continue
            self._work_waits.setdefault(entry.name, {})[scale_set] = now
            if self._anyone_below(config.priority, entry.name):
                full.append(entry.name)  # a hold that keeps no one off would clutter status
        if not full:
            return []
        provider = self._provider_to_hold(scale_set, full, now)
        duration = self.timing.hold_duration
        current = self._holds.get(provider)
        hold = place_hold(
            current,
            provider=provider,
            holder=scale_set,
            priority=config.priority,
            now=now,
            duration=duration,
        )
        self._holds[provider] = hold
        renewal = (
            current is not None and current.active(now, duration) and current.holder == scale_set
        )
        if hold.holder == scale_set and not renewal:
            self.new_holds.append(hold)
        return [hold]

    def _provider_to_hold(self, scale_set: str, full: list[str], now: float) -> str:
        """Of the providers found full, the one to hold (see :meth:`hold_full_providers`)."""
        for provider in full:
            hold = self.hold_on(provider, now)
            if hold is not None and hold.holder == scale_set:
                return provider
        config = self.scale_sets[scale_set]
        own = {name: self._runners[(scale_set, name)] for name in full}
        weights = {name: self.providers[name].weight for name in full}
        ordered = order_providers(full, config.placement, weights, own)
        return min(ordered, key=lambda name: (self.provider_count(name), ordered.index(name)))

    def _anyone_below(self, priority: int, provider: str) -> bool:
        return self._lowest_priority.get(provider, priority) < priority

    def release_holds(self, scale_set: str) -> None:
        """Lift holds of this scale set's priority or lower on all of its providers."""
        priority = self.scale_sets[scale_set].priority
        for entry in self.scale_sets[scale_set].providers:
            hold = self._holds.get(entry.name)
            if hold is not None and hold.priority <= priority:
                del self._holds[entry.name]

    # ----------------------------------------------------------------- views

    def backoff(self, scale_set: str, provider: str) -> Backoff | None:
        return self._backoffs.get((scale_set, provider))

    def active_backoffs(self, now: float) -> list[tuple[str, str, Backoff]]:
        return [(s, p, b) for (s, p), b in self._backoffs.items() if b.active(now)]

    def hold_on(self, provider: str, now: float) -> Hold | None:
        hold = self._holds.get(provider)
        if hold is not None and hold.active(now, self.timing.hold_duration):
            return hold
        return None

    def holding_back(self, scale_set: str, now: float) -> list[Hold]:
        """Active holds that keep this scale set off one of its providers."""
        priority = self.scale_sets[scale_set].priority
        found = []
        for entry in self.scale_sets[scale_set].providers:
            hold = self.hold_on(entry.name, now)
            if hold is not None and hold.holder != scale_set and priority < hold.priority:
                found.append(hold)
        return found

    def waiting_for_room(self, provider: str, now: float, besides: str = "") -> list[str]:
        """Scale sets whose assigned jobs wait for room on ``provider`` (oldest first)."""
        duration = self.timing.hold_duration
        waits = self._work_waits.get(provider, {})
        return [
            s
            for s, since in sorted(waits.items(), key=lambda item: item[1])
            if s != besides and now - since <= duration
        ]

    def claims(self) -> list[Claim]:
        return list(self._claims.values())

    # ----------------------------------------------------------------- persistence

    def export_state(self) -> tuple[list[tuple[str, str, Backoff]], list[Hold]]:
        """Backoffs and holds, so a restart keeps them with their remaining time."""
        return [(s, p, b) for (s, p), b in self._backoffs.items()], list(self._holds.values())

    def export_crash_loops(self) -> list[tuple[str, str, Backoff]]:
        """Crash loops, kept across a restart like backoffs."""
        return [(s, p, b) for (s, p), b in self._crash_loops.items()]

    def restore_crash_loops(self, loops: Iterable[tuple[str, str, Backoff]]) -> None:
        for scale_set, provider, backoff in loops:
            if scale_set in self.scale_sets and provider in self.providers:
                self._crash_loops[(scale_set, provider)] = backoff

    def restore_state(
        self, backoffs: Iterable[tuple[str, str, Backoff]], holds: Iterable[Hold]
    ) -> None:
        for scale_set, provider, backoff in backoffs:
            if scale_set in self.scale_sets and provider in self.providers:
                self._backoffs[(scale_set, provider)] = backoff
        for hold in holds:
            if hold.provider in self.providers:
                self._holds[hold.provider] = hold
