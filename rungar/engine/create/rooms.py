"""Room opening on a provider, and who gets it (docs/placement.md, "Room that opens").

The fleet reports room opening (:class:`rungar.placement.RoomOpened`): a machine deleted, a
create there refused or abandoned. Two things follow at once:

- the provider's holder is scaled now, its backoff there already lifted: its Create is sent
  within moments of the room opening, not after its backoff or the next reconcile pass;
- an idle runner (never a busy one) on a dearer provider is replaced by one here: the new one
  is created first, then the idle one removed (:meth:`rungar.placement.Fleet.replacement`).

How long held room stood empty before its holder took it is kept per (holder, provider) and
recorded with the runner's ``created`` event (``held_room_idle``, seconds on the engine's clock).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from rungar.engine.core.context import EngineContext
from rungar.engine.core.records import RunnerRecord
from rungar.model import sentences
from rungar.model.runner import RunnerState
from rungar.placement import RoomOpened

log = structlog.get_logger("rungar.engine")

Work = Coroutine[Any, Any, Any]


class Rooms:
    """Given the engine's context and how to scale a scale set now (``scale``), create a
    scale set's runner on a provider priced below a price (``create_cheaper``) and remove an
    idle runner (``remove``)."""

    def __init__(
        self,
        ctx: EngineContext,
        *,
        scale: Callable[[str], Work],
        create_cheaper: Callable[[str, float], Coroutine[Any, Any, RunnerRecord | None]],
        remove: Callable[[RunnerRecord], Work],
    ) -> None:
        self.ctx = ctx
        self.scale = scale
        self.create_cheaper = create_cheaper
        self.remove = remove
        self._opened: dict[tuple[str, str], float] = {}  # (holder, provider) -> first opened
        # Scale sets waiting for a host's expected room: when each is scaled again, and the
        # task that sleeps until then (apart from the engine's work in flight, which a clean
        # stop waits for: a wait may last minutes, and is cancelled instead, cancel_wakes).
        self._wakes: dict[str, tuple[float, asyncio.Task[None]]] = {}

    def opened(self, opened: RoomOpened) -> None:
        """Act on room opened: the holder is tried there now; a dearer idle runner replaced."""
        ctx = self.ctx
        if not ctx.acting():
            return
        self._forget_stale(opened.at)
        if opened.holder:
            self._opened.setdefault((opened.holder, opened.provider), opened.at)
            log.info(
                "provider.room_opened",
                provider=opened.provider,
                scale_set=opened.holder,
                sentence=f"room opened on {opened.provider}: trying {opened.holder} there now",
            )
            ctx.spawn(self.scale(opened.holder))
        for waiting in ctx.fleet.waiting_for_host(opened.provider, opened.at):
            if waiting != opened.holder:  # its wait was for this room: tried now, not later
                ctx.spawn(self.scale(waiting))
        idle = [r.view() for r in ctx.runners if _never_busy_idle(r)]
        runner = ctx.fleet.replacement(opened.provider, idle, opened.at)
        if runner is not None:
            ctx.spawn(self._replace(runner.name))

    def wake_later(self, scale_set: str) -> None:
        """A scale set whose runner waits for a host's expected room (a priced provider with
        ``overflow: when_host_is_later``) is scaled again when the host is to be tried, or
        when its wait ends and the priced provider takes it (docs/placement.md)."""
        ctx = self.ctx
        now = ctx.clock.now()
        at = ctx.fleet.wake_at(scale_set, now)
        if at is None:
            return
        if at <= now:  # the host is kept off for another reason: asked again, not at once
            at = now + ctx.config.timing.backoff_first
        pending = self._wakes.get(scale_set)
        if pending is not None and now < pending[0] <= at and not pending[1].done():
            return  # an earlier wake stands; it looks again then
        if pending is not None:
            pending[1].cancel()
        for wait in ctx.fleet.host_waits(now):
            if wait.scale_set == scale_set:
                sentence = sentences.waits_for_host(
                    scale_set, wait.provider, wait.host.provider, wait.host.left(now)
                )
                ctx.events.record(
                    "scale_set",
                    scale_set,
                    "waits_for_host",
                    scale_set=scale_set,
                    provider=wait.provider,
                    host=wait.host.provider,
                    message=sentence,
                    room_in=round(wait.host.left(now), 1),
                    confidence=round(wait.host.confidence, 3),
                    # it would not have been tried anyway: at its own max_runners
                    at_limit=ctx.fleet.at_limit(wait.provider),
                )
                log.info("scale_set.waits_for_host", sentence=sentence, scale_set=scale_set)
                break
        self._wakes[scale_set] = (at, asyncio.ensure_future(self._wake(scale_set, at)))

    async def _wake(self, scale_set: str, at: float) -> None:
        ctx = self.ctx
        await ctx.clock.sleep(max(0.0, at - ctx.clock.now()))
        self._wakes.pop(scale_set, None)
        if ctx.acting():
            ctx.spawn(self.scale(scale_set))

    def waking(self) -> dict[str, float]:
        """The scale sets to be scaled again for a host's expected room, and when."""
        return {name: at for name, (at, task) in self._wakes.items() if not task.done()}

    def cancel_wakes(self) -> None:
        """The engine stops: no scale set is woken any more."""
        for _, task in self._wakes.values():
            task.cancel()
        self._wakes.clear()

    def taken(self, scale_set: str, provider: str, now: float) -> float | None:
        """A runner of ``scale_set`` was created on ``provider``: how long the room held for it
        there stood empty, or None when none was."""
        since = self._opened.pop((scale_set, provider), None)
        for key in [k for k in self._opened if k[0] == scale_set]:
            del self._opened[key]  # its holds lifted: room elsewhere was not its to take
        return None if since is None else max(0.0, now - since)

    def _forget_stale(self, now: float) -> None:
        duration = self.ctx.fleet.timing.hold_duration
        for key, since in list(self._opened.items()):
            if self.ctx.fleet.hold_on(key[1], now) is None and now - since > duration:
                del self._opened[key]

    async def _replace(self, name: str) -> None:
        old = self.ctx.runners.get(name)
        if old is None:
            return
        new = await self.create_cheaper(old.scale_set, self.ctx.fleet.price_of(old.provider))
        if new is None:
            return
        old = self.ctx.runners.get(name)
        if old is None or not _never_busy_idle(old):
            return  # it took a job meanwhile (or went): the scale step removes any surplus
        log.info(
            "runner.replaced",
            runner=name,
            by=new.name,
            scale_set=old.scale_set,
            provider=old.provider,
            to=new.provider,
            sentence=f"idle {name} on {old.provider} replaced by {new.name} on {new.provider}",
        )
        await self.remove(old)


def _never_busy_idle(record: RunnerRecord) -> bool:
    return record.state is RunnerState.IDLE and not record.job and not record.view().busy
