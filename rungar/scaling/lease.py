"""Which of two daemons of one installation acts: the lease (docs/operating.md, "Running a
standby").

Two daemons with the same configuration on two machines: one acts, the other stands by. The
lock is GitHub's own rule that one message session at a time holds a scale set, applied to the
first configured scale set (the *lead*), plus an explicit lease on top of it:

- The daemon whose lead session GitHub confirms (a session refresh that answers) holds the
  lease for ``lease_duration`` from that answer, and renews it every ``lease_renew_interval``.
- It acts (creates, removes, adopts, sweeps) only while the lease holds. A daemon cut off from
  GitHub stops acting when its lease runs out, without waiting to hear that it lost anything.
- GitHub saying the session is gone, or that another owner's session holds the lead scale set
  (409), ends the lease at once.
- The standby asks for the lead session every ``standby_retry``; GitHub answers 409, naming the
  owner of the session that holds it, until that session ends (stopped cleanly) or GitHub
  expires it (a daemon killed or cut off stops polling). Then the standby's session opens, is
  confirmed, and it holds the lease: a new *term*, which begins by adopting what exists.

Pure: every function takes ``now``; nothing here reads a clock or does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


class Role(StrEnum):
    ACTIVE = "active"
    STANDBY = "standby"


class Heard(StrEnum):
    """What GitHub said of this daemon's lead session since the last look."""

    CONFIRMED = "confirmed"  # the session answered a refresh: it is ours
    GONE = "gone"  # GitHub says the session no longer exists
    HELD_ELSEWHERE = "held_elsewhere"  # 409: another owner's session holds the lead scale set
    NOTHING = "nothing"  # no answer (an error, a timeout) or nothing asked


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    duration: float = 30.0  # the lease lasts this long after GitHub last confirmed it
    renew_interval: float = 10.0  # the active daemon confirms it this often
    standby_retry: float = 5.0  # the standby asks for the lead session this often


@dataclass(frozen=True, slots=True)
class Lease:
    """This daemon's lease as it knows it. ``term`` counts the terms it has held: each one
    begins with an adoption pass, and nothing is created in a term before that pass ran."""

    role: Role = Role.STANDBY
    held_since: float = 0.0
    renewed_at: float = 0.0
    term: int = 0
    holder: str = ""  # standing by: the owner GitHub named for the session holding the lead
    holder_seen_at: float = 0.0  # when GitHub last said so

    def expires_at(self, timing: LeaseTiming) -> float:
        return self.renewed_at + timing.duration if self.role is Role.ACTIVE else 0.0


def acts(lease: Lease, now: float, timing: LeaseTiming) -> bool:
    """Whether this daemon may act now: it holds the lease and the lease has not run out."""
    return lease.role is Role.ACTIVE and now < lease.expires_at(timing)


def renewal_due(lease: Lease, now: float, timing: LeaseTiming) -> bool:
    """Whether to ask GitHub to confirm the lead session now. A standby whose session opened
    asks at once (that answer is what makes it active); the active one every renew_interval."""
    if lease.role is not Role.ACTIVE:
        return True
    return now - lease.renewed_at >= timing.renew_interval


def observe(lease: Lease, heard: Heard, now: float, timing: LeaseTiming, holder: str = "") -> Lease:
    """The lease after hearing ``heard`` at ``now``. A lease that ran out is a standby's first:
    a confirmation after that starts a new term (and a new adoption pass)."""
    if lease.role is Role.ACTIVE and not acts(lease, now, timing):
        lease = standing_by(lease)
    if heard is Heard.CONFIRMED:
        if lease.role is Role.ACTIVE:
            return replace(lease, renewed_at=now)
        return Lease(Role.ACTIVE, held_since=now, renewed_at=now, term=lease.term + 1)
    if heard is Heard.GONE:
        return standing_by(lease)
    if heard is Heard.HELD_ELSEWHERE:
        return replace(standing_by(lease), holder=holder, holder_seen_at=now)
    return lease


def standing_by(lease: Lease) -> Lease:
    """The same lease, given up (its term number kept)."""
    if lease.role is Role.STANDBY:
        return lease
    return Lease(Role.STANDBY, term=lease.term)
