"""tools/guard_mutants.py: each guard removed alone is caught by the test named for its rule.

The full check (every mutant applied in a copy of the tree, its tests run there) is marked
``long`` (``make test-long``, a minute or two); that every mutant's snippet is still found
exactly once in the source is checked in the default run, so a change to a guarded line says
so at once rather than when the long run comes.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "guard_mutants.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("guard_mutants", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("guard_mutants", module)  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


guard_mutants = _tool()


def test_every_mutants_snippet_is_found_once_and_its_tests_exist() -> None:
    root = guard_mutants.ROOT
    for mutant in guard_mutants.MUTANTS:
        source = (root / mutant.file).read_text()
        assert guard_mutants.replaced(source, mutant) != source, mutant.name
        for test in mutant.tests:
            path, _, name = test.partition("::")
            assert f"def {name}(" in (root / path).read_text(), f"{mutant.name}: {test}"


def test_a_snippet_found_twice_or_not_at_all_is_an_error() -> None:
    mutant = guard_mutants.MUTANTS[0]
    for text in ("", mutant.snippet * 2):
        with pytest.raises(guard_mutants.MutantError, match=f"found {text.count(mutant.snippet)}"):
            guard_mutants.replaced(text, mutant)


@pytest.mark.long
def test_every_guard_removed_alone_fails_its_test() -> None:
    problems = guard_mutants.check(guard_mutants.MUTANTS)
    assert not problems, "\n\n".join(problems)
