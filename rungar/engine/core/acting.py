"""Whether this daemon may touch the fleet: the one guard every concern that acts asks.

A daemon that acts alone always may. With active and standby daemons
(:mod:`rungar.daemon.lease`) only the holder of the lease acts, and it creates only once it
has adopted what the last active daemon left (else those runners would count as missing).
"""

from __future__ import annotations

from typing import Any, Protocol


class Lease(Protocol):
    """The daemon's side of the lease as the guard, readiness and ``rungar status`` read it
    (:class:`rungar.daemon.lease.LeaseKeeper`)."""

    @property
    def lead(self) -> str: ...

    def acts(self) -> bool: ...

    def may_create(self) -> bool: ...

    def document(self) -> dict[str, Any]: ...


class ActingGuard:
    def __init__(self) -> None:
        # Active and standby (rungar.daemon.lease): None for a daemon that acts alone.
        self.lease: Lease | None = None

    def acting(self) -> bool:
        """Whether this daemon may touch the fleet: a standby never removes, adopts, sweeps or
        deletes anything (the active daemon does)."""
        return self.lease is None or self.lease.acts()

    def may_create(self) -> bool:
        """Whether it may create: it acts, and has adopted what the last active daemon left."""
        return self.lease is None or self.lease.may_create()
