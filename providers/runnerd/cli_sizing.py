"""Command lines for sizing, ``runnerd simulate`` and ``runnerd history generate``.

docs/admission.md, "Sizing", "Auto sizing", "Try it first: runnerd simulate". Register with one line
each: ``add_runnerctl_commands(subparsers)`` in runnerctl (``sizing [--json]``, ``sizing apply
PROFILE``, ``sizing undo PROFILE``) and ``add_runnerd_commands(subparsers)`` in runnerd (``simulate
…``, ``history generate …``). Each parser sets ``func(args) -> int``.

These read the config file and the history database read-only, so they work with or without
the daemon; apply and undo write the config file in place and record the change in the
history's ``sizing_changes`` table. Exit 2 for config and usage errors, 1 for runtime errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rungar.errors import ConfigError
from rungar.model.units import parse_bytes, parse_duration
from runnerd.config import RunnerdConfig, load_config

if TYPE_CHECKING:
    from runnerd.sizing.changes import Change

DEFAULT_CONFIG = os.environ.get("RUNNERD_CONFIG", "runnerd.toml")


def _config_args(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: a ``-c`` given before the subcommand (runnerctl -c X sizing) is kept.
    parser.add_argument("-c", "--config", default=argparse.SUPPRESS, help="runnerd.toml")
    parser.add_argument("--db", help="the job history (default: the config's [host] history)")


def add_runnerctl_commands(subparsers: Any) -> None:
    sizing = subparsers.add_parser(
        "sizing", help="memory and slots advice from the job history; apply or undo it"
    )
    sizing.add_argument("action", nargs="?", choices=("apply", "undo"))
    sizing.add_argument("profile", nargs="?")
    sizing.add_argument("--json", action="store_true", help="print JSON")
    sizing.add_argument("--memory-max", help="the slice's MemoryMax (default: read it)")
    _config_args(sizing)
    sizing.set_defaults(func=run_sizing)


def add_runnerd_commands(subparsers: Any) -> None:
    from runnerd.simulate.sample import MAX_JOBS

    sim = subparsers.add_parser(
        "simulate", help="replay the job history through caps, measured and CPU admission"
    )
    sim.add_argument("--memory-max", help="MemoryMax to replay against (default: the slice's)")
    sim.add_argument("--slots", action="append", default=[], metavar="PROFILE=N")
    sim.add_argument("--since", default="30d", help="the window: 30d, 12h, 2w (default 30d)")
    sim.add_argument("--cpus", type=float, help="replay another number of CPUs")
    sim.add_argument(
        "--cpu-overcommit", type=float, action="append", default=[], metavar="N",
        help="replay CPU admission at this factor (repeat to compare)",
    )  # fmt: skip
    sim.add_argument(
        "--max-jobs", type=int, default=MAX_JOBS, metavar="N",
        help=f"more jobs in the window: replay its latest whole weeks (default {MAX_JOBS})",
    )  # fmt: skip
    sim.add_argument("--all", action="store_true", help="replay every job of the window")
    _config_args(sim)
    sim.set_defaults(func=run_simulate)

    history = subparsers.add_parser("history", help="job history tools")
    tools = history.add_subparsers(dest="history_command", required=True)
    gen = tools.add_parser("generate", help="write a realistic generated job history")
    gen.add_argument("--days", type=float, default=30.0)
    gen.add_argument("--jobs", type=int, default=2000)
    gen.add_argument("--seed", type=int, default=1)
    gen.add_argument("--db", required=True, help="the history database to write")
    gen.add_argument("--until", type=float, help="epoch seconds of the last day (default: now)")
    gen.add_argument("--write-config", help="also write a runnerd.toml for its profiles here")
    gen.set_defaults(func=run_generate)


def _config_path(args: argparse.Namespace) -> str:
    return str(getattr(args, "config", DEFAULT_CONFIG))


def _load(args: argparse.Namespace) -> tuple[RunnerdConfig, Path]:
    config = load_config(_config_path(args))
    db = Path(args.db or config.host.history_path())
    return config, db


def _limits(config: RunnerdConfig, memory_max: str | None) -> tuple[int | None, float | None]:
    from runnerd.provider import slice_limits

    read_max, cpus = slice_limits(config)
    return (parse_bytes(memory_max) if memory_max else read_max), cpus


def _sent(db: Path, change: Change, now: float) -> None:
    """A change written by hand is a ``sizing.changed`` event too (runnerctl events -f)."""
    from runnerd.events import EventLog

    events = EventLog(db)
    try:
        events.record(
            now, "sizing.changed", change.profile, change.describe(), **change.event_data()
        )
    finally:
        events.close()


def _warn(sentence: str) -> None:
    print(f"warning: {sentence}", file=sys.stderr)


def _duration(text: str) -> float:
    if text.endswith("w"):
        return float(text[:-1]) * 7 * 86400
    return parse_duration(text)


def apply_sizing(
    path: Path, profile: str, now: float, db: Path | None = None, memory_max: int | None = None
) -> Change:
    """``runnerctl sizing apply PROFILE`` and ``a`` in ``runnerctl tui``: the advice from the
    history, checked against the config as it is on disk now, the same check as any config;
    recorded in the history and sent as a ``sizing.changed`` event. Raises ``ConfigError`` with
    the problems when the check refuses, and then nothing is written or recorded."""
    from runnerd.sizing.report import apply_command

    config = load_config(str(path))
    if profile not in config.profiles:
        raise ConfigError([f"{path}: no [profiles.{profile}]"])
    read_max, cpus = _limits(config, None)
    db = db or Path(config.host.history_path())
    change = apply_command(
        path, db, config, profile, read_max if memory_max is None else memory_max, cpus, now
    )
    _sent(db, change, now)
    return change


def run_sizing(args: argparse.Namespace) -> int:
    from runnerd.sizing.report import sizing_report, undo_command

    try:
        config, db = _load(args)
        memory_max, cpus = _limits(config, args.memory_max)
        now = time.time()
        if args.action is not None and not args.profile:
            print(f"runnerctl sizing {args.action} needs a PROFILE", file=sys.stderr)
            return 2
        if args.action is not None and args.profile not in config.profiles:
            print(f"{_config_path(args)}: no [profiles.{args.profile}]", file=sys.stderr)
            return 2
        if args.action == "apply":
            change = apply_sizing(Path(_config_path(args)), args.profile, now, db, memory_max)
            print(f"applied {change.describe()}")
            print("runnerd runs with it once restarted")
            return 0
        if args.action == "undo":
            change = undo_command(Path(_config_path(args)), db, args.profile, memory_max, cpus, now)
            _sent(db, change, now)
            print(f"undone: {change.describe()}")
            return 0
        report = sizing_report(config, db, memory_max, now, on_stale=_warn, slice_cpus=cpus)
    except ConfigError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"runnerctl sizing: {e}", file=sys.stderr)
        return 1
    print(json.dumps(report.to_json(), indent=2) if args.json else report.text())
    return 0


def cpu_factors(config: RunnerdConfig, asked: list[float]) -> list[float]:
    """The ``cpu ×N`` rows: the config's cpu_overcommit whenever it sets one, then each
    ``--cpu-overcommit`` asked for, each factor once."""
    factors = [config.host.cpu_overcommit] if config.host.cpu_overcommit is not None else []
    return list(dict.fromkeys([*factors, *asked]))


def run_simulate(args: argparse.Namespace) -> int:
    from runnerd.simulate.command import SimulateRequest, simulate

    try:
        config, db = _load(args)
        memory_max, cpus = _limits(config, args.memory_max)
        if args.cpus is not None:
            cpus = args.cpus
        if memory_max is None:
            print(
                "runnerd simulate: the slice has no MemoryMax; pass --memory-max", file=sys.stderr
            )
            return 2
        factors = cpu_factors(config, args.cpu_overcommit)
        if factors and cpus is None:
            print(
                "runnerd simulate: the slice's CPUs could not be read; pass --cpus", file=sys.stderr
            )
            return 2
        slots = {}
        for item in args.slots:
            name, _, count = item.partition("=")
            if not count.isdigit() or int(count) < 1:
                print(f"runnerd simulate: --slots {item}: use PROFILE=N", file=sys.stderr)
                return 2
            slots[name] = int(count)
        if args.max_jobs < 1:
            print("runnerd simulate: --max-jobs must be 1 or more", file=sys.stderr)
            return 2
        request = SimulateRequest(
            memory_max, cpus, _duration(args.since), slots, factors,
            on_stale=_warn, max_jobs=None if args.all else args.max_jobs,
        )  # fmt: skip
        report = simulate(config, str(db), request, time.time())
    except ConfigError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"runnerd simulate: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"runnerd simulate: {e}", file=sys.stderr)
        return 1
    print(report.text)
    return 0


def run_generate(args: argparse.Namespace) -> int:
    from runnerd.history_generate import example_config, generate, write_history

    if args.jobs < 1 or args.days <= 0:
        print("runnerd history generate: --jobs and --days must be more than 0", file=sys.stderr)
        return 2
    until = args.until if args.until is not None else time.time()
    jobs = generate(args.jobs, args.days, args.seed, until)
    count = write_history(args.db, jobs)
    print(f"wrote {count} jobs over {args.days:g} days to {args.db}")
    if args.write_config:
        # The history's absolute path: the config resolves a relative one from its own folder.
        db = str(Path(args.db).resolve())
        Path(args.write_config).write_text(example_config(db, args.jobs, args.days))
        print(f"wrote {args.write_config}")
    return 0
