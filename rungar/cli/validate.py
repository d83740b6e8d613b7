"""``rungar validate FILE``: check a scale_sets.yaml without contacting anything.

Prints ``FILE is valid: 3 providers, 2 scale sets`` and exits 0, or every problem on stderr as
``FILE:LINE:COL: key.path: what is wrong`` and exits 2 (STYLE.md: 2 for configuration errors).
``--json`` prints one JSON object on stdout instead, with the same exit codes.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rungar.config.loader import load_scale_sets
from rungar.config.problems import ScaleSetsError
from rungar.errors import ConfigError

EXIT_OK = 0
EXIT_CONFIG = 2


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text
    )
    parser.add_argument("file", metavar="FILE", help="the scale_sets.yaml to check")
    parser.add_argument(
        "--json", action="store_true", help="print the result as one JSON object on stdout"
    )
    return parser


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def run(args: argparse.Namespace) -> int:
    path: str = args.file
    try:
        config = load_scale_sets(path)
    except ConfigError as e:
        if args.json:
            details: list[dict[str, object]]
            if isinstance(e, ScaleSetsError):
                details = [p.to_json() for p in e.details]
            else:
                details = [{"message": line} for line in e.problems]
            print(json.dumps({"file": path, "valid": False, "problems": details}))
        else:
            for line in e.problems:
                print(line, file=sys.stderr)
        return EXIT_CONFIG
    providers, scale_sets = len(config.providers), len(config.scale_sets)
    warnings = _warnings(path)
    if args.json:
        result = {"file": path, "valid": True, "providers": providers, "scale_sets": scale_sets}
        print(json.dumps(result))
    else:
        counts = f"{_count(providers, 'provider')}, {_count(scale_sets, 'scale set')}"
        print(f"{path} is valid: {counts}")
    for warning in warnings:  # on stderr either way: stdout stays the result
        print(f"Warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _warnings(path: str) -> list[str]:
    """What still loads but is to change: a file that states no format (README, "Stability")."""
    from rungar.config.migrate import version_of

    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if version_of(text) == 0:
        return [
            f"{path} states no version:; `rungar config migrate --write {path}` adds it "
            "(a later format may need it)"
        ]
    return []
