"""The demo's summary names each priority hold once, with how often it was taken."""

from __future__ import annotations

from rungar.demo.scenario import Summary


def test_repeated_holds_are_named_once_with_their_count_in_the_order_first_taken() -> None:
    holds = ["host1 for big", "host2 for big", "host1 for big", "host3 for big", "host1 for big"]
    assert Summary(holds=holds).holds_text() == (
        "host1 for big (3 times); host2 for big; host3 for big"
    )


def test_no_holds_reads_none() -> None:
    assert Summary().holds_text() == "none"
