"""The placement state of one installation, and every placement decision taken from it.

Pure: no I/O, no clock reads, no logging; ``now`` is an argument of every time-dependent call.
Callers (the engine, the simulation) report what happened — a runner created, a refusal, a
provider that did not answer, machines listed or deleted — and ask: which providers can this
scale set try, in which order, and may it claim a place on one. Queries change nothing; what a
report or a decision changes is returned to the caller to act on (:class:`HoldDecision`,
:class:`RoomOpened`).

Skip reasons, checked in this order, are user-facing sentences shared by logs, errors and
``rungar status`` (docs/troubleshooting.md):

1. ``disabled``
2. ``unreachable``
3. ``full``
4. ``failing to create its runner: <last error>``
5. ``its runners exit before connecting (N in a row)`` (or ``never connect within
   start_timeout``): a crash loop, learned from runners that ended before they ever connected
6. ``held for scale set <name>``
7. ``kept for the assigned jobs of scale set <name>`` (only for an idle-reserve refill)
8. ``taken only after 5m waiting for room elsewhere`` (a provider with ``overflow_after``)
9. ``at its limit of N runners``

Real work comes before reserves. A create is either for an assigned job or for the idle
reserve (``min_runners`` in force). Only work may take a priority hold; a scale set whose
assigned jobs find a provider full marks it as *waited on* for ``hold_duration`` (renewed while
it keeps asking, dropped when it places a runner), and every other scale set's reserve refill
skips a provider so marked, whatever the priorities. So a higher-priority scale set refilling
its reserve never takes the room a lower-priority scale set's queued job is waiting for; a
reserve that already exists is not pre-empted either (no idle runner is removed for it).
A reserve refill tries the cheapest providers first (``price_per_hour``; none is 0), so it is
never placed on a priced provider while a cheaper one in its list would take it.

Room opening names the provider's holder, to be tried there at once, its FULL wait there
lifted: a machine deleted (:meth:`Fleet.machine_deleted`, which lifts every scale set's FULL
wait there), or a create abandoned or refused for any reason but being full
(:meth:`Fleet.abandon`).

A provider with ``overflow_after`` (opt-in, 0 by default: taken at once, as without it) is
tried by a scale set only once its assigned work has found nothing to try for that long: from
the first such time, renewed each time it again finds nothing (and lapsing, as a hold does,
``hold_duration`` after it stops asking), until a provider without ``overflow_after`` takes
one of its runners. So a priced cloud behind hosts takes what the hosts cannot take within
that wait, rather than every job that meets them full.

A crash loop is kept apart from the refusal backoff: a create that succeeds does not forgive
it (the runner it made may crash too), only a runner that connects does. It begins at the
``crash_backoff_after``-th failure in a row (the second, by default) and waits
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
from rungar.model.runner import RunnerView
from rungar.model.sentences import (
    DISABLED,
    FULL,
    SCALE_SET_GONE,
    UNREACHABLE,
    crash_reason,
    failing_reason,
    held_reason,
    kept_for_reason,
    limit_reason,
    nothing_to_try,
    overflow_reason,
    scale_set_limit_reason,
)
from rungar.placement.backoff import Backoff, after_refusal, backoff_wait
from rungar.placement.holds import Hold, HoldDecision, HoldRule, RoomOpened, place_hold
from rungar.placement.index import ProviderOrder
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
    gone: bool = False  # the scale set is no longer configured; nothing is tried

    @property
    def any(self) -> bool:
        return bool(self.order)

    def why_none(self) -> str:
        if self.gone:
            return SCALE_SET_GONE
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
        *,
        hold_rule: HoldRule = HoldRule.EVERY_FULL,
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
        self._asking: dict[str, tuple[float, float]] = {}  # scale set -> (since, last) no room
        self._unreachable: set[str] = set()
        self._runtime_disabled: set[str] = set()
        self._runtime_enabled: set[str] = set()
        self._ids = itertools.count(1)
        self.hold_rule = hold_rule
        self._order = ProviderOrder()  # each scale set's providers in its placement order
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
        self._users: dict[str, list[str]] = {}  # provider -> the scale sets listing it
        for s in scale_sets:
            for p in s.providers:
                self._users.setdefault(p.name, []).append(s.name)
        self._lowest_priority: dict[str, int] = {}
        for s in scale_sets:
            for p in s.providers:
                lowest = self._lowest_priority.get(p.name, s.priority)
                self._lowest_priority[p.name] = min(lowest, s.priority)
        self._backoffs = {k: v for k, v in self._backoffs.items() if k in pairs}
        self._crash_loops = {k: v for k, v in self._crash_loops.items() if k in pairs}
        # A removed scale set asks no more: its holds end with it.
        self._holds = {
            k: v
            for k, v in self._holds.items()
            if k in self.providers and v.holder in self.scale_sets
        }
        self._work_waits = {
            p: {s: t for s, t in waits.items() if (s, p) in pairs}
            for p, waits in self._work_waits.items()
        }
        self._asking = {s: v for s, v in self._asking.items() if s in self.scale_sets}
        self._reorder()

    def _reorder(self) -> None:
        providers = self.providers

        def weight(name: str) -> float:
            config = providers.get(name)
            return config.weight if config is not None else 1.0

        self._order.rebuild(list(self.scale_sets.values()), weight, self._own)

    def _own(self, scale_set: str, provider: str) -> int:
        """The scale set's runners and creates in flight on the provider: what spread orders by."""
        key = (scale_set, provider)
        return self._runners.get(key, 0) + self._claims_by_pair.get(key, 0)

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
        self._reorder()

    def add_runner(self, scale_set: str, provider: str) -> None:
        self._runners[(scale_set, provider)] += 1
        self._runners_by_set[scale_set] += 1
        self._runners_by_provider[provider] += 1
        self._order.moved(scale_set, provider, self._own(scale_set, provider))

    def remove_runner(self, scale_set: str, provider: str, *, leaving: bool) -> None:
        """A runner stops counting for its scale set; ``leaving`` keeps its machine counted."""
        key = (scale_set, provider)
        if self._runners[key] > 0:
            self._runners[key] -= 1
            self._runners_by_set[scale_set] -= 1
            self._runners_by_provider[provider] -= 1
            self._order.moved(scale_set, provider, self._own(scale_set, provider))
        if leaving:
            self._leaving[provider] += 1

    def machine_deleted(self, provider: str, now: float) -> RoomOpened:
        """A leaving machine was deleted: its place on the provider is free, and room opened
        there (:meth:`open_room`)."""
        if self._leaving[provider] > 0:
            self._leaving[provider] -= 1
        return self.open_room(provider, now)

    def open_room(self, provider: str, now: float, *, by: str = "") -> RoomOpened:
        """Room opened on ``provider``: every scale set's FULL wait there is lifted (the refusal
        it waits out was about room that has now opened), and the scale set holding it is to
        be tried there at once. ``by``: a scale set whose own wait stays and that is not the
        holder to try."""
        forgiven: list[str] = []
        for scale_set in self._users.get(provider, ()):
            backoff = self._backoffs.get((scale_set, provider))
            if scale_set == by or backoff is None or not backoff.full or not backoff.active(now):
                continue
            self._backoffs[(scale_set, provider)] = backoff.lifted(now)
            forgiven.append(scale_set)
        hold = self.hold_on(provider, now)
        holder = hold.holder if hold is not None and hold.holder != by else ""
        return RoomOpened(provider, now, holder, tuple(forgiven))

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
        config = self.scale_sets.get(scale_set)
        if config is None:
            return SCALE_SET_GONE
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
        patience = self.providers[provider].overflow_after
        if patience > 0 and self.asking_for(scale_set, now) < patience:
            return overflow_reason(patience)
        limit = self.providers[provider].max_runners
        if limit > 0 and self.provider_count(provider) >= limit:
            return limit_reason(limit)
        return None

    def candidates(self, scale_set: str, now: float, *, reserve: bool = False) -> Candidates:
        """Providers this scale set may try now, in its placement's order, without asking any."""
        config = self.scale_sets.get(scale_set)
        if config is None:  # removed by a new configuration while a create was on its way
            return Candidates((), (), gone=True)
        if self.runners_of(scale_set) + self.creating_of(scale_set) >= config.max_runners:
            return Candidates((), (), scale_set_limit=config.max_runners)
        reasons: dict[str, str | None] = {}
        skips: list[Skip] = []
        for entry in config.providers:
            reason = reasons[entry.name] = self.skip_reason(
                scale_set, entry.name, now, reserve=reserve
            )
            if reason is not None:
                skips.append(Skip(entry.name, reason))
        # The placement order is kept as counts change (see first_tryable): no sort here.
        ordered = [name for name in self._order.walk(scale_set) if reasons[name] is None]
        if reserve:  # hosts before the cloud: a refill goes to the cheapest that takes it
            ordered.sort(key=self.price_of)
        return Candidates(tuple(ordered), tuple(skips))

    def first_tryable(self, scale_set: str, now: float, limit: int = 1) -> list[str]:
        """The first ``limit`` providers of :meth:`candidates`' order for assigned work, found
        without ordering or explaining the rest: the scale set's providers are kept in their
        placement order as counts change (:class:`rungar.placement.index.ProviderOrder`), so
        this walks from the front and stops once it has them. Why the others are skipped is
        :meth:`candidates`' to say, when asked."""
        config = self.scale_sets.get(scale_set)
        if config is None:
            return []
        if self.runners_of(scale_set) + self.creating_of(scale_set) >= config.max_runners:
            return []
        found: list[str] = []
        if limit < 1:
            return found
        skip_reason, backoffs = self.skip_reason, self._backoffs
        for name in self._order.walk(scale_set):
            backoff = backoffs.get((scale_set, name))
            if backoff is not None and backoff.active(now):
                continue  # skipped as full or failing: no need to word why
            if skip_reason(scale_set, name, now) is None:
                found.append(name)
                if len(found) >= limit:
                    break
        return found

    def price_of(self, provider: str) -> float:
        """A runner-hour's price on ``provider``; 0 when it has none (a host of one's own)."""
        return self.providers[provider].price_per_hour or 0.0

    def cannot_place(self, scale_set: str, now: float, *, reserve: bool = False) -> str:
        """Empty when :meth:`candidates` would find a provider to try, else why it finds none.

        The engine's check before a runner is registered: it stops at the first provider that
        can be tried rather than ordering them all, as the create that follows orders them
        afresh when it tries them. A query: when nothing can be tried, the holds that follow
        are the caller's to decide (:meth:`plan_holds`)."""
        config = self.scale_sets.get(scale_set)
        if config is None:
            return SCALE_SET_GONE
        if self.runners_of(scale_set) + self.creating_of(scale_set) < config.max_runners:
            for entry in config.providers:
                if self.skip_reason(scale_set, entry.name, now, reserve=reserve) is None:
                    return ""
        return self.candidates(scale_set, now, reserve=reserve).why_none()

    def claim(
        self, scale_set: str, provider: str, now: float, *, reserve: bool = False
    ) -> Claim | Skip:
        """Take a place on ``provider`` for one create, or say why it cannot be tried now."""
        config = self.scale_sets.get(scale_set)
        if config is None:
            return Skip(provider, SCALE_SET_GONE)
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
        self._order.moved(scale_set, provider, self._own(scale_set, provider))
        return claim

    def abandon(self, claim: Claim, now: float, *, full: bool = False) -> RoomOpened | None:
        """A create refused or given up: its claim is given back, and the place it had taken
        is room opened for the provider's holder (its wait there lifted), unless the create
        was the holder's own, or the provider refused it as full (then no room opened). Other
        scale sets' waits stay: the room is the holder's. None when nothing opened."""
        if claim.id not in self._claims:
            return None
        self.release(claim)
        if full:
            return None
        hold = self.hold_on(claim.provider, now)
        if hold is None or hold.holder == claim.scale_set:
            return None
        key = (hold.holder, claim.provider)
        backoff = self._backoffs.get(key)
        forgiven: tuple[str, ...] = ()
        if backoff is not None and backoff.full and backoff.active(now):
            self._backoffs[key] = backoff.lifted(now)
            forgiven = (hold.holder,)
        return RoomOpened(claim.provider, now, hold.holder, forgiven)

    def release(self, claim: Claim) -> None:
        """Give a claim back (its create failed or was settled elsewhere). Idempotent."""
        if self._claims.pop(claim.id, None) is None:
            return
        self._claims_by_provider[claim.provider] -= 1
        self._claims_by_pair[(claim.scale_set, claim.provider)] -= 1
        self._claims_by_set[claim.scale_set] -= 1
        self._order.moved(
            claim.scale_set, claim.provider, self._own(claim.scale_set, claim.provider)
        )

    def record_created(self, claim: Claim, now: float) -> None:
        """The claim's create succeeded: the runner counts, the streak is forgiven, holds lift.

        An unreachable provider stays so: a create settled by asking again says nothing of
        whether it can take more, and only an answered List (:meth:`set_reachable`) brings it
        back into placement, as the log line and ``rungar status`` promise."""
        self.release(claim)
        self.add_runner(claim.scale_set, claim.provider)
        self._backoffs.pop((claim.scale_set, claim.provider), None)
        self.release_holds(claim.scale_set)
        if not self.providers[claim.provider].overflow_after:
            self._asking.pop(claim.scale_set, None)  # room found without overflowing
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
        previous = self._crash_loops.get((scale_set, provider))
        refusals = (previous.refusals if previous else 0) + 1
        # The first failures (``crash_backoff_after`` less one) are counted, not backed off:
        # a runner that dies once is bad luck; two in a row is a loop. The skip then starts at
        # ``crash_backoff_first`` and doubles with each failure after it.
        streak = refusals - max(1, self.timing.crash_backoff_after) + 1
        backoff = Backoff(
            refusals=refusals,
            until=now
            + backoff_wait(streak, self.timing.crash_backoff_first, self.timing.crash_backoff_max),
            last_error=why,
            full=False,
            resource="",
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

    def plan_holds(self, scale_set: str, now: float) -> HoldDecision:
        """What this scale set's assigned work, finding nothing to try, decides about holds:
        every provider it is skipping as full is marked waited on, and each of them that a
        lower priority also uses is held (placed, or renewed when it already holds it).
        Changes nothing; :meth:`apply_holds` carries it out. Only for work: never a reserve.

        Under :attr:`HoldRule.ONE` (comparison only) one of them is held: the one it already
        holds, else the one with the fewest runners counted on it, the first in its order on a
        tie."""
        config = self.scale_sets.get(scale_set)
        if config is None:  # no longer configured: it waits for nothing
            return HoldDecision(scale_set, now, waiting=False)
        if self.runners_of(scale_set) + self.creating_of(scale_set) >= config.max_runners:
            # At its own limit: it waits for no provider.
            return HoldDecision(scale_set, now, waiting=False)
        waited_on: list[str] = []
        full: list[str] = []
        for entry in config.providers:
            backoff = self._backoffs.get((scale_set, entry.name))
            if backoff is None or not backoff.active(now) or not backoff.full:
                continue
            waited_on.append(entry.name)
            if self._anyone_below(config.priority, entry.name):
                full.append(entry.name)  # a hold that keeps no one off would clutter status
        if self.hold_rule is HoldRule.ONE and full:
            full = [self._provider_to_hold(scale_set, full, now)]
        duration = self.timing.hold_duration
        holds: list[Hold] = []
        placed: list[Hold] = []
        for provider in full:
            current = self._holds.get(provider)
            hold = place_hold(
                current,
                provider=provider,
                holder=scale_set,
                priority=config.priority,
                now=now,
                duration=duration,
            )
            if hold.holder != scale_set:
                continue  # a higher priority holds it: its hold stays
            holds.append(hold)
            renewal = (
                current is not None
                and current.active(now, duration)
                and current.holder == scale_set
            )
            if not renewal:
                placed.append(hold)
        return HoldDecision(scale_set, now, tuple(waited_on), tuple(holds), tuple(placed))

    def apply_holds(self, decision: HoldDecision) -> tuple[Hold, ...]:
        """Carry out :meth:`plan_holds`'s decision; returns the holds newly placed."""
        for provider in decision.waited_on:
            self._work_waits.setdefault(provider, {})[decision.scale_set] = decision.at
        if decision.waiting:
            since = decision.at
            asking = self._asking.get(decision.scale_set)
            if asking is not None and decision.at - asking[1] <= self.timing.hold_duration:
                since = asking[0]
            self._asking[decision.scale_set] = (since, decision.at)
        for hold in decision.holds:
            self._holds[hold.provider] = hold
        return decision.placed

    def hold_full_providers(self, scale_set: str, now: float) -> tuple[Hold, ...]:
        """:meth:`plan_holds` then :meth:`apply_holds`: the holds newly placed."""
        return self.apply_holds(self.plan_holds(scale_set, now))

    def _provider_to_hold(self, scale_set: str, full: list[str], now: float) -> str:
        """Under :attr:`HoldRule.ONE`: of the providers found full, the one to hold."""
        for provider in full:
            hold = self.hold_on(provider, now)
            if hold is not None and hold.holder == scale_set:
                return provider
        config = self.scale_sets[scale_set]
        own = {name: self._runners[(scale_set, name)] for name in full}
        weights = {name: self.providers[name].weight for name in full}
        ordered = order_providers(full, config.placement, weights, own)
        return min(ordered, key=lambda name: (self.provider_count(name), ordered.index(name)))

    def replacement(
        self, provider: str, idle: Iterable[RunnerView], now: float
    ) -> RunnerView | None:
        """Room opened on ``provider``: the idle runner (never busy; ``idle`` lists them) on a
        dearer provider that a runner there should replace, else None. The dearest first, the
        oldest on a tie; its scale set must list ``provider``, may put a reserve runner there
        now, and have room under its own ``max_runners`` for both runners at once (the new one
        is created first, then the idle one removed)."""
        price = self.price_of(provider)
        users = set(self._users.get(provider, ()))
        best: RunnerView | None = None
        for runner in idle:
            if runner.scale_set not in users or runner.provider not in self.providers:
                continue
            if runner.busy or self.price_of(runner.provider) <= price:
                continue
            config = self.scale_sets[runner.scale_set]
            if self.runners_of(runner.scale_set) + self.creating_of(runner.scale_set) >= (
                config.max_runners
            ):
                continue
            if self.skip_reason(runner.scale_set, provider, now, reserve=True) is not None:
                continue
            key = (-self.price_of(runner.provider), runner.created_at)
            if best is None or key < (-self.price_of(best.provider), best.created_at):
                best = runner
        return best

    def _anyone_below(self, priority: int, provider: str) -> bool:
        return self._lowest_priority.get(provider, priority) < priority

    def release_holds(self, scale_set: str) -> None:
        """The scale set placed its runner: every hold it has ends, on whichever provider.
        Another scale set's hold stays, whatever the priorities: it ends when its holder places
        its runner or stops asking (it then lapses after ``hold_duration``)."""
        for provider in [p for p, hold in self._holds.items() if hold.holder == scale_set]:
            del self._holds[provider]

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
        config = self.scale_sets.get(scale_set)
        if config is None:
            return []
        priority = config.priority
        found = []
        for entry in config.providers:
            hold = self.hold_on(entry.name, now)
            if hold is not None and hold.holder != scale_set and priority < hold.priority:
                found.append(hold)
        return found

    def asking_for(self, scale_set: str, now: float) -> float:
        """How long this scale set's assigned work has been finding nothing to try (renewed
        within ``hold_duration``, until a provider without ``overflow_after`` took one of its
        runners); 0 when it is not."""
        asking = self._asking.get(scale_set)
        if asking is None or now - asking[1] > self.timing.hold_duration:
            return 0.0
        return now - asking[0]

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
