"""Which listed machines a reconcile pass adopts, and which create intents it settles: a pure
plan from what the providers listed, what the daemon tracks and what the store kept
(docs/architecture.md: a reconcile pass).

The pass acts on the plan afterwards (adopts, removes registrations, clears intents), so nothing
it awaits can change what was decided: a create that begins meanwhile has a new name, and one in
flight when the plan was made is never touched.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass

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


def plan_adoption(
    *,
    machines: Mapping[str, tuple[str, Machine]],
    every_listed: bool,
    intents: Sequence[CreateIntent],
    tracked: Collection[str],
    creating: Container[str],
    given_up: Container[str],
    installation: str,
    doubtful: Container[str] = frozenset(),
    dropped: Container[str] = frozenset(),
) -> AdoptionPlan:
    """``machines`` by runner name (with their provider) from this pass's listings;
    ``every_listed``: every provider answered; ``tracked``: runners the daemon has records of;
    ``creating``: names of creates in flight; ``given_up``: names of creates given up on while
    a machine may be left behind, never adopted (their machine is deleted,
    :mod:`rungar.engine.reconcile.given_up_plan`; an intent a crash left beside one is cleared);
    ``doubtful``: names listed in a way not believed this pass
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
        if intent.runner in given_up:
            cleared.append(intent.runner)
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
    for name, (provider, machine) in machines.items():
        if name in taken or name in creating or name in dropped or name in given_up:
            continue
        if machine.labels.get(L.INSTALLATION) != installation:
            continue
        adopt.append(Adopt(provider, machine, UNTRACKED))
        taken.add(name)
    return AdoptionPlan(tuple(adopt), tuple(cleared), tuple(settled))
