"""``rungar``: one entry point, subcommands in their own modules, imported only when used.

Each subcommand module exposes ``add_parser(subparsers, name, help_text)`` and
``run(args) -> int``. Only the module of the subcommand being run is imported: ``rungar --help``
lists the subcommands from the table below without importing any of them, and ``rungar status``
imports the status module (and the gRPC client it needs), never a cloud SDK, the GitHub emulator
or the daemon. Exit codes: 0 success, 1 runtime error, 2 configuration or usage error.

Every parser is a :class:`Parser`: its help is plain text (the modules' docstrings that serve
as descriptions are written for Sphinx-style readers, their markup is dropped), and a mistyped
subcommand, at any depth, gets the closest name as a suggestion. The global flags (``--color``)
are taken from anywhere on the command line, before or after the subcommand.

A reader that stops reading (``rungar events | head -2``) ends the command quietly, with the exit
code of a program ended by SIGPIPE (141), whichever command was writing: :func:`main` is the one
place that catches it.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from rungar import __version__

# subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("rungar.cli.validate", "check a scale_sets.yaml without contacting anything"),
    "config": ("rungar.cli.config", "print the effective configuration, or migrate a file"),
    "doctor": ("rungar.cli.doctor", "check credentials, providers, clock, disk, files and socket"),
    "demo": ("rungar.cli.demo", "run the embedded default on loopback and show what happens"),
    "serve": ("rungar.cli.serve", "run the daemon until SIGTERM; runners are left in place"),
    "status": ("rungar.cli.status", "show the daemon, scale sets, providers, skips and runners"),
    "apply": ("rungar.cli.apply", "check a scale_sets.yaml and apply it to the running daemon"),
    "events": ("rungar.cli.events", "show the daemon's events; -f follows new ones"),
    "scale-sets": ("rungar.cli.scale_sets", "list, inspect, pause, resume or remove scale sets"),
    "providers": ("rungar.cli.providers", "list, inspect, disable, enable or drain providers"),
    "runners": ("rungar.cli.runners", "list or remove runners"),
    "usage": ("rungar.cli.usage", "runner time, jobs, waits and cost of the jobs served"),
    "reconcile": ("rungar.cli.reconcile", "run a reconcile pass now"),
    "github-emulator": ("rungar.cli.github_emulator", "serve a loopback GitHub for tests"),
    "fake-runner": ("rungar.cli.fake_runner", "act as a runner for the GitHub emulator"),
    "completion": ("rungar.cli.completion", "print a completion script for bash, zsh or fish"),
    "simulate": (
        "rungar.simulate.command",
        "replay a job history through the fleet on a virtual clock",
    ),
}

EPILOG = """exit codes:
  0    success
  1    a runtime error, or a doctor check failed
  2    a configuration or usage error
  130  stopped at once by a second Ctrl-C

  141  its output was closed before it was all written (rungar events | head)

colour: --color never|auto|always (auto: on a terminal, unless NO_COLOR is set)
"""


COLORS = ("never", "auto", "always")
EXIT_CLOSED_OUTPUT = 141  # 128 + SIGPIPE, as a shell reports a program SIGPIPE ended
# argparse's words for a subcommand that is not one of its choices (Python 3.11 to 3.13).
INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$", re.S)
ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj|exc|ref):`~?([^`]+)`")
LITERAL = re.compile(r"``([^`]+)``")


def plain(text: str) -> str:
    """``text`` without reStructuredText markup: ``:mod:`a.b` `` is ``a.b``, a literal is its
    content."""
    return LITERAL.sub(r"\1", ROLE.sub(r"\1", text))


class Parser(argparse.ArgumentParser):
    """An argparse parser whose help is plain text and whose errors suggest a close name.
    Subparsers are made of the same class (argparse makes them of their parent's)."""

    def format_help(self) -> str:
        return plain(super().format_help())

    def error(self, message: str) -> NoReturn:
        found = INVALID_CHOICE.search(message)
        if found:
            choices = re.findall(r"'([^']*)'", found.group(2))
            close = difflib.get_close_matches(found.group(1), choices, n=1)
            if close:
                message = message[: found.start()] + (
                    f"invalid choice: {found.group(1)!r}: did you mean {close[0]!r}?"
                )
        super().error(message)


def global_flags_first(words: list[str]) -> list[str]:
    """``words`` with ``--color MODE`` (or ``--color=MODE``) moved to the front from wherever it
    was given, so it works before or after the subcommand; words after ``--`` are left alone."""
    flags: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            rest.extend(words[i:])
            break
        if word == "--color" and i + 1 < len(words):
            flags += words[i : i + 2]
            i += 2
            continue
        if word.startswith("--color="):
            flags.append(word)
        else:
            rest.append(word)
        i += 1
    return flags + rest


def chosen_subcommand(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` runs: its first word that names one (words before it are
    ``rungar``'s own options and their values)."""
    return next((word for word in argv if word in SUBCOMMANDS), None)


def build_parser(chosen: str | None = None, *, full: bool = False) -> argparse.ArgumentParser:
    """The parser, with the full arguments of ``chosen`` only: every other subcommand is a
    name and a help line, so its module is not imported. ``full`` imports every subcommand
    (for tools that check documented command lines)."""
    parser = Parser(
        prog="rungar",
        description="Places GitHub Actions runners across providers that create or refuse.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rungar {__version__}")
    parser.add_argument(
        "--color",
        choices=COLORS,
        help="colour the output: never, auto (a terminal without NO_COLOR), always",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if full or name == chosen:
            importlib.import_module(module_name).add_parser(subparsers, name, help_text)
        else:
            subparsers.add_parser(name, help=help_text, description=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        result = run_command(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # here, not at exit: a reader gone is found while it can be caught
        return result
    except BrokenPipeError:
        return output_closed()


def output_closed() -> int:
    """stdout's reader is gone: say nothing more. What is still buffered goes to /dev/null, so
    the interpreter's last flush at exit does not raise the same error again."""
    # A stdout with no descriptor (a test's capture) has nothing to redirect.
    with open(os.devnull, "w") as devnull, contextlib.suppress(OSError, ValueError):
        os.dup2(devnull.fileno(), sys.stdout.fileno())
    return EXIT_CLOSED_OUTPUT


def run_command(words: list[str]) -> int:
    if words[:1] == ["__complete"]:  # the completion scripts' question, not a command
        from rungar.cli.complete_names import complete_names

        return complete_names(words[1:])
    words = global_flags_first(words)
    parser = build_parser(chosen_subcommand(words))
    args = parser.parse_args(words)
    if args.color:
        from rungar.cli.style import set_mode

        set_mode(args.color)
    if not args.command:
        parser.print_help()
        return 2
    module = importlib.import_module(SUBCOMMANDS[args.command][0])
    result: int = module.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
