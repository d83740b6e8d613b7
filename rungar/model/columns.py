"""Words and columns for what a person reads at a terminal: a count agreeing with its noun,
and which columns of a table fit a width (docs/cli.md, "Tables at any width"). Pure: the CLI's
tables (``rungar.cli.render``) and ``runnerctl tui``'s screens both ask it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

GAP = 2  # spaces between two columns of a plain-text table


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 run``, ``3 runs``; ``many`` for a plural not made with an s."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def fitting_columns(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None,
    drop: Sequence[str] = (),
    *,
    gap: int = GAP,
    pad: int = 0,
    short: Mapping[str, str] | None = None,
) -> tuple[list[int], list[str]]:
    """The columns of a table that fit ``width`` and their headers: short headers first, then
    the ``drop`` columns left out, least useful first, until the widest line fits (or nothing
    more may go). ``gap`` separates two columns; ``pad`` is added to each (a TUI cell's)."""
    names = [str(h) for h in headers]
    keep = list(range(len(names)))

    def line_width(shown: list[str]) -> int:
        widths = [max([len(shown[k])] + [len(r[i]) for r in rows]) for k, i in enumerate(keep)]
        return sum(widths) + pad * len(keep) + gap * max(0, len(keep) - 1)

    if width is None or line_width(names) <= width:
        return keep, names
    names = [(short or {}).get(n, n) for n in names]
    for name in drop:
        if line_width([names[i] for i in keep]) <= width:
            break
        if name in headers:
            keep.remove(list(headers).index(name))
    return keep, [names[i] for i in keep]
