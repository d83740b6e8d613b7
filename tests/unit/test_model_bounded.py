"""Bounds on provider text: cut to a documented length, checked against a documented form."""

from __future__ import annotations

from rungar.engine.report.events import EventLog
from rungar.model import bounded
from rungar.testing.clock import FakeClock


def test_a_text_past_its_bound_is_cut_and_says_so() -> None:
    assert bounded.cut("short") == "short"
    long = bounded.cut("x" * 5000)
    assert len(long) == bounded.TEXT_MAX and long.endswith("…(cut)")


def test_a_sentence_has_no_control_characters() -> None:
    assert bounded.sentence("two\nlines\x1b[2J") == "two lines [2J"


def test_a_resource_is_believed_only_as_lowercase_words() -> None:
    assert bounded.resource("memory") == "memory"
    assert bounded.resource("zone stock and quota") == "zone stock and quota"
    for bad in ("Memory", "two  spaces", "m" * 65, "", "cpu\n", " cpu"):
        assert bounded.resource(bad) == ""


def test_labels_are_bounded_in_number_and_length() -> None:
    many = {f"k{i}": "v" * 1000 for i in range(100)}
    kept = bounded.labels(many)
    assert len(kept) == bounded.LABELS_MAX
    assert all(len(v) == bounded.LABEL_MAX for v in kept.values())
    small = {"a": "b"}
    assert bounded.labels(small) is small


def test_a_machine_name_has_its_documented_form() -> None:
    assert bounded.is_name("linux-0000abcd")
    for bad in ("", "a b", "x" * 256, "a\nb"):
        assert not bounded.is_name(bad)


def test_the_event_log_is_bounded_in_bytes_as_well_as_in_count() -> None:
    log = EventLog(FakeClock(), max_count=10_000, max_bytes=100_000)
    for i in range(1000):
        log.record("provider", "b", "full", message=f"{i} " + "x" * 10_000)
    kept = log.recent()
    assert len(kept[-1].message) <= 4096, "each message cut"
    assert kept[-1].message.startswith("999 ")
    assert 10 <= len(kept) <= 100_000 // 4096 + 1
