"""Trying providers in order, and weights (docs/configuration.md)."""

from __future__ import annotations

import pytest

from rungar.config.model import Placement
from rungar.placement import order_providers


@pytest.mark.parametrize(
    ("placement", "weights", "own", "expected"),
    [
        (Placement.PACK, {}, {}, ["a", "b", "c"]),
        (Placement.PACK, {"a": 1, "b": 2, "c": 2}, {}, ["b", "c", "a"]),
        (Placement.PACK, {}, {"a": 5, "b": 0, "c": 1}, ["a", "b", "c"]),
        (Placement.SPREAD, {}, {"a": 2, "b": 1, "c": 0}, ["c", "b", "a"]),
        (Placement.SPREAD, {"a": 2, "b": 1, "c": 1}, {"a": 2, "b": 1, "c": 2}, ["a", "b", "c"]),
        (Placement.SPREAD, {}, {"a": 1, "b": 1, "c": 1}, ["a", "b", "c"]),
    ],
    ids=[
        "pack_keeps_the_listed_order",
        "pack_puts_the_heaviest_first_ties_in_listed_order",
        "pack_ignores_runner_counts",
        "spread_puts_the_emptiest_first",
        "spread_divides_by_weight",
        "spread_keeps_the_listed_order_on_ties",
    ],
)
def test_each_placement_orders_the_providers(
    placement: Placement, weights: dict[str, float], own: dict[str, int], expected: list[str]
) -> None:
    assert order_providers(["a", "b", "c"], placement, weights, own) == expected


def test_a_provider_of_weight_two_gets_two_runners_for_every_one_of_the_others() -> None:
    own = {"big": 0, "small": 0}
    weights = {"big": 2.0, "small": 1.0}
    for _ in range(30):
        first = order_providers(["small", "big"], Placement.SPREAD, weights, own)[0]
        own[first] += 1
    assert own == {"big": 20, "small": 10}
