"""The sync of starting runners: every ``timing.starting_sync_interval`` (5 s), runners still
starting are checked against GitHub's runner list and their providers' listings, between
reconcile passes (docs/architecture.md).

A pass comes every ``reconcile_interval`` (30 s); without this, a runner that connected just
after one would be counted as starting, and its boot timed, up to 30 s late, and an idle
surplus would wait that long to go. The list is the installation's shared one
(:mod:`rungar.github.runner_list`: at most one request per 15 s whoever asks), so the sync
costs GitHub nothing beyond what the passes ask, and a connection is seen within about 20 s.

Only good news is taken from it: a runner GitHub lists online or busy has connected (its boot
is timed then, and its scale set's decision is applied again so an idle surplus can go). A
runner the list does not show yet is left to the pass, which judges that with the runner's
age: the list may be older than the runner's registration.

Each provider with a runner still starting is listed too: a runner whose machine stopped
before it ever connected (an image that exits at once) ends then, with the crash loop's
backoff and its registration removed, as the pass would end it up to ``reconcile_interval``
later. A machine missing from the listing is left to the pass. The listings are checked as the
pass checks them (:mod:`rungar.engine.reconcile.ownership`): a machine listed twice with
different states, or one another provider holds, ends no runner.
"""

from __future__ import annotations

import asyncio

import structlog

from rungar.engine.core.context import EngineContext
from rungar.engine.jobs.book import JobBook
from rungar.engine.jobs.scaler import Scaler
from rungar.engine.reconcile.listing_faults import note_listing_faults
from rungar.engine.reconcile.ownership import sort_listings
from rungar.engine.reconcile.reconciler import github_view, holders, list_provider
from rungar.engine.remove.removing import Removals
from rungar.model.machine import MachineState
from rungar.model.runner import GitHubState, RemovalReason, RunnerState

log = structlog.get_logger("rungar.engine")


class StartingSync:
    """Marks runners connected through the :class:`JobBook`, ends stopped ones through the
    :class:`Removals` and applies their scale sets' decisions again through the
    :class:`Scaler`."""

    def __init__(
        self, ctx: EngineContext, jobs: JobBook, removals: Removals, scaler: Scaler
    ) -> None:
        self.ctx = ctx
        self.jobs = jobs
        self.removals = removals
        self.scaler = scaler

    async def sync(self) -> list[str]:
        """Check the starting runners against GitHub once; the names of those that connected."""
        ctx = self.ctx
        if not ctx.acting():
            return []  # a standby ends nothing: the active daemon does
        if not any(r.state is RunnerState.STARTING for r in ctx.runners):
            return []  # nothing to ask about: no listing is asked for
        await self._end_stopped()
        registrations = await github_view(ctx)
        if registrations is None:
            return []
        connected: list[str] = []
        scale_sets: set[str] = set()
        for record in list(ctx.runners):
            if record.state is not RunnerState.STARTING:  # changed while the list was asked for
                continue
            status = registrations.get(record.scale_set, {}).get(record.name)
            if status is None or not (status.online or status.busy):
                continue
            record.runner_id = record.runner_id or status.id
            self.jobs.mark_connected(record)  # times its boot, forgives a crash loop
            record.offline_since = None
            record.github = GitHubState.BUSY if status.busy else GitHubState.IDLE
            record.state = RunnerState.BUSY if status.busy else RunnerState.IDLE
            connected.append(record.name)
            scale_sets.add(record.scale_set)
        for scale_set in sorted(scale_sets):
            ctx.spawn(self.scaler.scale(scale_set))
        return connected

    async def _end_stopped(self) -> list[str]:
        """List each provider with a starting runner; end the runners whose machine stopped."""
        ctx = self.ctx
        providers = sorted(
            {r.provider for r in ctx.runners if r.state is RunnerState.STARTING}
            & set(ctx.providers)
        )
        answers = await asyncio.gather(*(list_provider(ctx, p) for p in providers))
        # Checked as the pass checks them (ownership): a machine another provider holds, or
        # one listed twice with different states, ends no runner.
        listings = dict(zip(providers, answers, strict=True))
        listed = sort_listings(listings, holders(ctx, ctx.store.given_up()), ctx.installation)
        note_listing_faults(ctx, listed.faults)
        ended: list[str] = []
        for provider in providers:
            stopped = {
                name
                for name, (lister, machine) in listed.machines.items()
                if lister == provider and machine.state is MachineState.STOPPED
            }
            for record in ctx.runners.on(provider):
                if record.state is RunnerState.STARTING and record.name in stopped:
                    record.machine = MachineState.STOPPED
                    record.stopped_at = record.stopped_at or ctx.clock.now()
                    # a crash: backs the provider off
                    self.removals.let_go(record, RemovalReason.ENDED)
                    ctx.spawn(self.removals.settle_leaving(record))
                    ended.append(record.name)
        return ended

    async def forever(self) -> None:
        while True:
            await self.ctx.clock.sleep(self.ctx.config.timing.starting_sync_interval)
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("starting_sync.failed")
