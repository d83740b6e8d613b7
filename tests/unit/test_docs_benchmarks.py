"""docs/benchmarks.md describes every benchmark script, and its figures match the scripts' own
metric names."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "benchmarks.md"


def scripts() -> list[str]:
    return sorted(
        p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.name not in ("run_all.py",)
    )


def documented(text: str) -> set[str]:
    return set(re.findall(r"^### `benchmarks/([a-z_]+)\.py`", text, flags=re.MULTILINE))


def table_rows(text: str) -> set[str]:
    return set(re.findall(r"^\| ([a-z_]+) \|", text, flags=re.MULTILINE))


def test_every_benchmark_script_has_a_section_and_rows_in_the_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert set(scripts()) <= documented(text), sorted(set(scripts()) - documented(text))
    assert set(scripts()) <= table_rows(text), sorted(set(scripts()) - table_rows(text))


def test_every_ratio_the_page_names_is_a_metric_its_script_prints() -> None:
    text = DOC.read_text(encoding="utf-8")
    for metric in set(re.findall(r"`([a-z0-9_]+_ratio)`", text)):
        owners = [
            s for s in scripts() if f'"{metric}"' in (ROOT / "benchmarks" / f"{s}.py").read_text()
        ]
        assert owners, f"{metric} is printed by no benchmark script"


def test_a_script_without_a_section_is_found() -> None:
    text = "### `benchmarks/placement.py`\n| placement | x |\n"
    assert documented(text) == {"placement"}
    assert "rpc" not in documented(text)


def test_no_heading_names_the_projects_history() -> None:
    text = DOC.read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert not [h for h in headings if re.search(r"\bissue \d+", h)], headings
