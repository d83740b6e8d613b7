"""Relative paths in a configuration file mean "next to this file", wherever the daemon starts.

Every path a user writes in ``rungar.yaml``, ``scale_sets.yaml`` or ``runnerd.toml`` (sockets,
secret files, TLS files, state folders, ``unix:`` provider addresses, a plugin ``command:``
given as a path) is resolved once, when
the file is loaded, against the folder that holds the file. So one file serves daemons started
from any working directory, and ``rungar validate --verbose`` / ``runnerd check-config
--verbose`` can print exactly what will be opened.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rungar.config.model import ProviderConfig

UNIX_PREFIX = "unix:"
# Keys of a provider's own settings that name files (tls: holds the certificate files).
FILE_SUFFIXES = ("_file", "_path")


def base_of(config_file: str | os.PathLike[str]) -> Path:
    """The folder relative paths in ``config_file`` are resolved against."""
    return Path(os.path.abspath(os.fspath(config_file))).parent


def resolve_path(value: str, base: Path) -> str:
    """``value`` made absolute against ``base``; "" (unset) and absolute paths are kept."""
    if not value or os.path.isabs(value):
        return value
    return os.path.normpath(os.path.join(base, value))


def resolve_address(address: str, base: Path) -> str:
    """A ``unix:`` address with a relative path (``unix:runnerd.sock``) as ``unix:///abs``;
    ``unix:/abs`` is written ``unix:///abs``; any other address is kept."""
    if not address.startswith(UNIX_PREFIX) or address.startswith(UNIX_PREFIX + "//"):
        return address
    return UNIX_PREFIX + "//" + resolve_path(address[len(UNIX_PREFIX) :], base)


def _resolve_files(options: Mapping[str, Any], base: Path) -> dict[str, Any]:
    resolved: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, str) and key.endswith(FILE_SUFFIXES):
            resolved[key] = resolve_path(value, base)
        elif key == "tls" and isinstance(value, Mapping):
            resolved[key] = _resolve_files(value, base)
        else:
            resolved[key] = value
    return resolved


def resolve_command(command: tuple[str, ...], base: Path) -> tuple[str, ...]:
    """A plugin ``command:`` whose program is a relative path (``./bin/my-provider``,
    ``bin/my-provider``) with that path resolved against ``base``; a bare name (``python3``)
    is looked up on ``PATH`` as a shell would, so it is kept. Its arguments are the plugin's
    own business and are kept as written."""
    if not command or "/" not in command[0]:
        return command
    return (resolve_path(command[0], base), *command[1:])


def resolve_provider(provider: ProviderConfig, base: Path) -> ProviderConfig:
    """The provider's address, its plugin command and the files its settings name, resolved
    against ``base``."""
    return replace(
        provider,
        address=resolve_address(provider.address, base),
        command=resolve_command(provider.command, base),
        options=_resolve_files(provider.options, base),
    )


def provider_paths(provider: ProviderConfig) -> list[tuple[str, str]]:
    """``(key, resolved path)`` for every path of a provider, for ``validate --verbose``."""
    found: list[tuple[str, str]] = []
    prefix = f"providers.{provider.name}"
    if provider.address.startswith(UNIX_PREFIX):
        found.append((f"{prefix}.address", provider.address))
    if provider.command and os.path.isabs(provider.command[0]):
        found.append((f"{prefix}.command", provider.command[0]))

    def walk(options: Mapping[str, Any], path: str) -> None:
        for key, value in options.items():
            if isinstance(value, str) and value and key.endswith(FILE_SUFFIXES):
                found.append((f"{path}.{key}", value))
            elif key == "tls" and isinstance(value, Mapping):
                walk(value, f"{path}.tls")

    walk(provider.options, prefix)
    return found
