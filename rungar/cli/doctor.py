"""``rungar doctor [-c rungar.yaml] [--json]``: check what a working daemon needs, one line each.

Without ``-c`` it checks the rungar.yaml of the daemon answering on the admin socket
(``--socket``, else ``$RUNGAR_SOCKET``, else the default, as every command asks the daemon),
and /etc/rungar/rungar.yaml when none answers.

Each line is ``ok``, ``warn`` or ``fail``, what was found, and for the last two what to do:
the way to GitHub (the proxy its calls take and why, the certificate authorities trusted),
the GitHub credentials and what they may do on the configured scope, asked through that proxy,
the clock against GitHub's, each provider's Info (reachability, transport, identity), the
state directory's permissions and free disk, the secret files' modes and the admin socket's
group.

``--json`` prints ``{"version": 1, "ok": BOOL, "checks": [{"area", "level", "message",
"fix"}, ...]}``.

Exit codes: 0 nothing failed (warnings allowed), 1 a check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from rungar.cli.socket import ENV_SOCKET, add_socket_argument, socket_path

EXIT_OK = 0
EXIT_FAILED = 1
DEFAULT_CONFIG = "/etc/rungar/rungar.yaml"
ASK_TIMEOUT = 5.0  # seconds the daemon on the socket has to say where its rungar.yaml is


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help_text,
        description=__doc__.split("\n\n", 1)[1] if __doc__ else help_text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-c",
        "--config",
        help=(
            "the daemon's rungar.yaml (default: the running daemon's, asked on the socket, "
            f"else {DEFAULT_CONFIG})"
        ),
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_socket_argument(parser)
    parser.add_argument(
        "--provider-timeout", type=float, default=10.0, help="seconds each provider has to answer"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    import asyncio

    from rungar import logs
    from rungar.doctor.checks import FAIL
    from rungar.doctor.run import diagnose

    logs.configure("error")  # findings are the output; a plugin's chatter is not
    socket = socket_path(args)
    # The socket the other commands ask, when it was chosen rather than the default.
    chosen = socket if (args.socket or os.environ.get(ENV_SOCKET)) else ""
    config, asked = args.config, ""
    if config is None:
        asked = asyncio.run(running_settings_path(socket))
        config = asked or DEFAULT_CONFIG
    checks = asyncio.run(
        diagnose(
            config,
            provider_timeout=args.provider_timeout,
            cli_socket=chosen,
            from_daemon=socket if asked else "",
        )
    )
    failed = any(c.level == FAIL for c in checks)
    if args.json:
        payload = {"version": 1, "ok": not failed, "checks": [c.to_json() for c in checks]}
        print(json.dumps(payload, indent=2))
    else:
        from rungar.cli.style import paint

        for check in checks:
            level = paint(f"{check.level:<4}", check.level, sys.stdout)
            print(f"{level}  {check.area:<18} {check.message}")
            if check.fix and check.level != "ok":
                print(f"{'':<4}  {'':<18} → {check.fix}")
        counts = {lvl: sum(1 for c in checks if c.level == lvl) for lvl in ("ok", "warn", "fail")}
        print(f"\n{counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail")
    return EXIT_FAILED if failed else EXIT_OK


async def running_settings_path(socket: str) -> str:
    """The rungar.yaml of the daemon answering on ``socket``; "" when none answers (or it is
    too old to say)."""
    import asyncio

    from rungar.rpc.admin_client import AdminClient, DaemonUnreachable

    try:
        async with AdminClient(socket) as client:
            status = await asyncio.wait_for(client.status(), ASK_TIMEOUT)
    except (DaemonUnreachable, TimeoutError, OSError):
        return ""
    return str((status.get("daemon") or {}).get("settings_path") or "")
