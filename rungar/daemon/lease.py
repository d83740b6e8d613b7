"""Active and standby: the daemon's side of the lease (docs/operating.md, "Running a standby").

The decisions are pure (:mod:`rungar.scaling.lease`); this module looks at the lead scale set's
message session every tick, asks GitHub to confirm it when a renewal is due, and carries out
role changes:

- becoming active starts a new term: the other scale sets' listeners start, and a reconcile
  pass adopts what exists before anything is created (:meth:`LeaseKeeper.may_create` is false
  until a pass that began in this term has ended);
- standing by (GitHub says the session is gone or another owner holds it, or the lease ran
  out) forgets every runner, stops the other scale sets' listeners (their sessions are
  deleted, so the new active daemon gets them at once), and from then on the engine's
  acting guard (:mod:`rungar.engine.core.acting`) refuses to create, remove, adopt or sweep.

Each change is logged, recorded as an event (``daemon`` ``active``/``standby``) and shown by
the ``rungar_active`` gauge.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import structlog

from rungar.config.model import Timing
from rungar.engine.core.acting import Lease as DaemonLease
from rungar.engine.core.context import EngineContext
from rungar.errors import GitHubError
from rungar.model.phase import Phase
from rungar.scaling.lease import (
    Heard,
    Lease,
    LeaseTiming,
    Role,
    acts,
    observe,
    renewal_due,
)
from rungar.stopping import within

log = structlog.get_logger("rungar.lease")

# Shortest pause between two looks, so a tiny configured retry cannot spin the loop.
MIN_TICK = 0.05


def lease_timing(timing: Timing) -> LeaseTiming:
    return LeaseTiming(timing.lease_duration, timing.lease_renew_interval, timing.standby_retry)


def forget_runners(ctx: EngineContext) -> int:
    """A daemon that stands by no longer tracks anything: the active one does. Its machines are
    left as they are; the next term adopts them again."""
    names = [record.name for record in ctx.runners]
    for name in names:
        ctx.runners.pop(name)
    ctx.resync_fleet_counts()
    return len(names)


def lead_change_refused(keeper: DaemonLease | None, scale_sets: Sequence[str]) -> str:
    """Why a configuration applied at runtime (or a scale set removed) cannot be: it moves or
    drops the lead, whose message session is the lease. "" when it keeps the lead first."""
    if keeper is None or (scale_sets and scale_sets[0] == keeper.lead):
        return ""
    return (
        f"scale set {keeper.lead} is the lead (the first in the file): its message session "
        "decides which daemon acts, so it stays first while the daemon runs; to change the "
        "lead, change the file and restart both daemons"
    )


class LeaseKeeper:
    """Holds, renews or waits for the lease of one daemon.

    ``on_active`` and ``on_standby`` are the run loop's: start the other listeners and run a
    pass now; stop them."""

    def __init__(
        self,
        ctx: EngineContext,
        *,
        lead: str,
        owner: str,
        on_active: Callable[[], None] = lambda: None,
        on_standby: Callable[[], None] = lambda: None,
    ) -> None:
        self.ctx = ctx
        self.lead = lead
        self.owner = owner
        self.lease = Lease()
        self.adopted_term = 0  # the last term whose adoption pass has ended
        self.active = asyncio.Event()  # set while this daemon holds the lease
        self.on_active = on_active
        self.on_standby = on_standby
        self._poked = asyncio.Event()
        # GitHub left the lease unconfirmed (no answer, or an error) since this time; 0 = it
        # answered the last look. ``unconfirmed_why`` says how, for rungar status.
        self.unconfirmed_since = 0.0
        self.unconfirmed_why = ""
        ctx.metrics.active.set(0)

    @property
    def timing(self) -> LeaseTiming:
        return lease_timing(self.ctx.config.timing)

    # ------------------------------------------------------------------ the engine asks

    def acts(self) -> bool:
        """Whether this daemon may act now (remove, adopt, sweep, settle)."""
        return acts(self.lease, self.ctx.clock.now(), self.timing)

    def may_create(self) -> bool:
        """Whether it may create: it acts, and this term's adoption pass has ended, so nothing
        the last active daemon left is counted as missing."""
        return self.acts() and self.adopted_term == self.lease.term

    def pass_begins(self) -> int:
        """The term a reconcile pass starting now runs in (0: none, it does nothing)."""
        return self.lease.term if self.acts() else 0

    def pass_ended(self, term: int) -> bool:
        """A pass of ``term`` has ended; True when it was the term's adoption pass."""
        if not term or term != self.lease.term or self.adopted_term == term or not self.acts():
            return False
        self.adopted_term = term
        log.info("lease.adopted", term=term, runners=len(self.ctx.runners))
        return True

    def is_lead(self, scale_set: str) -> bool:
        return scale_set == self.lead

    def document(self) -> dict[str, Any]:
        """For ``rungar status``: this daemon's role and what it knows of the lease."""
        lease, timing = self.lease, self.timing
        now = self.ctx.clock.now()
        active = acts(lease, now, timing)
        return {
            "role": Role.ACTIVE.value if active else Role.STANDBY.value,
            "owner": self.owner,
            "lead": self.lead,
            "term": lease.term,
            "held_since": lease.held_since if active else None,
            "renewed_at": lease.renewed_at if active else None,
            "expires_at": lease.expires_at(timing) if active else None,
            "holder": "" if active else lease.holder,
            "holder_seen_at": (lease.holder_seen_at or None) if not active else None,
            "adopted": active and self.adopted_term == lease.term,
            "unconfirmed_since": self.unconfirmed_since or None,
            "unconfirmed_why": self.unconfirmed_why,
        }

    # ------------------------------------------------------------------ the loop

    def poke(self) -> None:
        """Look now: the lead scale set's listener heard from GitHub (a session that opens
        publishes its statistics), so a standby need not wait for its next tick."""
        self._poked.set()

    async def run(self) -> None:
        while True:
            self._poked.clear()
            try:
                await self.look()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("lease.look_failed")
            timing = self.timing
            tick = max(MIN_TICK, min(timing.renew_interval, timing.standby_retry) / 2)
            sleeper = asyncio.ensure_future(self.ctx.clock.sleep(tick))
            poked = asyncio.ensure_future(self._poked.wait())
            try:
                await asyncio.wait({sleeper, poked}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                poked.cancel()

    async def look(self) -> None:
        """One look at the lead session: what GitHub said of it, and a renewal when due."""
        github = self.ctx.github
        clock = self.ctx.clock
        timing = self.timing
        now = clock.now()
        phase = github.session_phase(self.lead)
        heard, holder = Heard.NOTHING, ""
        if phase.phase is Phase.WAITING:
            heard, holder = Heard.HELD_ELSEWHERE, phase.holder
        elif renewal_due(self.lease, now, timing):
            try:
                confirmed = await within(
                    github.renew_session(self.lead), timing.renew_interval, "the lease renewal"
                )
            except (GitHubError, TimeoutError) as e:
                why = unconfirmed_why(e)
                log.warning("lease.not_renewed", error=why)
                self.unconfirmed_since = self.unconfirmed_since or now
                self.unconfirmed_why = why
            else:
                heard = Heard.CONFIRMED if confirmed else Heard.GONE
        if heard is not Heard.NOTHING:  # GitHub answered
            self.unconfirmed_since, self.unconfirmed_why = 0.0, ""
        # A confirmation counts from when it was asked: GitHub knew the session was ours then.
        lease = observe(self.lease, heard, now, timing, holder)
        if heard is Heard.HELD_ELSEWHERE and phase.holder_seen_at:
            lease = replace(lease, holder_seen_at=phase.holder_seen_at)
        self.apply(lease, heard, clock.now())

    def apply(self, lease: Lease, heard: Heard, now: float) -> None:
        """Take ``lease`` as this daemon's, carrying out the role change it makes."""
        old, self.lease = self.lease, lease
        was_active = old.role is Role.ACTIVE
        new_term = lease.role is Role.ACTIVE and lease.term != old.term
        if was_active and (lease.role is Role.STANDBY or new_term):
            self._stood_down(old, lease, heard, now)
        if new_term:
            self._took_over(lease)

    def _took_over(self, lease: Lease) -> None:
        ctx = self.ctx
        ctx.metrics.active.set(1)
        message = (
            f"{self.owner} holds the lease (the message session of scale set {self.lead}): "
            "it adopts what exists, then acts"
        )
        ctx.events.record("daemon", self.owner, "active", message=message, term=lease.term)
        log.info("lease.acquired", owner=self.owner, lead=self.lead, term=lease.term)
        self.active.set()
        self.on_active()

    def _stood_down(self, old: Lease, lease: Lease, heard: Heard, now: float) -> None:
        ctx = self.ctx
        if heard is Heard.HELD_ELSEWHERE:
            why = f"{lease.holder or 'another daemon'} holds the lead scale set's message session"
        elif heard is Heard.GONE:
            why = "GitHub says its lead scale set's message session is gone"
        else:
            silent = round(now - old.renewed_at, 1)
            why = f"GitHub has not confirmed the lease for {silent}s"
        ctx.metrics.active.set(0)
        forgotten = forget_runners(ctx)
        message = f"{self.owner} stands by: {why}; it forgot {forgotten} runners and acts no more"
        ctx.events.record("daemon", self.owner, "standby", message=message, term=old.term)
        log.warning("lease.lost", owner=self.owner, reason=why, runners_forgotten=forgotten)
        self.active.clear()
        self.on_standby()


GITHUB_SILENT = "GitHub does not answer: "  # how unconfirmed_why begins when no answer came


def unconfirmed_why(error: GitHubError | TimeoutError) -> str:
    """A failed lease renewal in words: "GitHub does not answer: the lease renewal timed out
    after 10 s" when no answer came, else what GitHub answered."""
    if isinstance(error, TimeoutError) or (isinstance(error, GitHubError) and error.status is None):
        return GITHUB_SILENT + (str(error) or type(error).__name__)
    return f"GitHub refused the lease renewal: {error}"


def github_silence(lease: DaemonLease | None) -> str:
    """What the last lease renewal met when GitHub gave it no answer at all ("the lease renewal
    timed out after 10 s"), or "" (GitHub answers, or answered with an error)."""
    why = str(lease.document().get("unconfirmed_why") or "") if lease is not None else ""
    return why.removeprefix(GITHUB_SILENT) if why.startswith(GITHUB_SILENT) else ""


async def stop_keeper(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
