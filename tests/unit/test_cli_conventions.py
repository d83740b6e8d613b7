"""The CLI's conventions: the runs-on line in scale-sets inspect, shell completions generated
from the parsers, colour only where wanted (NO_COLOR, --color), exit codes in --help."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rungar.cli import style
from rungar.cli.completion import bash_script, fish_script, tree, zsh_script
from rungar.cli.main import SUBCOMMANDS, build_parser, main
from rungar.cli.scale_sets import inspect_lines, runs_on

FOUND = {
    "name": "rungar-c4-m8",
    "labels": ["rungar-c4-m8"],
    "runners": 0,
    "max": 10,
    "min": 0,
    "runner_list": [],
    "skips": [],
}


def test_inspect_ends_with_the_runs_on_line_to_copy_into_a_workflow() -> None:
    lines = inspect_lines(FOUND)
    assert "  runs-on: rungar-c4-m8" in lines
    assert lines[lines.index("  runs-on: rungar-c4-m8") - 1] == "In a workflow"


def test_runs_on_is_the_label_or_a_flow_list_of_every_label() -> None:
    assert runs_on({"name": "big", "labels": []}) == "big"
    assert runs_on({"name": "big", "labels": ["linux", "x64", "big"]}) == "[linux, x64, big]"


def test_the_completion_tree_has_every_command_and_their_subcommands_and_options() -> None:
    words = tree(build_parser(full=True))
    assert set(SUBCOMMANDS) <= set(words[""])
    assert {"ls", "inspect", "pause", "resume", "rm"} <= set(words["scale-sets"])
    assert "--json" in words["scale-sets ls"] and "--wait" in words["scale-sets pause"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("rungar scale-sets ", {"ls", "inspect", "pause", "resume", "rm"}),
        ("rungar --color never scale-sets ls --j", {"--json"}),
        ("rungar doc", {"doctor"}),
        ("rungar usage --by ", {"repository", "workflow", "scale-set", "provider"}),
        ("rungar usage --by s", {"scale-set"}),
        ("rungar --color ", {"never", "auto", "always"}),
    ],
)
def test_bash_completes_commands_subcommands_and_options(
    line: str, expected: set[str], tmp_path: Path
) -> None:
    script = tmp_path / "rungar.bash"
    script.write_text(bash_script(build_parser(full=True)))
    words = line.split(" ")
    program = (
        f"source {script}; COMP_WORDS=({' '.join(repr(w) for w in words)}); "
        f"COMP_CWORD={len(words) - 1}; _rungar; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    assert expected <= set(done.stdout.split()), done.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_an_option_s_fixed_values_are_offered_rather_than_the_options(tmp_path: Path) -> None:
    script = tmp_path / "rungar.bash"
    script.write_text(bash_script(build_parser(full=True)))
    program = (
        f"source {script}; COMP_WORDS=(rungar usage --by ''); COMP_CWORD=3; _rungar; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    assert sorted(done.stdout.split()) == ["provider", "repository", "scale-set", "workflow"]


def test_a_name_is_completed_silently_as_nothing_when_no_daemon_answers(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rungar.cli.main", "__complete", "scale-sets", "--socket",
         str(tmp_path / "none.sock")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_zsh_uses_the_bash_completion_and_fish_names_every_command() -> None:
    parser = build_parser(full=True)
    assert "bashcompinit" in zsh_script(parser) and "_rungar()" in zsh_script(parser)
    fish = fish_script(parser)
    for name in SUBCOMMANDS:
        assert f"-a {name} " in fish, name
    assert (
        "'__fish_seen_subcommand_from scale-sets; and __fish_seen_subcommand_from ls' -l json"
        in fish
    )


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("chosen", "no_color", "tty", "coloured"),
    [
        ("auto", "", True, True),
        ("auto", "1", True, False),
        ("auto", "", False, False),
        ("never", "", True, False),
        ("always", "1", False, True),
    ],
)
def test_colour_follows_color_then_no_color_then_the_terminal(
    chosen: str, no_color: str, tty: bool, coloured: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(style.COLOR_ENV, chosen)
    monkeypatch.setenv("NO_COLOR", no_color)
    stream = Terminal() if tty else io.StringIO()
    assert (style.paint("fail", "fail", stream) != "fail") is coloured


def test_color_never_reaches_what_the_command_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv(style.COLOR_ENV, "auto")
    main(["--color", "never", "completion", "bash"])
    import os

    assert os.environ["NO_COLOR"] == "1" and os.environ[style.COLOR_ENV] == "never"


def test_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for code in ("0    success", "1    a runtime error", "2    a configuration", "130  stopped"):
        assert code in out
