"""Placement as a plan: the decision (what to try, in which order, why not the others) is a
value computed without changing the fleet; the engine tries exactly that plan."""

from __future__ import annotations

from rungar.config.model import Placement
from rungar.engine.create.placing import try_plan
from rungar.placement import Skip
from rungar.placement.plan import NotPlaced, Outcome, Placed, PlacementPlan, plan_placement
from tests.unit.placement_helpers import FULL, Script, fleet, provider, scale_set

T0 = 1000.0


def test_a_plan_names_the_order_and_why_each_other_provider_is_skipped_and_claims_nothing() -> None:
    f = fleet(
        [provider("a"), provider("b", disabled=True), provider("c")],
        [scale_set("s", ["a", "b", "c"], placement=Placement.PACK)],
    )
    plan = plan_placement(f, "s", T0)
    assert plan.order == ("a", "c")
    assert plan.skips == (Skip("b", "disabled"),)
    assert plan.why_none == ""
    assert str(plan) == "try a then c; skip b: disabled"
    assert f.claims() == [] and f.creating_of("s") == 0, "planning takes no place"


def test_a_plan_with_nothing_to_try_says_why() -> None:
    f = fleet([provider("a", disabled=True)], [scale_set("s", ["a"])])
    plan = plan_placement(f, "s", T0)
    assert plan.order == () and "disabled" in plan.why_none


async def test_the_engine_tries_the_plans_providers_in_the_plans_order() -> None:
    # Broken on purpose once (try_plan re-ordering by the fleet's pack order): a was tried first.
    f = fleet(
        [provider("a"), provider("b"), provider("c")],
        [scale_set("s", ["a", "b", "c"], placement=Placement.PACK)],
    )
    script = Script(answers={"c": FULL})
    plan = PlacementPlan("s", ("c", "b"), (Skip("a", "disabled"),))
    result = await try_plan(
        f,
        plan,
        now=lambda: T0,
        create=script.create,
        delete=script.delete,
        settle=script.settle,
    )
    assert isinstance(result, Placed) and result.provider == "b"
    assert script.created_on() == ["c", "b"], "a, left out of the plan, is never asked"
    assert [t.outcome for t in result.tries] == [Outcome.REFUSED, Outcome.CREATED]
    assert result.plan is plan, "the result says what was planned"


async def test_an_empty_plan_is_not_placed_with_the_plans_reason() -> None:
    f = fleet([provider("a")], [scale_set("s", ["a"])])
    plan = PlacementPlan("s", (), (Skip("a", "disabled"),), why_none="a: disabled")
    script = Script()
    result = await try_plan(
        f, plan, now=lambda: T0, create=script.create, delete=script.delete, settle=script.settle
    )
    assert isinstance(result, NotPlaced) and result.reason == "a: disabled"
    assert script.calls == []


def test_a_plan_with_nothing_to_try_for_work_carries_its_holds_and_places_none() -> None:
    f = fleet(
        [provider("a"), provider("b")],
        [scale_set("big", ["a", "b"], priority=10), scale_set("small", ["a", "b"])],
    )
    f.record_refusal("big", "a", FULL, T0)
    f.record_refusal("big", "b", FULL, T0)
    plan = plan_placement(f, "big", T0 + 1)
    assert plan.order == () and plan.holds is not None
    assert [h.provider for h in plan.holds.placed] == ["a", "b"]
    assert f.hold_on("a", T0 + 1) is None, "a plan places no hold: the engine applies it"
    assert plan_placement(f, "big", T0 + 1, reserve=True).holds is None, "a reserve holds none"
