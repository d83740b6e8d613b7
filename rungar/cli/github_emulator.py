"""``rungar github-emulator``: the loopback GitHub of ``rungar.testing.github_emulator``, served.

Point Rungar at the printed URL with the PAT ``emulator-pat``; queue jobs with
``POST /_fake/jobs`` (labels, repository, workflow, name, duration, memory_bytes, cpu, result).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import Any

from rungar.stopping import stop_on_signals
from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=__doc__
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (loopback by default)")
    parser.add_argument("--port", type=int, default=8765, help="port to bind (0 = any free port)")
    parser.add_argument("--owner", default="octo-org", help="the organization it serves")
    parser.add_argument(
        "--clock-factor", type=float, default=1.0, help="emulated seconds per real second"
    )
    parser.add_argument(
        "--long-poll", type=float, default=50.0, help="real seconds a message poll waits"
    )
    parser.add_argument(
        "--session-ttl", type=float, default=120.0, help="idle seconds before a session is stale"
    )
    parser.add_argument(
        "--assignment-timeout", type=float, default=300.0, help="seconds a job waits for a runner"
    )
    parser.add_argument("--acquire-mode", choices=("broker", "legacy"), default="broker")
    parser.add_argument(
        "--webhook-url", default="", help="where to send signed workflow_job webhooks"
    )
    parser.add_argument("--webhook-secret-file", default="", help="file holding the webhook secret")
    return parser


def run(args: argparse.Namespace) -> int:
    secret = ""
    if args.webhook_secret_file:
        with open(args.webhook_secret_file, encoding="utf-8") as f:
            secret = f.read().strip()
    if args.webhook_url and not secret:
        print("github-emulator: --webhook-url needs --webhook-secret-file", flush=True)
        return 2
    options = EmulatorOptions(
        owner=args.owner,
        pats={"emulator-pat": args.owner},
        installations={1: args.owner},
        clock_factor=args.clock_factor,
        long_poll_seconds=args.long_poll,
        session_idle_ttl=args.session_ttl,
        assignment_timeout=args.assignment_timeout,
        acquire_mode=args.acquire_mode,
        webhook_url=args.webhook_url,
        webhook_secret=secret,
    )
    emulator = GitHubEmulator(options)

    def ready(base: str) -> None:
        print(f"github emulator: {base}/{args.owner} (PAT: emulator-pat)", flush=True)

    async def serve_until_stopped() -> None:
        stop = asyncio.Event()
        stop_on_signals(stop)
        serving = asyncio.create_task(emulator.serve_forever(args.host, args.port, ready))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({serving, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for task in (serving, stopped):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving  # raises what ended it, if it ended by itself
        stopped.cancel()

    asyncio.run(serve_until_stopped())
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m rungar.cli.github_emulator``: the same without the ``rungar`` dispatcher."""
    parser = argparse.ArgumentParser(prog="rungar github-emulator")
    sub = parser.add_subparsers(dest="command")
    add_parser(sub, "github-emulator", "serve the loopback GitHub")
    return run(parser.parse_args(["github-emulator", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    sys.exit(main())
