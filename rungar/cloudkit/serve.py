"""A cloud provider as a process: its settings, ``--listen`` or plugin socket, exit codes
(docs/architecture.md).

``rungar-provider-gcp`` and ``rungar-provider-aws`` differ only in how they parse their
settings and open their provider, so both are :func:`run_provider_server`. Started by Rungar
as a plugin (``RUNGAR_PLUGIN_SOCKET`` set) a provider serves on that socket; otherwise
``--listen`` names a ``unix:///path`` or, with TLS, a ``host:port``. Exit codes: 0 stopped,
2 configuration or usage error. ``rungar.rpc``'s server (and with it grpc) is imported only
when the provider is served, and the cloud SDK only when ``open_provider`` runs.

Settings come from two places, so a user writes a key once: what Rungar hands over to a plugin
it starts (the file named by ``RUNGAR_PLUGIN_SETTINGS``: the provider's keys from
scale_sets.yaml, its name and the installation), with the ``--config`` file's keys laid over
them. The file holds what scale_sets.yaml has no key for (an API endpoint of a local fake, a
timeout) or overrides; standalone, it holds everything. Each problem names the place its key
came from.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from rungar.cloudkit.settings import SettingsProblems
from rungar.errors import ConfigError
from rungar.model.provider import Provider
from rungar.rpc.plugin import SETTINGS_ENV
from rungar.stopping import exit_until_serving, stop_on_signals

SettingsT = TypeVar("SettingsT")


class ClosableProvider(Provider, Protocol):
    def close(self) -> None: ...


def read_settings_file(path: str) -> Mapping[str, Any]:
    """A mapping from a ``.toml`` file or a YAML one; raises ``ConfigError``."""
    try:
        text = Path(path).read_text()
        raw = tomllib.loads(text) if path.endswith(".toml") else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as e:
        raise ConfigError([f"{path}: {e}"]) from e
    if not isinstance(raw, dict):
        raise ConfigError([f"{path}: must be a mapping of settings"])
    return raw


@dataclass(frozen=True, slots=True)
class SettingsSources:
    """The settings Rungar handed over and the ``--config`` file's, each as given."""

    handed: Mapping[str, Any] = field(default_factory=dict)
    handed_from: str = ""  # how a problem names the handed-over settings; "" = none handed
    file: Mapping[str, Any] = field(default_factory=dict)
    file_path: str = ""  # "" = no --config

    def merged(self) -> dict[str, Any]:
        """The file's keys laid over the handed-over ones."""
        return {**self.handed, **self.file}

    def attribute(self, problems: Sequence[str]) -> list[str]:
        """The problems grouped by the place their key came from, one line per place.

        A problem starts with its key (``zones: …``). A key in the file is the file's (its
        value won), one only handed over is Rungar's, and a key neither gave (``installation:
        required``) belongs to every place there is.
        """
        places = [p for p in (self.handed_from, self.file_path) if p]
        everywhere = " and ".join(places)
        grouped: dict[str, list[str]] = {}
        for problem in problems:
            key = problem.split(":", 1)[0].strip()
            if self.file_path and key in self.file:
                place = self.file_path
            elif self.handed_from and key in self.handed:
                place = self.handed_from
            else:
                place = everywhere
            grouped.setdefault(place, []).append(problem)
        return [f"{place}: {'; '.join(found)}" for place, found in grouped.items()]


def read_handed_settings(path: str) -> Mapping[str, Any]:
    """The settings Rungar wrote for this plugin (JSON); raises ``ConfigError``."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ConfigError([f"settings from rungar ({SETTINGS_ENV}={path}): {e}"]) from e
    if not isinstance(raw, dict):
        raise ConfigError([f"settings from rungar ({SETTINGS_ENV}={path}): not a mapping"])
    return raw


def read_sources(config: str, environ: Mapping[str, str] | None = None) -> SettingsSources:
    """What Rungar handed over (``$RUNGAR_PLUGIN_SETTINGS``) and the ``--config`` file, either
    of them or both; raises ``ConfigError`` when neither is there or one cannot be read."""
    handed_path = (os.environ if environ is None else environ).get(SETTINGS_ENV, "")
    if not handed_path and not config:
        raise ConfigError(
            [
                "no settings: give --config FILE, or let rungar start this provider from a "
                f"scale_sets.yaml provider with command: (it hands the keys over in {SETTINGS_ENV})"
            ]
        )
    handed: Mapping[str, Any] = read_handed_settings(handed_path) if handed_path else {}
    handed_from = ""
    if handed_path:
        handed_from = f"settings from rungar (scale_sets.yaml provider {handed.get('name', '?')})"
    file = read_settings_file(config) if config else {}
    return SettingsSources(handed, handed_from, file, config)


def build_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--config",
        default="",
        help=f"settings file (.yaml or .toml), laid over what rungar hands over in {SETTINGS_ENV}",
    )
    parser.add_argument("--listen", default="", help="unix:///path or host:port (needs --tls-*)")
    parser.add_argument("--tls-cert", default="", help="server certificate (PEM)")
    parser.add_argument("--tls-key", default="", help="server key (PEM)")
    parser.add_argument("--tls-client-ca", default="", help="CA of client certificates (mTLS)")
    parser.add_argument("--token-file", default="", help="file holding a bearer token")
    parser.add_argument(
        "--insecure-no-client-auth",
        action="store_true",
        help="serve TCP clients without a client certificate or token (warned at every start)",
    )
    return parser


async def serve_until_stopped(provider: Provider, args: argparse.Namespace) -> None:
    """Serve ``provider`` as a plugin or at ``--listen`` until SIGTERM or SIGINT."""
    from rungar.rpc.plugin import SOCKET_ENV, serve_plugin
    from rungar.rpc.server import serve
    from rungar.rpc.tls import ServerTls

    if not args.listen:
        if not os.environ.get(SOCKET_ENV):
            raise ConfigError([f"--listen is required unless started by rungar ({SOCKET_ENV})"])
        await serve_plugin(provider)
        return
    tls = ServerTls(args.tls_cert, args.tls_key, args.tls_client_ca) if args.tls_cert else None
    token = Path(args.token_file).read_text().strip() if args.token_file else ""
    stop = asyncio.Event()
    stop_on_signals(stop)  # before the socket appears: whoever waits for it may signal at once
    server = await serve(
        provider, args.listen, tls, token, insecure_no_client_auth=args.insecure_no_client_auth
    )
    try:
        await stop.wait()
    finally:
        await server.stop(5.0)
        _remove_socket(args.listen)


def _remove_socket(address: str) -> None:
    """A unix socket the server made is removed when it stops: the next start binds anew."""
    if address.startswith("unix://"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address[len("unix://") :])


def run_provider_server(
    prog: str,
    description: str,
    parse_settings: Callable[[Mapping[str, Any]], SettingsT],
    open_provider: Callable[[SettingsT], ClosableProvider],
    argv: Sequence[str] | None = None,
) -> int:
    """Read and parse the settings, then serve the provider until stopped; the exit code.

    ``parse_settings`` raises ``ValueError`` listing every problem of the settings
    (``SettingsProblems``, to name where each one came from).
    """
    restore = exit_until_serving()  # a signal while the settings and the SDK load: exit 0
    try:
        return _run_provider_server(prog, description, parse_settings, open_provider, argv)
    finally:
        restore()


def _run_provider_server(
    prog: str,
    description: str,
    parse_settings: Callable[[Mapping[str, Any]], SettingsT],
    open_provider: Callable[[SettingsT], ClosableProvider],
    argv: Sequence[str] | None,
) -> int:
    args = build_parser(prog, description).parse_args(argv)
    from rungar import logs

    # The same pipeline as rungar's and runnerd's: JSON when not a terminal, redacted.
    logs.configure("info", os.environ.get("RUNGAR_LOG_FORMAT", "auto"))
    try:
        sources = read_sources(args.config)
    except ConfigError as e:
        _complain(prog, e.problems)
        return 2
    try:
        settings = parse_settings(sources.merged())
    except ValueError as e:
        problems = e.problems if isinstance(e, SettingsProblems) else [str(e)]
        _complain(prog, sources.attribute(problems))
        return 2

    async def run() -> None:
        provider = open_provider(settings)
        try:
            await serve_until_stopped(provider, args)
        finally:
            provider.close()

    try:
        asyncio.run(run())
    except ConfigError as e:
        _complain(prog, e.problems)
        return 2
    return 0


def _complain(prog: str, lines: Sequence[str]) -> None:
    for line in lines:
        print(f"{prog}: {line}", file=sys.stderr)
