"""``runnerd``: ``serve``, ``check-config``, ``doctor``, ``init``, ``simulate``, ``history``.

Exit 2 for config and usage errors, 1 for runtime errors, as every command of the project does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from rungar.errors import ConfigError, RungarError
from runnerd.cli_sizing import add_runnerd_commands

DEFAULT_CONFIG = os.environ.get("RUNNERD_CONFIG", "/etc/runnerd/runnerd.toml")


def _configure_logs() -> None:
    """The same pipeline as rungar's (JSON when not a terminal, redaction, library loggers
    routed through it); ``RUNNERD_LOG_FORMAT`` (auto, json, text) overrides the choice."""
    from rungar import logs

    # gRPC's C core is left as it is: runners inherit runnerd's environment.
    logs.configure("info", os.environ.get("RUNNERD_LOG_FORMAT", "auto"), quiet_grpc_core=False)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="runnerd", description="The runnerd host provider.")
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the provider protocol and runnerctl's API")
    serve.add_argument("-c", "--config", default=DEFAULT_CONFIG)
    check = sub.add_parser("check-config", help="check runnerd.toml against the slice")
    check.add_argument("-c", "--config", default=DEFAULT_CONFIG)
    check.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print every path runnerd will open, resolved against the file's folder",
    )
    check.add_argument("--memory-max", help="check against this MemoryMax (default: the slice's)")
    doctor = sub.add_parser("doctor", help="what the host lacks, read-only (= runnerctl doctor)")
    doctor.add_argument("-c", "--config", default=DEFAULT_CONFIG)
    doctor.add_argument("--json", action="store_true", help="print JSON")
    init = sub.add_parser(
        "init", help="write a commented runnerd.toml for this host, then check it"
    )
    init.add_argument("-c", "--config", default=DEFAULT_CONFIG, help="the file to write")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.add_argument("--slice", default="runnerd.slice")
    init.add_argument("--state-dir", default="/var/lib/runnerd")
    init.add_argument("--cgroup-root", default="/sys/fs/cgroup")
    init.add_argument("--proc-root", default="/proc")
    add_runnerd_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if hasattr(args, "func"):  # simulate, history generate
        result: int = args.func(args)
        return result
    if args.command == "doctor":
        from runnerd.ctl import doctor_config, run_doctor

        try:
            config = doctor_config(args.config)
        except ConfigError as e:
            print("\n".join(e.problems), file=sys.stderr)
            return 2
        return run_doctor(config, args.json)
    if args.command == "init":
        from runnerd.init import run_init

        return run_init(args)
    if args.command == "check-config":
        from rungar.model.units import parse_bytes
        from runnerd.daemon import check_config

        try:
            memory_max = parse_bytes(args.memory_max) if args.memory_max else None
        except ValueError as e:
            print(f"runnerd check-config: --memory-max: {e}", file=sys.stderr)
            return 2
        problems, warnings = check_config(args.config, memory_max)
        for problem in problems:
            print(problem, file=sys.stderr)
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        if not problems:
            print(f"{args.config}: ok")
            if args.verbose:
                from runnerd.config import host_paths, load_config

                paths = host_paths(load_config(args.config).host)
                width = max(len(key) for key, _ in paths)
                for key, value in paths:
                    print(f"  {key.ljust(width)}  {value}")
        return 2 if problems else 0
    from runnerd.daemon import serve_forever

    _configure_logs()

    try:
        return asyncio.run(serve_forever(args.config))
    except ConfigError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return 2
    except (RungarError, OSError, RuntimeError) as e:  # RuntimeError: a runtime that cannot
        print(f"runnerd: {e}", file=sys.stderr)  # start, e.g. no Docker Engine answers
        return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
