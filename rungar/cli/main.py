"""``rungar``: one entry point, subcommands in their own modules, imported only when used.

Each subcommand module exposes ``add_parser(subparsers, name, help_text)`` and
``run(args) -> int``. Only the module of the subcommand being run is imported: ``rungar --help``
lists the subcommands from the table below without importing any of them, and ``rungar status``
imports the status module (and the gRPC client it needs), never a cloud SDK, the GitHub emulator
or the daemon. Exit codes: 0 success, 1 runtime error, 2 configuration or usage error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

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

colour: --color never|auto|always (auto: on a terminal, unless NO_COLOR is set)
"""


def chosen_subcommand(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` runs: its first word that names one (words before it are
    ``rungar``'s own options and their values)."""
    return next((word for word in argv if word in SUBCOMMANDS), None)


def build_parser(chosen: str | None = None, *, full: bool = False) -> argparse.ArgumentParser:
    """The parser, with the full arguments of ``chosen`` only: every other subcommand is a
    name and a help line, so its module is not imported. ``full`` imports every subcommand
    (for tools that check documented command lines)."""
    parser = argparse.ArgumentParser(
        prog="rungar",
        description="Places GitHub Actions runners across providers that create or refuse.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rungar {__version__}")
    parser.add_argument(
        "--color",
        choices=("never", "auto", "always"),
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
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["__complete"]:  # the completion scripts' question, not a command
        from rungar.cli.complete_names import complete_names

        return complete_names(words[1:])
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
