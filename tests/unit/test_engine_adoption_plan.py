"""The reconcile pass's adoption plan: a pure function of the listings, the tracked runners, the
create intents and the creates given up on. (Adopting an intent's machine a second time as
``untracked``, or adopting a name in flight, fails these.)"""

from __future__ import annotations

from rungar.engine.reconcile.adoption import (
    INTERRUPTED_CREATE,
    UNTRACKED,
    Adopt,
    AdoptionPlan,
    plan_adoption,
)
from rungar.model import labels as L
from rungar.model.create_intent import CreateIntent
from rungar.model.machine import Machine, MachineState

OURS = "gh-1"


def machine(name: str, installation: str = OURS) -> tuple[str, Machine]:
    labels = {L.INSTALLATION: installation}
    return "compute1", Machine(name, MachineState.RUNNING, labels, created_at=10.0)


def plan(
    *,
    machines: dict[str, tuple[str, Machine]] | None = None,
    every_listed: bool = True,
    intents: list[CreateIntent] | None = None,
    tracked: set[str] | None = None,
    creating: set[str] | None = None,
    given_up: set[str] | None = None,
) -> AdoptionPlan:
    return plan_adoption(
        machines=machines or {},
        every_listed=every_listed,
        intents=intents or [],
        tracked=tracked or set(),
        creating=creating or set(),
        given_up=given_up or set(),
        installation=OURS,
    )


def test_a_machine_of_a_create_cut_short_is_adopted_once_with_its_registration() -> None:
    found = plan(
        machines={"r-1": machine("r-1")},
        intents=[CreateIntent("r-1", "linux", "req", runner_id=7)],
    )
    assert found.adopt == (Adopt("compute1", machine("r-1")[1], INTERRUPTED_CREATE, 7),)
    assert found.cleared == ("r-1",)
    assert found.settled == ()


def test_an_intent_with_no_listed_machine_is_settled_only_when_every_provider_answered() -> None:
    intent = CreateIntent("r-2", "linux", "req", runner_id=9)
    assert plan(intents=[intent]).settled == (intent,)
    assert plan(intents=[intent], every_listed=False).settled == ()


def test_creates_in_flight_and_tracked_runners_are_never_adopted() -> None:
    found = plan(
        machines={"flying": machine("flying"), "known": machine("known")},
        intents=[CreateIntent("flying", "linux", "req")],
        creating={"flying"},
        tracked={"known"},
    )
    assert found.adopt == () and found.cleared == ()


def test_an_untracked_machine_of_ours_is_adopted_and_one_of_another_installation_is_not() -> None:
    found = plan(machines={"mine": machine("mine"), "theirs": machine("theirs", "gh-2")})
    assert [(a.machine.name, a.why) for a in found.adopt] == [("mine", UNTRACKED)]


def test_a_machine_of_a_create_given_up_on_is_never_adopted_and_its_intent_is_cleared() -> None:
    machines = {"given-up": machine("given-up"), "other": machine("other")}
    found = plan(
        machines=machines,
        intents=[CreateIntent("given-up", "linux", "req", runner_id=3)],
        given_up={"given-up"},
    )
    assert [a.machine.name for a in found.adopt] == ["other"]
    assert found.cleared == ("given-up",) and found.settled == ()
    untracked = plan(machines=machines, given_up={"given-up"})
    assert [a.machine.name for a in untracked.adopt] == ["other"]
