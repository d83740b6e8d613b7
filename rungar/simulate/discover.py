"""What ``rungar simulate`` finds by itself from a fleet's own files, so replaying the demo's (or
a daemon's) history needs no models file or ``--scale-set`` mapping (docs/simulate.md, "From
a fleet's own files").

Given a folder (``rungar demo --keep``'s), a daemon's settings (``rungar serve -c``'s
``rungar.yaml``, whose ``scale_sets:`` names the file) or a ``scale_sets.yaml``:

- each ``type: runnerd`` provider's ``runnerd.toml``: ``NAME/runnerd.toml`` beside the
  scale_sets.yaml, or beside the socket of a ``unix://`` address; it is the provider's model,
  and its job history (``[host] history``) is replayed when it exists;
- every other provider is a cloud at its ``price_per_hour``;
- each runnerd profile a single scale set runs in maps the history's jobs of that profile to it.

Anything the user gives (``--history``, ``--models``, ``--scale-set``) wins over what is found.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from rungar.config.loader import load_scale_sets
from rungar.config.model import ScaleSetsFile
from rungar.errors import ConfigError
from rungar.simulate.models import RUNNERD_BOOT, Models, ProviderModel


@dataclass(frozen=True, slots=True)
class Found:
    config: str  # the scale_sets.yaml to replay
    histories: tuple[str, ...]  # the runnerd hosts' job histories that exist
    models: Models  # the runnerd hosts and priced clouds, and the profile mapping
    lines: tuple[str, ...]  # what was found, one sentence each, for the user


def scale_sets_path(given: str) -> str:
    """The scale_sets.yaml that ``given`` (a folder, a daemon's settings or the file) names."""
    path = Path(given)
    if path.is_dir():
        found = path / "scale_sets.yaml"
        if not found.exists():
            raise ConfigError([f"{path}: no scale_sets.yaml in this folder"])
        return str(found)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError([f"{path}: cannot be read: {e.strerror or e}"]) from None
    except yaml.YAMLError:
        return str(path)  # the loader names the problem, with its line
    if isinstance(data, dict) and isinstance(data.get("scale_sets"), str):
        return str((path.parent / data["scale_sets"]).resolve())  # a daemon's settings
    return str(path)


def runnerd_toml(name: str, address: str, folder: Path) -> Path | None:
    """Where a runnerd provider's runnerd.toml is on this machine, if it is."""
    candidates = [folder / name / "runnerd.toml"]
    if address.startswith("unix://"):
        candidates.append(Path(address[len("unix://") :]).parent / "runnerd.toml")
    return next((c for c in candidates if c.is_file()), None)


def profile_mapping(config: ScaleSetsFile) -> dict[str, str]:
    """Each runnerd profile that exactly one scale set runs in -> that scale set."""
    users: dict[str, set[str]] = {}
    for scale_set in config.scale_sets:
        for provider in scale_set.providers:
            profile = provider.runner.get("profile")
            if isinstance(profile, str) and profile:
                users.setdefault(profile, set()).add(scale_set.name)
    return {p: next(iter(names)) for p, names in users.items() if len(names) == 1}


def discover(given: str) -> Found:
    """Everything ``rungar simulate`` can find from ``given``; raises ConfigError naming the
    file when the scale_sets.yaml is missing or wrong."""
    from runnerd.config import load_config

    config_path = scale_sets_path(given)
    config = load_scale_sets(config_path)
    folder = Path(config_path).parent
    providers: dict[str, ProviderModel] = {}
    histories: list[str] = []
    lines: list[str] = []
    for provider in config.providers:
        if provider.type != "runnerd":
            if provider.price_per_hour:
                providers[provider.name] = ProviderModel(
                    provider.name, price_per_hour=provider.price_per_hour
                )
            continue
        toml = runnerd_toml(provider.name, provider.address, folder)
        if toml is None:
            continue
        providers[provider.name] = ProviderModel(
            provider.name, toml.read_text(), str(toml), boot=RUNNERD_BOOT
        )
        try:
            history = Path(load_config(toml).host.history_path())
        except ConfigError as e:  # the model still stands; runnerd's own check names it later
            lines.append(f"{provider.name}: {toml}, whose history is not known: {e.problems[0]}")
            continue
        if history.exists():
            histories.append(str(history))
            lines.append(f"{provider.name}: {toml}, its history {history}")
        else:
            lines.append(f"{provider.name}: {toml} (no job history yet)")
    mapping = profile_mapping(config)
    if mapping:
        pairs = ", ".join(f"{p} -> {s}" for p, s in sorted(mapping.items()))
        lines.append(f"profiles to scale sets: {pairs}")
    return Found(config_path, tuple(histories), Models(providers, mapping), tuple(lines))
