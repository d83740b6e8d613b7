"""Every placement rule, as behaviour: order, skips, backoff, holds and limits."""

from __future__ import annotations

import asyncio
import contextlib

from rungar.config.model import Placement
from rungar.engine.create.placing import place
from rungar.model.machine import Created, Machine, MachineState, Refusal
from rungar.placement import Skip
from rungar.placement.plan import NotPlaced, Outcome, Placed
from tests.unit.placement_helpers import (
    FAILED,
    FULL,
    INVALID,
    Script,
    fleet,
    provider,
    scale_set,
    try_place,
)

T0 = 1000.0


async def test_place_takes_the_first_provider_that_takes_it() -> None:
    f = fleet([provider("a"), provider("b")], [scale_set("s", ["a", "b"])])
    script = Script()
    result = await try_place(f, "s", script, T0)
    assert isinstance(result, Placed) and result.provider == "a"
    assert script.created_on() == ["a"]


async def test_a_full_provider_is_skipped_only_by_the_scale_set_that_found_it() -> None:
    f = fleet(
        [provider("a"), provider("b")],
        [scale_set("s1", ["a", "b"], placement=Placement.PACK), scale_set("s2", ["a", "b"])],
    )
    script = Script(answers={"a": FULL})
    result = await try_place(f, "s1", script, T0)
    assert isinstance(result, Placed) and result.provider == "b"
    assert ("delete", "a") in script.calls, "the refused create's leftover is deleted"
    assert f.skip_reason("s1", "a", T0 + 1) == "full"
    assert f.skip_reason("s2", "a", T0 + 1) is None
    assert f.skip_reason("s1", "a", T0 + 10) is None, "tried again once its time is up"


async def test_a_failing_provider_is_skipped_by_the_scale_set_that_found_it() -> None:
    for refusal in (FAILED, INVALID):
        f = fleet(
            [provider("a"), provider("b")], [scale_set("s1", ["a", "b"]), scale_set("s2", ["a"])]
        )
        result = await try_place(f, "s1", Script(answers={"a": refusal}), T0)
        assert isinstance(result, Placed) and result.provider == "b"
        assert f.skip_reason("s1", "a", T0) == f"failing to create its runner: {refusal.message}"
        assert f.skip_reason("s2", "a", T0) is None
        assert f.is_reachable("a") and not f.is_disabled("a")


async def test_a_refusal_is_reported_for_the_scale_set_and_forgiven_by_a_creation() -> None:
    f = fleet([provider("a")], [scale_set("s", ["a"])])
    await try_place(f, "s", Script(answers={"a": FAILED}), T0)
    backoff = f.backoff("s", "a")
    assert backoff is not None and backoff.remaining(T0) == 10 and not backoff.full
    await try_place(f, "s", Script(answers={"a": FAILED}), T0 + 10)
    backoff = f.backoff("s", "a")
    assert backoff is not None and backoff.remaining(T0 + 10) == 20
    assert backoff.refusals == 2 and backoff.last_error == "connection reset"
    await try_place(f, "s", Script(), T0 + 30)
    assert f.backoff("s", "a") is None


async def test_a_runner_that_can_never_be_created_is_tried_again_every_backoff_max() -> None:
    f = fleet([provider("a")], [scale_set("s", ["a"])])
    now = T0
    waits = []
    for _ in range(5):
        await try_place(f, "s", Script(answers={"a": INVALID}), now)
        backoff = f.backoff("s", "a")
        assert backoff is not None
        waits.append(backoff.until - now)
        now = backoff.until
    assert waits == [10, 20, 40, 40, 40]
    result = await try_place(f, "s", Script(), now)
    assert isinstance(result, Placed), "created once its block is fixed"


async def test_a_leftover_that_cannot_be_deleted_stops_placement() -> None:
    f = fleet([provider("a"), provider("b")], [scale_set("s", ["a", "b"])])
    script = Script(answers={"a": FAILED}, failing_deletes={"a"})
    result = await try_place(f, "s", script, T0)
    assert isinstance(result, NotPlaced) and result.stranded_on == "a"
    assert "connection reset" in result.reason and "could not be deleted" in result.reason
    assert "b" not in script.created_on()
    backoff = f.backoff("s", "a")
    assert backoff is not None and backoff.refusals == 1


async def test_no_provider_taking_the_runner_says_why_of_each() -> None:
    f = fleet([provider("a"), provider("b")], [scale_set("s", ["a", "b"])])
    result = await try_place(f, "s", Script(answers={"a": FULL, "b": FAILED}), T0)
    assert isinstance(result, NotPlaced)
    assert result.reason == (
        "no provider took the runner: a: not enough memory; b: connection reset"
    )


async def test_candidates_says_why_no_provider_can_be_tried_without_calling_any() -> None:
    f = fleet(
        [
            provider("dis", disabled=True),
            provider("gone"),
            provider("fullp"),
            provider("fail"),
            provider("lim", max_runners=2),
            provider("held"),
        ],
        [
            scale_set("s", ["dis", "gone", "fullp", "fail", "lim", "held"]),
            scale_set("other", ["lim"]),
            scale_set("big", ["held"], priority=10),
        ],
    )
    f.set_reachable("gone", False)
    f.record_refusal("s", "fullp", FULL, T0)
    f.record_refusal("s", "fail", FAILED, T0)
    f.add_runner("other", "lim")
    f.add_runner("other", "lim")
    f.record_refusal("big", "held", FULL, T0)
    f.hold_full_providers("big", T0)
    found = f.candidates("s", T0 + 1)
    assert not found.any
    assert [s.reason for s in found.skips] == [
        "disabled",
        "unreachable",
        "full",
        "failing to create its runner: connection reset",
        "at its limit of 2 runners",
        "held for scale set big",
    ]
    assert found.why_none().startswith("no provider can be tried: dis: disabled; gone: unreachable")


async def test_failing_for_another_scale_set_leaves_a_provider_tryable() -> None:
    f = fleet([provider("a")], [scale_set("s", ["a"]), scale_set("t", ["a"])])
    f.record_refusal("t", "a", FAILED, T0)
    assert f.candidates("s", T0).order == ("a",)


def test_a_scale_set_with_no_providers_can_place_nowhere() -> None:
    f = fleet([], [scale_set("s", [])])
    found = f.candidates("s", T0)
    assert not found.any and found.why_none() == "the scale set has no providers"


def test_a_provider_skipped_for_several_reasons_names_them_in_a_fixed_order() -> None:
    f = fleet(
        [provider("a", disabled=True, max_runners=1)],
        [scale_set("s", ["a"]), scale_set("big", ["a"], priority=5)],
    )
    f.add_runner("s", "a")
    f.record_refusal("big", "a", FULL, T0)
    f.hold_full_providers("big", T0)
    f.record_refusal("s", "a", FULL, T0)
    f.set_reachable("a", False)
    assert f.skip_reason("s", "a", T0) == "disabled"
    f.set_disabled("a", False)
    assert f.skip_reason("s", "a", T0) == "unreachable"
    f.set_reachable("a", True)
    assert f.skip_reason("s", "a", T0) == "full"
    assert f.skip_reason("s", "a", T0 + 10) == "held for scale set big"
    assert f.skip_reason("s", "a", T0 + 61) == "at its limit of 1 runners"


async def test_a_provider_that_does_not_answer_is_skipped_by_every_scale_set() -> None:
    f = fleet([provider("a"), provider("b")], [scale_set("s1", ["a", "b"]), scale_set("s2", ["a"])])
    script = Script(answers={"a": "silent"})
    result = await try_place(f, "s1", script, T0)
    assert isinstance(result, NotPlaced) and result.stranded_on == "a"
    assert ("settle", "a") in script.calls, "the outcome is settled by name first"
    assert "b" not in script.created_on(), "nothing else happens to the runner until settled"
    assert f.skip_reason("s2", "a", T0 + 3600) == "unreachable"
    f.set_reachable("a", True)
    assert f.skip_reason("s2", "a", T0 + 3600) is None


async def test_an_unanswered_create_that_settles_as_created_counts_the_runner() -> None:
    f = fleet([provider("a")], [scale_set("s", ["a"])])
    script = Script(answers={"a": "silent"})

    async def settle(name: str) -> Created | None:
        return Created(Machine("r1", MachineState.RUNNING))

    result = await place(
        f, "s", now=lambda: T0, create=script.create, delete=script.delete, settle=settle
    )
    assert isinstance(result, Placed) and f.runners_of("s", "a") == 1


async def test_a_settled_create_leaves_its_provider_unreachable_until_it_lists_again() -> None:
    # Broken once (record_created clearing the mark again): fails on "settled, not listed".
    f = fleet([provider("a"), provider("b")], [scale_set("s", ["a", "b"])])
    script = Script(answers={"a": "silent"})

    async def settle(name: str) -> Created | None:
        return Created(Machine("r1", MachineState.RUNNING))

    result = await place(
        f, "s", now=lambda: T0, create=script.create, delete=script.delete, settle=settle
    )
    assert isinstance(result, Placed) and result.provider == "a"
    assert f.skip_reason("s", "a", T0) == "unreachable", "settled, not listed"
    assert f.candidates("s", T0).order == ("b",)
    f.set_reachable("a", True)
    assert f.skip_reason("s", "a", T0) is None


async def test_a_runner_out_of_time_tries_nothing_else() -> None:
    f = fleet([provider("a"), provider("b")], [scale_set("s", ["a", "b"])])
    calls: list[str] = []

    async def create(name: str) -> Created | Refusal:
        calls.append(name)
        raise TimeoutError

    async def delete(name: str) -> None:
        calls.append("delete " + name)

    async def settle(name: str) -> Created | None:
        return None

    result = await place(f, "s", now=lambda: T0, create=create, delete=delete, settle=settle)
    assert isinstance(result, NotPlaced) and calls == ["a", "delete a"]
    backoff = f.backoff("s", "a")
    assert backoff is not None and backoff.refusals == 1


async def test_a_cancelled_placement_tries_nothing_else_and_records_nothing() -> None:
    f = fleet([provider("a"), provider("b")], [scale_set("s", ["a", "b"])])
    calls: list[str] = []
    started = asyncio.Event()

    async def create(name: str) -> Created | Refusal:
        calls.append(name)
        started.set()
        await asyncio.sleep(3600)
        raise AssertionError("not reached")

    async def delete(name: str) -> None:
        calls.append("delete " + name)

    async def settle(name: str) -> Created | None:
        return None

    task = asyncio.create_task(
        place(f, "s", now=lambda: T0, create=create, delete=delete, settle=settle)
    )
    await started.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert calls == ["a", "delete a"]
    assert f.backoff("s", "a") is None and f.claims() == []


async def test_a_limit_counts_the_scale_sets_runners_and_those_being_created() -> None:
    f = fleet([provider("a", weight=2, max_runners=2), provider("b")], [scale_set("s", ["a", "b"])])
    first = f.claim("s", "a", T0)
    assert not isinstance(first, Skip)
    assert f.provider_count("a") == 1
    f.release(first)
    f.release(first)
    assert f.provider_count("a") == 0, "release is idempotent"
    f.add_runner("s", "a")
    f.add_runner("s", "a")
    result = await try_place(f, "s", Script(), T0)
    assert isinstance(result, Placed) and result.provider == "b"


async def test_a_limit_of_one_lets_one_of_eight_concurrent_placements_through() -> None:
    names = [f"s{i}" for i in range(8)]
    f = fleet([provider("a", max_runners=1)], [scale_set(n, ["a"]) for n in names])
    creates: list[str] = []

    async def create(name: str) -> Created | Refusal:
        creates.append(name)
        for _ in range(10):  # a create that takes a while: every other placement runs meanwhile
            await asyncio.sleep(0)
        return Created(Machine("r", MachineState.STARTING))

    async def noop(name: str) -> None:
        return None

    async def settle(name: str) -> Created | None:
        return None

    results = await asyncio.gather(
        *(place(f, n, now=lambda: T0, create=create, delete=noop, settle=settle) for n in names)
    )
    assert len(creates) == 1
    assert sum(isinstance(r, Placed) for r in results) == 1
    assert f.provider_count("a") == 1


def test_a_scale_sets_own_limit_counts_its_runners_being_created() -> None:
    f = fleet([provider("a")], [scale_set("s", ["a"], max_runners=2)])
    assert not isinstance(f.claim("s", "a", T0), Skip)
    f.add_runner("s", "a")
    assert isinstance(f.claim("s", "a", T0), Skip)
    assert f.candidates("s", T0).why_none() == "the scale set is at its limit of 2 runners"


def test_a_providers_limit_counts_machines_leaving_but_not_yet_deleted() -> None:
    f = fleet([provider("a", max_runners=2)], [scale_set("s", ["a"])])
    f.add_runner("s", "a")
    f.add_runner("s", "a")
    f.remove_runner("s", "a", leaving=True)
    assert f.skip_reason("s", "a", T0) == "at its limit of 2 runners"
    f.machine_deleted("a", T0)
    assert f.skip_reason("s", "a", T0) is None


def test_a_providers_limit_counts_every_scale_set_placed_on_it() -> None:
    f = fleet([provider("a", max_runners=2)], [scale_set("s", ["a"]), scale_set("t", ["a"])])
    f.add_runner("s", "a")
    f.add_runner("t", "a")
    assert f.skip_reason("s", "a", T0) == "at its limit of 2 runners"
    assert f.skip_reason("t", "a", T0) == "at its limit of 2 runners"


async def test_a_disabled_provider_is_left_out_of_placement() -> None:
    f = fleet([provider("a", disabled=True), provider("b")], [scale_set("s", ["a", "b"])])
    script = Script()
    await try_place(f, "s", script, T0)
    assert script.created_on() == ["b"]


async def test_spread_sends_runners_to_the_emptiest_provider_of_this_scale_set() -> None:
    f = fleet([provider("a"), provider("b")], [scale_set("s", ["a", "b"])])
    landed = []
    for _ in range(4):
        result = await try_place(f, "s", Script(), T0)
        assert isinstance(result, Placed)
        landed.append(result.provider)
    assert landed == ["a", "b", "a", "b"]


async def test_pack_fills_providers_one_after_another() -> None:
    f = fleet(
        [provider("compute1"), provider("compute2"), provider("gcp")],
        [scale_set("s", ["compute1", "compute2", "gcp"], placement=Placement.PACK)],
    )
    script = Script(answers={"compute1": FULL})
    result = await try_place(f, "s", script, T0)
    assert isinstance(result, Placed) and result.provider == "compute2"
    assert script.created_on() == ["compute1", "compute2"]
    assert [t.outcome for t in result.tries] == [Outcome.REFUSED, Outcome.CREATED]


def test_cannot_place_says_what_candidates_says_without_ordering_every_provider() -> None:
    # Checked against candidates with a provider limit, a backoff and the scale set's limit.
    f = fleet(
        [provider("a", max_runners=1), provider("b")], [scale_set("s", ["a", "b"], max_runners=3)]
    )
    assert f.cannot_place("s", T0) == ""
    f.add_runner("s", "a")  # a at its limit; b still tryable
    assert f.cannot_place("s", T0) == ""
    f.record_refusal("s", "b", FULL, T0)
    assert f.cannot_place("s", T0 + 1) == f.candidates("s", T0 + 1).why_none() != ""
    f.add_runner("s", "b")
    f.add_runner("s", "b")
    assert f.cannot_place("s", T0 + 1) == "the scale set is at its limit of 3 runners"
