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
3. ``runner 2.320.0 is below GitHub's minimum 2.329.0`` (or ``was refused by GitHub as
   outdated``, told by a runner's exit): GitHub would refuse the runner there
   (:class:`~rungar.placement.versions.RunnerVersions`)
4. ``full``
5. ``failing to create its runner: <last error>``
6. ``its runners exit before connecting (N in a row)`` (or ``never connect within
   start_timeout``): a crash loop, learned from runners that ended before they ever connected
7. ``held for scale set <name>``
8. ``kept for the assigned jobs of scale set <name>`` (only for an idle-reserve refill)
9. ``taken only after 5m waiting for room elsewhere`` (a provider with ``overflow_after``)
10. ``waits for host1: room expected in 40s`` (a provider with ``overflow: when_host_is_later``,
    :mod:`rungar.placement.host_waits`)
11. ``at its limit of N runners``

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

:class:`Fleet` is the one face of placement's state, made of named parts, each keeping its own
rules: :class:`~rungar.placement.counts.Counts` (runners, claims, leaving machines),
:class:`~rungar.placement.backoff.Backoffs` (refusal backoffs and crash loops),
:class:`~rungar.placement.holds.Holds` (priority holds and the waits for room),
:class:`~rungar.placement.switches.Switches` (reachability, runtime switches) and
:class:`~rungar.placement.index.ProviderOrder` (each scale set's providers in its order). The
face holds the configuration and the decisions that read several parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rungar.config.model import HoldChoice, Overflow, ProviderConfig, ScaleSetConfig, Timing
from rungar.model.machine import Refusal, RefusalKind
from rungar.model.runner import RunnerView
from rungar.model.sentences import (
    SCALE_SET_GONE,
    held_reason,
    kept_for_reason,
    limit_reason,
    nothing_to_try,
    overflow_reason,
    scale_set_limit_reason,
    waits_for_host_reason,
)
from rungar.placement.backoff import Backoff, Backoffs
from rungar.placement.counts import Claim, Counts
from rungar.placement.holds import (
    Hold,
    HoldDecision,
    HoldRule,
    Holds,
    RoomOpened,
    place_hold,
    providers_to_hold,
)
from rungar.placement.host_waits import HostRooms, HostWait, StartTimes, host_to_wait_for
from rungar.placement.index import ProviderOrder
from rungar.placement.order import order_providers
from rungar.placement.switches import Switches
from rungar.placement.versions import RunnerVersions

__all__ = ["Candidates", "Claim", "Fleet", "Skip"]


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
        self.hold_rule = hold_rule
        self.order = ProviderOrder()  # each scale set's providers in its placement order
        self.counts = Counts(self.order)
        self.backoffs = Backoffs()
        self.holds = Holds(self.timing.hold_duration)
        self.switches = Switches()
        self.versions = RunnerVersions()
        self.host_rooms = HostRooms()  # rooms hosts expect, for overflow: when_host_is_later
        self.start_times = StartTimes()  # each provider's starts, for its typical start
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
        self.switches.providers = self.providers
        self.scale_sets = {s.name: s for s in scale_sets}
        pairs = {(s.name, p.name) for s in scale_sets for p in s.providers}
        self._users: dict[str, list[str]] = {}  # provider -> the scale sets listing it
        self._lowest_priority: dict[str, int] = {}
        for s in scale_sets:
            for p in s.providers:
                self._users.setdefault(p.name, []).append(s.name)
                lowest = self._lowest_priority.get(p.name, s.priority)
                self._lowest_priority[p.name] = min(lowest, s.priority)
        self.backoffs.keep_only(pairs)
        self.versions.configure(scale_sets)
        self.holds.duration = timing.hold_duration
        self.holds.keep_only(self.providers, self.scale_sets, pairs)
        self.host_rooms.keep_only(self.scale_sets, self.providers)
        self._reorder()

    def _reorder(self) -> None:
        providers = self.providers

        def weight(name: str) -> float:
            config = providers.get(name)
            return config.weight if config is not None else 1.0

        self.order.rebuild(list(self.scale_sets.values()), weight, self.counts.own)

    def _at_own_limit(self, config: ScaleSetConfig) -> bool:
        """The scale set's runners and creates in flight fill its own ``max_runners``."""
        return self.counts.of_scale_set(config.name) >= config.max_runners

    def set_disabled(self, provider: str, disabled: bool) -> None:
        """A runtime switch (``rungar providers disable|enable|drain``), kept until restart."""
        self.switches.set_disabled(provider, disabled)

    def is_disabled(self, provider: str) -> bool:
        return self.switches.is_disabled(provider)

    def disabled_at_runtime(self, provider: str) -> bool | None:
        """True/False when a runtime switch overrides the configuration, else None."""
        return self.switches.disabled_at_runtime(provider)

    # ----------------------------------------------------------------- what is counted

    def set_runners(self, counts: Iterable[tuple[str, str, int]]) -> None:
        """Replace the counted runners with ``(scale_set, provider, n)`` from the tracked fleet."""
        self.counts.set_runners(counts)
        self._reorder()

    def add_runner(self, scale_set: str, provider: str) -> None:
        self.counts.add_runner(scale_set, provider)

    def remove_runner(self, scale_set: str, provider: str, *, leaving: bool) -> None:
        """A runner stops counting for its scale set; ``leaving`` keeps its machine counted."""
        self.counts.remove_runner(scale_set, provider, leaving=leaving)

    def machine_deleted(self, provider: str, now: float) -> RoomOpened:
        """A leaving machine was deleted: its place on the provider is free, and room opened
        there (:meth:`open_room`)."""
        self.counts.machine_deleted(provider)
        return self.open_room(provider, now)

    def open_room(self, provider: str, now: float, *, by: str = "") -> RoomOpened:
        """Room opened on ``provider``: every scale set's FULL wait there is lifted (the refusal
        it waits out was about room that has now opened), and the scale set holding it is to
        be tried there at once. ``by``: a scale set whose own wait stays and that is not the
        holder to try."""
        forgiven = [
            scale_set
            for scale_set in self._users.get(provider, ())
            if scale_set != by and self.backoffs.lift_full(scale_set, provider, now)
        ]
        hold = self.holds.on(provider, now)
        holder = hold.holder if hold is not None and hold.holder != by else ""
        return RoomOpened(provider, now, holder, tuple(forgiven))

    def set_leaving(self, provider: str, n: int) -> None:
        self.counts.set_leaving(provider, n)

    def runners_of(self, scale_set: str, provider: str | None = None) -> int:
        return self.counts.runners_of(scale_set, provider)

    def creating_of(self, scale_set: str) -> int:
        return self.counts.creating_of(scale_set)

    def provider_count(self, provider: str) -> int:
        """Everything counted against a provider's limit: runners, claims, leaving machines."""
        return self.counts.on_provider(provider)

    def leaving_on(self, provider: str) -> int:
        return self.counts.leaving_on(provider)

    # ----------------------------------------------------------------- reachability

    def set_reachable(self, provider: str, reachable: bool) -> bool:
        """Record a List's answer (or any call's silence); returns True when its state changed.

        Only an answered List makes a provider reachable again (a reconcile pass's or a probe's).
        """
        return self.switches.set_reachable(provider, reachable)

    def is_reachable(self, provider: str) -> bool:
        return self.switches.is_reachable(provider)

    # ----------------------------------------------------------------- decisions

    def skip_reason(
        self, scale_set: str, provider: str, now: float, *, reserve: bool = False
    ) -> str | None:
        """Why ``scale_set`` will not try ``provider`` now, or None; in the order above.

        ``reserve``: the runner would refill the idle reserve, not serve an assigned job."""
        config = self.scale_sets.get(scale_set)
        if config is None:
            return SCALE_SET_GONE
        out = self.switches.out_of_placement(provider) or self.versions.refused(scale_set, provider)
        if out is not None:
            return out
        backed_off = self.backoffs.skip_reason(scale_set, provider, now)
        if backed_off is not None:
            return backed_off
        holder = self.holds.keeps_off(scale_set, config.priority, provider, now)
        if holder:
            return held_reason(holder)
        if reserve:
            waiting = self.holds.waiting_for_room(provider, now, besides=scale_set)
            if waiting:
                return kept_for_reason(waiting[0])
        patience = self.providers[provider].overflow_after
        if patience > 0 and self.holds.asking_for(scale_set, now) < patience:
            return overflow_reason(patience)
        if self.providers[provider].overflow is Overflow.WHEN_HOST_IS_LATER:
            wait = self.host_wait(scale_set, provider, now)
            if wait is not None:
                return waits_for_host_reason(wait.host.provider, wait.host.left(now))
        limit = self.providers[provider].max_runners
        if limit > 0 and self.counts.on_provider(provider) >= limit:
            return limit_reason(limit)
        return None

    def candidates(self, scale_set: str, now: float, *, reserve: bool = False) -> Candidates:
        """Providers this scale set may try now, in its placement's order, without asking any."""
        config = self.scale_sets.get(scale_set)
        if config is None:  # removed by a new configuration while a create was on its way
            return Candidates((), (), gone=True)
        if self._at_own_limit(config):
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
        ordered = [name for name in self.order.walk(scale_set) if reasons[name] is None]
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
        if config is None or self._at_own_limit(config):
            return []
        found: list[str] = []
        if limit < 1:
            return found
        skip_reason = self.skip_reason
        # Those skipped as full or failing are passed over without wording why.
        for name in self.backoffs.not_waiting(scale_set, self.order.walk(scale_set), now):
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
        if not self._at_own_limit(config):
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
        if self._at_own_limit(config):
            return Skip(provider, scale_set_limit_reason(config.max_runners))
        reason = self.skip_reason(scale_set, provider, now, reserve=reserve)
        if reason is not None:
            return Skip(provider, reason)
        return self.counts.take(scale_set, provider)

    def abandon(self, claim: Claim, now: float, *, full: bool = False) -> RoomOpened | None:
        """A create refused or given up: its claim is given back, and the place it had taken
        is room opened for the provider's holder (its wait there lifted), unless the create
        was the holder's own, or the provider refused it as full (then no room opened). Other
        scale sets' waits stay: the room is the holder's. None when nothing opened."""
        if not self.counts.holds(claim):
            return None
        self.release(claim)
        if full:
            return None
        hold = self.holds.on(claim.provider, now)
        if hold is None or hold.holder == claim.scale_set:
            return None
        lifted = self.backoffs.lift_full(hold.holder, claim.provider, now)
        return RoomOpened(claim.provider, now, hold.holder, (hold.holder,) if lifted else ())

    def release(self, claim: Claim) -> None:
        """Give a claim back (its create failed or was settled elsewhere). Idempotent."""
        self.counts.give_back(claim)

    def record_created(self, claim: Claim, now: float) -> None:
        """The claim's create succeeded: the runner counts, the streak is forgiven, holds lift.

        An unreachable provider stays so: a create settled by asking again says nothing of
        whether it can take more, and only an answered List (:meth:`set_reachable`) brings it
        back into placement, as the log line and ``rungar status`` promise."""
        self.release(claim)
        self.counts.add_runner(claim.scale_set, claim.provider)
        self.backoffs.created(claim.scale_set, claim.provider)
        overflowing = bool(self.providers[claim.provider].overflow_after)
        self.holds.placed(claim.scale_set, overflowing=overflowing)
        self.host_rooms.forget(claim.scale_set)

    def record_refusal(
        self, scale_set: str, provider: str, refusal: Refusal, now: float
    ) -> Backoff:
        """A refusal of any kind backs the scale set off the provider; only FULL may hold.

        A FULL refusal saying when room comes is kept (``host_rooms``); when it comes from a
        provider cheaper than one of the scale set's providers with ``overflow:
        when_host_is_later``, and the room is expected within that provider's patience, the
        scale set tries this provider again at the expected time (``backoff_first`` at the
        soonest) rather than after its backoff."""
        backoff = self.backoffs.refused(scale_set, provider, refusal, now, self.timing)
        if refusal.kind is not RefusalKind.FULL:
            return backoff
        config = self.scale_sets.get(scale_set)
        if config is not None and config.hold is HoldChoice.SOONEST_ROOM:
            at = None if refusal.room is None else now + refusal.room.seconds
            self.holds.room_expected(scale_set, provider, at)
        if refusal.room is None:
            self.host_rooms.not_told(scale_set, provider)
            return backoff
        # Kept whatever the scale set's providers (``host_rooms``: for any rule to read); only
        # ``overflow: when_host_is_later`` acts on it.
        dearer = self._waiting_providers(scale_set, self.price_of(provider))
        patience = max((self.patience(name) for name in dearer), default=self.holds.duration)
        seconds = refusal.room.seconds
        retry_at = now + max(seconds, self.timing.backoff_first)
        self.host_rooms.told(
            scale_set, provider, refusal.room, now, retry_at=retry_at, patience=patience
        )
        if dearer and seconds < patience:
            backoff = self.backoffs.retry_at(scale_set, provider, retry_at)
        return backoff

    def record_start(self, provider: str, seconds: float) -> None:
        """A runner on ``provider`` came online ``seconds`` after its Create was sent: one more
        of its starts, for its typical start (:meth:`patience`)."""
        if provider in self.providers:
            self.start_times.record(provider, seconds)

    def patience(self, provider: str) -> float:
        """How much sooner than a priced provider with ``overflow: when_host_is_later`` a
        host's room must be expected for a runner to wait for it: the provider's typical start
        (measured, or ``typical_start``) plus its ``overflow_margin``."""
        config = self.providers[provider]
        typical = self.start_times.typical(provider, config.typical_start)
        return typical + config.overflow_margin

    def _waiting_providers(self, scale_set: str, price: float) -> list[str]:
        """The scale set's providers with ``overflow: when_host_is_later`` dearer than
        ``price``."""
        config = self.scale_sets.get(scale_set)
        if config is None:
            return []
        return [
            entry.name
            for entry in config.providers
            if entry.name in self.providers
            and self.providers[entry.name].overflow is Overflow.WHEN_HOST_IS_LATER
            and self.price_of(entry.name) > price
        ]

    def host_wait(self, scale_set: str, provider: str, now: float) -> HostWait | None:
        """The host whose expected room keeps ``scale_set``'s runner off ``provider`` now (a
        provider with ``overflow: when_host_is_later``), or None
        (:func:`rungar.placement.host_waits.host_to_wait_for`)."""
        price = self.price_of(provider)
        rooms = [
            room
            for room in self.host_rooms.expected(scale_set)
            if room.provider in self.providers and self.price_of(room.provider) < price
        ]
        if not rooms:
            return None
        since = self.host_rooms.since(scale_set, now)
        room = host_to_wait_for(rooms, now, self.patience(provider), since)
        return None if room is None else HostWait(scale_set, provider, room, since)

    def host_waits(self, now: float) -> list[HostWait]:
        """Every scale set's runner waiting for a host's expected room now, by scale set."""
        waits: list[HostWait] = []
        for name in sorted(self.scale_sets):
            for provider in self._waiting_providers(name, 0.0):
                wait = self.host_wait(name, provider, now)
                if wait is not None:
                    waits.append(wait)
        return waits

    def at_limit(self, provider: str) -> bool:
        """The provider holds as many runners as its own ``max_runners``."""
        limit = self.providers[provider].max_runners
        return limit > 0 and self.counts.on_provider(provider) >= limit

    def waiting_for_host(self, host: str, now: float) -> list[str]:
        """The scale sets whose runner waits for ``host``'s expected room: room that opens
        there is theirs to try at once, as a holder's is."""
        return [wait.scale_set for wait in self.host_waits(now) if wait.host.provider == host]

    def wake_at(self, scale_set: str, now: float) -> float | None:
        """When a scale set waiting for a host's expected room should be scaled again: the
        host's retry, or the end of its wait (the priced provider then takes it); None when
        it waits for none."""
        found: list[float] = []
        for provider in self._waiting_providers(scale_set, 0.0):
            wait = self.host_wait(scale_set, provider, now)
            if wait is not None:
                found.append(min(wait.host.retry_at, wait.since + self.patience(provider)))
        return min(found, default=None)

    def record_crash(self, scale_set: str, provider: str, why: str, now: float) -> Backoff:
        """A runner ended, or never connected in time, before it ever connected: one more in
        the scale set's crash loop on that provider (``why`` is EXITED or NEVER_CONNECTED)."""
        return self.backoffs.crashed(scale_set, provider, why, now, self.timing)

    def uncount_crash(self, scale_set: str, provider: str, now: float) -> Backoff | None:
        """A runner counted in the crash loop exited for another reason (GitHub refused its
        version): the loop is one shorter; what is left of it."""
        self.backoffs.uncount(scale_set, provider, now, self.timing)
        return self.backoffs.crash_loop(scale_set, provider)

    def record_connected(self, scale_set: str, provider: str) -> bool:
        """A runner connected: its scale set's crash loop on the provider is forgiven."""
        return self.backoffs.connected(scale_set, provider)

    def crash_loop(self, scale_set: str, provider: str) -> Backoff | None:
        return self.backoffs.crash_loop(scale_set, provider)

    def active_crash_loops(self, now: float) -> list[tuple[str, str, Backoff]]:
        return self.backoffs.active_crash_loops(now)

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
        tie. A scale set with ``hold: soonest_room`` holds those
        :func:`~rungar.placement.holds.providers_to_hold` chooses by when each expects room."""
        config = self.scale_sets.get(scale_set)
        if config is None:  # no longer configured: it waits for nothing
            return HoldDecision(scale_set, now, waiting=False)
        if self._at_own_limit(config):  # it waits for no provider
            return HoldDecision(scale_set, now, waiting=False)
        waited_on: list[str] = []
        full: list[str] = []
        for entry in config.providers:
            if not self.backoffs.waiting_full(scale_set, entry.name, now):
                continue
            waited_on.append(entry.name)
            if self._anyone_below(config.priority, entry.name):
                full.append(entry.name)  # a hold that keeps no one off would clutter status
        if self.hold_rule is HoldRule.ONE and full:
            full = [self._provider_to_hold(scale_set, full, now)]
        elif config.hold is HoldChoice.SOONEST_ROOM and full:
            expected = self.holds.rooms_expected(scale_set)
            held = self.holds.held_by(scale_set, now)
            full = providers_to_hold(full, expected, held, now, config.hold_margin)
        duration = self.timing.hold_duration
        holds: list[Hold] = []
        placed: list[Hold] = []
        for provider in full:
            current = self.holds.current(provider)
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
        return self.holds.apply(decision)

    def hold_full_providers(self, scale_set: str, now: float) -> tuple[Hold, ...]:
        """:meth:`plan_holds` then :meth:`apply_holds`: the holds newly placed."""
        return self.apply_holds(self.plan_holds(scale_set, now))

    def _provider_to_hold(self, scale_set: str, full: list[str], now: float) -> str:
        """Under :attr:`HoldRule.ONE`: of the providers found full, the one to hold."""
        for provider in full:
            hold = self.holds.on(provider, now)
            if hold is not None and hold.holder == scale_set:
                return provider
        config = self.scale_sets[scale_set]
        own = {name: self.counts.runners_of(scale_set, name) for name in full}
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
            if self._at_own_limit(self.scale_sets[runner.scale_set]):
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
        self.holds.release(scale_set)

    # ----------------------------------------------------------------- views

    def backoff(self, scale_set: str, provider: str) -> Backoff | None:
        return self.backoffs.get(scale_set, provider)

    def active_backoffs(self, now: float) -> list[tuple[str, str, Backoff]]:
        return self.backoffs.active(now)

    def hold_on(self, provider: str, now: float) -> Hold | None:
        return self.holds.on(provider, now)

    def holding_back(self, scale_set: str, now: float) -> list[Hold]:
        """Active holds that keep this scale set off one of its providers."""
        config = self.scale_sets.get(scale_set)
        if config is None:
            return []
        priority = config.priority
        found = []
        for entry in config.providers:
            hold = self.holds.on(entry.name, now)
            if hold is not None and hold.holder != scale_set and priority < hold.priority:
                found.append(hold)
        return found

    def asking_for(self, scale_set: str, now: float) -> float:
        """How long this scale set's assigned work has been finding nothing to try (renewed
        within ``hold_duration``, until a provider without ``overflow_after`` took one of its
        runners); 0 when it is not."""
        return self.holds.asking_for(scale_set, now)

    def waiting_for_room(self, provider: str, now: float, besides: str = "") -> list[str]:
        """Scale sets whose assigned jobs wait for room on ``provider`` (oldest first)."""
        return self.holds.waiting_for_room(provider, now, besides)

    def claims(self) -> list[Claim]:
        return self.counts.claims()

    # ----------------------------------------------------------------- persistence

    def export_state(self) -> tuple[list[tuple[str, str, Backoff]], list[Hold]]:
        """Backoffs and holds, so a restart keeps them with their remaining time."""
        return self.backoffs.every(), self.holds.every()

    def export_crash_loops(self) -> list[tuple[str, str, Backoff]]:
        """Crash loops, kept across a restart like backoffs."""
        return self.backoffs.every_crash_loop()

    def restore_crash_loops(self, loops: Iterable[tuple[str, str, Backoff]]) -> None:
        for scale_set, provider, backoff in loops:
            if scale_set in self.scale_sets and provider in self.providers:
                self.backoffs.restore_crash_loop(scale_set, provider, backoff)

    def restore_state(
        self, backoffs: Iterable[tuple[str, str, Backoff]], holds: Iterable[Hold]
    ) -> None:
        for scale_set, provider, backoff in backoffs:
            if scale_set in self.scale_sets and provider in self.providers:
                self.backoffs.restore(scale_set, provider, backoff)
        for hold in holds:
            if hold.provider in self.providers:
                self.holds.restore(hold)
