"""What ``rungar status`` reports, as one JSON-able document read from the engine's context
(:class:`~rungar.engine.core.context.EngineContext`: the runner table, the fleet, the scale sets,
the lease, the configuration, the clock, the findings), never from the engine that composes it.

It never claims to know a provider's spare room: only what Rungar itself counts, the skips it
is applying and why, and the holds in force (docs/troubleshooting.md).

Document (every time in epoch seconds, every duration in seconds)::

    {"version": 2 (this shape; a change that breaks a reader raises it),
     "daemon": {"ready", "readiness", "version", "installation", "started_at", "now",
                "config_path", "settings_path" (its rungar.yaml), "github",
                "lease": null | {"role": "active"|"standby", "owner", "lead", "term",
                                 "held_since", "renewed_at", "expires_at" (null on a standby),
                                 "holder", "holder_seen_at" (a standby: the active daemon as
                                 GitHub names it, and when it last did), "adopted",
                                 "unconfirmed_since", "unconfirmed_why" (GitHub left the
                                 lease unconfirmed since then, and how; null and "" while
                                 it answers)},
                "registrations": {"per_minute" (0: sent at once), "waiting", "source"
                                  ("github": GitHub's limit learned from a 429, "configured",
                                  ""), "throttled" (429s so far), "sentence",
                                  "apps": with several GitHub Apps, one each in github.apps
                                  order: [{"app" (its client_id), "state" (ok | failing),
                                  "per_minute", "source", "throttled", "taken" (registrations
                                  GitHub took from it in the trailing window), "failing_since"
                                  (null: not failing), "error" (GitHub's refusal), "sentence"}],
                                  [] with one},
                "budget": {"remaining", "limit", "reset_at" (null until read), "stretch" (1,
                           2 or 4: how many times less often reads that can wait are made),
                           "not_modified" (reads answered 304, free), "note"},
                "reruns": {"count" (jobs re-run since start), "last": its sentence},
                "runner_release": null | {"latest", "released_at", "source" ("github" |
                                  "configured"), "window_days", "warn_days"},
                "notes": [{"label", "text"}] (the three above in words, as rungar status and
                the fleet page show them)},
     "scale_sets": [{"name", "status", "note", "runners", "creating", "busy", "idle", "starting",
                     "desired", "reserve", "min", "schedule", "max", "priority", "placement",
                     "providers", "paused", "assigned", "statistics", "labels"}],
     (runners = busy + idle + starting; creating: creates in flight, counted among runners and
     starting and not yet listed under "runners" below;
     polled_at: when GitHub last told the assigned count, null = never; the queue's age is
     daemon.now - polled_at;
     schedule: null | {"timezone", "window", "min_runners", "next_change",
                        "next_min_runners", "next_window"}; reserve: the part of desired kept
     idle beyond the assigned jobs, warm pool included; warm: null | {"runners" (its part of
     reserve), "predicted", "max", "reason"}; min: the min_runners in force now;
     statistics: null | {"reported" (GitHub's assigned count), "sent" (its jobs waiting or
     running), "counted" (what scaling counts), "sentence"} while GitHub's count is judged
     stale)
     "leftovers": [{"scale_set", "runners", "busy", "registrations", "sentence"}],
     (scale sets no longer configured whose runners or registrations remain)
     "providers": [{"name", "type", "status" (a display sentence), "state" (ok | unreachable |
                    draining | disabled | held), "runners", "max_runners", "leaving", "weight",
                    "reachable", "disabled", "draining", "runtime_change", "kept",
                    "written_off_in", "listing_faults", "runner_version",
                    "runner_deadline": null | {"runner_version", "latest", "stops_at",
                    "days_left", "warn", "sentence"}, "hold": null | {"holder", "priority",
                    "left"}}],
     (kept: runners of an unreachable provider still counted; written_off_in: seconds until
     unreachable_grace writes the first off, null when none is kept; listing_faults: the
     latest sentences saying what its listings said that was not believed)
     "skips": [{"scale_set", "provider", "full", "refusals", "left", "error", "resource",
                "sentence", "crash_loop"?, "runner"?, "output"?, "outdated"?,
                "waits_for_host"?, "confidence"?}],
     (crash_loop: runners that end before connecting; runner: the last of them, output: its
     last lines of output as its provider gave them, oldest first; outdated: its runner is
     below GitHub's minimum version, error says which; waits_for_host: the host whose expected
     room keeps the runner off this priced provider, left: seconds until that room,
     confidence: how sure the host is)
     "runners": [{"name", "scale_set", "provider", "state", "machine", "github", "age",
                  "job"}]}
     (state: starting | idle | busy | leaving; machine: starting | running | stopped |
     not_listed (recalled at a restart, its provider silent since); github: busy | idle |
     offline | not_registered | unknown; providers' max_runners: null when unlimited)
"""

from __future__ import annotations

from typing import Any

from rungar import __version__
from rungar.config.model import ScaleSetConfig
from rungar.daemon.lease import github_silence
from rungar.daemon.readiness import readiness
from rungar.engine.core.context import EngineContext
from rungar.engine.core.scale_set_state import ScaleSetState
from rungar.engine.reconcile.runner_versions import deadline_sentence
from rungar.model.columns import plural
from rungar.model.json_shapes import STATUS_SHAPE
from rungar.model.phase import Phase
from rungar.model.runner import GitHubState, RunnerState
from rungar.model.runner_block import RunnerBlock
from rungar.model.sentences import (
    LEAD_NOTE,
    STARTING_NOTE,
    UNREACHABLE_NOTE,
    WAITING_NOTE,
    crash_sentence,
    held_status,
    holding_back,
    outdated_sentence,
    paused_note,
    skip_sentence,
    waits_for_host,
)
from rungar.placement.version_window import latest_release, runner_deadlines
from rungar.scaling import in_force

LISTING_FAULTS_SHOWN = 5  # per provider, the latest

# A scale set listening whose runners end before they connect (docs/cli.md, status words).
CRASH_LOOP_STATUS = "CRASH LOOP"

# A runner's word from GitHub, as a stable value: busy, idle, offline, not_registered, unknown.
GITHUB_STATES = {
    GitHubState.BUSY: "busy",
    GitHubState.IDLE: "idle",
    GitHubState.OFFLINE: "offline",
    GitHubState.NOT_REGISTERED: "not_registered",
}


def runner_summary(config: ScaleSetConfig) -> str:
    """What its runners are, per provider block: ``2 vCPU, 4G; e2-custom-4-8192``."""
    seen: list[str] = []
    for entry in config.providers:
        try:
            text = RunnerBlock.from_mapping(entry.runner).describe()
        except ValueError:
            text = ""
        if text and text not in seen:
            seen.append(text)
    return "; ".join(seen)


def schedule_document(config: ScaleSetConfig, now: float) -> Any:
    """The window in force and the next change, or None for a scale set with no schedule."""
    if config.schedule is None:
        return None
    found = in_force(config, now)
    return {
        "timezone": config.schedule.timezone,
        "window": found.window,
        "min_runners": found.min_runners,
        "next_change": found.next_change,
        "next_min_runners": found.next_min_runners,
        "next_window": found.next_window,
    }


def warm_document(state: ScaleSetState) -> Any:
    """The warm pool's part of desired and why, or None for a scale set with no warm pool."""
    if state.warm is None:
        return None
    return {
        "runners": state.warm_runners,
        "predicted": state.warm.predicted,
        "max": state.warm.most,
        "reason": state.warm.reason,
    }


def statistics_document(state: ScaleSetState) -> dict[str, Any] | None:
    """GitHub's assigned count judged stale (docs/github.md, "When GitHub's count goes stale"),
    or None while scaling counts it as given."""
    judged = state.statistics
    if judged is None or not judged.check.discount:
        return None
    return {
        "reported": judged.reported,
        "sent": judged.known,
        "counted": judged.counted,
        "sentence": judged.sentence,
    }


def scale_set_status(ctx: EngineContext, name: str, now: float) -> tuple[str, str]:
    state = ctx.sets[name]
    if state.paused:
        left = len(ctx.runners.live(name))
        return "PAUSED", paused_note(left)
    holds = ctx.fleet.holding_back(name, now)
    if holds:
        hold = holds[0]
        return "HOLDING BACK", holding_back(hold.provider, hold.holder)
    if state.phase is Phase.LISTENING:
        # The listener knows when GitHub answers its session create with a conflict, and when
        # GitHub stops answering after the scale set was found.
        session = ctx.github.session_phase(name)
        if session.phase is Phase.WAITING:
            return Phase.WAITING, WAITING_NOTE
        if session.phase is Phase.UNREACHABLE:
            return Phase.UNREACHABLE, f"{UNREACHABLE_NOTE}: {session.error}"
        # A long poll cut off by a partition reads as "nothing new": the lease renewal, a call
        # GitHub answers at once, is what tells that GitHub does not answer.
        silence = github_silence(ctx.lease)
        if silence:
            return Phase.UNREACHABLE, f"{UNREACHABLE_NOTE}: {silence}"
        # Listening, but its runners end before they connect: not a healthy scale set.
        loops = [
            crash_sentence(name, provider, loop.last_error, loop.refusals, loop.remaining(now))
            for scale_set, provider, loop in sorted(ctx.fleet.active_crash_loops(now))
            if scale_set == name
        ]
        if loops:
            return CRASH_LOOP_STATUS, "; ".join(loops)
        return Phase.LISTENING, ""
    if state.phase is Phase.UNREACHABLE:
        return Phase.UNREACHABLE, state.note or "GitHub does not answer"
    if state.phase is Phase.WAITING:
        return Phase.WAITING, state.note or LEAD_NOTE
    return Phase.STARTING, STARTING_NOTE


def provider_state(ctx: EngineContext, name: str, now: float) -> str:
    """The provider's state as a stable value for scripts: ``ok``, ``unreachable``,
    ``draining``, ``disabled`` or ``held`` (what :func:`provider_status` words)."""
    fleet = ctx.fleet
    if not fleet.is_reachable(name):
        return "unreachable"
    if name in ctx.findings.draining_providers:
        return "draining"
    if fleet.is_disabled(name):
        return "disabled"
    if fleet.hold_on(name, now) is not None:
        return "held"
    return "ok"


def provider_status(ctx: EngineContext, name: str, now: float) -> str:
    """The provider's state as ``rungar status`` shows it: ``HELD for big (priority 10), …``."""
    fleet = ctx.fleet
    if not fleet.is_reachable(name):
        return "UNREACHABLE"
    runtime = fleet.disabled_at_runtime(name)
    suffix = " until the daemon restarts" if runtime is not None else ""
    if name in ctx.findings.draining_providers:
        count = fleet.provider_count(name)
        return f"DRAINING {count} {'runner' if count == 1 else 'runners'} left{suffix}"
    if fleet.is_disabled(name):
        return f"DISABLED{suffix}"
    hold = fleet.hold_on(name, now)
    if hold is not None:
        return held_status(hold.holder, hold.priority)
    return "OK enabled until the daemon restarts" if runtime is False else "OK"


def kept_while_unreachable(
    ctx: EngineContext, provider: str, now: float
) -> tuple[int, float | None]:
    """The runners an unreachable provider's limits still count (those a restart recalled from
    the state database among them), and in how many seconds ``unreachable_grace`` writes the
    first off; (0, None) for a reachable provider."""
    if ctx.fleet.is_reachable(provider):
        return 0, None
    kept = [r for r in ctx.runners.on(provider) if r.state is not RunnerState.LEAVING]
    if not kept:
        return 0, None
    grace = ctx.config.timing.unreachable_grace
    since = min((r.unreachable_since or now) for r in kept)
    return len(kept), round(max(0.0, since + grace - now), 1)


def registrations_document(ctx: EngineContext) -> dict[str, Any]:
    """The installation's registration pace and queue (docs/github.md, "Registration pace")."""
    queue = ctx.registrations
    view = queue.view()
    apps = queue.apps() if len(queue.lanes) > 1 else []
    return {
        "per_minute": round(view.per_minute, 1),
        "waiting": view.waiting,
        "source": view.source,
        "throttled": view.throttled,
        "sentence": view.sentence(),
        "apps": [
            {
                "app": a.app,
                "state": "failing" if a.failing_since else "ok",
                "per_minute": round(a.per_minute, 1),
                "source": a.source,
                "throttled": a.throttled,
                "taken": a.taken,
                "failing_since": a.failing_since or None,
                "error": a.error,
                "sentence": a.sentence(),
            }
            for a in apps
        ],
    }


def budget_document(ctx: EngineContext) -> dict[str, Any]:
    """GitHub's REST budget as last read, and what it slows (docs/github.md, "API budget")."""
    budget = ctx.github.budget()
    return {
        "remaining": budget.remaining,
        "limit": budget.limit,
        "reset_at": budget.reset_at,
        "stretch": budget.stretch,
        "not_modified": budget.not_modified,
        "note": budget.note,
    }


def daemon_notes(daemon: dict[str, Any]) -> list[dict[str, str]]:
    """The daemon's lines that ``rungar status`` and the fleet page both show under its header,
    worded here once: the jobs re-run, the API budget when it slows anything, and the
    registration queue. Each is ``{"label", "text"}``: ``Registering``, ``6/min, GitHub's limit; 17
    waiting``."""
    notes = []
    reruns = daemon["reruns"]
    if reruns.get("count"):
        lost = plural(int(reruns["count"]), "lost job")
        notes.append({"label": "Re-run", "text": f"{lost}; last: {reruns.get('last', '')}"})
    budget = str(daemon["budget"].get("note") or "")
    if budget:
        notes.append({"label": "API budget", "text": budget.removeprefix("API budget ")})
    registering = str(daemon["registrations"].get("sentence") or "")
    if registering:
        notes.append({"label": "Registering", "text": registering.removeprefix("registering ")})
    for app in daemon["registrations"].get("apps", ()):
        notes.append({"label": f"App {app['app']}", "text": str(app["sentence"])})
    return notes


def snapshot(ctx: EngineContext) -> dict[str, Any]:
    now = ctx.clock.now()
    return {
        "version": STATUS_SHAPE,
        "daemon": daemon_document(ctx, now),
        "scale_sets": scale_sets_document(ctx, now),
        "leftovers": [
            {
                "scale_set": f.scale_set,
                "runners": f.runners,
                "busy": f.busy,
                "registrations": f.registrations,
                "sentence": f.sentence,
            }
            for f in ctx.findings.leftovers
        ],
        "providers": providers_document(ctx, now),
        "skips": skips_document(ctx, now),
        "runners": runners_document(ctx, now),
    }


def daemon_document(ctx: EngineContext, now: float) -> dict[str, Any]:
    ready = readiness(ctx.sets, ctx.lease)
    daemon = {
        "ready": ready.ready,
        "readiness": ready.sentence,
        "version": __version__,
        "installation": ctx.installation,
        "started_at": ctx.started_at,
        "now": now,
        "config_path": ctx.config.path,
        "settings_path": ctx.settings_path,
        "state_moved_aside": str(ctx.store.moved_aside or ""),
        "github": ctx.github_url,
        "lease": ctx.lease.document() if ctx.lease is not None else None,
        "registrations": registrations_document(ctx),
        "budget": budget_document(ctx),
        "reruns": {
            "count": ctx.findings.reruns.done,
            "last": ctx.findings.reruns.last,
        },
        "runner_release": runner_release_document(ctx),
    }
    daemon["notes"] = daemon_notes(daemon)
    return daemon


def scale_sets_document(ctx: EngineContext, now: float) -> list[dict[str, Any]]:
    scale_sets = []
    for name, state in ctx.sets.items():
        status, note = scale_set_status(ctx, name, now)
        live = ctx.runners.live(name)
        ss = state.config
        scale_sets.append(
            {
                "name": name,
                "status": status,
                "note": note,
                # Creates in flight count as runners and as starting alike, so runners is
                # always busy + idle + starting.
                "runners": len(live) + ctx.runners.creating.count(name),
                "creating": ctx.runners.creating.count(name),
                "busy": sum(1 for r in live if r.state is RunnerState.BUSY),
                "idle": sum(1 for r in live if r.state is RunnerState.IDLE),
                "starting": sum(1 for r in live if r.state is RunnerState.STARTING)
                + ctx.runners.creating.count(name),
                "desired": state.desired,
                "reserve": state.reserve,
                "min": in_force(ss, now).min_runners,
                "schedule": schedule_document(ss, now),
                "warm": warm_document(state),
                "rerun_lost_jobs": ss.rerun_lost_jobs,
                "max": ss.max_runners,
                "priority": ss.priority,
                "placement": ss.placement.value,
                "providers": list(ss.provider_names),
                "paused": state.paused,
                "assigned": state.assigned,
                "statistics": statistics_document(state),
                "polled_at": state.polled_at or None,
                "labels": list(ss.labels) or [name],
                "runner": runner_summary(ss),
            }
        )
    return scale_sets


def runner_release_document(ctx: EngineContext) -> dict[str, Any] | None:
    """The latest runner release known, and GitHub's window (docs/github.md, "Runner
    versions")."""
    versions = ctx.fleet.versions
    latest = latest_release(versions.snapshot().releases)
    if latest is None:
        return None
    return {
        "latest": str(latest.version),
        "released_at": latest.published_at,
        "source": latest.source,
        "window_days": versions.window.days,
        "warn_days": versions.window.warn_days,
    }


def deadlines_document(ctx: EngineContext, now: float) -> dict[str, dict[str, Any]]:
    """Each provider whose runner is older than the latest release: when GitHub stops queueing
    jobs to it, and whether that is near enough to warn of."""
    versions = ctx.fleet.versions
    return {
        d.provider: {
            "runner_version": str(d.version),
            "latest": str(d.latest.version),
            "stops_at": d.stops_at,
            "days_left": round(d.days_left, 2),
            "warn": d.warn,
            "sentence": deadline_sentence(d, now),
        }
        for d in runner_deadlines(versions.snapshot(), now, versions.window)
    }


def providers_document(ctx: EngineContext, now: float) -> list[dict[str, Any]]:
    fleet = ctx.fleet
    providers = []
    reported = fleet.versions.reported()
    deadlines = deadlines_document(ctx, now)
    for name, provider_config in fleet.providers.items():
        hold = fleet.hold_on(name, now)
        kept, written_off_in = kept_while_unreachable(ctx, name, now)
        providers.append(
            {
                "name": name,
                "type": provider_config.type,
                "status": provider_status(ctx, name, now),
                "state": provider_state(ctx, name, now),
                "runners": fleet.provider_count(name),
                "max_runners": provider_config.max_runners or None,  # null: no limit
                "leaving": fleet.leaving_on(name),
                "weight": provider_config.weight,
                "reachable": fleet.is_reachable(name),
                "error": "" if fleet.is_reachable(name) else ctx.findings.list_errors.get(name, ""),
                "kept": kept,
                "written_off_in": written_off_in,
                "disabled": fleet.is_disabled(name),
                "draining": name in ctx.findings.draining_providers,
                # What its listings said that was not believed (rungar.engine.reconcile.ownership).
                "listing_faults": [
                    sentence
                    for (lister, _, _), sentence in ctx.findings.listing_faults.items()
                    if lister == name
                ][-LISTING_FAULTS_SHOWN:],
                "runtime_change": fleet.disabled_at_runtime(name) is not None,
                "runner_version": str(reported[name]) if name in reported else None,
                "runner_deadline": deadlines.get(name),
                "hold": None
                if hold is None
                else {
                    "holder": hold.holder,
                    "priority": hold.priority,
                    "left": round(hold.remaining(now, fleet.timing.hold_duration), 1),
                },
            }
        )
    return providers


def skips_document(ctx: EngineContext, now: float) -> list[dict[str, Any]]:
    """Every backoff and crash loop in force: which scale set skips which provider, and why."""
    fleet = ctx.fleet
    skips = []
    for scale_set, provider, backoff in sorted(fleet.active_backoffs(now)):
        left = backoff.remaining(now)
        skips.append(
            {
                "scale_set": scale_set,
                "provider": provider,
                "full": backoff.full,
                "refusals": backoff.refusals,
                "left": round(left, 1),
                "error": backoff.last_error,
                "resource": backoff.resource,
                "sentence": skip_sentence(
                    scale_set, provider, backoff.full, backoff.refusals, left, backoff.last_error
                ),
            }
        )
    for scale_set, provider, loop in sorted(fleet.active_crash_loops(now)):
        left = loop.remaining(now)
        runner, output = ctx.findings.crash_output.get((scale_set, provider), ("", ()))
        skips.append(
            {
                "scale_set": scale_set,
                "provider": provider,
                "full": False,
                "crash_loop": True,
                "refusals": loop.refusals,
                "left": round(left, 1),
                "error": loop.last_error,
                "resource": "",
                "sentence": crash_sentence(
                    scale_set, provider, loop.last_error, loop.refusals, left
                ),
                "runner": runner,
                "output": list(output),
            }
        )
    for wait in fleet.host_waits(now):
        left = wait.host.left(now)
        skips.append(
            {
                "scale_set": wait.scale_set,
                "provider": wait.provider,
                "full": False,
                "waits_for_host": wait.host.provider,
                "refusals": 0,
                "left": round(left, 1),
                "error": "",
                "resource": "",
                "confidence": round(wait.host.confidence, 3),
                "sentence": waits_for_host(wait.scale_set, wait.provider, wait.host.provider, left),
            }
        )
    for scale_set in sorted(ctx.sets):
        for provider in ctx.sets[scale_set].config.provider_names:
            reason = fleet.versions.refused(scale_set, provider)
            if reason is not None:
                skips.append(
                    {
                        "scale_set": scale_set,
                        "provider": provider,
                        "full": False,
                        "outdated": True,
                        "refusals": 0,
                        "left": 0,
                        "error": reason,
                        "resource": "",
                        "sentence": outdated_sentence(scale_set, provider, reason),
                    }
                )
    return skips


def runners_document(ctx: EngineContext, now: float) -> list[dict[str, Any]]:
    runners = []
    for record in sorted(ctx.runners, key=lambda r: (r.scale_set, r.created_at, r.name)):
        runners.append(
            {
                "name": record.name,
                "scale_set": record.scale_set,
                "provider": record.provider,
                # Stable values; the CLI and the fleet page put them in words.
                "state": record.state.value,
                # Recalled from the state database at a restart, its provider silent since.
                "machine": "not_listed" if record.recalled else record.machine.value,
                "github": GITHUB_STATES.get(record.github, "unknown"),
                "age": round(now - record.created_at, 1) if record.created_at else None,
                "job": record.job,
            }
        )
    return runners
