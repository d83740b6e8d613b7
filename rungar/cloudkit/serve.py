"""A cloud provider as a process: settings file, ``--listen`` or plugin socket, exit codes
(ARCHITECTURE §1, §6).

``rungar-provider-gcp`` and ``rungar-provider-aws`` differ only in how they parse their
settings and open their provider, so both are :func:`run_provider_server`. Started by Rungar
as a plugin (``RUNGAR_PLUGIN_SOCKET`` set) a provider serves on that socket; otherwise
``--listen`` names a ``unix:///path`` or, with TLS, a ``host:port``. Exit codes: 0 stopped,
2 configuration or usage error. ``rungar.rpc`` (and with it grpc) is imported only when the
provider is served, and the cloud SDK only when ``open_provider`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from rungar.errors import ConfigError
from rungar.model.provider import Provider

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


def build_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", required=True, help="settings file (.yaml or .toml)")
    parser.add_argument("--listen", default="", help="unix:///path or host:port (needs --tls-*)")
    parser.add_argument("--tls-cert", default="", help="server certificate (PEM)")
    parser.add_argument("--tls-key", default="", help="server key (PEM)")
    parser.add_argument("--tls-client-ca", default="", help="CA of client certificates (mTLS)")
    parser.add_argument("--token-file", default="", help="file holding a bearer token")
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
    server = await serve(provider, args.listen, tls, token)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop(5.0)


def run_provider_server(
    prog: str,
    description: str,
    parse_settings: Callable[[Mapping[str, Any]], SettingsT],
    open_provider: Callable[[SettingsT], ClosableProvider],
    argv: Sequence[str] | None = None,
) -> int:
    """Parse the settings file, then serve the provider until stopped; the exit code.

    ``parse_settings`` raises ``ValueError`` listing every problem of the settings.
    """
    args = build_parser(prog, description).parse_args(argv)
    try:
        settings = parse_settings(read_settings_file(args.config))
    except ConfigError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"{prog}: {args.config}: {e}", file=sys.stderr)
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
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    return 0
