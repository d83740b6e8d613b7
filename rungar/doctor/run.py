"""Run every check of :mod:`rungar.doctor.checks` against the daemon's rungar.yaml."""

from __future__ import annotations

import asyncio
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


async def diagnose(settings_path: str, *, provider_timeout: float = 10.0) -> list[Check]:
    """Every finding, in the order they are printed; a file that does not load is the first."""
    from rungar.config.loader import load_scale_sets
    from rungar.config.model import ScaleSetsFile
    from rungar.daemon.settings import load_settings
    from rungar.engine.core.naming import installation_id
    from rungar.errors import ConfigError

    try:
        settings = load_settings(settings_path)
    except ConfigError as e:
        return [
            Check("config", FAIL, p, f"rungar validate; fix {settings_path}") for p in e.problems
        ]
    checks = [Check("config", OK, f"{settings_path} loads")]
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
    checks += state_checks(settings.state_dir)
    checks += secret_checks(settings, config)
    checks += socket_checks(settings)
    checks += await daemon_file_checks(settings)
    return checks
