"""Which listed machines a reconcile pass adopts, and which create intents it settles: a pure
plan from what the providers listed, what the daemon tracks and what the store kept, and ``now``
(docs/architecture.md: a reconcile pass).

The pass acts on the plan afterwards (adopts, removes registrations, clears intents), so nothing
it awaits can change what was decided: a create that begins meanwhile has a new name, and one in
flight when the plan was made is never touched.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass, field

from rungar.model import labels as L
from rungar.model.create_intent import CreateIntent
from rungar.model.machine import Machine

INTERRUPTED_CREATE = "interrupted_create"
UNTRACKED = "untracked"


@dataclass(frozen=True, slots=True)
class Adopt:
    provider: str
    machine: Machine
    why: str  # INTERRUPTED_CREATE or UNTRACKED: the ``why`` of its ``adopted`` event
    runner_id: int = 0  # the registration its create intent recorded, when it had one
    asked_at: float = 0.0  # INTERRUPTED_CREATE: when its create was asked for


@dataclass(frozen=True, slots=True)
class AdoptionPlan:
    adopt: tuple[Adopt, ...] = ()
    # Intents whose machine is listed: cleared (their machine is adopted, or tracked already).
    cleared: tuple[str, ...] = ()
    # Intents a crash cut short whose machine no provider lists: registration removed, settled.
    settled: tuple[CreateIntent, ...] = ()
    # Names kept from adoption whose time is up: forgotten.
    forgotten: tuple[str, ...] = field(default=())


def plan_adoption(
    *,
    machines: Mapping[str, tuple[str, Machine]],
    every_listed: bool,
    intents: Sequence[CreateIntent],
    tracked: Collection[str],
    creating: Container[str],
    kept_until: Mapping[str, float],
    installation: str,
    now: float,
    doubtful: Container[str] = frozenset(),
    dropped: Container[str] = frozenset(),
) -> AdoptionPlan:
    """``machines`` by runner name (with their provider) from this pass's listings;
    ``every_listed``: every provider answered; ``tracked``: runners the daemon has records of;
    ``creating``: names of creates in flight; ``kept_until``: names kept from adoption (a
    stranded create's) until then; ``doubtful``: names listed in a way not believed this pass
    (neither adopted nor settled); ``dropped``: names tracked or being created when the
    listings were asked for and let go since: a listing older than that is not believed about
    them (their machine may be deleted since), so they are not adopted."""
    adopt: list[Adopt] = []
    cleared: list[str] = []
    settled: list[CreateIntent] = []
    taken = set(tracked)
    # Intents left by a crash (never those of creates in flight now).
    for intent in intents:
        if intent.runner in creating or intent.runner in doubtful:
            continue
        if intent.runner in machines:
            cleared.append(intent.runner)
            if intent.runner not in taken:
                provider, machine = machines[intent.runner]
                adopt.append(
                    Adopt(
                        provider, machine, INTERRUPTED_CREATE, intent.runner_id, intent.created_at
                    )
                )
                taken.add(intent.runner)
        elif every_listed:
            settled.append(intent)
    # What nobody tracks.
    forgotten: list[str] = []
    for name, (provider, machine) in machines.items():
        if name in taken or name in creating or name in dropped:
            continue
        if name in kept_until:
            if kept_until[name] > now:
                continue
            forgotten.append(name)
        if machine.labels.get(L.INSTALLATION) != installation:
            continue
        adopt.append(Adopt(provider, machine, UNTRACKED))
        taken.add(name)
    return AdoptionPlan(tuple(adopt), tuple(cleared), tuple(settled), tuple(forgotten))
