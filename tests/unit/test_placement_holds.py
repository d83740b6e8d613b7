"""Priority: holds placed by FULL refusals, renewed, lapsed and released."""

from __future__ import annotations

from rungar.config.model import Placement
from rungar.model.runner import RunnerState, RunnerView
from rungar.placement import Fleet, HoldRule, RoomOpened, Skip
from rungar.placement.plan import NotPlaced, Placed, PlacementPlan, plan_placement
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


# "The hold lasts two reconcile_intervals ... so it holds while the scale set keeps asking, and
# ends when it places its runner or stops asking." (docs/placement.md, "Priority holds")


async def test_a_peer_of_equal_priority_placing_on_the_held_provider_does_not_end_the_hold() -> (
    None
):
    f = priority_fleet()
    await try_place(f, "big", Script(answers={"a": FULL}), T0)
    placed = await try_place(f, "peer", Script(), T0 + 1)
    assert isinstance(placed, Placed) and placed.provider == "a", "peers never hold each other"
    hold = f.hold_on("a", T0 + 1)
    assert hold is not None and hold.holder == "big", "only the holder's runner ends its hold"
    assert f.skip_reason("small", "a", T0 + 1) == "held for scale set big"


async def test_a_higher_priority_placing_a_runner_does_not_end_a_lower_ones_hold() -> None:
    f = fleet(
        [provider("a"), provider("b")],
        [
            scale_set("mid", ["a"], priority=5),
            scale_set("top", ["b", "a"], priority=10, placement=Placement.PACK),
            scale_set("low", ["a"]),
        ],
    )
    await try_place(f, "mid", Script(answers={"a": FULL}), T0)
    placed = await try_place(f, "top", Script(), T0 + 1)
    assert isinstance(placed, Placed) and placed.provider == "b"
    assert f.skip_reason("low", "a", T0 + 1) == "held for scale set mid"


async def test_the_hold_ends_when_its_holder_places_its_runner_on_another_provider() -> None:
    f = fleet(
        [provider("a"), provider("b")],
        [scale_set("big", ["a", "b"], priority=10), scale_set("small", ["a"])],
    )
    result = await try_place(f, "big", Script(answers={"a": FULL, "b": FULL}), T0)
    assert isinstance(result, NotPlaced) and f.hold_on("a", T0) is not None
    f.record_refusal("big", "b", FULL, T0)  # b's wait is lifted by room there, a's is not
    f.open_room("b", T0 + 5)
    placed = await try_place(f, "big", Script(), T0 + 5)
    assert isinstance(placed, Placed) and placed.provider == "b"
    assert f.hold_on("a", T0 + 5) is None, "its runner is placed: it asks for nothing more"
    assert f.skip_reason("small", "a", T0 + 5) is None


async def test_a_hold_holds_while_its_holder_keeps_asking_whoever_else_places() -> None:
    f = priority_fleet()
    await try_place(f, "big", Script(answers={"a": FULL}), T0)
    for step in range(1, 6):  # asking every reconcile_interval (30 s) for two and a half minutes
        now = T0 + 30 * step
        assert isinstance(await try_place(f, "peer", Script(answers={"a": "ok"}), now), Placed)
        assert f.skip_reason("small", "a", now) == "held for scale set big"
        f.record_refusal("big", "a", FULL, now)
        f.hold_full_providers("big", now)
        assert f.skip_reason("small", "a", now + 1) == "held for scale set big"


def test_a_removed_holder_stops_asking_and_its_holds_end() -> None:
    f = priority_fleet()
    f.record_refusal("big", "a", FULL, T0)
    f.hold_full_providers("big", T0)
    f.configure(
        list(f.providers.values()),
        [c for name, c in f.scale_sets.items() if name != "big"],
        f.timing,
    )
    assert f.hold_on("a", T0 + 1) is None
    assert f.skip_reason("small", "a", T0 + 1) is None


def test_a_scale_set_removed_while_its_create_was_on_its_way_places_nothing() -> None:
    f = priority_fleet()
    f.configure(
        list(f.providers.values()),
        [c for name, c in f.scale_sets.items() if name != "small"],
        f.timing,
    )
    gone = "the scale set is no longer configured"
    assert f.cannot_place("small", T0) == gone
    assert f.candidates("small", T0).why_none() == gone
    assert f.first_tryable("small", T0) == []
    assert f.claim("small", "b", T0) == Skip("b", gone)
    assert f.plan_holds("small", T0).holds == () and f.holding_back("small", T0) == []
    assert isinstance(plan_placement(f, "small", T0), PlacementPlan)
    assert plan_placement(f, "small", T0).why_none == gone


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
    assert f.cannot_place("big", T0 + 45) != ""
    f.hold_full_providers("big", T0 + 45)
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
    result = await try_place(f, "big", Script(answers={"a": FULL}), T0)
    assert isinstance(result, NotPlaced)
    assert [(h.provider, h.holder) for h in result.held] == [("a", "big")]
    renewal = f.plan_holds("big", T0 + 5)
    assert [h.provider for h in renewal.holds] == ["a"] and renewal.placed == ()
    assert f.apply_holds(renewal) == (), "a renewal is not a new hold"


def test_asking_whether_a_scale_set_can_place_changes_nothing() -> None:
    # The query renews no hold and marks nothing waited on; the holds are a decision applied.
    f = priority_fleet()
    f.record_refusal("big", "a", FULL, T0)
    assert f.cannot_place("big", T0 + 1) != ""
    assert f.hold_on("a", T0 + 1) is None and f.waiting_for_room("a", T0 + 1) == []
    decision = f.plan_holds("big", T0 + 1)
    assert f.hold_on("a", T0 + 1) is None, "planning the holds places none"
    assert [h.provider for h in f.apply_holds(decision)] == ["a"]
    assert f.waiting_for_room("a", T0 + 1) == ["big"]


def two_host_fleet(rule: HoldRule = HoldRule.EVERY_FULL) -> Fleet:
    return fleet(
        [provider("a"), provider("b")],
        [scale_set("big", ["a", "b"], priority=10), scale_set("small", ["a", "b"])],
        hold_rule=rule,
    )


async def test_a_runner_refused_by_every_provider_holds_every_one_of_them() -> None:
    f = two_host_fleet()
    for _ in range(3):
        f.add_runner("small", "a")
        f.add_runner("small", "b")
    result = await try_place(f, "big", Script(answers={"a": FULL, "b": FULL}), T0)
    assert isinstance(result, NotPlaced)
    held = [p for p in ("a", "b") if f.hold_on(p, T0) is not None]
    assert held == ["a", "b"]
    assert sorted(h.provider for h in result.held) == ["a", "b"]
    assert f.skip_reason("small", "a", T0 + 1) == "held for scale set big"
    assert f.skip_reason("small", "b", T0 + 1) == "held for scale set big"


async def test_a_provider_that_failed_rather_than_was_full_is_not_held() -> None:
    f = two_host_fleet()
    await try_place(f, "big", Script(answers={"a": FULL, "b": FAILED}), T0)
    assert f.hold_on("a", T0) is not None and f.hold_on("b", T0) is None


async def test_the_one_provider_rule_holds_the_one_with_the_fewest_runners_on_it() -> None:
    f = two_host_fleet(HoldRule.ONE)
    for _ in range(4):
        f.add_runner("small", "a")
    f.add_runner("small", "b")
    await try_place(f, "big", Script(answers={"a": FULL, "b": FULL}), T0)
    assert f.hold_on("a", T0) is None
    hold = f.hold_on("b", T0)
    assert hold is not None and hold.holder == "big"


async def test_under_the_one_provider_rule_a_standing_hold_stays_on_its_provider() -> None:
    f = two_host_fleet(HoldRule.ONE)
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


# ----------------------------------------------------------------- room opening


async def test_room_opening_on_a_held_provider_names_its_holder_and_lifts_its_wait() -> None:
    f = two_host_fleet()
    f.add_runner("small", "a")
    await try_place(f, "big", Script(answers={"a": FULL, "b": FULL}), T0)
    assert f.skip_reason("big", "a", T0 + 1) == "full"
    f.remove_runner("small", "a", leaving=True)
    opened = f.machine_deleted("a", T0 + 1)
    assert (opened.provider, opened.holder) == ("a", "big")
    assert f.skip_reason("big", "a", T0 + 1) is None, "tried there at once, not after 15 s"
    assert f.skip_reason("big", "b", T0 + 1) == "full", "room opened on a only"
    assert f.skip_reason("small", "a", T0 + 1) == "held for scale set big"


async def test_a_refusal_after_room_opened_still_doubles_the_wait() -> None:
    f = two_host_fleet()
    await try_place(f, "big", Script(answers={"a": FULL, "b": FULL}), T0)
    f.machine_deleted("a", T0 + 1)
    await try_place(f, "big", Script(answers={"a": FULL}), T0 + 1)
    backoff = f.backoff("big", "a")
    assert backoff is not None and backoff.refusals == 2
    assert backoff.until == T0 + 1 + 20, "10 s, doubled"


async def test_room_opening_lifts_every_scale_sets_full_wait_but_not_a_failing_one() -> None:
    f = fleet(
        [provider("a")],
        [scale_set("s", ["a"]), scale_set("t", ["a"]), scale_set("u", ["a"])],
    )
    f.record_refusal("s", "a", FULL, T0)
    f.record_refusal("t", "a", FULL, T0)
    f.record_refusal("u", "a", FAILED, T0)
    opened = f.machine_deleted("a", T0 + 2)
    assert opened.holder == "" and sorted(opened.forgiven) == ["s", "t"]
    assert f.skip_reason("s", "a", T0 + 2) is None
    assert f.skip_reason("u", "a", T0 + 2) is not None


async def test_a_peers_failed_create_opens_room_for_the_holder_but_a_full_one_does_not() -> None:
    f = fleet(
        [provider("a")],
        [
            scale_set("big", ["a"], priority=10),
            scale_set("mid", ["a"], priority=10),
            scale_set("peer", ["a"], priority=10),
            scale_set("small", ["a"]),
        ],
    )
    await try_place(f, "big", Script(answers={"a": FULL}), T0)
    opened: list[RoomOpened] = []
    await try_place(f, "peer", Script(answers={"a": FAILED}), T0 + 1, on_room=opened.append)
    assert [(o.provider, o.holder) for o in opened] == [("a", "big")]
    assert f.skip_reason("big", "a", T0 + 1) is None, "the holder is tried there at once"
    opened.clear()
    await try_place(f, "mid", Script(answers={"a": FULL}), T0 + 2, on_room=opened.append)
    assert opened == [], "a full refusal says there is no room"
    hold = f.hold_on("a", T0 + 2)
    assert hold is not None and hold.holder == "mid", "an equal priority takes the hold over"
    f.record_refusal("mid", "a", FULL, T0 + 2)
    f.machine_deleted("a", T0 + 3)
    await try_place(f, "mid", Script(answers={"a": FAILED}), T0 + 3, on_room=opened.append)
    assert opened == [], "its own create is no room for itself"


# ----------------------------------------------------------------- hosts before the cloud


def priced_fleet() -> Fleet:
    return fleet(
        [
            provider("cloud", weight=5, price_per_hour=0.4),
            provider("host"),
            provider("dear", price_per_hour=0.9),
        ],
        [scale_set("s", ["cloud", "dear", "host"], placement=Placement.PACK, max_runners=3)],
    )


def test_a_reserve_refill_tries_the_unpriced_provider_before_priced_ones() -> None:
    f = priced_fleet()
    assert f.candidates("s", T0).order == ("cloud", "dear", "host"), "work keeps its order"
    assert f.candidates("s", T0, reserve=True).order == ("host", "cloud", "dear")


async def test_no_idle_reserve_is_placed_on_a_priced_provider_while_a_cheaper_one_has_room() -> (
    None
):
    f = priced_fleet()
    script = Script()
    placed = await try_place(f, "s", script, T0, reserve=True)
    assert isinstance(placed, Placed) and placed.provider == "host"
    assert script.created_on() == ["host"]


def test_room_on_a_cheaper_provider_replaces_the_idle_runner_on_the_dearest() -> None:
    f = priced_fleet()
    for where in ("cloud", "dear"):
        f.add_runner("s", where)
    idle = [view("r1", "cloud", 10.0), view("r2", "dear", 20.0), view("r3", "dear", 5.0)]
    found = f.replacement("host", idle, T0)
    assert found is not None and found.name == "r3", "the dearest, the oldest on a tie"
    assert f.replacement("dear", idle, T0) is None, "never onto a dearer provider"
    busy = [view("r4", "cloud", 1.0, RunnerState.BUSY)]
    assert f.replacement("host", busy, T0) is None, "a busy runner is never replaced"


def test_a_replacement_counts_against_the_scale_sets_limit() -> None:
    f = priced_fleet()
    for where in ("cloud", "dear", "dear"):
        f.add_runner("s", where)  # 3 of max 3: no room for the new one beside the old
    assert f.replacement("host", [view("r1", "cloud", 1.0)], T0) is None


def test_a_replacement_plan_tries_only_providers_cheaper_than_the_runner_it_replaces() -> None:
    f = priced_fleet()
    plan = plan_placement(f, "s", T0, reserve=True, cheaper_than=0.4)
    assert plan.order == ("host",)
    assert {s.provider for s in plan.skips} == {"cloud", "dear"}


def view(
    name: str, where: str, created: float, state: RunnerState = RunnerState.IDLE
) -> RunnerView:
    return RunnerView(name, "s", where, "", created, state)
