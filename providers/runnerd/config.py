"""runnerd.toml: ``[host]``, ``[sizing]`` and ``[profiles.NAME]`` as frozen values.

docs/admission.md, "Measured admission" (the keys and the config check), and every key of
config/runnerd.example.toml. Every timing constant is a key here with the documented value as its
default, so tests and demos can compress the clock.

The check (:func:`check_budget`) is the documented one: under ``caps`` slots × memory of every
profile with the mirror must fit the slice's MemoryMax; under ``measured`` one runner of each
profile with the mirror must, and the slice must have a MemoryMax. A config that sets
``cpu_overcommit`` is refused when the slice's CPUs cannot be read. Problems name the file, line and
key, all at once. Every relative path of ``[host]`` is relative to the folder of runnerd.toml
(``HOST_PATHS``).
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from rungar.config.paths import base_of, resolve_path
from rungar.config.problems import START, Mark, Problems
from rungar.errors import ConfigError
from rungar.model.runner_version import version_problem
from rungar.model.units import format_bytes, parse_bytes, parse_duration
from runnerd.admission.model import Margin, OverRun, Policy
from runnerd.admission.predict import PredictionRules

GiB = 1024**3
MiB = 1024**2


class RuntimeKind(StrEnum):
    PROCESS = "process"
    DOCKER = "docker"


class Isolation(StrEnum):
    """How the docker runtime isolates a runner's own Docker Engine from the host."""

    SYSBOX = "sysbox"  # runtime sysbox-runc: unprivileged, in its own user namespace
    UNSAFE_DIND = "unsafe-dind"  # runtime runc, privileged: root in it is root on the host


# A profile's ``image_stage`` names a build stage of the runner image; this is its reference.
RUNNER_IMAGE = "ghcr.io/ayagmar/runnerd-runner:{stage}-0.0.20"


@dataclass(frozen=True, slots=True)
class HostConfig:
    slice: str = "runnerd.slice"
    memory_max: int | None = None  # None: read the slice's memory.max
    admission: Policy = Policy.CAPS
    cpu_overcommit: float | None = None  # None: no CPU admission
    cpus: float | None = None  # the slice's CPUs; None: read them
    runtime: RuntimeKind = RuntimeKind.PROCESS  # docker when isolation or image_stage is set
    isolation: Isolation | None = None  # docker only; None: the Engine's default runtime
    allow_unsafe: bool = False  # unsafe-dind needs it, so a copied config cannot turn it on
    runner_image: str = RUNNER_IMAGE  # what a profile's image_stage names a stage of
    # The GitHub Actions runner version of the install the profiles start ("2.329.0"), told to
    # Rungar in Info so it places nothing here once GitHub refuses it; "" = not known.
    runner_version: str = ""
    # The runner install whose bin/Runner.Listener --version is told to Rungar; "" = the folder
    # of the run.sh a process profile's command starts, if any (docs/runnerd.md)
    runner_dir: str = ""
    metrics_listen: str = ""  # host:port for Prometheus metrics; "" = none
    dashboard_listen: str = ""  # host:port for the dashboard (docs/runnerd-dashboard.md); "" = off
    state_dir: str = "/var/lib/runnerd"
    socket: str = ""  # provider gRPC on a unix socket; "" = state_dir/provider.sock
    api_socket: str = ""  # runnerctl's HTTP/JSON API; "" = state_dir/runnerd.sock
    listen: str = ""  # host:port for gRPC over TCP (TLS required)
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""  # client CA: with it, TCP is mutual TLS
    token_file: str = ""
    # Serve TCP clients with neither a client CA nor a token: anyone who reaches the port can
    # start runners. Warned at every start; for a host behind its own authenticating proxy.
    insecure_no_client_auth: bool = False
    history: str = ""  # "" = state_dir/history.db
    cgroup_root: str = "/sys/fs/cgroup"
    proc_root: str = "/proc"
    docker_socket: str = "/var/run/docker.sock"
    mirror_memory: int = 0  # the Docker Hub mirror's cap, when one runs in the slice
    disk_path: str = ""  # "" = state_dir
    disk_reserve: int = 10 * GiB
    disk_per_runner: int = 8 * GiB  # a profile's footprint when it sets no disk
    # Timing (seconds), the documented values by default.
    sample_interval: float = 2.0
    exit_grace: float = 5.0  # a runner whose job completed may exit by itself before it is stopped
    holders_interval: float = 30.0
    fresh_for: float = 6.0  # "the last few seconds": three samples
    cpu_starvation: float = 120.0
    cpu_wait_forget: float = 300.0  # a scale set that stops asking has left the queue
    held_window: float = 86400.0  # refusals kept to charge the jobs they held back
    hold_for: float = 7 * 86400.0
    over_run: OverRun = OverRun.RECENT  # what a run past its reservation holds (docs/admission.md)
    history_window: float = 30 * 86400.0
    reread: float = 60.0
    dashboard_recent: float = 300.0  # the overview charts each runner's last 5 minutes
    dashboard_stream: float = 300.0  # a live page's stream ends after this; it reconnects at once
    # Thresholds.
    high_water: float = 0.90
    stall_enter: float = 5.0
    stall_leave: float = 1.0
    margin_min: int = 2 * GiB
    margin_share: int = 16
    holder_min: int = 512 * MiB

    def socket_path(self) -> str:
        return self.socket or str(Path(self.state_dir) / "provider.sock")

    def api_socket_path(self) -> str:
        return self.api_socket or str(Path(self.state_dir) / "runnerd.sock")

    def history_path(self) -> str:
        return self.history or str(Path(self.state_dir) / "history.db")

    def disk_path_or_state(self) -> str:
        return self.disk_path or self.state_dir


@dataclass(frozen=True, slots=True)
class SizingConfig:
    margin: Margin = field(default_factory=Margin)
    min_jobs: int = 10
    auto: bool = False
    interval: float = 3600.0
    raise_interval: float = 3600.0
    max_step: float = 25.0


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    cpus: float
    memory: int
    slots: int
    image: str = ""
    image_stage: str = ""  # a build stage of [host] runner_image; image is resolved from it
    command: tuple[str, ...] = ()
    disk: int = 0
    min_memory: int | None = None
    max_memory: int | None = None
    max_slots: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunnerdConfig:
    host: HostConfig
    sizing: SizingConfig
    profiles: Mapping[str, Profile]
    file: str = "runnerd.toml"


def prediction_rules(config: RunnerdConfig) -> PredictionRules:
    """What measured admission's predictions read of the config: [sizing] margin and
    min_jobs, [host] hold_for and over_run."""
    return PredictionRules(
        config.sizing.margin, config.sizing.min_jobs, config.host.hold_for, config.host.over_run
    )


HOST_SIZES = ("memory_max", "mirror_memory", "disk_reserve", "disk_per_runner", "margin_min")
HOST_SIZES_EXTRA = ("holder_min",)
HOST_DURATIONS = (
    "sample_interval",
    "exit_grace",
    "holders_interval",
    "fresh_for",
    "cpu_starvation",
    "cpu_wait_forget",
    "held_window",
    "hold_for",
    "history_window",
    "reread",
    "dashboard_recent",
    "dashboard_stream",
)
HOST_STRINGS = (
    "slice",
    "state_dir",
    "socket",
    "api_socket",
    "listen",
    "tls_cert",
    "tls_key",
    "tls_ca",
    "token_file",
    "history",
    "cgroup_root",
    "proc_root",
    "docker_socket",
    "disk_path",
    "runner_image",
    "runner_version",
    "runner_dir",
    "metrics_listen",
    "dashboard_listen",
)
HOST_FLOATS = ("cpu_overcommit", "cpus", "high_water", "stall_enter", "stall_leave")
PROFILE_KEYS = {
    "image",
    "image_stage",
    "command",
    "cpus",
    "memory",
    "slots",
    "disk",
    "min_memory",
    "max_memory",
    "max_slots",
    "env",
}


class _Lines:
    """Finds the line of a table or a key in the TOML text, for problems that point at it."""

    def __init__(self, text: str) -> None:
        self._lines = text.splitlines()

    def of(self, table: str, key: str = "") -> Mark:
        header = re.compile(r"^\s*\[\s*" + re.escape(table) + r"\s*\]")
        start = next((i for i, line in enumerate(self._lines) if header.match(line)), None)
        if start is None:
            return START
        if not key:
            return Mark(start + 1, 1)
        pattern = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
        for i in range(start + 1, len(self._lines)):
            if self._lines[i].lstrip().startswith("["):
                break
            if pattern.match(self._lines[i]):
                return Mark(i + 1, self._lines[i].index(key) + 1)
        return Mark(start + 1, 1)


def load_config(path: str | Path) -> RunnerdConfig:
    """Read and parse ``path``; raises ``ConfigError`` listing every problem."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError([f"{path}: cannot read: {e.strerror}"]) from e
    return parse_config(text, str(path))


def parse_config(text: str, file: str = "runnerd.toml") -> RunnerdConfig:
    problems = Problems(file)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError([f"{file}: {e}"]) from e
    lines = _Lines(text)
    for key in data:
        if key not in ("host", "sizing", "profiles"):
            problems.add(
                START, key, "unknown section; runnerd.toml has [host], [sizing], [profiles.NAME]"
            )
    host = _parse_host(data.get("host", {}), problems, lines)
    sizing = _parse_sizing(data.get("sizing", {}), problems, lines)
    profiles: dict[str, Profile] = {}
    raw_profiles = data.get("profiles", {})
    if not isinstance(raw_profiles, dict):
        problems.add(START, "profiles", "must be tables [profiles.NAME]")
    else:
        for name, raw in raw_profiles.items():
            profile = _parse_profile(name, raw, problems, lines)
            if profile is not None:
                if profile.image_stage:
                    stage_image = host.runner_image.replace("{stage}", profile.image_stage)
                    profile = replace(profile, image=stage_image)
                profiles[name] = profile
    raw_host = data.get("host", {})
    runtime_set = isinstance(raw_host, dict) and "runtime" in raw_host
    host = _runtime_for(host, profiles, runtime_set, problems, lines)
    problems.raise_if_any()
    host = resolve_host_paths(host, base_of(file))
    return RunnerdConfig(host, sizing, profiles, file)


# [host] keys naming a file or folder: a relative one is relative to runnerd.toml's folder.
HOST_PATHS = (
    "runner_dir",
    "state_dir",
    "socket",
    "api_socket",
    "tls_cert",
    "tls_key",
    "tls_ca",
    "token_file",
    "history",
    "cgroup_root",
    "proc_root",
    "docker_socket",
    "disk_path",
)


def resolve_host_paths(host: HostConfig, base: Path) -> HostConfig:
    """Every relative path of ``[host]`` resolved against ``base`` (the file's folder), so
    runnerd opens the same files whatever its working directory."""
    resolved: dict[str, Any] = {key: resolve_path(getattr(host, key), base) for key in HOST_PATHS}
    return replace(host, **resolved)


def host_paths(host: HostConfig) -> list[tuple[str, str]]:
    """``(key, path)`` of every path runnerd will open, defaults filled in, for
    ``check-config --verbose``."""
    found = [(f"host.{key}", str(getattr(host, key))) for key in HOST_PATHS]
    defaults = {
        "host.socket": host.socket_path(),
        "host.api_socket": host.api_socket_path(),
        "host.history": host.history_path(),
        "host.disk_path": host.disk_path_or_state(),
    }
    return [(key, defaults.get(key, value)) for key, value in found if defaults.get(key, value)]


def _parse_host(raw: Any, problems: Problems, lines: _Lines) -> HostConfig:
    if not isinstance(raw, dict):
        problems.add(START, "host", "must be a table")
        return HostConfig()
    values: dict[str, Any] = {}
    known = set(HostConfig.__dataclass_fields__)
    for key, value in raw.items():
        mark = lines.of("host", key)
        path = f"host.{key}"
        if key not in known:
            problems.add(mark, path, "unknown key")
            continue
        try:
            if key in HOST_SIZES or key in HOST_SIZES_EXTRA:
                values[key] = None if value == "max" else parse_bytes(value)
            elif key in HOST_DURATIONS:
                values[key] = _positive(parse_duration(value))
            elif key in HOST_STRINGS:
                values[key] = _string(value)
            elif key in HOST_FLOATS:
                values[key] = _positive(_number(value))
            elif key == "admission":
                values[key] = Policy(value)
            elif key == "over_run":
                values[key] = OverRun(value)
            elif key == "runtime":
                values[key] = RuntimeKind(value)
            elif key == "isolation":
                values[key] = Isolation(value)
            elif key in ("allow_unsafe", "insecure_no_client_auth"):
                if not isinstance(value, bool):
                    raise ValueError(f"{value!r} is not true or false")
                values[key] = value
            elif key == "margin_share":
                values[key] = _count(value, least=1)
        except ValueError as e:
            problems.add(mark, path, _sentence(key, e))
    for key in ("metrics_listen", "dashboard_listen"):
        _check_http_listen(key, values, problems, lines)
    if "listen" in values and values["listen"] and not values.get("tls_cert"):
        problems.add(
            lines.of("host", "listen"), "host.listen", "gRPC over TCP needs tls_cert and tls_key"
        )
    elif (
        values.get("listen")
        and not values.get("tls_ca")
        and not values.get("token_file")
        and not values.get("insecure_no_client_auth")
    ):
        problems.add(
            lines.of("host", "listen"),
            "host.listen",
            "gRPC over TCP needs client authentication: set tls_ca (mutual TLS) or token_file "
            "(a bearer token); without either anyone who reaches the port can start runners "
            "(insecure_no_client_auth = true accepts that, warned at every start)",
        )
    if values.get("isolation") is Isolation.UNSAFE_DIND and not values.get("allow_unsafe"):
        problems.add(
            lines.of("host", "isolation"),
            "host.isolation",
            '"unsafe-dind" runs each runner privileged (root in it is root on the host); set '
            "allow_unsafe = true to mean it",
        )
    runner_version = values.get("runner_version")
    if runner_version is not None and version_problem(runner_version):
        mark = lines.of("host", "runner_version")
        problems.add(mark, "host.runner_version", version_problem(runner_version))
    runner_image = values.get("runner_image")
    if runner_image is not None and "{stage}" not in runner_image:
        problems.add(
            lines.of("host", "runner_image"),
            "host.runner_image",
            "must hold {stage}, where a profile's image_stage goes",
        )
    return HostConfig(**values)


def _check_http_listen(key: str, values: dict[str, Any], problems: Problems, lines: _Lines) -> None:
    """An HTTP listener of runnerd's (metrics, dashboard): plain HTTP on loopback only; beyond
    it TLS, and then tls_ca or token_file decides who may use it. The dashboard can write the
    config, so beyond loopback it also needs one of them."""
    address = values.get(key)
    if not address:
        return
    mark = lines.of("host", key)
    try:
        split_address(address)
    except ValueError as e:
        problems.add(mark, f"host.{key}", str(e))
        return
    if is_loopback(address):
        return
    if not (values.get("tls_cert") and values.get("tls_key")):
        problems.add(
            mark,
            f"host.{key}",
            "beyond loopback needs tls_cert and tls_key, as listen does (then tls_ca "
            "or token_file decides who may read it)",
        )
    elif key == "dashboard_listen" and not (values.get("tls_ca") or values.get("token_file")):
        problems.add(
            mark,
            f"host.{key}",
            "beyond loopback needs tls_ca (client certificates) or token_file (a bearer "
            "token): the dashboard can change runnerd.toml",
        )


def _runtime_for(
    host: HostConfig,
    profiles: Mapping[str, Profile],
    runtime_set: bool,
    problems: Problems,
    lines: _Lines,
) -> HostConfig:
    """isolation and image_stage are the docker runtime's: a config that sets either without
    ``runtime`` runs it; ``runtime = "process"`` cannot apply them and is refused."""
    staged = [p.name for p in profiles.values() if p.image_stage]
    if host.isolation is None and not staged:
        return host
    if not runtime_set:
        return replace(host, runtime=RuntimeKind.DOCKER)
    if host.runtime is RuntimeKind.PROCESS:
        if host.isolation is not None:
            problems.add(
                lines.of("host", "isolation"),
                "host.isolation",
                f'the process runtime runs no containers, so it cannot apply "{host.isolation}"; '
                'remove runtime = "process" (isolation runs the docker runtime) or isolation',
            )
        for name in staged:
            table = f"profiles.{name}"
            problems.add(
                lines.of(table, "image_stage"),
                f"{table}.image_stage",
                "names a stage of the runner image, which only the docker runtime runs; remove "
                'runtime = "process" or use command',
            )
    return host


def _parse_sizing(raw: Any, problems: Problems, lines: _Lines) -> SizingConfig:
    if not isinstance(raw, dict):
        problems.add(START, "sizing", "must be a table")
        return SizingConfig()
    values: dict[str, Any] = {}
    for key, value in raw.items():
        mark = lines.of("sizing", key)
        path = f"sizing.{key}"
        try:
            if key == "margin":
                if isinstance(value, str):
                    values[key] = Margin(0.0, parse_bytes(value))
                else:
                    values[key] = Margin(_positive(_number(value)), 0)
            elif key == "min_jobs":
                values[key] = _count(value, least=1)
            elif key == "auto":
                if not isinstance(value, bool):
                    raise ValueError(f"{value!r} is not true or false")
                values[key] = value
            elif key in ("interval", "raise_interval"):
                values[key] = _positive(parse_duration(value))
            elif key == "max_step":
                values[key] = _positive(_number(value))
            elif key == "page_cache_room":
                values[key] = parse_bytes(value)
            else:
                problems.add(mark, path, "unknown key")
        except ValueError as e:
            problems.add(mark, path, _sentence(key, e))
    room = values.pop("page_cache_room", None)
    if room is not None:
        values["margin"] = replace(values.get("margin", Margin()), room=room)
    return SizingConfig(**values)


def _parse_profile(name: str, raw: Any, problems: Problems, lines: _Lines) -> Profile | None:
    table = f"profiles.{name}"
    if not isinstance(raw, dict):
        problems.add(lines.of(table), table, "must be a table")
        return None
    values: dict[str, Any] = {"name": name}
    for key, value in raw.items():
        mark = lines.of(table, key)
        path = f"{table}.{key}"
        try:
            if key not in PROFILE_KEYS:
                raise ValueError("unknown key")
            if key in ("memory", "disk", "min_memory", "max_memory"):
                values[key] = parse_bytes(value)
            elif key == "cpus":
                values[key] = _positive(_number(value))
            elif key in ("slots", "max_slots"):
                values[key] = _count(value, least=1)
            elif key in ("image", "image_stage"):
                values[key] = _string(value)
                if not values[key]:
                    raise ValueError("must not be empty")
                if key == "image_stage" and not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", value):
                    raise ValueError(
                        f"{value!r} is not a stage name (a build stage of the runner image, "
                        "such as node or jvm, not an image reference)"
                    )
            elif key == "command":
                values[key] = _command(value)
            elif key == "env":
                if not isinstance(value, dict) or not all(
                    isinstance(v, str) for v in value.values()
                ):
                    raise ValueError("must be a table of strings")
                values[key] = dict(value)
        except ValueError as e:
            problems.add(mark, path, _sentence(key, e))
    if "image" in raw and "image_stage" in raw:
        problems.add(
            lines.of(table, "image_stage"),
            f"{table}.image_stage",
            "set image or image_stage, not both",
        )
    for required in ("cpus", "memory", "slots"):
        if required not in raw:
            problems.add(lines.of(table), f"{table}.{required}", "is required")
    if any(k not in values for k in ("cpus", "memory", "slots")):
        return None
    if values["memory"] <= 0:
        problems.add(lines.of(table, "memory"), f"{table}.memory", "must be more than 0")
    lo, hi = values.get("min_memory"), values.get("max_memory")
    if lo is not None and hi is not None and lo > hi:
        problems.add(
            lines.of(table, "min_memory"), f"{table}.min_memory", "is more than max_memory"
        )
    return Profile(**values)


def check_budget(
    config: RunnerdConfig,
    memory_max: int | None,
    slice_cpus: float | None,
    text: str = "",
) -> None:
    """The config check against the slice; raises ``ConfigError`` and changes nothing."""
    problems = Problems(config.file)
    lines = _Lines(text)
    host = config.host
    mirror = host.mirror_memory
    with_mirror = f" with the {format_bytes(mirror)} mirror" if mirror else ""
    if host.admission is Policy.CAPS and memory_max is not None:
        total = mirror + sum(p.slots * p.memory for p in config.profiles.values())
        if total > memory_max:
            parts = ", ".join(
                f"{p.name} {p.slots} × {format_bytes(p.memory)}" for p in config.profiles.values()
            )
            problems.add(
                lines.of("host", "admission"),
                "profiles",
                f"slots × memory ({parts}){with_mirror} take {format_bytes(total)}, more than the "
                f"slice's MemoryMax of {format_bytes(memory_max)}; lower slots or memory, or set "
                'admission = "measured"',
            )
    if host.admission is Policy.MEASURED:
        if memory_max is None:
            problems.add(
                lines.of("host", "admission"),
                "host.admission",
                f'"measured" needs a MemoryMax on {host.slice}; set one or host.memory_max',
            )
        else:
            for p in config.profiles.values():
                if p.memory + mirror > memory_max:
                    table = f"profiles.{p.name}"
                    problems.add(
                        lines.of(table, "memory"),
                        f"{table}.memory",
                        f"one runner of {format_bytes(p.memory)}{with_mirror} does not fit the "
                        f"slice's MemoryMax of {format_bytes(memory_max)}",
                    )
    if host.cpu_overcommit is not None and slice_cpus is None:
        problems.add(
            lines.of("host", "cpu_overcommit"),
            "host.cpu_overcommit",
            f"needs the slice's CPUs, which could not be read for {host.slice}; set host.cpus",
        )
    problems.raise_if_any()


def is_loopback(address: str) -> bool:
    host = split_address(address)[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:9100`` for IPv6); a bare port binds loopback."""
    host, sep, port = address.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", address
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) < 65536:  # 0: the system picks one
        raise ValueError(f"{address!r} is not host:port")
    return host, int(port)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not a number")
    return float(value)


def _positive(value: float) -> float:
    if value <= 0:
        raise ValueError(f"{value:g} must be more than 0")
    return value


def _count(value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{value!r} must be a whole number of at least {least}")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a string")
    return value


def _command(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        import shlex

        return tuple(shlex.split(value))
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError("must be a string or a list of strings")


def _sentence(key: str, error: ValueError) -> str:
    text = str(error)
    if key in ("admission",):
        return f"{text}; use caps or measured"
    if key == "over_run":
        return f"{text}; use recent or window"
    if key == "runtime":
        return f"{text}; use process or docker"
    if key == "isolation":
        return f"{text}; use sysbox or unsafe-dind"
    return text
