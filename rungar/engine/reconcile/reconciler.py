"""One reconcile pass (docs/architecture.md), level-triggered.

1. List every provider by this installation's labels, in parallel. A provider that answers is
   reachable; one that does not is skipped by every scale set, and its runners are kept for
   ``unreachable_grace`` before being written off.
2. Settle create intents a crash left behind: adopt the machine if it exists, otherwise remove
   the registration (by its id, or by name in GitHub's list when the crash came before the id
   was known) — once every provider has been listed, so nothing is judged on half a view.
3. Delete the machines of creates given up on (their Create or its leftover's Delete got no
   answer), listed by the provider they were given up on after the give-up: never adopted.
   Adopt the other labelled machines nobody tracks (not being created, not let go meanwhile).
4. Machines that are gone or stopped end their runners; GitHub's view of each runner is synced
   and whatever can no longer serve is removed (at most one replacement per pass).
5. Leaving machines are deleted, concurrently (bounded), and retried every pass; each still
   counts for its provider until deleted. Those on an unreachable provider are not asked for
   until it lists again (a pass's List or a probe's), so a dead provider never stalls a pass.
6. Offline registrations with no machine, named like our runners, are swept after start_timeout
   (those of leftover scale sets too: no longer configured, their id recorded); leftover scale
   sets are warned about (:mod:`rungar.engine.core.leftovers`).
7. Counts are re-synced into placement, backoffs and holds saved, and every decision retried.

Steps 2 and 3 are pure plans (:func:`rungar.engine.reconcile.given_up_plan.plan_given_up`,
:func:`rungar.engine.reconcile.adoption.plan_adoption`), step 4's machines another
(:func:`rungar.engine.reconcile.sightings.plan_sightings`), each carried out after it is made;
in the later steps too each decision is taken before the awaits that carry it out, never between
two of them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from functools import partial

import structlog

from rungar.engine.core.context import EngineContext
from rungar.engine.core.leftovers import find_leftovers, note_leftovers
from rungar.engine.core.naming import belongs_to
from rungar.engine.core.records import RunnerRecord
from rungar.engine.jobs.book import JobBook
from rungar.engine.jobs.scaler import Scaler
from rungar.engine.reconcile import sightings as S
from rungar.engine.reconcile.adoption import INTERRUPTED_CREATE, UNTRACKED, plan_adoption
from rungar.engine.reconcile.given_up import settle_given_up
from rungar.engine.reconcile.given_up_plan import plan_given_up
from rungar.engine.reconcile.listing_faults import note_listing_faults
from rungar.engine.reconcile.ownership import SortedListings, sort_listings
from rungar.engine.reconcile.recall import RunnerKeeper, settle_recalled
from rungar.engine.reconcile.runner_versions import note_runner_deadlines, read_runner_version
from rungar.engine.reconcile.sightings import plan_sightings
from rungar.engine.remove.removing import Removals
from rungar.errors import GitHubError, ProviderError
from rungar.github.interface import RunnerStatus
from rungar.model import labels as L
from rungar.model import sentences
from rungar.model.create_intent import CreateIntent, GivenUpCreate
from rungar.model.machine import Machine, MachineState, Removal
from rungar.model.runner import GitHubState, LossReason, RemovalReason, RunnerState
from rungar.scaling.decide import decide_removal
from rungar.stopping import within

log = structlog.get_logger("rungar.reconcile")


def holders(ctx: EngineContext, given_up: Iterable[GivenUpCreate]) -> dict[str, str]:
    """The provider that holds each name: a tracked runner's, or the one a create was given
    up on (rungar.engine.reconcile.ownership)."""
    held = {entry.runner: entry.provider for entry in given_up}
    return held | {record.name: record.provider for record in ctx.runners}


async def list_provider(ctx: EngineContext, name: str) -> list[Machine] | None:
    """One provider's machines of this installation, or None when it did not answer. The answer
    is the only thing that makes an unreachable provider reachable again."""
    selector = L.installation_selector(ctx.installation)
    timeout = ctx.call_timeout(name)
    try:
        machines = await within(ctx.providers[name].list(selector), timeout, "List")
    except (ProviderError, TimeoutError) as e:
        ctx.metrics.provider_calls.labels(name, "list", "error").inc()
        ctx.findings.list_errors[name] = str(e) or type(e).__name__
        if ctx.fleet.set_reachable(name, False):
            log.warning(
                "provider.unreachable",
                sentence=sentences.UNREACHABLE_SINCE,
                provider=name,
                error=str(e),
            )
            ctx.events.record("provider", name, "unreachable", provider=name, message=str(e))
        ctx.metrics.provider_reachable.labels(name).set(0)
        return None
    ctx.metrics.provider_calls.labels(name, "list", "ok").inc()
    back = ctx.fleet.set_reachable(name, True)
    if back:
        log.info("provider.reachable", sentence=sentences.REACHABLE_AGAIN, provider=name)
        ctx.events.record("provider", name, "reachable", provider=name)
    await read_runner_version(ctx, name, again=back)
    ctx.metrics.provider_reachable.labels(name).set(1)
    return machines


async def list_providers(ctx: EngineContext) -> dict[str, list[Machine] | None]:
    """Every provider's machines of this installation; None where the provider did not answer."""

    async def one(name: str) -> tuple[str, list[Machine] | None]:
        return name, await list_provider(ctx, name)

    names = [n for n in ctx.providers if n in ctx.fleet.providers]
    return dict(await asyncio.gather(*(one(n) for n in names)))


async def github_view(ctx: EngineContext) -> dict[str, dict[str, RunnerStatus]] | None:
    """Registrations per scale set, from one call for all of them; None when GitHub could not
    be asked. Scale sets no longer configured whose id this installation recorded are in it
    too: their runners' state is synced (a busy one is not removed) and their offline
    registrations with no machine are swept as any other's."""
    names = {state.id: name for name, state in ctx.sets.items() if state.id}
    for leftover, recorded in ctx.store.scale_set_ids().items():
        if recorded and recorded not in names and leftover not in ctx.sets:
            names[recorded] = leftover
    if not names:
        return {}
    try:
        runners = await ctx.github.list_all_runners()
    except GitHubError as e:
        log.warning("github.list_runners_failed", error=str(e))
        return None
    ctx.findings.listed_runners = runners
    view: dict[str, dict[str, RunnerStatus]] = {name: {} for name in names.values()}
    for runner in runners:
        name = names.get(runner.scale_set_id)
        if name is not None:
            view[name][runner.name] = runner
    return view


def _busy(registrations: dict[str, dict[str, RunnerStatus]] | None) -> set[str] | None:
    """The runner names GitHub lists as busy; None when GitHub could not be asked."""
    if registrations is None:
        return None
    return {
        name for found in registrations.values() for name, status in found.items() if status.busy
    }


# Why a machine was adopted: the ``why`` attribute of its ``adopted`` event, and the message.
ADOPTED_WHY = {
    INTERRUPTED_CREATE: (
        "its create was cut short (the daemon stopped between asking and hearing back); "
        "the machine was found on the fleet"
    ),
    UNTRACKED: (
        "found on the fleet with this installation's labels, unknown to the daemon "
        "(a restart, or a runner whose record was lost)"
    ),
}


# A create of this daemon's own that got no clear answer (its provider did not answer, or a
# plugin restarted mid-call): the daemon did not stop.
UNANSWERED_CREATE = (
    "its create got no clear answer from {provider}; the machine was found on the fleet"
)


def _adopt(
    ctx: EngineContext,
    provider: str,
    machine: Machine,
    now: float,
    why: str,
    message: str = "",
) -> None:
    if not ctx.acting():
        return  # the lease ran out during the pass
    scale_set = machine.labels.get(L.SCALE_SET, "")
    record = RunnerRecord(
        name=machine.name,
        scale_set=scale_set,
        provider=provider,
        revision=machine.labels.get(L.REVISION, ""),
        created_at=machine.created_at,
        state=RunnerState.IDLE
        if machine.state is not MachineState.STOPPED
        else RunnerState.LEAVING,
        machine=machine.state,
        adopted=True,
        left_at=now,
    )
    if record.state is RunnerState.IDLE and now - machine.created_at <= _start_timeout(
        ctx, scale_set
    ):
        record.state = RunnerState.STARTING
    ctx.runners.add(record)
    if record.state is RunnerState.LEAVING:
        record.removal_reason = RemovalReason.ENDED.value
        record.removal = Removal(RemovalReason.ENDED)
    ctx.events.record(
        "runner",
        machine.name,
        "adopted",
        scale_set=scale_set,
        provider=provider,
        message=message or ADOPTED_WHY[why],
        why=why,
        machine_state=machine.state.value,
    )
    log.info(
        "runner.adopted",
        runner=machine.name,
        provider=provider,
        scale_set=scale_set,
        why=why,
        machine_state=machine.state.value,
    )


def _settled_without_machine(ctx: EngineContext, intent: CreateIntent) -> None:
    """A create a crash cut short, and no provider lists its machine: nothing to adopt, and
    its registration (if it got one) has been removed."""
    message = (
        "its create was cut short (the daemon stopped between asking and hearing back) and "
        "no provider lists its machine; its registration was removed"
    )
    if intent.created_at >= ctx.started_at:  # asked by this daemon: it did not stop
        message = (
            f"its create got no clear answer from {intent.provider or 'its provider'} and no "
            "provider lists its machine; its registration was removed"
        )
    ctx.events.record(
        "runner",
        intent.runner,
        "settled",
        scale_set=intent.scale_set,
        provider=intent.provider,
        message=message,
        why=INTERRUPTED_CREATE,
    )
    log.info(
        "runner.create_settled",
        runner=intent.runner,
        provider=intent.provider,
        scale_set=intent.scale_set,
        outcome="no machine; registration removed",
    )


def _machine_gone(ctx: EngineContext, record: RunnerRecord) -> None:
    """Its machine is no longer in its provider's listing: deleted outside Rungar, or it ended
    and its provider cleaned it up. Nothing is left to delete; the runner is settled."""
    ctx.events.record(
        "runner",
        record.name,
        "machine_gone",
        scale_set=record.scale_set,
        provider=record.provider,
        message=f"its machine is gone from {record.provider}'s listing; nothing is left to delete",
    )
    log.info(
        "runner.machine_gone",
        runner=record.name,
        provider=record.provider,
        scale_set=record.scale_set,
    )


def _start_timeout(ctx: EngineContext, scale_set: str) -> float:
    state = ctx.sets.get(scale_set)
    return state.config.start_timeout if state else ctx.config.timing.start_timeout


def _sync_github(
    record: RunnerRecord,
    status: RunnerStatus | None,
    now: float,
    connected: Callable[[RunnerRecord], None],
) -> None:
    """GitHub's view of the runner, taken into its record; ``connected`` is told the first
    time it is seen online or busy."""
    if status is None:
        if record.state is RunnerState.BUSY and record.github is GitHubState.BUSY:
            return  # GitHub's word that its job started is newer than a listing without it
        record.github = GitHubState.NOT_REGISTERED
        return
    record.runner_id = record.runner_id or status.id
    if status.busy or status.online:
        connected(record)
    if status.busy:
        record.github = GitHubState.BUSY
        record.connected = True
        record.offline_since = None
        if record.state is not RunnerState.LEAVING:
            record.state = RunnerState.BUSY
    elif status.online:
        record.github = GitHubState.IDLE
        record.connected = True
        record.offline_since = None
        if record.state in (RunnerState.STARTING, RunnerState.BUSY):
            record.state = RunnerState.IDLE
    else:
        if record.github is not GitHubState.OFFLINE or record.offline_since is None:
            record.offline_since = now
        record.github = GitHubState.OFFLINE


def export_gauges(ctx: EngineContext) -> None:
    """Runner gauges by state, pause flags, runners per provider, GitHub calls by code."""
    metrics = ctx.metrics
    for name, state in ctx.sets.items():
        live = ctx.runners.live(name)
        for runner_state in ("starting", "idle", "busy"):
            count = sum(1 for r in live if r.state.value == runner_state)
            if runner_state == "starting":
                count += ctx.runners.creating.count(name)
            metrics.runners_current.labels(name, runner_state).set(count)
        metrics.paused.labels(name).set(1 if state.paused else 0)
        minimum = state.minimum.min_runners if state.minimum else state.config.min_runners
        metrics.runners_min.labels(name).set(minimum)
    for scale_set, provider, count in ctx.runners.counts():
        metrics.provider_runners.labels(scale_set, provider).set(count)
    pace = ctx.registrations.view()
    metrics.registration_pace.set(pace.per_minute)
    metrics.registrations_waiting.set(pace.waiting)
    for provider_name, client in ctx.providers.items():
        reconnects = getattr(client, "reconnects", None)  # a gRPC provider's (rpc.reconnects)
        attempts = getattr(reconnects, "attempts", 0)
        seen = ctx.findings.reconnects_exported.get(provider_name, 0)
        if attempts > seen:
            metrics.provider_reconnects.labels(provider_name).inc(attempts - seen)
            ctx.findings.reconnects_exported[provider_name] = attempts
    counter = getattr(ctx.github, "counter", None)
    if counter is not None:
        for code, total in counter.snapshot().items():
            seen = ctx.findings.github_calls_exported.get(code, 0)
            if total > seen:
                metrics.github_requests.labels(code).inc(total - seen)
                ctx.findings.github_calls_exported[code] = total


def _write_off(ctx: EngineContext, record: RunnerRecord) -> None:
    """A runner on a provider unreachable for too long is forgotten; its machine is left alone."""
    log.warning(
        "runner.written_off",
        sentence=sentences.WRITTEN_OFF,
        runner=record.name,
        provider=record.provider,
    )
    if record.state is not RunnerState.LEAVING:
        ctx.fleet.remove_runner(record.scale_set, record.provider, leaving=False)
    ctx.runners.pop(record.name)
    ctx.metrics.lost.labels(record.scale_set, record.provider, LossReason.UNREACHABLE).inc()
    ctx.events.record(
        "runner",
        record.name,
        "lost",
        scale_set=record.scale_set,
        provider=record.provider,
        message="its provider has not answered for too long",
        reason=LossReason.UNREACHABLE.value,
    )
    if record.runner_id and not record.view().busy and ctx.acting():
        ctx.spawn(_unregister(ctx, record.runner_id))


async def _unregister(ctx: EngineContext, runner_id: int) -> None:
    with contextlib.suppress(GitHubError):
        await ctx.github.remove_runner(runner_id)


async def _sweep_orphans(
    ctx: EngineContext, registrations: dict[str, dict[str, RunnerStatus]], now: float
) -> None:
    for scale_set, found in registrations.items():
        timeout = _start_timeout(ctx, scale_set)
        for name, status in found.items():
            if not ctx.acting():
                return
            tracked = name in ctx.runners or name in ctx.runners.creating
            if tracked or status.online or status.busy or not belongs_to(name, scale_set):
                ctx.findings.orphans_seen.pop(name, None)
                continue
            first = ctx.findings.orphans_seen.setdefault(name, now)
            if now - first <= timeout:
                continue
            with contextlib.suppress(GitHubError):
                await ctx.github.remove_runner(status.id)
                ctx.findings.orphans_seen.pop(name, None)
                ctx.metrics.removed.labels(scale_set, "", RemovalReason.ORPHANED.value).inc()
                ctx.events.record(
                    "runner",
                    name,
                    "removed",
                    scale_set=scale_set,
                    provider="",  # a registration with no machine on any provider
                    message="an offline registration with no machine",
                    reason="orphaned",
                )
                log.info(
                    "runner.orphan_swept",
                    runner=name,
                    provider="",
                    scale_set=scale_set,
                    offline_for=round(now - first, 1),
                )


class Reconciler:
    """The reconcile pass, and the probe of unreachable providers between passes. Removes
    through :class:`Removals`, marks runners connected through the :class:`JobBook`, applies
    every scale set's decision again through the :class:`Scaler` and keeps the runner table
    through the :class:`RunnerKeeper`."""

    def __init__(
        self,
        ctx: EngineContext,
        scaler: Scaler,
        removals: Removals,
        jobs: JobBook,
        keeper: RunnerKeeper,
    ) -> None:
        self.ctx = ctx
        self.scaler = scaler
        self.removals = removals
        self.jobs = jobs
        self.keeper = keeper

    async def reconcile(self) -> None:
        ctx = self.ctx
        if not ctx.acting():
            return  # a standby adopts, removes and sweeps nothing: the active daemon does
        started = pass_began = ctx.clock.now()
        # What the daemon tracked when the listings were asked for: whatever of it is let go
        # while they are awaited is not adopted again from them (step 3).
        known_before = ctx.runners.names() | ctx.runners.creating.names()
        # Only these creates were given up on before the listings were asked for: only their
        # machines can be judged from them.
        given_up_before = {entry.runner for entry in ctx.store.given_up()}
        listings = await list_providers(ctx)
        every_listed = all(m is not None for m in listings.values())
        # Each runner is judged by its own provider's listing only, and a create given up on by
        # the listing of the provider it was given up on (rungar.engine.reconcile.ownership).
        given_up = ctx.store.given_up()
        listed = sort_listings(listings, holders(ctx, given_up), ctx.installation)
        note_listing_faults(ctx, listed.faults)
        machines = listed.machines
        now = ctx.clock.now()
        # runners recalled from the state database, on providers that answered
        settle_recalled(ctx, listings, machines, now, partial(_adopt, ctx), listed.doubtful)
        registrations = await github_view(ctx)
        given_up_plan = plan_given_up(
            given_up,
            listings=listings,
            machines=machines,
            before_listing=given_up_before,
            held=ctx.runners.names() | ctx.runners.creating.names(),
            busy=_busy(registrations),
            now=now,
            left_grace=ctx.config.timing.left_grace,
            unreachable_grace=ctx.config.timing.unreachable_grace,
            doubtful=listed.doubtful,
        )
        await settle_given_up(ctx, given_up_plan)
        dropped = known_before - ctx.runners.names() - ctx.runners.creating.names()
        await self._adopt_and_settle(
            machines, every_listed, registrations, now, listed.doubtful, frozenset(dropped)
        )
        await self._sightings(listings, listed, registrations, pass_began, now)
        await self._remove_what_cannot_serve(now)
        if registrations is not None:
            self._note_leftovers()
        # 5. leaving machines, all at once (bounded); those on unreachable providers wait
        leaving = [r for r in ctx.runners if r.state is RunnerState.LEAVING]
        await asyncio.gather(*(self.removals.settle_leaving(r) for r in leaving))
        # 6. orphaned registrations
        if every_listed and registrations is not None:
            await _sweep_orphans(ctx, registrations, now)
        # 7. counts, persistence, retries
        ctx.resync_fleet_counts()
        ctx.save_placement()
        self.keeper.remember(ctx.runners)
        for name in list(ctx.sets):
            ctx.metrics.last_reconcile.labels(name).set(now)
            await self.scaler.scale(name)
        export_gauges(ctx)
        note_runner_deadlines(ctx)
        took = max(0.0, ctx.clock.now() - started)
        ctx.metrics.reconcile_duration.observe(took)
        log.info("reconcile.pass", runners=len(ctx.runners), duration=round(took, 3))

    async def _adopt_and_settle(
        self,
        machines: dict[str, tuple[str, Machine]],
        every_listed: bool,
        registrations: dict[str, dict[str, RunnerStatus]] | None,
        now: float,
        doubtful: frozenset[str],
        dropped: frozenset[str],
    ) -> None:
        """2. intents left by a crash (never those of creates in flight now), and 3. what
        nobody tracks: decided in one step, then carried out. An intent without the
        registration's id (the crash came while GitHub's answer was in flight) finds it by
        name in GitHub's list; while GitHub cannot be asked it waits for a later pass."""
        ctx = self.ctx
        plan = plan_adoption(
            machines=machines,
            every_listed=every_listed,
            intents=ctx.store.intents(),
            tracked=ctx.runners.names(),
            creating=ctx.runners.creating,
            given_up={entry.runner for entry in ctx.store.given_up()},
            installation=ctx.installation,
            doubtful=doubtful,
            dropped=dropped,
        )
        for name in plan.cleared:
            ctx.store.clear_intent(name)
        for adoption in plan.adopt:
            message = ""
            if adoption.why == INTERRUPTED_CREATE and adoption.asked_at >= ctx.started_at:
                message = UNANSWERED_CREATE.format(provider=adoption.provider)
            _adopt(ctx, adoption.provider, adoption.machine, now, adoption.why, message)
            record = ctx.runners.get(adoption.machine.name)
            if record is not None and adoption.runner_id:
                record.runner_id = adoption.runner_id
        for intent in plan.settled:
            if not ctx.acting():
                break  # the lease ran out during the pass: the active daemon settles the rest
            runner_id = intent.runner_id
            if not runner_id:
                if registrations is None:
                    continue
                listed = registrations.get(intent.scale_set, {}).get(intent.runner)
                runner_id = listed.id if listed is not None else 0
            # its registration goes before its intent, so a crash in between leaves the intent
            if runner_id:
                with contextlib.suppress(GitHubError):
                    await ctx.github.remove_runner(runner_id)
            ctx.store.clear_intent(intent.runner)
            _settled_without_machine(ctx, intent)

    async def _sightings(
        self,
        listings: dict[str, list[Machine] | None],
        listed: SortedListings,
        registrations: dict[str, dict[str, RunnerStatus]] | None,
        pass_began: float,
        now: float,
    ) -> None:
        """4. machines gone, stopped or on unreachable providers; GitHub's view."""
        ctx = self.ctx
        timing = ctx.config.timing
        connected = self.jobs.mark_connected
        sightings = plan_sightings(
            list(ctx.runners),
            listings=listings,
            machines=listed.machines,
            doubtful=listed.doubtful,
            registrations=registrations,
            pass_began=pass_began,
            now=now,
            unreachable_grace=timing.unreachable_grace,
            reconcile_interval=timing.reconcile_interval,
        )
        unregister: list[int] = []  # decided in the plan, removed after it is carried out
        for sighting in sightings:
            record = ctx.runners.get(sighting.runner)
            if record is None:
                continue
            if sighting.kind in (S.UNREACHABLE, S.WRITTEN_OFF):
                record.unreachable_since = sighting.since
                if sighting.kind == S.WRITTEN_OFF:
                    _write_off(ctx, record)
                elif record.recalled and registrations and record.scale_set in registrations:
                    # What it did since the restart is GitHub's to tell while its provider is
                    # silent.
                    status = registrations[record.scale_set].get(record.name)
                    _sync_github(record, status, now, connected)
                continue
            record.unreachable_since = None
            if sighting.kind == S.LEFT_REGISTERED and sighting.registration is not None:
                unregister.append(sighting.registration.id)
                continue
            if sighting.kind == S.GONE:
                _machine_gone(ctx, record)
                self.removals.let_go(record, RemovalReason.ENDED)
                continue
            if sighting.machine is not None:
                record.machine = sighting.machine.state
            if sighting.kind in (S.STOPPED, S.STOPPED_AWAITING_JOB):
                record.stopped_at = sighting.since
            if sighting.kind == S.STOPPED:
                if sighting.unregister:
                    unregister.append(record.runner_id)
                self.removals.let_go(record, RemovalReason.ENDED)
            elif sighting.kind == S.LISTED and sighting.synced:
                _sync_github(record, sighting.registration, now, connected)
        for runner_id in unregister:
            with contextlib.suppress(GitHubError):
                await ctx.github.remove_runner(runner_id)

    async def _remove_what_cannot_serve(self, now: float) -> None:
        """Runners that can no longer serve (decided per scale set), then the idle runners of
        scale sets no longer configured; their machines go with the pass's other deletes."""
        ctx = self.ctx
        removals = []
        for name, state in ctx.sets.items():
            views = [r.view() for r in ctx.runners.of(name)]
            revisions = ctx.revisions(name)
            removals += decide_removal(views, state.config, revisions, now, ctx.config.timing)
        for removal in removals:
            record = ctx.runners.get(removal.name)
            if record is not None:
                await self.removals.remove(
                    record, removal.reason, forced=removal.forced, delete=False
                )
        drained = [
            record
            for record in ctx.runners
            if record.scale_set not in ctx.sets
            and record.state is not RunnerState.LEAVING
            and not record.view().busy
        ]
        for record in drained:
            await self.removals.remove(record, RemovalReason.SCALE_SET_REMOVED, delete=False)

    def _note_leftovers(self) -> None:
        ctx = self.ctx
        findings = ctx.findings
        configured = {name for name, state in ctx.sets.items() if not state.removed}
        found = find_leftovers(
            configured, ctx.runners, findings.listed_runners, ctx.store.scale_set_ids()
        )
        findings.leftovers_reported = note_leftovers(
            ctx.metrics, found, findings.leftovers_reported
        )
        findings.leftovers = found

    async def probe_unreachable(self) -> list[str]:
        """List every unreachable provider once, between passes (``timing.probe_interval``);
        the providers that answered, which are back in placement at once: the scale sets
        using them try again, and the machines left on them are deleted."""
        ctx = self.ctx
        fleet = ctx.fleet
        names = [n for n in ctx.providers if n in fleet.providers and not fleet.is_reachable(n)]
        answers = await asyncio.gather(*(list_provider(ctx, n) for n in names))
        back = [name for name, found in zip(names, answers, strict=True) if found is not None]
        for name in back:
            leaving = [r for r in ctx.runners.on(name) if r.state is RunnerState.LEAVING]
            for record in leaving:
                ctx.spawn(self.removals.settle_leaving(record))
        for scale_set, state in ctx.sets.items():
            if any(name in state.config.provider_names for name in back):
                ctx.spawn(self.scaler.scale(scale_set))
        return back
