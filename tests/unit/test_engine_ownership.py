"""Whose listing speaks for which machine: the pure sort of a pass's listings."""

from __future__ import annotations

from rungar.engine.core.records import RunnerRecord
from rungar.engine.reconcile import ownership as O
from rungar.engine.reconcile import sightings as S
from rungar.engine.reconcile.ownership import ListingFault, sort_listings
from rungar.engine.reconcile.sightings import plan_sightings
from rungar.model import labels as L
from rungar.model.machine import Machine, MachineState
from rungar.model.runner import RunnerState

OURS = "gh-test"


def machine(
    name: str,
    state: MachineState = MachineState.RUNNING,
    installation: str = OURS,
    provider: str = "",
) -> Machine:
    return Machine(name, state, labels=L.machine_labels(installation, "linux", name, "r", provider))


def test_a_held_machine_is_judged_by_its_holders_listing_only() -> None:
    found = sort_listings(
        {"a": [machine("r-1")], "b": [machine("r-1", MachineState.STOPPED)]},
        {"r-1": "a"},
        OURS,
    )
    assert found.machines["r-1"][0] == "a"
    assert found.machines["r-1"][1].state is MachineState.RUNNING
    assert found.faults == (ListingFault("b", "r-1", O.HELD_ELSEWHERE, "a"),)
    assert found.faults[0].sentence() == (
        "provider b listed machine r-1, which provider a holds: ignored"
    )


def test_a_held_machine_its_holder_does_not_list_is_absent_whoever_else_lists_it() -> None:
    found = sort_listings({"a": [], "b": [machine("r-1")]}, {"r-1": "a"}, OURS)
    assert "r-1" not in found.machines
    assert [f.kind for f in found.faults] == [O.HELD_ELSEWHERE]


def test_an_untracked_machine_goes_to_the_first_provider_that_lists_it() -> None:
    found = sort_listings({"a": [machine("r-9")], "b": [machine("r-9")]}, {}, OURS)
    assert found.machines["r-9"][0] == "a"
    assert found.faults == (ListingFault("b", "r-9", O.HELD_ELSEWHERE, "a"),)


def test_a_machine_made_by_another_of_our_providers_on_a_shared_backend_is_skipped_quietly() -> (
    None
):
    found = sort_listings({"a": [], "b": [machine("r-1", provider="a")]}, {"r-1": "a"}, OURS)
    assert found.machines == {} and found.faults == ()


def test_a_machine_named_twice_with_different_states_is_doubtful_and_reported() -> None:
    twice = [machine("r-1"), machine("r-1", MachineState.STOPPED)]
    found = sort_listings({"a": twice}, {"r-1": "a"}, OURS)
    assert "r-1" not in found.machines and found.doubtful == {"r-1"}
    assert [f.kind for f in found.faults] == [O.LISTED_TWICE]
    same = sort_listings({"a": [machine("r-1"), machine("r-1")]}, {"r-1": "a"}, OURS)
    assert "r-1" in same.machines and same.faults == ()


def test_a_machine_of_another_installation_is_doubtful_and_reported() -> None:
    found = sort_listings({"a": [machine("r-1", installation="other")]}, {}, OURS)
    assert found.machines == {} and found.doubtful == {"r-1"}
    assert [f.kind for f in found.faults] == [O.OTHER_INSTALLATION]


def test_a_doubtful_runner_is_neither_ended_nor_judged_gone() -> None:
    record = RunnerRecord("r-1", "linux", "a", "r", created_at=0.0, state=RunnerState.BUSY)
    [sighting] = plan_sightings(
        [record],
        listings={"a": []},
        machines={},
        doubtful={"r-1"},
        registrations=None,
        pass_began=50.0,
        now=100.0,
        unreachable_grace=300.0,
        reconcile_interval=30.0,
    )
    assert sighting.kind == S.REACHABLE


def test_a_machine_with_a_name_no_machine_can_have_is_reported_and_left_out() -> None:
    found = sort_listings({"a": [machine("a b"), machine("")]}, {}, OURS)
    assert found.machines == {}
    assert [f.kind for f in found.faults] == [O.NOT_A_NAME, O.NOT_A_NAME]
    assert found.faults[0].sentence() == (
        "provider a listed a machine named 'a b', not a machine name: ignored"
    )
