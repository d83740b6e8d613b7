"""What a reconcile pass does with the creates given up on while a machine of theirs may be left
behind: a pure plan from the given-up creates the state database keeps, the pass's listings and
``now`` (docs/architecture.md: a reconcile pass, step 3).

A create is given up on when no provider took its runner in time. When the last provider tried
may still make its machine (its Create, or the Delete of its leftover, got no answer: a Create
held up in a network partition reaches the provider once the link heals), the runner's name is
kept as given up on that provider (:class:`GivenUpCreate`). Only that provider's listing, and
only one asked for after the give-up, settles it:

- its machine is listed: it is deleted there, as left behind by a create given up on
  (``delete``); it is never adopted, and never registered with GitHub again. The name is kept
  until a later listing no longer shows the machine. (Not while GitHub lists the runner it
  carries busy, or cannot be asked: a registration whose removal failed at the give-up may
  have taken a job, and a busy runner is never removed);
- its machine is not listed: the name is kept for ``left_grace`` after the provider first
  answered such a listing (a Create delivered late makes its machine meanwhile), then
  forgotten;
- no such listing (the provider does not answer, or the pass asked for its listings before the
  give-up): nothing changes; a name whose provider has answered no listing for
  ``unreachable_grace`` since the give-up is forgotten and its machine left alone, as a runner of
  an unreachable provider is.

A name a runner of ours holds (or a create in flight) is not this plan's to delete, and one
whose provider is no longer configured is never listed again: both are forgotten at once.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Mapping
from dataclasses import dataclass, replace

from rungar.model.create_intent import GivenUpCreate
from rungar.model.machine import Machine

# Why a given-up create is forgotten: the ``why`` of its log line.
GONE = "its machine is gone"
NO_MACHINE = "no machine appeared within left_grace"
WRITTEN_OFF = "its provider answered no listing within unreachable_grace"
HELD = "a runner of ours holds the name"
NOT_CONFIGURED = "its provider is no longer configured"


@dataclass(frozen=True, slots=True)
class LeftBehind:
    """A given-up create's machine, listed by its provider: deleted there."""

    given_up: GivenUpCreate  # as saved after this pass (``seen``)
    machine: Machine
    first: bool  # first seen this pass (its event is recorded once)


@dataclass(frozen=True, slots=True)
class GivenUpPlan:
    delete: tuple[LeftBehind, ...] = ()
    save: tuple[GivenUpCreate, ...] = ()  # changed this pass (first listed, or seen)
    forget: tuple[tuple[GivenUpCreate, str], ...] = ()  # with why


def plan_given_up(
    given_up: Iterable[GivenUpCreate],
    *,
    listings: Mapping[str, object | None],
    machines: Mapping[str, tuple[str, Machine]],
    before_listing: Container[str],
    held: Collection[str],
    busy: Container[str] | None,
    now: float,
    left_grace: float,
    unreachable_grace: float,
    doubtful: Container[str] = frozenset(),
) -> GivenUpPlan:
    """``listings``: each configured provider's answer this pass (None: it did not answer);
    ``machines``: the listed machines by name, with the provider whose listing speaks for each
    (:func:`rungar.engine.reconcile.ownership.sort_listings`, given-up names held by their
    provider); ``before_listing``: the names given up before this pass asked for its listings
    (only their listing is newer than the give-up); ``held``: names of runners the daemon
    tracks and creates in flight; ``busy``: names GitHub lists as busy (None: GitHub could
    not be asked); ``doubtful``: names whose listing is not believed this pass."""
    delete: list[LeftBehind] = []
    save: list[GivenUpCreate] = []
    forget: list[tuple[GivenUpCreate, str]] = []
    for entry in given_up:
        name, provider = entry.runner, entry.provider
        if name in held:
            forget.append((entry, HELD))
            continue
        if provider not in listings:
            forget.append((entry, NOT_CONFIGURED))
            continue
        answered = (
            listings[provider] is not None and name in before_listing and name not in doubtful
        )
        listed = machines.get(name) if answered else None
        if listed is not None and listed[0] == provider:
            if busy is None or entry.carries in busy:
                continue  # its job ends first, or GitHub is asked again next pass
            seen = replace(entry, listed_at=entry.listed_at or now, seen=True)
            delete.append(LeftBehind(seen, listed[1], first=not entry.seen))
            if seen != entry:
                save.append(seen)
        elif entry.seen:
            if answered:
                forget.append((entry, GONE))  # else kept: deleted, not yet listed gone
        elif answered and not entry.listed_at:
            if left_grace > 0:
                save.append(replace(entry, listed_at=now))
            else:
                forget.append((entry, NO_MACHINE))
        elif entry.listed_at:
            if now - entry.listed_at >= left_grace:
                forget.append((entry, NO_MACHINE))
        elif now - entry.given_up_at > unreachable_grace:
            forget.append((entry, WRITTEN_OFF))
    return GivenUpPlan(tuple(delete), tuple(save), tuple(forget))
