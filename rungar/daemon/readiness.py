"""When the daemon is ready, and who is told: systemd (``Type=notify``), ``/readyz``, and
``rungar status --wait-ready``.

The daemon is ready when every configured scale set has its message session (LISTENING) or
stands by because another daemon holds it (WAITING): jobs routed to any of its labels are
then served. Until then, and again whenever a scale set loses its session, it is not. Of two
daemons of one installation, one is ready once it holds the lease and listens on every scale
set, the other once GitHub has said the lead scale set's session is held elsewhere.

systemd is told over the datagram socket it names in ``NOTIFY_SOCKET`` (the protocol of
``sd_notify(3)``, a few lines of the standard library): a ``STATUS=`` line each time a scale
set comes up or goes down, ``READY=1`` the first time all are up, and ``STOPPING=1`` when the
daemon stops. Without ``NOTIFY_SOCKET`` (not started by systemd) nothing is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from rungar.engine.core.acting import Lease
from rungar.engine.core.context import EngineContext
from rungar.engine.core.scale_set_state import ScaleSetState
from rungar.model.phase import Phase
from rungar.model.sentences import LEAD_NOTE

log = structlog.get_logger("rungar.readiness")

UP = (Phase.LISTENING, Phase.WAITING)


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    up: int  # scale sets with their session, or waiting for another daemon's
    total: int
    waiting_for: tuple[str, ...] = ()  # the scale sets not up yet, by name

    @property
    def sentence(self) -> str:
        if self.ready:
            return f"ready: {self.up} of {self.total} scale sets have their message session"
        names = ", ".join(self.waiting_for[:5]) + (", ..." if len(self.waiting_for) > 5 else "")
        return f"{self.up} of {self.total} scale sets have their message session; not yet {names}"


def readiness(sets: Mapping[str, ScaleSetState], lease: Lease | None) -> Readiness:
    """The daemon's readiness now, from its scale sets' phases and its lease (None for a
    daemon that acts alone); read on the engine's event loop."""
    configured = [(n, s) for n, s in list(sets.items()) if not s.removed]
    down = tuple(name for name, state in configured if not _up(sets, lease, state))
    return Readiness(not down, len(configured) - len(down), len(configured), down)


def _up(sets: Mapping[str, ScaleSetState], lease: Lease | None, state: ScaleSetState) -> bool:
    """LISTENING; or WAITING because another daemon holds the session. With two daemons of
    one installation, a scale set waiting for this daemon's lease is up only once GitHub has
    said another daemon holds the lead (this one stands by): until the lease is decided, or
    while the active daemon's listeners start, it is not."""
    if state.phase is Phase.LISTENING:
        return True
    if state.phase is not Phase.WAITING:
        return False
    if lease is None or state.note != LEAD_NOTE:
        return True
    lead = sets.get(lease.lead)
    return not lease.acts() and lead is not None and lead.phase is Phase.WAITING


def notify(message: str, environ: dict[str, str] | None = None) -> bool:
    """Send one ``sd_notify`` message; False when there is no NOTIFY_SOCKET or it fails."""
    address = (environ if environ is not None else os.environ).get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):  # an abstract socket
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError as e:
        log.warning("systemd.notify_failed", error=str(e))
        return False
    return True


class ReadinessReporter:
    """Follows the scale sets' phases on the event loop and tells systemd of each change.

    ``current`` is replaced whole on every change, so the metrics listener's thread can read
    it for ``/readyz`` without touching the engine.
    """

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self.current = readiness(ctx.sets, ctx.lease)
        self.told_ready = False
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        ctx.phase_watchers.append(self._changed.set)

    def answer(self) -> tuple[bool, str]:
        """For ``/readyz``, from any thread."""
        current = self.current
        return current.ready, current.sentence

    def start(self) -> None:
        self._report(force=True)
        self._task = asyncio.get_running_loop().create_task(self._follow())

    async def stop(self) -> None:
        notify("STOPPING=1\nSTATUS=stopping; every runner is left in place")
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _report(self, force: bool = False) -> None:
        now = readiness(self.ctx.sets, self.ctx.lease)
        if now == self.current and not force:
            return
        self.current = now
        message = f"STATUS={now.sentence}"
        if now.ready and not self.told_ready:
            message = "READY=1\n" + message
            self.told_ready = True
            log.info("daemon.ready", scale_sets=now.total)
        notify(message)

    async def _follow(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            self._report()
