"""The checks of ``rungar doctor``: each gives ``ok``, ``warn`` or ``fail`` with what to do.

They read the daemon's two files and look at what those name: the GitHub credentials and what
they may do on the configured scope, the clock against GitHub's ``Date`` header, every
provider's ``Info`` (reachability, transport, identity), the state directory, the secret files'
modes and the admin socket. The pure parts (:func:`skew_check`, :func:`mode_check`,
:func:`disk_check`) take their inputs, so they are tested without a host.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from rungar.config.model import ProviderConfig, ScaleSetsFile
from rungar.daemon.settings import DaemonSettings

ENV_SOCKET = "RUNGAR_SOCKET"  # the socket rungar's commands ask (docs/commands.md)

OK, WARN, FAIL = "ok", "warn", "fail"
SKEW_WARN = 10.0  # seconds: GitHub's Date has whole seconds, a few are noise
SKEW_FAIL = 60.0  # an App's JWT is backdated 60 s: beyond this GitHub refuses it
DISK_FAIL = 1 << 30  # bytes free under which the state database may not grow
DISK_WARN_SHARE = 0.05


@dataclass(frozen=True, slots=True)
class Check:
    area: str  # network, github, clock, provider NAME, state, secret, socket, config
    level: str  # ok, warn or fail
    message: str
    fix: str = ""  # what to do, for warn and fail

    def to_json(self) -> dict[str, str]:
        return {"area": self.area, "level": self.level, "message": self.message, "fix": self.fix}


# ------------------------------------------------------------------ pure parts


def skew_check(local: float, date_header: str) -> Check:
    """Local time against GitHub's ``Date``: an App's tokens fail past a minute."""
    try:
        github = parsedate_to_datetime(date_header).timestamp()
    except (TypeError, ValueError):
        return Check("clock", WARN, f"GitHub's Date header is unreadable: {date_header!r}")
    skew = local - github
    said = f"this host's clock is {abs(skew):.0f}s {'ahead of' if skew > 0 else 'behind'} GitHub's"
    if abs(skew) <= SKEW_WARN:
        return Check("clock", OK, f"within {SKEW_WARN:g}s of GitHub's")
    fix = "synchronise it (systemd-timesyncd, chrony)"
    return Check("clock", FAIL if abs(skew) > SKEW_FAIL else WARN, said, fix)


def mode_check(area: str, path: str, mode: int, what: str) -> Check:
    """A secret file: only its owner may read it."""
    bits = stat.S_IMODE(mode)
    fix = f"chmod 600 {path}"
    if bits & stat.S_IROTH:
        return Check(area, FAIL, f"{what} {path} is readable by anyone (mode {bits:04o})", fix)
    if bits & (stat.S_IRGRP | stat.S_IWGRP | stat.S_IWOTH):
        return Check(area, WARN, f"{what} {path} is open to its group (mode {bits:04o})", fix)
    return Check(area, OK, f"{what} {path} is its owner's only (mode {bits:04o})")


def disk_check(path: str, free: int, total: int) -> Check:
    share = free / total if total else 0.0
    said = f"{free / (1 << 30):.1f} GiB free ({share:.0%}) under {path}"
    if free < DISK_FAIL:
        return Check("state", FAIL, said, "free some disk: the state database and events grow")
    if share < DISK_WARN_SHARE:
        return Check("state", WARN, said, "free some disk before it runs out")
    return Check("state", OK, said)


# ------------------------------------------------------------------ the host


def secret_checks(settings: DaemonSettings, config: ScaleSetsFile | None) -> list[Check]:
    files = [
        (settings.github.token_path, "the GitHub token"),
        (settings.github.app_private_key_path, "the App's private key"),
        *((a.private_key_path, f"App {a.client_id}'s private key") for a in settings.github.apps),
        (settings.webhook.secret_path, "the webhook secret"),
    ]
    for provider in config.providers if config else ():
        if provider.options.get("token_file"):
            files.append((str(provider.options["token_file"]), f"{provider.name}'s token"))
        key = (provider.options.get("tls") or {}).get("key_file")
        if key:
            files.append((str(key), f"{provider.name}'s TLS key"))
    out = []
    for path, what in files:
        if not path:
            continue
        try:
            mode = os.stat(path).st_mode
        except OSError as e:
            out.append(Check("secret", FAIL, f"{what} {path}: {e.strerror}", "create it, mode 600"))
            continue
        out.append(mode_check("secret", path, mode, what))
    return out


def state_checks(state_dir: str, settings_path: str = "rungar.yaml") -> list[Check]:
    path = Path(state_dir)
    out = []
    if path.is_dir():
        bits = stat.S_IMODE(path.stat().st_mode)
        if not os.access(path, os.W_OK | os.X_OK):
            out.append(
                Check("state", FAIL, f"{path} is not writable by this user", f"chown it to {_me()}")
            )
        elif bits & (stat.S_IROTH | stat.S_IWOTH):
            out.append(
                Check(
                    "state",
                    WARN,
                    f"{path} is open to others (mode {bits:04o})",
                    f"chmod 750 {path}",
                )
            )
        else:
            out.append(Check("state", OK, f"{path} is writable (mode {bits:04o})"))
    else:
        out.append(
            Check(
                "state",
                WARN,
                f"{path} does not exist yet",
                f"rungar serve -c {settings_path} creates it; or mkdir it",
            )
        )
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    usage = shutil.disk_usage(existing)
    out.append(disk_check(str(existing), usage.free, usage.total))
    return out


def socket_checks(
    settings: DaemonSettings, settings_path: str = "rungar.yaml", cli_socket: str = ""
) -> list[Check]:
    """The admin socket rungar.yaml names: there, a socket, and who may use it; and, when the
    CLI was pointed at another (``--socket``, ``$RUNGAR_SOCKET``), that it was."""
    import grp

    path = settings.socket
    wanted = settings.socket_mode
    out = []
    if cli_socket and os.path.abspath(cli_socket) != os.path.abspath(path):
        out.append(
            Check(
                "socket",
                WARN,
                f"rungar's commands here ask {cli_socket} (--socket or ${ENV_SOCKET}), not "
                f"{path}, the socket of {settings_path}",
                f"export {ENV_SOCKET}={path}, or check the rungar.yaml of that daemon: "
                f"rungar doctor -c PATH/rungar.yaml",
            )
        )
    if wanted & 0o007:
        out.append(
            Check(
                "socket",
                WARN,
                f"socket_mode {wanted:04o} lets anyone on the host control the daemon",
                "socket_mode: 0660, and add the operators to the socket's group",
            )
        )
    try:
        st = os.stat(path)
    except OSError:
        out.append(
            Check(
                "socket",
                WARN,
                f"{path} is not there",
                f"start rungar serve -c {settings_path}; then rungar doctor -c {settings_path}",
            )
        )
        return out
    if not stat.S_ISSOCK(st.st_mode):
        out.append(Check("socket", FAIL, f"{path} is not a socket", f"remove it: rm {path}"))
        return out
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    bits = stat.S_IMODE(st.st_mode)
    who = f"members of group {group}" if bits & 0o060 else "only its owner"
    out.append(Check("socket", OK, f"{path} (mode {bits:04o}, group {group}): {who} may use it"))
    return out


def running_file_check(scale_sets: str, running: str) -> Check:
    """The file the running daemon runs from against the one rungar.yaml names: a restart
    reads rungar.yaml's, so a daemon running another has changes a restart undoes."""
    if not running or os.path.realpath(running) == os.path.realpath(scale_sets):
        return Check("config", OK, f"the daemon runs from {scale_sets}, as rungar.yaml names")
    return Check(
        "config",
        WARN,
        f"the daemon runs from {running}, but rungar.yaml names {scale_sets}: a restart "
        f"switches to {scale_sets}",
        f"make {scale_sets} what you want and run rungar apply {scale_sets}, or point "
        f"rungar.yaml's scale_sets at {running}",
    )


async def daemon_file_checks(settings: DaemonSettings, timeout: float = 5.0) -> list[Check]:
    """What :func:`running_file_check` and :func:`runner_deadline_checks` say of the daemon
    answering on the socket; nothing when none answers (socket_checks says so)."""
    import asyncio

    from rungar.rpc.admin_client import AdminClient, DaemonUnreachable

    try:
        async with AdminClient(settings.socket) as client:
            status = await asyncio.wait_for(client.status(), timeout)
    except (DaemonUnreachable, TimeoutError, OSError):
        return []
    running = str((status.get("daemon") or {}).get("config_path") or "")
    return [running_file_check(settings.scale_sets, running), *runner_deadline_checks(status)]


def runner_deadline_checks(status: dict[str, Any]) -> list[Check]:
    """The running daemon's warnings that GitHub is about to stop queueing jobs to a
    provider's runner, or has (docs/github.md, "Runner versions"); nothing when none warns."""
    from rungar.model.sentences import runner_deadline_fix

    out = []
    for provider in status.get("providers") or []:
        deadline = provider.get("runner_deadline") or {}
        if not deadline.get("warn"):
            continue
        name = str(provider.get("name", ""))
        level = FAIL if float(deadline.get("days_left") or 0) <= 0 else WARN
        fix = runner_deadline_fix(name, deadline.get("latest", ""))
        out.append(Check(f"provider {name}", level, str(deadline.get("sentence", "")), fix))
    return out


def _me() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


# ------------------------------------------------------------------ GitHub

NEEDED = {
    "organization": ("admin:org", "Self-hosted runners: read and write"),
    "repository": ("repo", "Administration: read and write"),
    "enterprise": ("manage_runners:enterprise", "(an App cannot serve an enterprise)"),
}


async def github_checks(settings: DaemonSettings, now: Any) -> list[Check]:
    """The way to GitHub (proxy and trust, as the daemon goes), the credentials against the
    scope's runner listing through it, and the clock against the answer's Date."""
    from rungar.clock import SystemClock
    from rungar.daemon.settings import github_network
    from rungar.errors import ConfigError, RungarError
    from rungar.github.auth import AppAuth, AppTokenSource
    from rungar.github.exceptions import GitHubUnreachable
    from rungar.github.http import github_http
    from rungar.github.network import NetworkError
    from rungar.github.transport import Transport
    from rungar.github.urls import parse_config_url

    gh = settings.github
    try:
        target = parse_config_url(gh.url)
    except ConfigError as e:
        return [Check("github", FAIL, e.problems[0], "github.url: https://github.com/ORG")]
    try:
        network = github_network(gh)
        route = network.route(target.rest_base)
        http = github_http(network, timeout=15.0)
    except NetworkError as e:
        return [Check("network", FAIL, str(e), 'docs/operating.md, "Behind a proxy"')]
    out = [
        Check("network", OK, f"proxy to {target.rest_base}: {route.shown()}"),
        Check("network", OK, f"certificates checked against {network.trust.shown()}"),
    ]
    scope = f"{target.scope.value} {target.scope_path.split('/', 1)[1]}"
    # The single App, or each of github.apps: every one is asked for the runner listing.
    apps = [(a.client_id, a.installation_id, a.private_key_path) for a in gh.apps]
    if gh.app_private_key_path:
        apps = [(gh.app_client_id, gh.app_installation_id, gh.app_private_key_path)]
    more: list[Check] = []
    try:
        for client_id, installation_id, key_path in apps[1:]:
            more += await _app_listing(http, target, scope, client_id, installation_id, key_path)
        try:
            if apps:
                client_id, installation_id, key_path = apps[0]
                key = Path(key_path).read_text()
                auth = AppAuth(client_id, installation_id, key)
                transport = Transport(http, SystemClock(), max_retries=0)
                token = await AppTokenSource(auth, target, transport, SystemClock()).token()
                how = f"GitHub App {client_id}, installation {installation_id}"
            else:
                if gh.token_path:
                    token = Path(gh.token_path).read_text().strip()
                else:
                    token = os.environ.get(gh.token_env, "")
                if not token:
                    return [
                        *out,
                        Check("github", FAIL, "no token", "set github.token_path or an App"),
                    ]
                how = "the token"
        except GitHubUnreachable as e:
            return [*out, Check("github", FAIL, f"GitHub does not answer: {e}", _github_fix(e))]
        except (OSError, RungarError, ValueError) as e:
            return [
                *out,
                Check(
                    "github",
                    FAIL,
                    f"GitHub refused the credentials: {e}",
                    "check app_client_id, app_installation_id and the key, or the token",
                ),
            ]
        url = f"{target.rest_base}/{target.scope_path}/actions/runners"
        try:
            answer = await http.send(
                "GET",
                url,
                {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"},
                params={"per_page": "1"},
            )
        except GitHubUnreachable as e:
            return [*out, Check("github", FAIL, f"GitHub does not answer: {e}", _github_fix(e))]
    finally:
        await http.aclose()
    out += _answer_checks(answer, how, scope, url, NEEDED[target.scope.value]) + more
    date = answer.headers.get("date")
    if date:
        out.append(skew_check(now(), date))
    else:
        out.append(Check("clock", WARN, "GitHub's answer carried no Date header"))
    return out


async def _app_listing(
    http: Any, target: Any, scope: str, client_id: str, installation_id: int, key_path: str
) -> list[Check]:
    """One more App of ``github.apps``: its token, and the runner listing asked with it."""
    from rungar.clock import SystemClock
    from rungar.errors import RungarError
    from rungar.github.auth import AppAuth, AppTokenSource
    from rungar.github.transport import Transport

    how = f"GitHub App {client_id}, installation {installation_id}"
    url = f"{target.rest_base}/{target.scope_path}/actions/runners"
    try:
        auth = AppAuth(client_id, installation_id, Path(key_path).read_text())
        transport = Transport(http, SystemClock(), max_retries=0)
        token = await AppTokenSource(auth, target, transport, SystemClock()).token()
        answer = await http.send(
            "GET",
            url,
            {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"},
            params={"per_page": "1"},
        )
    except (OSError, RungarError, ValueError) as e:
        fix = "check its client_id, installation_id and key"
        return [Check("github", FAIL, f"GitHub refused {how}: {e}", fix)]
    return _answer_checks(answer, how, scope, url, NEEDED[target.scope.value])


def _github_fix(e: Exception) -> str:
    text = str(e)
    if "certificate" in text:
        return 'docs/operating.md, "GitHub Enterprise Server with a private CA"'
    if "proxy" in text:
        return 'docs/operating.md, "Behind a proxy"'
    return "check github.url, and the network between this host and GitHub"


def _answer_checks(
    answer: Any, how: str, scope: str, url: str, needed: tuple[str, str]
) -> list[Check]:
    """What GitHub's answer to the runner listing says of the credentials."""
    classic_scope, app_permission = needed
    out = []
    fix_permission = (
        f"a classic token needs {classic_scope}; a fine-grained token or an App needs "
        f"{app_permission}"
    )
    if answer.status == 200:
        out.append(Check("github", OK, f"{how} may list and manage the runners of {scope}"))
        granted = answer.headers.get("x-oauth-scopes")
        if granted is not None and classic_scope not in [s.strip() for s in granted.split(",")]:
            out.append(
                Check(
                    "github",
                    WARN,
                    f"the token's scopes ({granted or 'none'}) do not include {classic_scope}",
                    fix_permission,
                )
            )
    elif answer.status == 401:
        out.append(
            Check("github", FAIL, f"GitHub refuses {how} (401)", "renew the token or the App key")
        )
    elif answer.status == 403:
        out.append(
            Check("github", FAIL, f"{how} may not manage the runners of {scope}", fix_permission)
        )
    elif answer.status == 404:
        out.append(
            Check(
                "github",
                FAIL,
                f"github.url names {scope}, which {how} cannot see or which does not exist",
                "check github.url's spelling and that the token or App has access to it",
            )
        )
    else:
        out.append(Check("github", FAIL, f"GitHub answered {answer.status} for {url}"))
    return out


# ------------------------------------------------------------------ providers


async def provider_check(config: ProviderConfig, installation: str, timeout: float) -> list[Check]:
    """Info through the provider protocol: reachable, over what, and who answers."""
    from rungar.clock import SystemClock
    from rungar.daemon.providers import PluginProvider, make_provider

    area = f"provider {config.name}"
    if config.type == "fake" and not config.address and not config.command:
        return [Check(area, OK, "the in-process test provider")]
    plugins: list[Any] = []
    provider: Any = None
    try:
        provider = make_provider(config, SystemClock(), plugins, installation)
        async with asyncio.timeout(timeout):
            if isinstance(provider, PluginProvider):
                await provider.start()
            info = await provider.info()
    except Exception as e:  # any failure to reach it is the finding
        where = config.address or " ".join(provider.plugin.command if provider else ())
        reason = str(e) or type(e).__name__
        return [Check(area, FAIL, f"does not answer at {where}: {reason}", _reach_fix(config))]
    finally:
        if provider is not None:
            with contextlib.suppress(Exception):
                await provider.close()
        for plugin in plugins:
            with contextlib.suppress(Exception):
                await plugin.stop()
    runner = f", runner {info.runner_version}" if info.runner_version else ""
    answers = f"answers as {info.kind} {info.version} ({info.name}){_over(config)}{runner}"
    out = [Check(area, OK, answers)]
    if info.kind and info.kind != config.type:
        out.append(
            Check(
                area,
                WARN,
                f"configured as type {config.type}, but answers as {info.kind}",
                "check that the address is the host you mean",
            )
        )
    if (
        config.address
        and not config.address.startswith("unix://")
        and not config.options.get("tls")
    ):
        out.append(
            Check(
                area,
                WARN,
                f"{config.address} is plaintext TCP: anyone on the path sees JIT configs",
                "set tls: (ca_file, cert_file, key_file) on both sides",
            )
        )
    return out


def _over(config: ProviderConfig) -> str:
    if config.command or not config.address:
        return ", a plugin Rungar starts"
    if config.address.startswith("unix://"):
        return f" at {config.address}"
    return f" at {config.address} over {'mTLS' if config.options.get('tls') else 'plaintext'}"


def _reach_fix(config: ProviderConfig) -> str:
    if config.type == "runnerd":
        return "start runnerd on that host (systemctl start runnerd) and check the address"
    if not config.address:
        return "check that the plugin runs: run its command by hand"
    return "check that the provider runs and listens at that address"
