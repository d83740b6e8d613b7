"""docs/github-emulator.md's table of GitHub's 2025–2026 changes names, for each change, tests
that exist: a renamed or deleted test leaves no row pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "github-emulator.md"
HEADING = "## GitHub's changes of 2025–2026"


def rows() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]


def test_every_change_of_githubs_names_tests_that_exist() -> None:
    found = rows()
    assert len(found) >= 6
    for change, _emulator, tests in found:
        named = re.findall(r"`(tests/[^`]+)`", tests)
        assert named, f"no test named for: {change}"
        for test in named:
            path, _, function = test.partition("::")
            assert (ROOT / path).is_file(), f"{path} does not exist ({change})"
            if function:
                source = (ROOT / path).read_text(encoding="utf-8")
                assert f"def {function}(" in source, f"{test} does not exist ({change})"
