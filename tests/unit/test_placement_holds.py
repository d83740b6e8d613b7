"""Priority: holds placed by FULL refusals, renewed, lapsed and released."""

from __future__ import annotations

from rungar.placement import Fleet
from rungar.placement.attempt import NotPlaced, Placed
from tests.unit.placement_helpers import FAILED, FULL, Script, fleet, provider, scale_set, try_place

T0 = 1000.0


def priority_fleet() -> Fleet:
    return fleet(
        [provider("a"), provider("b")],
        [
            scale_set("big", ["a"], priority=10),
            scale_set("small", ["a", "b"]),
            scale_set("peer", ["a"], priority=10),
        ],
    )


async def test_a_higher_priority_that_finds_a_provider_full_holds_lower_ones_off() -> None:
    f = priority_fleet()
    result = await try_place(f, "big", Script(answers={"a": FULL}), T0)
    assert isinstance(result, NotPlaced)
    hold = f.hold_on("a", T0)
    assert hold is not None and (hold.holder, hold.priority) == ("big", 10)
    script = Script()
    placed = await try_place(f, "small", script, T0 + 1)
    assert isinstance(placed, Placed) and placed.provider == "b", "still uses its others"
    assert script.created_on() == ["b"]
    assert [h.holder for h in f.holding_back("small", T0 + 1)] == ["big"]


async def test_equal_priorities_never_hold_each_other_back() -> None:
    f = priority_fleet()
    await try_place(f, "big", Script(answers={"a": FULL}), T0)
    assert f.skip_reason("peer", "a", T0 + 1) is None


async def test_a_peer_placing_on_the_provider_lifts_the_hold() -> None:
    f = priority_fleet()
    await try_place(f, "big", Script(answers={"a": FULL}), T0)
    placed = await try_place(f, "peer", Script(), T0 + 1)
    assert isinstance(placed, Placed)
    assert f.hold_on("a", T0 + 1) is None
    assert f.skip_reason("small", "a", T0 + 1) is None


async def test_a_hold_lapses_when_not_renewed() -> None:
    f = priority_fleet()
    await try_place(f, "big", Script(answers={"a": FULL}), T0)
    assert f.skip_reason("small", "a", T0 + 60) == "held for scale set big"
    assert f.skip_reason("small", "a", T0 + 61) is None
    assert f.hold_on("a", T0 + 61) is None


async def test_finding_no_provider_to_try_renews_the_hold() -> None:
    f = priority_fleet()
    await try_place(f, "big", Script(answers={"a": FULL}), T0)
    f.record_refusal("big", "a", FULL, T0 + 5)  # a long streak keeps big skipping a
    f.record_refusal("big", "a", FULL, T0 + 9)
    assert not f.can_place("big", T0 + 45).any
    assert f.skip_reason("small", "a", T0 + 100) == "held for scale set big"


async def test_a_failing_provider_holds_no_one_off() -> None:
    f = priority_fleet()
    await try_place(f, "big", Script(answers={"a": FAILED}), T0)
    assert f.hold_on("a", T0) is None
    script = Script()
    placed = await try_place(f, "small", script, T0 + 1)
    assert isinstance(placed, Placed) and placed.provider == "a"


async def test_a_lower_priority_cannot_replace_a_higher_hold() -> None:
    f = priority_fleet()
    await try_place(f, "big", Script(answers={"a": FULL}), T0)
    f.record_refusal("small", "a", FULL, T0 + 1)
    f.hold_full_providers("small", T0 + 1)
    hold = f.hold_on("a", T0 + 1)
    assert hold is not None and hold.holder == "big"


async def test_the_holder_placing_a_runner_releases_its_hold() -> None:
    f = priority_fleet()
    await try_place(f, "big", Script(answers={"a": FULL}), T0)
    placed = await try_place(f, "big", Script(), T0 + 10)
    assert isinstance(placed, Placed)
    assert f.hold_on("a", T0 + 10) is None


def test_holds_and_backoffs_survive_an_export_and_restore() -> None:
    f = priority_fleet()
    f.record_refusal("big", "a", FULL, T0)
    f.hold_full_providers("big", T0)
    backoffs, holds = f.export_state()
    g = priority_fleet()
    g.restore_state(backoffs, holds)
    assert g.skip_reason("small", "a", T0 + 30) == "held for scale set big"
    assert g.skip_reason("big", "a", T0 + 5) == "full"


async def test_a_new_hold_is_reported_once_and_its_renewals_are_not() -> None:
    f = priority_fleet()
    await try_place(f, "big", Script(answers={"a": FULL}), T0)
    assert [(h.provider, h.holder) for h in f.new_holds] == [("a", "big")]
    f.new_holds.clear()
    f.can_place("big", T0 + 5)
    assert f.new_holds == [], "a renewal is not a new hold"


def two_host_fleet() -> Fleet:
    return fleet(
        [provider("a"), provider("b")],
        [scale_set("big", ["a", "b"], priority=10), scale_set("small", ["a", "b"])],
    )


async def test_a_runner_refused_by_every_provider_holds_only_one_of_them() -> None:
    # Holding every provider that refused (the rule before) fails the first assertion.
    f = two_host_fleet()
    for _ in range(3):
        f.add_runner("small", "a")
        f.add_runner("small", "b")
    result = await try_place(f, "big", Script(answers={"a": FULL, "b": FULL}), T0)
    assert isinstance(result, NotPlaced)
    held = [p for p in ("a", "b") if f.hold_on(p, T0) is not None]
    assert held == ["a"], "equally busy: the first in its order is held"
    assert f.skip_reason("small", "b", T0 + 1) is None, "the other still serves lower ones"


async def test_the_provider_held_is_the_one_with_the_fewest_runners_on_it() -> None:
    f = two_host_fleet()
    for _ in range(4):
        f.add_runner("small", "a")
    f.add_runner("small", "b")
    await try_place(f, "big", Script(answers={"a": FULL, "b": FULL}), T0)
    assert f.hold_on("a", T0) is None
    hold = f.hold_on("b", T0)
    assert hold is not None and hold.holder == "big"


async def test_a_standing_hold_stays_on_its_provider_when_renewed() -> None:
    f = two_host_fleet()
    f.add_runner("small", "b")
    await try_place(f, "big", Script(answers={"a": FULL, "b": FULL}), T0)
    assert f.hold_on("a", T0) is not None
    f.remove_runner("small", "b", leaving=False)  # room frees on b meanwhile ...
    f.add_runner("small", "a")
    f.add_runner("small", "a")
    await try_place(f, "big", Script(answers={"a": FULL, "b": FULL}), T0 + 50)
    hold = f.hold_on("a", T0 + 100)
    assert hold is not None and hold.since == T0 + 50, "... the room kept on a is kept"
    assert f.hold_on("b", T0 + 50) is None
