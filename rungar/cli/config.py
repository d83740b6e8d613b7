"""``rungar config``: the effective configuration; ``rungar config migrate``: a newer format.

    rungar config [FILE] [-c rungar.yaml] [--json]
    rungar config migrate FILE [-w/--write]

The first prints what Rungar runs from (:mod:`rungar.config.effective`): a scale_sets.yaml
FILE, or with ``-c`` the daemon's rungar.yaml and the scale_sets.yaml it names, every default
filled in and secrets redacted, and the way to GitHub: the proxy its calls take and why
(``github.proxy``, an environment variable of this command's, or none) and the certificate
authorities trusted. ``--json`` prints one object, ``{"version": 1, "scale_sets": ...,
"settings": ..., "network": ...}`` (durations in seconds). The second rewrites FILE for the current
format keeping its comments (:mod:`rungar.config.migrate`): printed to stdout, or with
``--write`` written in place with the file's mode and owner.

Exit codes: 0 done, 2 a configuration or usage problem.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from typing import Any

EXIT_OK = 0
EXIT_CONFIG = 2


def _flags(parser: argparse.ArgumentParser, *, default: Any = None) -> None:
    parser.add_argument("-c", "--config", default=default, help="the daemon's rungar.yaml")
    parser.add_argument(
        "--json", action="store_true", default=default, help="print one JSON object"
    )
    parser.add_argument(
        "-w", "--write", action="store_true", default=default, help="migrate: rewrite FILE"
    )


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help_text,
        description=__doc__.split("\n\n", 1)[1] if __doc__ else help_text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _flags(parser, default=None)
    # Flags may come after FILE or after `migrate`: the rest is parsed again in run(), which
    # answers a --help found there (`rungar config migrate --help`) with this parser's help.
    parser.add_argument("rest", nargs=argparse.REMAINDER, metavar="[migrate] FILE ...")
    parser.set_defaults(config_help=parser.format_help)
    return parser


def run(args: argparse.Namespace) -> int:
    from rungar.errors import ConfigError

    words_given = [w for w in args.rest if w != "--"]
    if any(w in ("-h", "--help") for w in words_given) and hasattr(args, "config_help"):
        print(args.config_help(), end="")
        return EXIT_OK
    inner = argparse.ArgumentParser(prog="rungar config", add_help=False)
    _flags(inner, default=None)
    inner.add_argument("words", nargs="*")
    again, unknown = inner.parse_known_intermixed_args(args.rest)
    if unknown:
        return _usage(f"config: unrecognized arguments: {' '.join(unknown)}")
    config = args.config or again.config or ""
    as_json = bool(args.json or again.json)
    write = bool(args.write or again.write)
    words: list[str] = list(again.words)
    try:
        if words[:1] == ["migrate"]:
            if len(words) != 2:
                return _usage("config migrate takes one FILE")
            return _migrate(words[1], write=write)
        if len(words) > 1 or (not words and not config):
            return _usage("config takes a scale_sets.yaml FILE, or -c rungar.yaml")
        return _show(words[0] if words else "", config, as_json=as_json)
    except ConfigError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return EXIT_CONFIG


def _usage(message: str) -> int:
    print(f"rungar: {message}", file=sys.stderr)
    return EXIT_CONFIG


def _show(file: str, settings_path: str, *, as_json: bool) -> int:
    import yaml

    from rungar.config.effective import PER_SCALE_SET, effective_scale_sets, in_force, redact
    from rungar.config.loader import load_scale_sets
    from rungar.daemon.shipped_plugins import SHIPPED, shipped_command

    out: dict[str, Any] = {"version": 1}
    settings: dict[str, Any] | None = None
    if settings_path:
        from rungar.daemon.settings import load_settings

        loaded = load_settings(settings_path)
        settings = redact(loaded.model_dump(mode="json"))
        file = file or loaded.scale_sets
        out["network"] = _network(loaded)

    def shipped(provider_type: str) -> tuple[str, ...] | None:
        return shipped_command(provider_type) if provider_type in SHIPPED else None

    config = load_scale_sets(file)
    out["scale_sets"] = effective_scale_sets(config, durations_as_text=not as_json, shipped=shipped)
    # A 0 that defers to each scale set is not shown as 0: its values in force are.
    timing = out["scale_sets"].get("timing", {})
    for key in PER_SCALE_SET:
        if not getattr(config.timing, key):
            timing.pop(key, None)
    out["in_force"] = in_force(config, durations_as_text=not as_json)
    if settings is not None:
        out["settings"] = settings
    if as_json:
        print(json.dumps(out, indent=2))
        return EXIT_OK
    print(f"# effective configuration of {file}: defaults filled in, secrets redacted")
    print(yaml.safe_dump(out["scale_sets"], sort_keys=False, allow_unicode=True), end="")
    print("# in force per scale set (timing leaves them to each scale set's start_timeout):")
    for name, values in out["in_force"].items():
        print(f"#   {name}: " + ", ".join(f"{k} {v}" for k, v in values.items()))
    if settings is not None:
        print(f"---\n# effective settings of {settings_path}")
        text = yaml.safe_dump(settings, sort_keys=False, allow_unicode=True)
        # socket_mode in octal, as it is written (YAML reads 0660 back as octal)
        mode = settings.get("socket_mode")
        if isinstance(mode, int):
            text = text.replace(f"socket_mode: {mode}\n", f"socket_mode: 0{mode:o}\n", 1)
        print(text, end="")
        network = out["network"]
        print(f"# GitHub ({network['url']}) is reached through proxy: {network['shown']}")
        print(f"# certificates are checked against {network['trust']}")
    return EXIT_OK


def _network(settings: Any) -> dict[str, Any]:
    """Which proxy GitHub's calls take and why (this command's environment, as the daemon's
    would be read), and the trust: never the proxy's credentials."""
    from rungar.daemon.settings import github_network
    from rungar.errors import ConfigError
    from rungar.github.network import NetworkError
    from rungar.github.urls import parse_config_url

    url = parse_config_url(settings.github.url).rest_base
    try:
        network = github_network(settings.github)
        route = network.route(url)
    except NetworkError as e:
        raise ConfigError([str(e)]) from None
    proxy = route.proxy
    return {
        "url": url,
        "proxy": proxy.url if proxy is not None else None,
        "source": proxy.source if proxy is not None else None,
        "why": route.why or None,
        "shown": route.shown(),
        "trust": network.trust.shown(),
    }


def _migrate(path: str, *, write: bool) -> int:
    from rungar.config.loader import parse_scale_sets
    from rungar.config.migrate import migrate

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        return _usage(f"{path}: cannot be read: {e.strerror or e}")
    try:
        migration = migrate(text)
    except ValueError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return EXIT_CONFIG
    parse_scale_sets(migration.text, path)  # raises ConfigError: nothing written
    if not write:
        print(migration.text, end="")
        for step in migration.done:
            print(f"{path}: {step}", file=sys.stderr)
        return EXIT_OK
    if not migration.changed:
        print(f"{path} is already format {migration.target}: nothing to change")
        return EXIT_OK
    _replace(path, migration.text)
    for step in migration.done:
        print(f"{path}: {step}")
    print(f"{path}: migrated from format {migration.source} to {migration.target}")
    return EXIT_OK


def _replace(path: str, text: str) -> None:
    """Write ``text`` over ``path`` at once, keeping its mode and owner."""
    before = os.stat(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=".migrate-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temp, before.st_mode & 0o7777)
        with contextlib.suppress(PermissionError):  # not ours to give: it stays the writer's
            os.chown(temp, before.st_uid, before.st_gid)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
