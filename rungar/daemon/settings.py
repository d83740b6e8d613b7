"""The daemon's own settings file (``rungar serve -c rungar.yaml``), checked at load.

Every relative path (``scale_sets``, ``state_dir``, ``socket``, the secret files,
``events.file``) is relative to the folder of the settings file, never the working directory.
Secrets come from files or the environment, never literals: ``token_path``/``token_env``, or a
GitHub App's ``app_private_key_path``. A world-readable secret file is warned about. Problems
are reported as ``FILE: key: what is wrong``, all at once, exit 2.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rungar.config.paths import resolve_path
from rungar.errors import ConfigError
from rungar.github.network import Network, NetworkError, Trust
from rungar.github.timing import GitHubTiming
from rungar.model.runner_release import RunnerRelease, date_problem, parse_date
from rungar.model.runner_version import parse_runner_version, version_problem
from rungar.placement.version_window import VersionWindow


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GitHubTimingSettings(_Strict):
    """Every wait of the GitHub client and listener (docs/github.md); defaults as documented."""

    error_backoff_first: float = Field(default=1.0, gt=0)
    error_backoff_max: float = Field(default=60.0, gt=0)
    session_recreate_after: int = Field(default=3, ge=1)
    registration_retry_window: float = Field(default=30.0, ge=0)
    registration_retry_first: float = Field(default=1.0, gt=0)
    rate_limit_wait_first: float = Field(default=60.0, gt=0)
    rate_limit_wait_max: float = Field(default=900.0, gt=0)
    retry_first: float = Field(default=1.0, gt=0)
    retry_max: float = Field(default=30.0, gt=0)
    broker_retry_first: float = Field(default=1.0, gt=0)
    broker_retry_max: float = Field(default=8.0, gt=0)
    broker_retry_jitter: float = Field(default=0.25, ge=0, le=1)
    installation_token_refresh_margin: float = Field(default=300.0, ge=0)
    registration_token_refresh_margin: float = Field(default=300.0, ge=0)
    admin_token_refresh_margin: float = Field(default=120.0, ge=0)
    message_queue_token_refresh_margin: float = Field(default=600.0, ge=0)
    runner_list_max_age: float = Field(default=15.0, ge=0)
    registrations_per_minute: float = Field(default=0.0, ge=0)
    registration_pace_margin: float = Field(default=0.02, ge=0, lt=1)
    registration_pace_forget: float = Field(default=3600.0, ge=0)
    registration_pace_relax: float = Field(default=60.0, ge=0)
    registrations_in_flight: int = Field(default=4, ge=0)
    registrations_in_flight_share: float = Field(default=0.02, ge=0, le=1)
    registration_pace_window: float = Field(default=60.0, gt=0)
    app_retry_after: float = Field(default=600.0, ge=0)
    budget_check_interval: float = Field(default=60.0, ge=0)
    http_keepalive_expiry: float = Field(default=5.0, ge=0)

    def value(self) -> GitHubTiming:
        return GitHubTiming(**self.model_dump())


class RunnerVersionSettings(_Strict):
    """GitHub's runner versions (docs/github.md, "Runner versions"): no runner is placed on a
    provider whose runner is below ``minimum``, and a provider whose runner has not caught up
    with the latest release is warned of from ``warn_days`` before GitHub's ``window_days``
    window closes on it."""

    minimum: str = "2.329.0"  # GitHub's refusal floor; its API does not publish it
    # The latest runner release and its date, for when GitHub's API does not name one (a GitHub
    # Enterprise Server without the actions/runner repository): "" = none configured
    latest: str = ""
    latest_released: str = ""
    # How often GitHub's latest release is asked (GET repos/actions/runner/releases/latest,
    # conditional); 0 = never, only the configured one counts
    check_interval: float = Field(default=3600.0, ge=0)
    info_interval: float = Field(default=300.0, gt=0)  # how often each provider's Info is asked
    window_days: float = Field(default=30.0, gt=0)  # GitHub's: a release must be installed within
    warn_days: float = Field(default=7.0, ge=0)  # the warning starts this long before it closes

    @field_validator("minimum", "latest")
    @classmethod
    def _a_version(cls, value: str, info: ValidationInfo) -> str:
        if not value and info.field_name == "latest":
            return ""
        problem = version_problem(value)
        if problem:
            raise ValueError(problem)
        return str(parse_runner_version(value))

    @field_validator("latest_released")
    @classmethod
    def _a_date(cls, value: str) -> str:
        problem = date_problem(value) if value else ""
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _both_or_neither(self) -> RunnerVersionSettings:
        if bool(self.latest) != bool(self.latest_released):
            raise ValueError("latest and latest_released: set both or neither")
        return self

    def configured_release(self) -> RunnerRelease | None:
        """The latest release rungar.yaml names, if it names one."""
        version = parse_runner_version(self.latest)
        published = parse_date(self.latest_released)
        if version is None or published is None:
            return None
        return RunnerRelease(version, published, "configured")

    def window(self) -> VersionWindow:
        return VersionWindow(self.window_days, self.warn_days)


class AppSettings(_Strict):
    """One GitHub App of ``github.apps`` (docs/configuration.md): as the single App's
    ``app_client_id``, ``app_installation_id`` and ``app_private_key_path``."""

    client_id: str = Field(min_length=1)
    installation_id: int = Field(ge=1)
    private_key_path: str = Field(min_length=1)


class GitHubSettings(_Strict):
    url: str
    token_path: str = ""
    token_env: str = ""
    app_client_id: str = ""
    app_installation_id: int = 0
    app_private_key_path: str = ""
    # Several Apps of the organisation, registrations spread over them (docs/github.md, "More
    # than one App"); instead of the app_* keys.
    apps: tuple[AppSettings, ...] = ()
    long_poll_timeout: float = 50.0
    # How GitHub is reached (docs/configuration.md, docs/operating.md "Behind a proxy"): a
    # proxy that takes precedence over HTTPS_PROXY/HTTP_PROXY, its USER:PASSWORD from a file,
    # and a PEM bundle of certificate authorities added to the system's (or, with
    # ca_file_only, trusted alone).
    proxy: str = ""
    proxy_credentials_path: str = ""
    ca_file: str = ""
    ca_file_only: bool = False
    timing: GitHubTimingSettings = GitHubTimingSettings()
    runner_versions: RunnerVersionSettings = RunnerVersionSettings()


class ListenerLimits(_Strict):
    """The bounds every HTTP listener of the daemon keeps (rungar.web.bounded)."""

    header_timeout: float = Field(default=10.0, gt=0)
    body_timeout: float = Field(default=10.0, gt=0)
    idle_timeout: float = Field(default=5.0, gt=0)
    max_connections: int = Field(default=256, ge=1, le=65536)


class MetricsSettings(ListenerLimits):
    listen: str = ""  # empty: no metrics server
    max_connections: int = Field(default=64, ge=1, le=65536)  # scrapers are few


class WebhookSettings(ListenerLimits):
    listen: str = ""  # empty: no webhook receiver
    secret_path: str = ""
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)


class EventsSettings(_Strict):
    file: str = ""  # default: <state_dir>/events.jsonl
    max_count: int = Field(default=10_000, ge=1)
    max_bytes: int = Field(default=16 * 1024 * 1024, ge=65_536)
    max_age: float | None = None


class DaemonSettings(_Strict):
    github: GitHubSettings
    scale_sets: str
    installation: str = ""
    state_dir: str = "/var/lib/rungar"
    socket: str = "/run/rungar/rungar.sock"
    socket_mode: int = 0o660
    metrics: MetricsSettings = MetricsSettings()
    webhook: WebhookSettings = WebhookSettings()
    events: EventsSettings = EventsSettings()
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["auto", "text", "json"] = "auto"
    max_parallel_creates: int = Field(default=64, ge=1, le=4096)
    stop_timeout: float = Field(default=10.0, gt=0)  # docs/commands.md, "Stopping"


def load_settings(path: str) -> DaemonSettings:
    base = Path(path).resolve().parent
    try:
        raw: Any = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError([f"{path}: {e}"]) from e
    if not isinstance(raw, dict):
        raise ConfigError([f"{path}: expected a mapping of settings"])
    try:
        settings = DaemonSettings.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(
            [_validation_problem(path, err["loc"], err["msg"]) for err in e.errors()]
        ) from e
    problems = []
    gh = settings.github
    has_app = bool(gh.app_client_id or gh.app_private_key_path or gh.app_installation_id)
    has_token = bool(gh.token_path or gh.token_env)
    if gh.apps:
        problems.extend(_apps_problems(path, gh, has_app, has_token))
        has_app = True
    elif has_app and has_token:
        problems.append(f"{path}: github: a GitHub App and a token together are refused")
    if not has_app and not has_token:
        problems.append(f"{path}: github: needs token_path, token_env or a GitHub App")
    if (
        has_app
        and not gh.apps
        and not (gh.app_client_id and gh.app_private_key_path and gh.app_installation_id)
    ):
        problems.append(
            f"{path}: github: an App needs app_client_id, app_installation_id and "
            "app_private_key_path"
        )
    if gh.ca_file_only and not gh.ca_file:
        problems.append(f"{_where(path, 'github', 'ca_file_only')}: needs github.ca_file")
    settings = resolve_settings_paths(settings, base)
    if len(settings.socket) > 103:
        problems.append(f"{path}: socket: longer than 103 characters")
    problems.extend(_network_problems(path, settings.github))
    if problems:
        raise ConfigError(problems)
    return settings


def github_network(gh: GitHubSettings, environ: Mapping[str, str] | None = None) -> Network:
    """How this process reaches GitHub: the ``github.*`` keys, then the environment (``environ``,
    by default the process's). Raises :class:`NetworkError`; the CA file is read later, by the
    HTTP client (:func:`rungar.github.http.github_http`)."""
    return Network.from_settings(
        gh.proxy,
        gh.proxy_credentials_path,
        gh.ca_file,
        gh.ca_file_only,
        os.environ if environ is None else environ,
    )


def _network_problems(path: str, gh: GitHubSettings) -> list[str]:
    """The proxy and CA keys checked as the daemon will use them, each problem at its key's
    line and column (the environment's proxy variables are checked when a command starts)."""
    problems = []
    try:
        Network.from_settings(gh.proxy, gh.proxy_credentials_path, "", False, {})
    except NetworkError as e:
        problems.append(f"{_where(path, 'github', e.key)}: {e.reason}")
    if gh.ca_file:
        try:
            Trust(gh.ca_file, gh.ca_file_only).context()
        except NetworkError as e:
            problems.append(f"{_where(path, 'github', e.key)}: {e.reason}")
    return problems


def _validation_problem(path: str, loc: tuple[int | str, ...], msg: str) -> str:
    """A schema problem as ``FILE: key: what``; under ``github.apps``, where it is written
    (``FILE:LINE:COL: github.apps[1].installation_id: …``)."""
    if loc[:2] == ("github", "apps") and len(loc) > 2:
        return f"{where_key(path, loc)}: {msg}"
    return f"{path}: {'.'.join(str(p) for p in loc)}: {msg}"


def _apps_problems(path: str, gh: GitHubSettings, has_app: bool, has_token: bool) -> list[str]:
    """``github.apps`` stands alone (not with the single App's keys nor a token), and names
    each App and each installation once."""
    problems = []
    if has_app:
        problems.append(
            f"{where_key(path, ('github', 'apps'))}: the single App's app_client_id, "
            "app_installation_id and app_private_key_path go with it no more: list that App "
            "under apps"
        )
    if has_token:
        problems.append(
            f"{where_key(path, ('github', 'apps'))}: GitHub Apps and a token together are refused"
        )
    seen: dict[tuple[str, object], int] = {}
    for i, app in enumerate(gh.apps):
        for key, value in (("client_id", app.client_id), ("installation_id", app.installation_id)):
            first = seen.setdefault((key, value), i)
            if first != i:
                problems.append(
                    f"{where_key(path, ('github', 'apps', i, key))}: the same as "
                    f"github.apps[{first}].{key}: each App is listed once"
                )
    return problems


def key_path_text(keys: tuple[int | str, ...]) -> str:
    """``github.apps[1].installation_id`` for ("github", "apps", 1, "installation_id")."""
    text = ""
    for key in keys:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text


def where_key(path: str, keys: tuple[int | str, ...]) -> str:
    """``FILE:LINE:COL: github.apps[1].installation_id``: where the value at ``keys`` (map keys
    and list indexes) is written in the settings file ``path``, or ``FILE: …`` when it cannot
    be found."""
    from rungar.config.problems import Problems
    from rungar.config.yaml_safe import YMap, YNode, YSeq, read_yaml

    shown = key_path_text(keys)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return f"{path}: {shown}"
    node: YNode | None = read_yaml(text, Problems(path))
    for key in keys:  # a key that is missing: where the mapping that lacks it is written
        if isinstance(key, int) and isinstance(node, YSeq) and 0 <= key < len(node.items):
            node = node.items[key]
        elif isinstance(key, str) and isinstance(node, YMap) and key in node.entries:
            node = node.entries[key].value
        else:
            break
    if node is None or node.mark.line <= 0:
        return f"{path}: {shown}"
    return f"{path}:{node.mark.line}:{node.mark.col}: {shown}"


def _where(path: str, section: str, key: str) -> str:
    """``FILE:LINE:COL: section.key``: where the key's value is written, or ``FILE: …`` when
    it cannot be found (written through an alias, say)."""
    from rungar.config.problems import Problems
    from rungar.config.yaml_safe import YMap, read_yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return f"{path}: {section}.{key}"
    tree = read_yaml(text, Problems(path))
    holder = tree.entries.get(section) if isinstance(tree, YMap) else None
    entry = holder.value.entries.get(key) if holder and isinstance(holder.value, YMap) else None
    if entry is None:
        return f"{path}: {section}.{key}"
    mark = entry.value.mark
    return f"{path}:{mark.line}:{mark.col}: {section}.{key}"


# Every key of rungar.yaml that names a file or folder, as (section, key); "" = top level.
PATH_KEYS: tuple[tuple[str, str], ...] = (
    ("", "scale_sets"),
    ("", "state_dir"),
    ("", "socket"),
    ("github", "token_path"),
    ("github", "app_private_key_path"),
    ("github", "proxy_credentials_path"),
    ("github", "ca_file"),
    ("webhook", "secret_path"),
    ("events", "file"),
)


def resolve_settings_paths(settings: DaemonSettings, base: Path) -> DaemonSettings:
    """Every relative path resolved against ``base``, the folder of the settings file, so the
    daemon opens the same files whatever its working directory."""
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, str]] = {}
    for section, key in PATH_KEYS:
        holder = getattr(settings, section) if section else settings
        value = resolve_path(getattr(holder, key), base)
        if section:
            sections.setdefault(section, {})[key] = value
        else:
            top[key] = value
    apps = tuple(
        app.model_copy(update={"private_key_path": resolve_path(app.private_key_path, base)})
        for app in settings.github.apps
    )
    sections.setdefault("github", {})
    for section, values in sections.items():
        update: dict[str, Any] = dict(values)
        if section == "github":
            update["apps"] = apps
        top[section] = getattr(settings, section).model_copy(update=update)
    return settings.model_copy(update=top)


def settings_paths(settings: DaemonSettings) -> list[tuple[str, str]]:
    """``(key, path)`` of every path the settings name and set, for ``validate --verbose``."""
    found = []
    for section, key in PATH_KEYS:
        holder = getattr(settings, section) if section else settings
        value = getattr(holder, key)
        if value:
            found.append((f"{section}.{key}" if section else key, value))
    return found


def read_secret(path: str, warn: list[str]) -> str:
    """A secret from a file; a world-readable file is warned about."""
    mode = os.stat(path).st_mode
    if mode & stat.S_IROTH:
        warn.append(f"a file holding a secret is readable by anyone on the host: {path}")
    return Path(path).read_text().strip()
