"""rungar's command line: every subcommand answers --help in plain text, a mistyped one gets a
suggestion, --color works wherever it is given, and the demo says what to install."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rungar.cli.main import build_parser, global_flags_first, main, plain

MARKUP = re.compile(r"``|:(?:mod|func|class|meth|attr|data|obj|exc|ref):`")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "01-single-host" / "scale_sets.yaml"


def commands(parser: argparse.ArgumentParser, path: list[str]) -> Iterator[list[str]]:
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, [*path, name])


EVERY = [c for c in commands(build_parser(full=True), []) if c] + [["config", "migrate"]]


@pytest.mark.parametrize("command", EVERY, ids=" ".join)
def test_every_subcommand_answers_help_in_plain_text(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        code = main([*command, "--help"])
        raise SystemExit(code)
    out = capsys.readouterr().out
    assert done.value.code in (0, None)
    assert out.startswith("usage: rungar"), out
    assert not MARKUP.search(out), MARKUP.findall(out)


def test_rest_markup_becomes_plain_text() -> None:
    assert plain("reads :mod:`rungar.config.effective` and ``--json``") == (
        "reads rungar.config.effective and --json"
    )


@pytest.mark.parametrize(
    ("words", "suggested"),
    [(["statsu"], "'status'"), (["scale-sets", "pasue", "x"], "'pause'")],
)
def test_a_mistyped_subcommand_gets_the_closest_name(
    words: list[str], suggested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(words)
    assert done.value.code == 2
    assert f"did you mean {suggested}?" in capsys.readouterr().err


@pytest.mark.parametrize(
    "words",
    [
        ["--color", "never", "validate", str(EXAMPLE)],
        ["validate", "--color", "never", str(EXAMPLE)],
        ["validate", str(EXAMPLE), "--color=never"],
    ],
)
def test_color_works_before_or_after_the_subcommand(
    words: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chosen: list[str] = []
    monkeypatch.setattr("rungar.cli.style.set_mode", chosen.append)

    assert main(words) == 0

    assert chosen == ["never"]
    assert "is valid" in capsys.readouterr().out


def test_words_after_a_double_dash_are_left_where_they_are() -> None:
    assert global_flags_first(["x", "--", "--color", "never"]) == ["x", "--", "--color", "never"]
    assert global_flags_first(["x", "--color", "auto", "y"]) == ["--color", "auto", "x", "y"]


def test_the_demo_without_its_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "moto.server", None)  # as if moto were not installed

    assert main(["demo", "--no-live"]) == 2

    err = capsys.readouterr().err
    assert "pip install 'rungar[demo]'" in err
    assert "Traceback" not in err
