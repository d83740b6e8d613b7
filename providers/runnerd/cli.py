"""``runnerd``: ``serve -c runnerd.toml`` and ``check-config -c runnerd.toml`` (issue 6).

Exit 2 for config and usage errors, 1 for runtime errors (STYLE.md).
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
    add_runnerd_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if hasattr(args, "func"):  # simulate, history generate
        result: int = args.func(args)
        return result
    _configure_logs()
    if args.command == "check-config":
        from runnerd.daemon import check_config

        problems = check_config(args.config)
        for problem in problems:
            print(problem, file=sys.stderr)
        if not problems:
            print(f"{args.config}: ok")
        return 2 if problems else 0
    from runnerd.daemon import serve_forever

    try:
        return asyncio.run(serve_forever(args.config))
    except ConfigError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return 2
    except (RungarError, OSError) as e:
        print(f"runnerd: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
