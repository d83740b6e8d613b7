"""``rungar validate FILE``: check a scale_sets.yaml without contacting anything.

Prints ``FILE is valid: 3 providers, 2 scale sets`` and exits 0, or every problem on stderr as
``FILE:LINE:COL: key.path: what is wrong`` and exits 2 (2 for configuration errors, as every
command). ``--json`` prints one JSON object on stdout instead, with the same exit codes.

FILE may also be the daemon's ``rungar.yaml`` (a mapping with a ``github:`` key): its settings
are checked, then the scale_sets.yaml it names. ``--verbose`` prints every path either file
names, resolved against the file's own folder as the daemon will open it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from rungar.config.loader import load_scale_sets
from rungar.config.model import ScaleSetsFile
from rungar.config.paths import provider_paths
from rungar.config.problems import ScaleSetsError
from rungar.errors import ConfigError

EXIT_OK = 0
EXIT_CONFIG = 2


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text
    )
    parser.add_argument(
        "file", metavar="FILE", help="the scale_sets.yaml (or the daemon's rungar.yaml) to check"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the result as one JSON object on stdout"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print every path the file names, resolved against the file's folder",
    )
    return parser


def is_daemon_settings(path: str) -> bool:
    """A rungar.yaml rather than a scale_sets.yaml: a mapping with a ``github:`` key."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return False  # load_scale_sets reports what is wrong with it
    return isinstance(data, dict) and "github" in data


def _load(path: str) -> tuple[ScaleSetsFile, list[tuple[str, str]]]:
    """The scale sets to report on, and ``(key, resolved path)`` of every path named."""
    if not is_daemon_settings(path):
        config = load_scale_sets(path)
        return config, [
            *(kv for p in config.providers for kv in provider_paths(p)),
            *dashboard_paths(config),
        ]
    from rungar.daemon.settings import load_settings, settings_paths

    settings = load_settings(path)
    config = load_scale_sets(settings.scale_sets)
    paths = settings_paths(settings)
    paths += [kv for p in config.providers for kv in provider_paths(p)]
    return config, paths + dashboard_paths(config)


def dashboard_paths(config: ScaleSetsFile) -> list[tuple[str, str]]:
    """The fleet page's files (``dashboard.tls.*``, ``dashboard.token_file``), resolved."""
    board = config.dashboard
    named = (
        ("dashboard.tls.cert_file", board.cert_file),
        ("dashboard.tls.key_file", board.key_file),
        ("dashboard.tls.client_ca_file", board.client_ca_file),
        ("dashboard.token_file", board.token_file),
    )
    return [(key, path) for key, path in named if path]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def run(args: argparse.Namespace) -> int:
    path: str = args.file
    try:
        config, paths = _load(path)
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
        result: dict[str, Any] = {
            "file": path,
            "valid": True,
            "providers": providers,
            "scale_sets": scale_sets,
        }
        if args.verbose:
            result["paths"] = dict(paths)
        print(json.dumps(result))
    else:
        counts = f"{_count(providers, 'provider')}, {_count(scale_sets, 'scale set')}"
        print(f"{path} is valid: {counts}")
        if args.verbose:
            width = max((len(key) for key, _ in paths), default=0)
            for key, value in paths:
                print(f"  {key.ljust(width)}  {value}")
    for warning in warnings:  # on stderr either way: stdout stays the result
        print(f"Warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _warnings(path: str) -> list[str]:
    """What still loads but is to change: a file that states no format (docs/stability.md)."""
    from rungar.config.migrate import version_of

    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if version_of(text) == 0:
        return [
            f"{path} states no version:; `rungar config migrate --write {path}` adds it "
            "(a later format may need it)"
        ]
    return []
