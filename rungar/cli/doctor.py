"""``rungar doctor -c rungar.yaml [--json]``: check what a working daemon needs, one line each.

Each line is ``ok``, ``warn`` or ``fail``, what was found, and for the last two what to do:
the GitHub credentials and what they may do on the configured scope, the clock against
GitHub's, each provider's Info (reachability, transport, identity), the state directory's
permissions and free disk, the secret files' modes and the admin socket's group.

``--json`` prints ``{"version": 1, "ok": BOOL, "checks": [{"area", "level", "message",
"fix"}, ...]}``.

Exit codes: 0 nothing failed (warnings allowed), 1 a check failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help_text,
        description=__doc__.split("\n\n", 1)[1] if __doc__ else help_text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-c", "--config", default="/etc/rungar/rungar.yaml", help="the daemon's rungar.yaml"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
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
    checks = asyncio.run(diagnose(args.config, provider_timeout=args.provider_timeout))
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
