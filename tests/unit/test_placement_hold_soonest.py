"""``hold: soonest_room`` (opt-in): a priority hold on the full providers whose room for the
holder is expected soonest, rather than on every full one (docs/placement.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rungar.config.effective import effective_scale_sets
from rungar.config.loader import parse_scale_sets
from rungar.config.model import HoldChoice
from rungar.errors import ConfigError
from rungar.model.machine import Refusal, RefusalKind, RoomExpected
from rungar.placement import Fleet
from rungar.placement.holds import providers_to_hold
from rungar.placement.plan import NotPlaced, Placed
from tests.unit.placement_helpers import FULL, Script, fleet, provider, scale_set, try_place

T0 = 1000.0


def full_in(seconds: float) -> Refusal:
    return Refusal(RefusalKind.FULL, "not enough memory", "memory", RoomExpected(seconds, 0.8))


def test_the_soonest_is_held_with_those_within_the_margin_and_those_that_said_nothing() -> None:
    expected = {"a": T0 + 600, "b": T0 + 60, "c": T0 + 100}
    assert providers_to_hold(["a", "b", "c", "d"], expected, [], T0, 0.0) == ["b", "d"]
    assert providers_to_hold(["a", "b", "c", "d"], expected, [], T0, 40.0) == ["b", "c", "d"]


def test_a_provider_already_held_stays_held_for_a_later_estimate() -> None:
    expected = {"a": T0 + 600, "b": T0 + 60}
    assert providers_to_hold(["a", "b"], expected, ["a"], T0, 0.0) == ["a", "b"]


def test_every_full_provider_is_held_when_none_said_when() -> None:
    assert providers_to_hold(["a", "b"], {}, [], T0, 0.0) == ["a", "b"]


def test_a_moment_already_passed_counts_as_now() -> None:
    expected = {"a": T0 - 500, "b": T0 - 10, "c": T0 + 1}
    assert providers_to_hold(["a", "b", "c"], expected, [], T0, 0.0) == ["a", "b"]


def soonest_fleet(hold: HoldChoice = HoldChoice.SOONEST_ROOM) -> Fleet:
    big = replace(scale_set("big", ["a", "b", "c"], priority=10), hold=hold)
    return fleet(
        [provider("a"), provider("b"), provider("c")],
        [big, scale_set("small", ["a", "b", "c"])],
    )


async def test_lower_priorities_keep_the_providers_whose_room_comes_later() -> None:
    f = soonest_fleet()
    answers = {"a": full_in(600), "b": full_in(60), "c": FULL}  # c says nothing of when
    assert isinstance(await try_place(f, "big", Script(answers=dict(answers)), T0), NotPlaced)
    assert [p for p in "abc" if f.hold_on(p, T0) is not None] == ["b", "c"]
    placed = await try_place(f, "small", Script(), T0 + 1)
    assert isinstance(placed, Placed) and placed.provider == "a"
    assert f.skip_reason("small", "b", T0 + 1) == "held for scale set big"


async def test_every_full_provider_is_held_by_default_whatever_the_refusals_say() -> None:
    f = soonest_fleet(HoldChoice.EVERY_FULL)
    answers = {"a": full_in(600), "b": full_in(60), "c": full_in(300)}
    await try_place(f, "big", Script(answers=dict(answers)), T0)
    assert [p for p in "abc" if f.hold_on(p, T0) is not None] == ["a", "b", "c"]


async def test_what_the_refusals_said_is_forgotten_once_the_holder_places_its_runner() -> None:
    f = soonest_fleet()
    await try_place(f, "big", Script(answers={"a": full_in(600), "b": full_in(60), "c": FULL}), T0)
    placed = await try_place(f, "big", Script(answers={"a": FULL, "c": FULL}), T0 + 60)
    assert isinstance(placed, Placed) and placed.provider == "b"
    assert f.holds.rooms_expected("big") == {}


YAML = """\
version: 1
providers:
  - { name: a, type: fake }
scale_sets:
  - name: big
    max_runners: 2
    priority: 10
%s    providers: [a]
"""


def test_hold_is_read_with_its_margin_and_defaults_to_every_full() -> None:
    config = parse_scale_sets(YAML % "    hold: soonest_room\n    hold_margin: 2m\n", "s.yaml")
    (big,) = config.scale_sets
    assert (big.hold, big.hold_margin) == (HoldChoice.SOONEST_ROOM, 120.0)
    (plain,) = parse_scale_sets(YAML % "", "s.yaml").scale_sets
    assert (plain.hold, plain.hold_margin) == (HoldChoice.EVERY_FULL, 0.0)


def test_a_bad_hold_names_its_file_line_and_key() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scale_sets(YAML % "    hold: fewest\n", "/etc/rungar/s.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("/etc/rungar/s.yaml:8:") and "hold" in problem, problem
    assert "every_full, soonest_room" in problem


def test_the_effective_configuration_shows_a_hold_other_than_the_default() -> None:
    chosen = parse_scale_sets(YAML % "    hold: soonest_room\n    hold_margin: 30s\n", "s.yaml")
    (big,) = effective_scale_sets(chosen, durations_as_text=False)["scale_sets"]
    assert (big["hold"], big["hold_margin"]) == ("soonest_room", 30.0)
    (plain,) = effective_scale_sets(parse_scale_sets(YAML % "", "s.yaml"))["scale_sets"]
    assert "hold" not in plain
