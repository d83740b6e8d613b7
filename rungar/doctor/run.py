"""Run every check of :mod:`rungar.doctor.checks` against the daemon's rungar.yaml."""

from __future__ import annotations

import asyncio
import os
import time

from rungar.doctor.checks import (
    FAIL,
    OK,
    Check,
    daemon_file_checks,
    github_checks,
    provider_check,
    secret_checks,
    socket_checks,
    state_checks,
)


async def diagnose(
    settings_path: str,
    *,
    provider_timeout: float = 10.0,
    cli_socket: str = "",
    from_daemon: str = "",
) -> list[Check]:
    """Every finding, in the order they are printed; a file that does not load is the first.
    ``cli_socket``: the socket the CLI's commands ask (``--socket``, ``$RUNGAR_SOCKET``), when
    chosen; ``from_daemon``: the socket of the daemon that named ``settings_path``, if one did.
    Every fix that runs a command names the file (``-c``)."""
    from rungar.config.loader import load_scale_sets
    from rungar.config.model import ScaleSetsFile
    from rungar.daemon.settings import load_settings
    from rungar.engine.core.naming import installation_id
    from rungar.errors import ConfigError

    try:
        settings = load_settings(settings_path)
    except ConfigError as e:
        if not os.path.exists(settings_path):
            fix = "name the daemon's rungar.yaml: rungar doctor -c PATH/rungar.yaml"
        else:
            fix = f"fix {settings_path}; then rungar doctor -c {settings_path}"
        return [Check("config", FAIL, p, fix) for p in e.problems]
    whose = f" (the rungar.yaml of the daemon on {from_daemon})" if from_daemon else ""
    checks = [Check("config", OK, f"{settings_path} loads{whose}")]
    config: ScaleSetsFile | None = None
    try:
        config = load_scale_sets(settings.scale_sets)
        checks.append(Check("config", OK, f"{settings.scale_sets} is valid"))
    except ConfigError as e:
        checks += [
            Check("config", FAIL, p, f"rungar validate {settings.scale_sets}") for p in e.problems
        ]
    checks += await github_checks(settings, time.time)
    if config is not None:
        installation = settings.installation or installation_id(settings.github.url)
        found = await asyncio.gather(
            *(provider_check(p, installation, provider_timeout) for p in config.providers)
        )
        for each in found:
            checks += each
    checks += state_checks(settings.state_dir, settings_path)
    checks += secret_checks(settings, config)
    checks += socket_checks(settings, settings_path, cli_socket)
    checks += await daemon_file_checks(settings)
    return checks
