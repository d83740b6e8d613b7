"""What the engine says when scaling changes under it: a schedule window that changes the
``min_runners`` in force, runners that crash before they connect, and how long jobs waited.

Each is an event, a log line and a metric (docs/scale-sets.md, "Schedules";
docs/troubleshooting.md); the decisions themselves live in the pure packages
(:mod:`rungar.scaling.schedule`, :class:`rungar.placement.Fleet`'s crash loops).
"""

from __future__ import annotations

import contextlib
from typing import Any

import structlog

from rungar.engine.core.context import EngineContext
from rungar.engine.core.records import RunnerRecord
from rungar.engine.core.scale_set_state import ScaleSetState
from rungar.errors import GitHubError, ProviderError
from rungar.model.provider import Provider
from rungar.model.runner import RemovalReason
from rungar.model.runner_version import RunnerVersion, refused_version
from rungar.model.sentences import (
    CRASH_LOOP,
    EXITED,
    NEVER_CONNECTED,
    UNREACHABLE_SINCE,
    crash_sentence,
    outdated_exit,
)
from rungar.scaling import InForce
from rungar.scaling.stale_statistics import Judged
from rungar.stopping import within

log = structlog.get_logger("rungar.engine")

OUTPUT_LINES = 20  # a crashed runner's last lines of output shown with its crash loop
# Why a runner that never connected went, as the crash loop's sentence names it.
CRASH_CAUSES = {"ended": EXITED, RemovalReason.NEVER_CONNECTED.value: NEVER_CONNECTED}


def note_minimum(ctx: EngineContext, state: ScaleSetState, minimum: InForce) -> None:
    """Export the ``min_runners`` in force, and say so when a schedule window changes it."""
    before, state.minimum = state.minimum, minimum
    name = state.config.name
    ctx.metrics.runners_min.labels(name).set(minimum.min_runners)
    if before is None or before.min_runners == minimum.min_runners:
        return
    # Only a scale set with a schedule has windows to be outside of; one without had its
    # min_runners changed by the configuration.
    scheduled = state.config.schedule is not None
    window = minimum.window or ("outside every window" if scheduled else "as configured")
    change: dict[str, Any] = {
        "from": before.min_runners,
        "to": minimum.min_runners,
        "window": minimum.window,
    }
    ctx.events.record(
        "scale_set",
        name,
        "min_runners_changed",
        scale_set=name,
        message=f"min_runners {before.min_runners} -> {minimum.min_runners} ({window})",
        **change,
    )
    log.info(
        "min_runners changed",
        scale_set=name,
        from_=before.min_runners,
        to=minimum.min_runners,
        window=minimum.window,
    )


def note_statistics(ctx: EngineContext, state: ScaleSetState, judged: Judged) -> None:
    """Keep the check of GitHub's assigned count, and say so when its judgement changes: a
    count judged stale, or believed again (docs/github.md, "When GitHub's count goes stale")."""
    before, state.statistics = state.statistics, judged
    name = state.config.name
    was = before.check.discount if before is not None else 0
    now = judged.check.discount
    ctx.metrics.jobs_counted.labels(name).set(judged.counted)
    if (was == 0) == (now == 0):
        return
    kind = "statistics_stale" if now else "statistics_believed"
    message = judged.sentence or f"GitHub's assigned count ({judged.reported}) is believed again"
    ctx.events.record(
        "scale_set",
        name,
        kind,
        scale_set=name,
        message=message,
        reported=judged.reported,
        sent=judged.known,
        counted=judged.counted,
    )
    log.warning(kind, scale_set=name, reported=judged.reported, sent=judged.known)


def note_crash(ctx: EngineContext, record: RunnerRecord, reason: str) -> None:
    """A runner of ours ended, or never connected in time, before it ever connected: one
    more in its scale set's crash loop on the provider, which is backed off from the
    ``crash_backoff_after``-th in a row (the second). Its registration is removed; its last
    output is asked of the provider before its machine is deleted (:func:`report_crash`)."""
    why = CRASH_CAUSES.get(reason)
    if why is None:
        return
    now = ctx.clock.now()
    backoff = ctx.fleet.record_crash(record.scale_set, record.provider, why, now)
    if why != EXITED:  # an exit is counted once its output shows it was no version refusal
        ctx.metrics.crashed.labels(record.scale_set, record.provider, "never_connected").inc()
    if backoff.active(now):
        ctx.metrics.crash_loop.labels(record.scale_set, record.provider).set(backoff.refusals)
    ctx.findings.crashes_to_report[record.name] = (why, backoff.refusals)
    if record.runner_id and reason == "ended":
        # A removal (never_connected) has unregistered it already; an ended one has not.
        ctx.spawn(_unregister_quietly(ctx, record.runner_id))


async def report_crash(ctx: EngineContext, record: RunnerRecord, provider: Provider) -> None:
    """Ask the provider for the crashed runner's last lines (before its machine goes), then
    say so: an event and a warning with the crash-loop sentence and the lines once the loop
    is backed off, an info line for a first failure. A provider that cannot answer has none."""
    reported = ctx.findings.crashes_to_report.pop(record.name, None)
    if reported is None:
        return
    why, in_a_row = reported
    lines: list[str] = []
    try:
        lines = list(
            await within(
                provider.last_output(record.name, OUTPUT_LINES),
                ctx.call_timeout(record.provider),
                "LastOutput",
            )
        )
    except (ProviderError, TimeoutError) as e:
        log.info("runner.output_unread", runner=record.name, error=str(e))
    if why == EXITED:
        turned_away = refused_version(lines)
        if turned_away is not None:
            note_outdated(ctx, record, turned_away, lines)
            return
        ctx.metrics.crashed.labels(record.scale_set, record.provider, "exited").inc()
    now = ctx.clock.now()
    backoff = ctx.fleet.crash_loop(record.scale_set, record.provider)
    if backoff is None or backoff.refusals != in_a_row:
        return  # forgiven, or a later crash reports for itself
    ctx.findings.crash_output[(record.scale_set, record.provider)] = (record.name, tuple(lines))
    if not backoff.active(now):
        log.info(
            "runner.crashed",
            scale_set=record.scale_set,
            provider=record.provider,
            runner=record.name,
            why=why,
            in_a_row=in_a_row,
            output=lines,
        )
        return
    sentence = crash_sentence(
        record.scale_set, record.provider, why, backoff.refusals, backoff.remaining(now)
    )
    ctx.events.record(
        "provider",
        record.provider,
        "crash_loop",
        scale_set=record.scale_set,
        provider=record.provider,
        message=sentence,
        runner=record.name,
        runners=backoff.refusals,
        output=lines,
    )
    log.warning(
        "provider.crash_loop",
        sentence=CRASH_LOOP,
        scale_set=record.scale_set,
        provider=record.provider,
        runner=record.name,
        in_a_row=backoff.refusals,
        output=lines,
    )


def note_outdated(
    ctx: EngineContext,
    record: RunnerRecord,
    version: RunnerVersion,
    lines: list[str],
) -> None:
    """A runner exited because GitHub refused its version (its output says so): no crash. Its
    count in the crash loop is taken back, and its scale set places nothing more on the
    provider until the provider reports a newer runner (docs/github.md, "Runner versions")."""
    scale_set, provider = record.scale_set, record.provider
    now = ctx.clock.now()
    left = ctx.fleet.uncount_crash(scale_set, provider, now)
    ctx.fleet.versions.turned_away(scale_set, provider, version)
    ctx.save_placement()  # kept at once: a restart goes on skipping it
    loop = left.refusals if left is not None and left.active(now) else 0
    ctx.metrics.crash_loop.labels(scale_set, provider).set(loop)
    ctx.metrics.outdated.labels(scale_set, provider).inc()
    sentence = outdated_exit(record.name, version)
    ctx.events.record(
        "runner",
        record.name,
        "outdated",
        scale_set=scale_set,
        provider=provider,
        message=sentence,
        runner_version=str(version),
        output=lines,
    )
    log.warning(
        "runner.outdated",
        sentence=sentence,
        scale_set=scale_set,
        provider=provider,
        runner=record.name,
        runner_version=str(version),
    )


def note_connected(ctx: EngineContext, record: RunnerRecord) -> None:
    """A runner connected: its scale set's crash loop on the provider is forgiven."""
    if ctx.fleet.record_connected(record.scale_set, record.provider):
        ctx.metrics.crash_loop.labels(record.scale_set, record.provider).set(0)
        ctx.findings.crash_output.pop((record.scale_set, record.provider), None)


async def _unregister_quietly(ctx: EngineContext, runner_id: int) -> None:
    with contextlib.suppress(GitHubError):
        await ctx.github.remove_runner(runner_id)


def observe_job_wait(
    ctx: EngineContext, name: str, queued_at: float, runner_assigned_at: float, heard_at: float
) -> None:
    """Queued → runner, on GitHub's clock when it gives both times; when it leaves the
    runner's assignment out, until the daemon heard the job start (the clocks may differ)."""
    if name not in ctx.sets or queued_at <= 0:
        return
    took = runner_assigned_at if runner_assigned_at > 0 else heard_at
    ctx.metrics.job_wait.labels(name).observe(max(0.0, took - queued_at))


def note_unanswered(ctx: EngineContext, provider: str, error: str) -> None:
    """A provider went unreachable because a call other than List got no answer (a Delete):
    the same log line, event and gauge as an unanswered List, and the same reason in status."""
    ctx.findings.list_errors[provider] = error
    log.warning("provider.unreachable", sentence=UNREACHABLE_SINCE, provider=provider, error=error)
    ctx.events.record("provider", provider, "unreachable", provider=provider, message=error)
    ctx.metrics.provider_reachable.labels(provider).set(0)
