"""The provider types whose plugin ships with Rungar: ``type: gcp`` and ``type: aws``.

An entry of either type with neither ``address`` nor ``command`` is served by the shipped
executable (``rungar-provider-gcp``, ``rungar-provider-aws``), started as any ``command:``
plugin is and handed the entry's keys. It is looked for beside the running ``rungar`` first
(the same installation's scripts), then beside the Python running it; when neither holds it
(a source checkout run as ``python -m``), the plugin's module is run by the same Python.
``command:`` still overrides; ``type: runnerd`` is a host of its own and always needs an
``address``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# type -> (executable, module run with ``python -m`` when the executable is not found)
SHIPPED: dict[str, tuple[str, str]] = {
    "gcp": ("rungar-provider-gcp", "rungar_gcp.server"),
    "aws": ("rungar-provider-aws", "rungar_aws.server"),
}


def is_shipped(provider_type: str) -> bool:
    return provider_type in SHIPPED


def _folders(argv0: str, executable: str) -> list[Path]:
    folders: list[Path] = []
    if argv0 and Path(argv0).name.startswith("rungar"):
        folders.append(Path(os.path.abspath(argv0)).parent)  # not resolved: a venv's bin/
    if executable:
        folders.append(Path(os.path.abspath(executable)).parent)
    return folders


def shipped_command(
    provider_type: str, argv0: str | None = None, executable: str | None = None
) -> tuple[str, ...]:
    """The command that starts ``provider_type``'s shipped plugin (KeyError if none ships)."""
    program, module = SHIPPED[provider_type]
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    for folder in _folders(argv0, executable):
        candidate = folder / program
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return (str(candidate),)
    return (executable or "python3", "-m", module)
