"""The reconcile pass's plan for creates given up on while a machine may be left behind: a pure
function of the given-up creates, the pass's listings, which of them were given up before the
listings were asked for, and ``now``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rungar.engine.reconcile import given_up_plan as G
from rungar.engine.reconcile.given_up_plan import GivenUpPlan, plan_given_up
from rungar.model.create_intent import GivenUpCreate
from rungar.model.machine import Machine, MachineState
from rungar.store.sqlite import SqliteStore

GIVEN_UP = GivenUpCreate("ci-1", "ci", "host1", given_up_at=100.0)
MACHINE = Machine("ci-1", MachineState.RUNNING, {})
LEFT_GRACE = 60.0
UNREACHABLE_GRACE = 300.0


def plan(
    entry: GivenUpCreate = GIVEN_UP,
    *,
    now: float,
    listed: dict[str, tuple[str, Machine]] | None = None,
    answered: tuple[str, ...] = ("host1", "host2"),
    before_listing: bool = True,
    held: frozenset[str] = frozenset(),
    busy: frozenset[str] | None = frozenset(),
    left_grace: float = LEFT_GRACE,
) -> GivenUpPlan:
    listings: dict[str, object | None] = {"host1": None, "host2": None}
    listings |= {name: [] for name in answered}
    return plan_given_up(
        [entry],
        listings=listings,
        machines=listed or {},
        before_listing={entry.runner} if before_listing else set(),
        held=held,
        busy=busy,
        now=now,
        left_grace=left_grace,
        unreachable_grace=UNREACHABLE_GRACE,
    )


def test_its_machine_listed_after_the_give_up_is_deleted_until_a_later_listing_shows_it_gone() -> (
    None
):
    first = plan(now=130.0, listed={"ci-1": ("host1", MACHINE)})
    seen = replace(GIVEN_UP, listed_at=130.0, seen=True)
    assert first == GivenUpPlan(delete=(G.LeftBehind(seen, MACHINE, first=True),), save=(seen,))
    again = plan(seen, now=160.0, listed={"ci-1": ("host1", MACHINE)})
    assert again == GivenUpPlan(delete=(G.LeftBehind(seen, MACHINE, first=False),))
    assert plan(seen, now=190.0) == GivenUpPlan(forget=((seen, G.GONE),))


def test_a_listing_asked_for_before_the_give_up_neither_deletes_nor_settles_it() -> None:
    listed = {"ci-1": ("host1", MACHINE)}
    assert plan(now=130.0, listed=listed, before_listing=False) == GivenUpPlan()
    assert plan(now=130.0, before_listing=False) == GivenUpPlan()
    seen = replace(GIVEN_UP, listed_at=130.0, seen=True)
    assert plan(seen, now=160.0, before_listing=False) == GivenUpPlan(), "not gone by it"


def test_only_its_own_providers_listing_speaks_for_it_never_another_providers() -> None:
    elsewhere = {"ci-1": ("host2", MACHINE)}  # host2 lists the name; host1 answers without it
    assert plan(now=130.0, listed=elsewhere) == GivenUpPlan(
        save=(replace(GIVEN_UP, listed_at=130.0),)
    ), "not deleted: host1's listing counts, as one without the machine"
    assert plan(now=130.0, listed=elsewhere, answered=("host2",)) == GivenUpPlan()
    seen = replace(GIVEN_UP, listed_at=130.0, seen=True)
    assert plan(seen, now=160.0, listed=elsewhere, answered=("host2",)) == GivenUpPlan()


def test_with_no_machine_listed_it_is_kept_for_left_grace_after_its_provider_first_answers() -> (
    None
):
    first = plan(now=500.0)  # its provider answers long after the give-up: a partition healed
    listed = replace(GIVEN_UP, listed_at=500.0)
    assert first == GivenUpPlan(save=(listed,))
    assert plan(listed, now=500.0 + LEFT_GRACE - 1) == GivenUpPlan()
    # A Create delivered late: its machine appears within left_grace, and is deleted.
    late = plan(listed, now=530.0, listed={"ci-1": ("host1", MACHINE)})
    seen = replace(listed, seen=True)
    assert late == GivenUpPlan(delete=(G.LeftBehind(seen, MACHINE, first=True),), save=(seen,))
    assert plan(listed, now=500.0 + LEFT_GRACE) == GivenUpPlan(forget=((listed, G.NO_MACHINE),))
    assert plan(now=500.0, left_grace=0) == GivenUpPlan(forget=((GIVEN_UP, G.NO_MACHINE),))


def test_while_its_provider_does_not_answer_it_is_kept_then_written_off() -> None:
    assert plan(now=100.0 + UNREACHABLE_GRACE, answered=()) == GivenUpPlan()
    written_off = plan(now=101.0 + UNREACHABLE_GRACE, answered=())
    assert written_off == GivenUpPlan(forget=((GIVEN_UP, G.WRITTEN_OFF),))
    seen = replace(GIVEN_UP, listed_at=130.0, seen=True)
    assert plan(seen, now=10_000.0, answered=()) == GivenUpPlan(), "its machine was there"


def test_a_name_a_runner_holds_or_of_a_provider_no_longer_configured_is_forgotten() -> None:
    listed = {"ci-1": ("host1", MACHINE)}
    held = plan(now=130.0, listed=listed, held=frozenset({"ci-1"}))
    assert held == GivenUpPlan(forget=((GIVEN_UP, G.HELD),))
    gone = replace(GIVEN_UP, provider="host9")
    assert plan(gone, now=130.0) == GivenUpPlan(forget=((gone, G.NOT_CONFIGURED),))


def test_its_machine_is_not_deleted_while_github_lists_it_busy_or_cannot_be_asked() -> None:
    listed = {"ci-1": ("host1", MACHINE)}
    assert plan(now=130.0, listed=listed, busy=frozenset({"ci-1"})) == GivenUpPlan()
    assert plan(now=130.0, listed=listed, busy=None) == GivenUpPlan()
    assert plan(now=130.0, listed=listed).delete, "deleted once GitHub says it is not busy"


def test_a_machine_carrying_another_runners_registration_waits_while_that_runner_is_busy() -> None:
    other = GivenUpCreate("ci-evil", "ci", "host1", given_up_at=100.0, registration="ci-1")
    evil = Machine("ci-evil", MachineState.RUNNING, {})
    listed = {"ci-evil": ("host1", evil)}
    assert plan(other, now=130.0, listed=listed, busy=frozenset({"ci-1"})) == GivenUpPlan()
    seen = replace(other, listed_at=130.0, seen=True)
    assert plan(other, now=130.0, listed=listed) == GivenUpPlan(
        delete=(G.LeftBehind(seen, evil, first=True),), save=(seen,)
    )


def test_a_given_up_create_and_the_registration_it_carries_survive_a_restart(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "state.db")
    kept = GivenUpCreate("ci-evil", "ci", "host1", 100.0, registration="ci-1")
    store.keep_given_up(kept)
    store.close()
    assert SqliteStore(tmp_path / "state.db").given_up() == [kept]
