"""Every command the README and the guides split from it show exists.

A command is a line of a code block whose first word is ``rungar``, ``runnerd``,
``runnerctl`` or ``make`` (after a ``$`` prompt, ``sudo``, environment assignments or a unit's
``ExecStart=``). Its subcommands and options are walked through that CLI's own argparse parser;
a make target must be defined in the Makefile. Blocks marked ``text``, ``yaml``, ``toml`` or
``json`` are pictures and files, not commands.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# The README and the guides it sends a newcomer on to: every command they show is checked.
GUIDES = [
    README,
    *(
        ROOT / "docs" / name
        for name in (
            "architecture.md",
            "scale-sets.md",
            "operating.md",
            "learning.md",
            "troubleshooting.md",
            "trying-a-change.md",
            "dashboards.md",
            "usage.md",
            "commands.md",
            "stability.md",
        )
    ),
]
MAKEFILE = ROOT / "Makefile"
CLIS = ("rungar", "runnerd", "runnerctl")
NOT_COMMANDS = {"text", "yaml", "yml", "toml", "json", "promql"}
SEPARATORS = {"&&", "||", "|", ";"}


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


def capture_parser(main: Callable[[list[str]], object]) -> argparse.ArgumentParser:
    """The parser a ``main(argv)`` builds, caught at its ``parse_args`` call.

    For a CLI that exposes no parser builder: nothing past ``parse_args`` runs.
    """

    def stop(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Captured(self)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", stop):
        try:
            main([])
        except _Captured as caught:
            return caught.parser
    raise AssertionError(f"{main} built no parser")


def parsers() -> dict[str, argparse.ArgumentParser]:
    from runnerd import cli as runnerd_cli
    from runnerd import ctl as runnerctl

    from rungar.cli.main import build_parser

    return {
        "rungar": build_parser(full=True),
        "runnerd": runnerd_cli.parser(),
        "runnerctl": capture_parser(runnerctl.main),
    }


def make_targets(makefile: str) -> set[str]:
    return set(re.findall(r"^([A-Za-z0-9][\w.-]*)\s*:(?!=)", makefile, flags=re.MULTILINE))


def code_blocks(markdown: str) -> Iterator[tuple[str, str]]:
    """(info string, body) of every fenced code block."""
    for match in re.finditer(r"^```([^\n`]*)\n(.*?)^```", markdown, flags=re.M | re.S):
        yield match.group(1).strip().lower(), match.group(2)


def commands(markdown: str) -> Iterator[list[str]]:
    """Every command line, as argv, whose program is one of ours or make."""
    for info, body in code_blocks(markdown):
        if info in NOT_COMMANDS:
            continue
        for line in body.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("ExecStart="):
                line = line.removeprefix("ExecStart=").lstrip("-+!@:")
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                continue
            segment: list[str] = []
            for word in [*words, ";"]:
                if word not in SEPARATORS:
                    segment.append(word)
                    continue
                while segment and (segment[0] == "sudo" or re.match(r"^\w+=", segment[0])):
                    segment.pop(0)
                if segment and Path(segment[0]).name in (*CLIS, "make"):
                    yield [Path(segment[0]).name, *segment[1:]]
                segment = []


def _subparsers(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def problem(
    argv: list[str], cli_parsers: dict[str, argparse.ArgumentParser], targets: set[str]
) -> str:
    """Why ``argv`` is not a command that exists, or "" when it does."""
    program, args = argv[0], argv[1:]
    shown = " ".join(argv)
    if program == "make":
        missing = [a for a in args if not a.startswith("-") and "=" not in a and a not in targets]
        return f"{shown}: no make target {', '.join(missing)}" if missing else ""
    parser = cli_parsers[program]
    i = 0
    while i < len(args):
        word = args[i]
        if word.startswith("-"):
            action = parser._option_string_actions.get(word.split("=", 1)[0])
            if action is None:
                return f"{shown}: {parser.prog} has no option {word}"
            takes_value = action.nargs != 0 and "=" not in word
            i += 2 if takes_value else 1
            continue
        sub = _subparsers(parser)
        if sub is None:  # a positional argument of the command; its options are still checked
            i += 1
            continue
        if word not in sub.choices:
            known = ", ".join(sorted(sub.choices))
            return f"{shown}: {parser.prog} has no command {word!r} (it has {known})"
        parser = sub.choices[word]
        i += 1
    return ""


@pytest.fixture(scope="module")
def cli_parsers() -> dict[str, argparse.ArgumentParser]:
    return parsers()


@pytest.fixture(scope="module")
def targets() -> set[str]:
    return make_targets(MAKEFILE.read_text(encoding="utf-8"))


def guides() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in GUIDES)


def test_every_command_the_guides_show_exists(
    cli_parsers: dict[str, argparse.ArgumentParser], targets: set[str]
) -> None:
    shown = list(commands(guides()))
    problems = [p for argv in shown if (p := problem(argv, cli_parsers, targets))]
    assert not problems, "\n".join(problems)


def test_the_guides_show_commands_of_every_cli_and_the_two_quick_start_targets() -> None:
    shown = list(commands(guides()))
    assert {argv[0] for argv in shown} == {*CLIS, "make"}
    assert ["make", "demo"] in shown and ["make", "test"] in shown


def test_the_quick_start_is_exactly_make_demo_and_make_test() -> None:
    readme = README.read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = [body for _, body in code_blocks(section)]
    assert len(blocks) == 1
    assert [argv for argv in commands(section)] == [["make", "demo"], ["make", "test"]]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("rungar frobnicate", "rungar has no command 'frobnicate'"),
        ("rungar scale-sets frob NAME", "rungar scale-sets has no command 'frob'"),
        ("rungar status --frob", "rungar status has no option --frob"),
        ("rungar apply FILE --frob", "rungar apply has no option --frob"),
        ("runnerd frobnicate -c x.toml", "runnerd has no command 'frobnicate'"),
        ("runnerctl frobnicate", "runnerctl has no command 'frobnicate'"),
        ("make frobnicate", "no make target frobnicate"),
    ],
)
def test_an_unknown_command_is_reported(
    line: str, expected: str, cli_parsers: dict[str, argparse.ArgumentParser], targets: set[str]
) -> None:
    [argv] = commands(f"```sh\n{line}   # a comment\n```\n")
    assert expected in problem(argv, cli_parsers, targets)


@pytest.mark.parametrize(
    "line",
    [
        "rungar serve -c /etc/rungar/rungar.yaml",
        "rungar providers drain compute2",
        "rungar events -f --scale-set rungar-c4-m8 --since=1h",
        "rungar --version",
        "runnerd check-config -c runnerd.toml",
        "runnerctl --socket /run/runnerd/runnerd.sock job 42",
        "make bench",
    ],
)
def test_a_known_command_passes(
    line: str, cli_parsers: dict[str, argparse.ArgumentParser], targets: set[str]
) -> None:
    [argv] = commands(f"```sh\n{line}\n```\n")
    assert problem(argv, cli_parsers, targets) == ""


def test_commands_are_found_behind_prompts_sudo_env_pipes_and_exec_start() -> None:
    markdown = (
        "```console\n$ sudo RUNGAR_SOCKET=/tmp/s rungar status | head\n```\n"
        "```ini\nExecStart=/usr/local/bin/runnerd serve -c /etc/runnerd/runnerd.toml\n```\n"
        "```text\nrunnerd on host A\n```\n"
        "```sh\ncd /srv && make demo\n```\n"
    )
    assert list(commands(markdown)) == [
        ["rungar", "status"],
        ["runnerd", "serve", "-c", "/etc/runnerd/runnerd.toml"],
        ["make", "demo"],
    ]


def _examples(language: str) -> list[str]:
    return [body for info, body in code_blocks(guides()) if info == language]


def test_the_guides_scale_sets_examples_are_valid() -> None:
    from rungar.config.loader import parse_scale_sets

    whole = [b for b in _examples("yaml") if b.startswith("version: 1")]
    # A fragment that shows one provider entry is checked inside a minimal file.
    fragments = [b for b in _examples("yaml") if b.startswith("# scale_sets.yaml")]
    assert whole and fragments
    for body in whole:
        assert parse_scale_sets(body, "README.md").scale_sets
    for body in fragments:
        text = body + "scale_sets:\n  - {name: s, max_runners: 1, providers: [compute2]}\n"
        assert parse_scale_sets(text, "README.md").providers


def test_the_guides_daemon_settings_example_is_valid(tmp_path: Path) -> None:
    from rungar.daemon.settings import load_settings

    [body] = [b for b in _examples("yaml") if b.startswith("github:")]
    path = tmp_path / "rungar.yaml"
    path.write_text(body, encoding="utf-8")
    assert load_settings(str(path)).metrics.listen == "127.0.0.1:9102"


def test_the_guides_runnerd_tls_example_is_valid() -> None:
    from runnerd.config import parse_config

    [body] = _examples("toml")
    profile = '\n[profiles.p]\ncpus = 1\nmemory = "1G"\nslots = 1\n'
    host = parse_config(body + profile, "README.md").host
    assert host.listen and host.tls_cert and host.tls_key and host.tls_ca


def test_the_readme_is_short_enough_to_read_in_ten_minutes() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines: move detail into docs/"


def test_every_guide_the_readme_links_to_exists() -> None:
    readme = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)\)", readme)
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert links and not missing, missing
