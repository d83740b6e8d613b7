"""Tables that fit their terminal: short headers first, then the least useful columns left out
and named, never a cut word (docs/cli.md, "Tables at any width")."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rungar.cli.render import RUNNER_FIT, RUNNER_HEADERS, Fit, runner_rows, table, terminal_width
from rungar.cli.status import render_status
from tests.unit.test_cli_status import DOCUMENT

WIDE = ("NAME", "STATUS", "LABELS", "PRIORITY")
ROWS = [
    ["rungar-c4-m8", "LISTENING", "self-hosted,linux,x64,c4-m8", "0"],
    ["rungar-small", "HOLDING BACK", "small", "10"],
]


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def table_lines(text: str, title: str) -> list[str]:
    """The lines of one section's table: its header up to the line naming what it left out
    (each table here leaves something out at 80 columns)."""
    lines = text.splitlines()
    start = lines.index(title) + 1
    found = []
    for line in lines[start:]:
        if not line or line.startswith("  (left out"):
            break
        found.append(line)
    return found


def test_a_table_that_fits_is_left_whole() -> None:
    fit = Fit(drop=("LABELS",), short={"PRIORITY": "PRIO"})
    assert table(WIDE, ROWS, width=200, fit=fit) == table(WIDE, ROWS)


def test_a_long_header_gives_way_before_any_column() -> None:
    fit = Fit(drop=("LABELS",), short={"PRIORITY": "PRIO"})
    full = table(WIDE, ROWS)
    width = max(map(len, full)) - 2
    lines = table(WIDE, ROWS, width=width, fit=fit)
    assert "PRIO" in lines[0] and "PRIORITY" not in lines[0]
    assert "LABELS" in lines[0]
    assert max(map(len, lines)) <= width


def test_the_least_useful_columns_go_first_and_are_named() -> None:
    fit = Fit(drop=("LABELS", "PRIORITY"))
    lines = table(WIDE, ROWS, width=40, fit=fit)
    assert lines[0].split() == ["NAME", "STATUS", "PRIORITY"]
    assert lines[-1] == "  (left out at 40 columns: LABELS)"
    assert max(map(len, lines[:-1])) <= 40


def test_no_cell_is_ever_cut() -> None:
    rows = runner_rows(DOCUMENT["runners"])
    for width in range(20, 120, 7):
        lines = table(RUNNER_HEADERS, rows, width=width, fit=RUNNER_FIT)
        shown = lines[0].split("  ")
        for row, line in zip(rows, lines[1:], strict=False):
            if line.startswith("  ("):
                continue
            for value in row:
                text = "-" if value in (None, "") else str(value)
                header = RUNNER_HEADERS[row.index(value)]
                if header in " ".join(shown):
                    assert text in line, (width, text, line)


def test_the_status_at_80_columns_has_no_table_line_wider_than_80() -> None:
    text = render_status(DOCUMENT, 80)
    for title in ("Scale sets (6)", "Providers (6)", "Runners (2)"):
        rows = table_lines(text, title)
        assert len(rows) >= 3, (title, rows)
        assert max(len(line) for line in rows) <= 80, "\n".join(rows)
    # what runs where stays
    assert "  rungar-c4-m8-0a1b2c3d  rungar-c4-m8  compute1  Busy" in text
    assert "  (left out at 80 columns: PROVIDERS, LABELS, RUNNER, MIN, MAX, PRIORITY)" in text


def test_without_a_width_every_column_is_shown() -> None:
    text = render_status(DOCUMENT)
    assert "left out" not in text
    assert "PRIORITY" in text and "MACHINE" in text


def test_the_width_is_columns_else_a_terminal_else_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "91")
    assert terminal_width() == 91
    monkeypatch.delenv("COLUMNS")
    # pytest captures stdout and stderr and gives no terminal on stdin: no terminal at all
    monkeypatch.setattr("sys.stdin", None)
    assert terminal_width() is None
