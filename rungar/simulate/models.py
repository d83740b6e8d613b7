"""The models file of ``rungar simulate``: what each provider of the fleet is like.

A provider is a runnerd host, read from its ``runnerd.toml`` (profiles, slots, MemoryMax,
admission), or a cloud with an optional quota of machines, a boot time and a price per hour.
Any provider may also refuse on a script or stop answering for a window. Times in windows
count from the first job of the history::

    providers:
      host1:
        runnerd: ../03-hosts-then-cloud/runnerd.toml   # relative to this file
        vars: {NAME: host1, MEMORY_MAX: 512M}          # fills ${NAME} placeholders in it
        boot: 5s                                       # create to connected; default 5s
      aws:
        cloud: {quota: 20, boot: 45s, price_per_hour: 0.0416}
        refusals:                                      # refuse every create in the window
          - {from: 2d, until: 2d6h, kind: full, message: InsufficientInstanceCapacity}
        outages:                                       # answer nothing in the window
          - {from: 5d, until: 5d1h}
    scale_sets: {jvm: ci, node: ci}                    # the history's labels -> scale sets

A provider the file does not name is a cloud without quota, booting in 60 s, free; a runnerd
provider must be named. Problems name the file, line and key, all at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rungar.errors import ConfigError
from rungar.model.machine import RefusalKind
from rungar.model.units import parse_duration

RUNNERD_BOOT = 5.0
CLOUD_BOOT = 60.0


@dataclass(frozen=True, slots=True)
class Window:
    start: float  # seconds after the first job
    end: float
    kind: RefusalKind = RefusalKind.FULL
    message: str = ""

    def covers(self, offset: float) -> bool:
        return self.start <= offset < self.end


@dataclass(frozen=True, slots=True)
class ProviderModel:
    name: str
    runnerd_toml: str = ""  # the runnerd.toml's text, placeholders filled; "" for a cloud
    runnerd_file: str = ""
    quota: int = 0  # machines; 0: no quota
    boot: float = CLOUD_BOOT
    price_per_hour: float = 0.0
    refusals: tuple[Window, ...] = ()
    outages: tuple[Window, ...] = ()

    @property
    def is_runnerd(self) -> bool:
        return bool(self.runnerd_toml)


@dataclass(frozen=True, slots=True)
class Models:
    providers: dict[str, ProviderModel] = field(default_factory=dict)
    scale_sets: dict[str, str] = field(default_factory=dict)

    def of(self, name: str) -> ProviderModel:
        return self.providers.get(name) or ProviderModel(name)


class _Reader:
    """Walks the composed YAML so every problem can name its line."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[str] = []

    def add(self, node: yaml.Node, path: str, message: str) -> None:
        self.problems.append(f"{self.file}:{node.start_mark.line + 1}: {path}: {message}")

    def mapping(self, node: yaml.Node, path: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            self.add(node, path, "must be a mapping")
            return {}
        return {str(k.value): (k, v) for k, v in node.value}

    def scalar(self, node: yaml.Node, path: str) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            self.add(node, path, "must be a single value")
            return None
        return yaml.safe_load(yaml.serialize(node))

    def duration(self, node: yaml.Node, path: str) -> float:
        try:
            value = parse_duration(self.scalar(node, path))
        except ValueError as e:
            self.add(node, path, str(e))
            return 0.0
        if value < 0:
            self.add(node, path, "must not be negative")
        return value

    def number(self, node: yaml.Node, path: str, *, integer: bool = False) -> float:
        value = self.scalar(node, path)
        ok = isinstance(value, int) if integer else isinstance(value, int | float)
        if not ok or isinstance(value, bool) or value < 0:
            kind = "a whole number" if integer else "a number"
            self.add(node, path, f"must be {kind}, at least 0")
            return 0
        return float(value)

    def unknown(
        self, keys: dict[str, tuple[yaml.Node, yaml.Node]], known: set[str], path: str
    ) -> None:
        for key, (knode, _) in keys.items():
            if key not in known:
                self.add(knode, f"{path}.{key}", f"unknown key; known: {', '.join(sorted(known))}")


def load_models(path: str) -> Models:
    """Read the models file; raises ConfigError listing every problem."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError([f"{path}: cannot be read: {e.strerror or e}"]) from None
    return parse_models(text, path)


def parse_models(text: str, file: str) -> Models:
    reader = _Reader(file)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        raise ConfigError([f"{file}: not YAML: {e}"]) from None
    if root is None:
        return Models()
    top = reader.mapping(root, "(top)")
    reader.unknown(top, {"providers", "scale_sets"}, "(top)")
    providers: dict[str, ProviderModel] = {}
    if "providers" in top:
        for name, (_, node) in reader.mapping(top["providers"][1], "providers").items():
            providers[name] = _provider(reader, name, node, Path(file).parent)
    scale_sets: dict[str, str] = {}
    if "scale_sets" in top:
        for label, (_, node) in reader.mapping(top["scale_sets"][1], "scale_sets").items():
            scale_sets[label] = str(reader.scalar(node, f"scale_sets.{label}"))
    if reader.problems:
        raise ConfigError(reader.problems)
    return Models(providers, scale_sets)


def _provider(reader: _Reader, name: str, node: yaml.Node, folder: Path) -> ProviderModel:
    path = f"providers.{name}"
    keys = reader.mapping(node, path)
    reader.unknown(keys, {"runnerd", "vars", "cloud", "boot", "refusals", "outages"}, path)
    model = ProviderModel(name)
    if "runnerd" in keys and "cloud" in keys:
        reader.add(node, path, "is a runnerd host or a cloud, not both")
    if "runnerd" in keys:
        _, vnode = keys["runnerd"]
        variables = {}
        if "vars" in keys:
            for var, (_, v) in reader.mapping(keys["vars"][1], f"{path}.vars").items():
                variables[var] = str(reader.scalar(v, f"{path}.vars.{var}"))
        toml_path = folder / str(reader.scalar(vnode, f"{path}.runnerd"))
        try:
            raw = toml_path.read_text()
        except OSError as e:
            reader.add(vnode, f"{path}.runnerd", f"{toml_path}: cannot be read: {e.strerror}")
            raw = ""
        filled = _fill(raw, variables)
        model = ProviderModel(name, filled, str(toml_path), boot=RUNNERD_BOOT)
    if "cloud" in keys:
        cloud = reader.mapping(keys["cloud"][1], f"{path}.cloud")
        reader.unknown(cloud, {"quota", "boot", "price_per_hour"}, f"{path}.cloud")
        quota = (
            reader.number(cloud["quota"][1], f"{path}.cloud.quota", integer=True)
            if "quota" in cloud
            else 0
        )
        boot = (
            reader.duration(cloud["boot"][1], f"{path}.cloud.boot")
            if "boot" in cloud
            else CLOUD_BOOT
        )
        price = (
            reader.number(cloud["price_per_hour"][1], f"{path}.cloud.price_per_hour")
            if "price_per_hour" in cloud
            else 0.0
        )
        model = ProviderModel(name, quota=int(quota), boot=boot, price_per_hour=price)
    boot = reader.duration(keys["boot"][1], f"{path}.boot") if "boot" in keys else model.boot
    refusals = _windows(reader, keys, "refusals", path, refusal=True)
    outages = _windows(reader, keys, "outages", path, refusal=False)
    return ProviderModel(
        name,
        model.runnerd_toml,
        model.runnerd_file,
        model.quota,
        boot,
        model.price_per_hour,
        refusals,
        outages,
    )


def _windows(
    reader: _Reader,
    keys: dict[str, tuple[yaml.Node, yaml.Node]],
    key: str,
    path: str,
    *,
    refusal: bool,
) -> tuple[Window, ...]:
    if key not in keys:
        return ()
    node = keys[key][1]
    if not isinstance(node, yaml.SequenceNode):
        reader.add(node, f"{path}.{key}", "must be a list")
        return ()
    windows = []
    for i, item in enumerate(node.value):
        where = f"{path}.{key}[{i}]"
        entry = reader.mapping(item, where)
        known = {"from", "until", "kind", "message"} if refusal else {"from", "until"}
        reader.unknown(entry, known, where)
        if "from" not in entry or "until" not in entry:
            reader.add(item, where, "needs from and until")
            continue
        start = reader.duration(entry["from"][1], f"{where}.from")
        end = reader.duration(entry["until"][1], f"{where}.until")
        if end <= start:
            reader.add(entry["until"][1], f"{where}.until", "must come after from")
        kind = RefusalKind.FULL
        if "kind" in entry:
            value = str(reader.scalar(entry["kind"][1], f"{where}.kind"))
            try:
                kind = RefusalKind(value)
            except ValueError:
                reader.add(entry["kind"][1], f"{where}.kind", "must be full, failed or invalid")
        message = (
            str(reader.scalar(entry["message"][1], f"{where}.message"))
            if "message" in entry
            else ""
        )
        windows.append(Window(start, end, kind, message or f"scripted {kind.value} refusal"))
    return tuple(windows)


_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _fill(text: str, variables: dict[str, str]) -> str:
    """``text`` with ``${NAME}`` filled from ``variables``; one not given reads ``simulated``
    (paths and commands mean nothing here; a size left so is named by runnerd's own check)."""
    return _PLACEHOLDER.sub(lambda m: variables.get(m.group(1), "simulated"), text)
