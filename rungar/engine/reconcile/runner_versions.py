"""Each provider's runner version, read from its ``Info`` for placement, GitHub's latest runner
release, and the warning before GitHub stops queueing jobs to a provider's runner
(docs/github.md, "Runner versions").

A provider is asked when it is first listed, again each time it lists after being unreachable
(a host restarted with a new runner install comes back this way), and every
``github.runner_versions.info_interval`` while it lists (an install upgraded in place). The
version is untrusted: the RPC layer keeps it only when it has a version's form. A provider that
does not answer Info keeps the version it last told.

GitHub's latest release is read every ``check_interval`` (less often while the REST budget is
low), in a task of its own, so a slow answer delays nothing else. When a provider's runner is
older than it, :func:`~rungar.placement.version_window.runner_deadlines` says when GitHub stops
queueing jobs to it; from ``warn_days`` before, it is warned of: a log line and an event once
per change, and ``rungar_provider_runner_days_left`` all along.
"""

from __future__ import annotations

import json

import structlog

from rungar.engine.core.context import EngineContext
from rungar.errors import GitHubError, ProviderError
from rungar.model import sentences
from rungar.model.runner_release import RunnerRelease, day_of
from rungar.model.runner_version import parse_runner_version
from rungar.placement.version_window import RunnerDeadline, runner_deadlines
from rungar.stopping import within

log = structlog.get_logger("rungar.reconcile")

RELEASES_KEY = "github.runner_releases"  # the releases GitHub named, kept in the store's meta
RELEASES_KEPT = 20  # the newest ones kept


async def read_runner_version(ctx: EngineContext, name: str, *, again: bool) -> None:
    """Ask ``name``'s Info for its runner version, unless it was asked within
    ``info_interval`` and ``again`` is off."""
    versions = ctx.fleet.versions
    now = ctx.clock.now()
    asked = versions.asked_at.get(name)
    if asked is not None and not again and now - asked < versions.info_interval:
        return
    versions.asked_at[name] = now
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
    note_runner_deadlines(ctx)


def deadline_sentence(deadline: RunnerDeadline, now: float) -> str:
    return sentences.runner_deadline(
        deadline.provider,
        deadline.version,
        deadline.latest.version,
        deadline.latest.date,
        day_of(deadline.stops_at),
        deadline.stops_at - now,
    )


def note_runner_deadlines(ctx: EngineContext) -> list[RunnerDeadline]:
    """Export each provider's days left, and warn of those near their deadline: a log line
    and an event when a warning starts or changes (another runner, another latest release,
    the deadline passed), not on every pass."""
    versions = ctx.fleet.versions
    now = ctx.clock.now()
    deadlines = runner_deadlines(versions.snapshot(), now, versions.window)
    gauge = ctx.metrics.runner_days_left
    exported = ctx.findings.runner_days_exported
    for gone in exported - {d.provider for d in deadlines}:
        gauge.remove(gone)
    exported.clear()
    told = ctx.findings.runner_deadlines_told
    warned: dict[str, tuple[str, str, bool]] = {}
    for deadline in deadlines:
        gauge.labels(deadline.provider).set(round(deadline.days_left, 3))
        exported.add(deadline.provider)
        if not deadline.warn:
            continue
        key = (str(deadline.version), str(deadline.latest.version), deadline.stopped)
        warned[deadline.provider] = key
        if told.get(deadline.provider) == key:
            continue
        sentence = deadline_sentence(deadline, now)
        log.warning("provider.runner_expiring", provider=deadline.provider, sentence=sentence)
        ctx.events.record(
            "provider",
            deadline.provider,
            "runner_expiring",
            provider=deadline.provider,
            message=sentence,
            runner_version=str(deadline.version),
            latest=str(deadline.latest.version),
            stops_at=deadline.stops_at,
            days_left=round(deadline.days_left, 1),
        )
    told.clear()
    told.update(warned)
    return deadlines


async def read_latest_release(ctx: EngineContext) -> RunnerRelease | None:
    """Ask GitHub for its latest runner release; a new one is learnt, kept in the store and
    weighed at once. None when GitHub did not name one."""
    try:
        release = await ctx.github.latest_runner_release()
    except GitHubError as e:
        log.warning("github.runner_release_unread", error=str(e))
        return None
    if release is None:
        if not ctx.findings.no_runner_release_said:
            ctx.findings.no_runner_release_said = True
            log.info("github.no_runner_release", note="github.runner_versions.latest counts")
        return None
    if ctx.fleet.versions.learn_release(release):
        log.info(
            "github.runner_release", runner_version=str(release.version), released=release.date
        )
        keep_releases(ctx)
        note_runner_deadlines(ctx)
    return release


def keep_releases(ctx: EngineContext) -> None:
    learnt = [r for r in ctx.fleet.versions.releases() if r.source == "github"]
    rows = [{"version": str(r.version), "published_at": r.published_at} for r in learnt]
    ctx.store.set_meta(RELEASES_KEY, json.dumps(rows[-RELEASES_KEPT:]))


def restore_releases(ctx: EngineContext) -> None:
    """The releases GitHub named before a restart: a provider's window opened by an older
    release stays open from that release's date."""
    try:
        rows = json.loads(ctx.store.get_meta(RELEASES_KEY) or "[]")
    except ValueError:
        return
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        version = parse_runner_version(row.get("version"))
        published = row.get("published_at")
        if version is not None and isinstance(published, int | float):
            ctx.fleet.versions.learn_release(RunnerRelease(version, float(published), "github"))


async def watch_latest_release(ctx: EngineContext, interval: float) -> None:
    """Read GitHub's latest release now and every ``interval`` seconds (twice or four times
    that while the REST budget is low), until cancelled."""
    while True:
        await read_latest_release(ctx)
        stretch = max(1.0, float(ctx.github.budget().stretch))
        await ctx.clock.sleep(max(interval, 1.0) * stretch)
