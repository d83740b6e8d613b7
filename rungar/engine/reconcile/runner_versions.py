"""Each provider's runner version, read from its ``Info`` for placement (docs/github.md,
"Runner versions").

A provider is asked when it is first listed and again each time it lists after being
unreachable (a host restarted with a new runner install comes back this way). The version is
untrusted: the RPC layer keeps it only when it has a version's form. A provider that does not
answer Info keeps the version it last told.
"""

from __future__ import annotations

import structlog

from rungar.engine.core.context import EngineContext
from rungar.errors import ProviderError
from rungar.stopping import within

log = structlog.get_logger("rungar.reconcile")


async def read_runner_version(ctx: EngineContext, name: str, *, again: bool) -> None:
    """Ask ``name``'s Info for its runner version, unless it was asked and ``again`` is off."""
    versions = ctx.fleet.versions
    if name in versions.asked and not again:
        return
    versions.asked.add(name)
    try:
        info = await within(ctx.providers[name].info(), ctx.call_timeout(name), "Info")
    except (ProviderError, TimeoutError) as e:
        log.warning("provider.info_failed", provider=name, error=str(e) or type(e).__name__)
        return
    if not versions.report(name, info.runner_version):
        return
    log.info("provider.runner_version", provider=name, runner_version=info.runner_version or "")
    for scale_set in ctx.sets:
        reason = versions.refused(scale_set, name)
        if reason is not None:
            log.warning(
                "provider.runner_refused", provider=name, scale_set=scale_set, sentence=reason
            )
