"""Runner-block merging: mappings merge at every depth, the rest replaces."""

from __future__ import annotations

from rungar.config.merge import merge_runner


def test_mappings_merge_key_by_key_at_every_depth() -> None:
    base = {"a": {"b": {"c": 1, "d": 2}}, "e": 3}
    over = {"a": {"b": {"d": 20, "f": 30}}}
    assert merge_runner(base, over) == {"a": {"b": {"c": 1, "d": 20, "f": 30}}, "e": 3}


def test_lists_and_scalars_replace_whole() -> None:
    base = {"list": [1, 2, 3], "scalar": "x", "map": {"k": 1}}
    over = {"list": [9], "scalar": "y", "map": "now a string"}
    assert merge_runner(base, over) == {"list": [9], "scalar": "y", "map": "now a string"}


def test_null_clears_a_key_at_any_depth() -> None:
    base = {"a": 1, "b": {"c": 2, "d": 3}}
    assert merge_runner(base, {"a": None, "b": {"c": None}}) == {"b": {"d": 3}}


def test_a_null_with_nothing_to_clear_is_dropped() -> None:
    assert merge_runner({"a": None, "b": {"c": None}}, {"x": None}) == {"b": {}}


def test_the_inputs_are_not_changed() -> None:
    base = {"a": {"b": [1]}}
    over = {"a": {"c": 2}}
    merged = merge_runner(base, over)
    merged["a"]["b"].append(2)
    assert base == {"a": {"b": [1]}} and over == {"a": {"c": 2}}
