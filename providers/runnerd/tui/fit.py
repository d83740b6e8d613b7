"""A screen's table that fits the terminal: the least useful columns are left out, never a word
cut at the screen's edge (docs/cli.md, "Tables at any width"), and the table is laid out again
when the terminal is resized. The choice is ``rungar.model.columns.fitting_columns``, the CLI's own.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.widgets import DataTable

from rungar.model.columns import fitting_columns

# A DataTable cell has one column of padding each side; the vertical scrollbar takes two.
CELL_PAD = 2
SCROLLBAR = 2


def fill_table(
    table: DataTable[str],
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    drop: Sequence[str],
    keys: Sequence[str] | None = None,
) -> list[str]:
    """Show ``rows`` under the columns of ``headers`` that fit the table's screen; returns the
    headers left out. The cursor stays on the row it was on."""
    width = max(table.app.size.width - SCROLLBAR, 1)
    keep, names = fitting_columns(headers, rows, width, drop, gap=0, pad=CELL_PAD)
    row = table.cursor_row
    shown = [str(c.label) for c in table.columns.values()]
    if shown != names:
        table.clear(columns=True)
        table.add_columns(*names)
    else:
        table.clear()
    for i, cells in enumerate(rows):
        table.add_row(*(cells[k] for k in keep), key=keys[i] if keys else None)
    if rows:
        table.move_cursor(row=min(max(row, 0), len(rows) - 1))
    return [h for i, h in enumerate(headers) if i not in keep]
