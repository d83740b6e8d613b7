"""The lease that decides which of two daemons acts (rungar.scaling.lease), on a virtual clock:
every time below is an argument, so each case reads as a timeline."""

from __future__ import annotations

from rungar.scaling.lease import (
    Heard,
    Lease,
    LeaseTiming,
    Role,
    acts,
    observe,
    renewal_due,
    standing_by,
)

TIMING = LeaseTiming(duration=30.0, renew_interval=10.0, standby_retry=5.0)
T0 = 1_800_000_000.0


def active_since(t: float) -> Lease:
    return observe(Lease(), Heard.CONFIRMED, t, TIMING)


def test_a_daemon_that_has_heard_nothing_stands_by_and_does_not_act() -> None:
    assert Lease().role is Role.STANDBY
    assert not acts(Lease(), T0, TIMING)


def test_a_confirmed_lead_session_makes_a_standby_active_in_a_new_term() -> None:
    lease = observe(Lease(term=3), Heard.CONFIRMED, T0, TIMING)
    assert lease.role is Role.ACTIVE
    assert (lease.held_since, lease.renewed_at, lease.term) == (T0, T0, 4)
    assert acts(lease, T0, TIMING)


def test_a_renewal_keeps_the_term_and_moves_the_expiry() -> None:
    lease = observe(active_since(T0), Heard.CONFIRMED, T0 + 10, TIMING)
    assert (lease.held_since, lease.renewed_at, lease.term) == (T0, T0 + 10, 1)
    assert acts(lease, T0 + 39.9, TIMING)


def test_a_daemon_cut_off_from_github_stops_acting_when_its_lease_runs_out() -> None:
    lease = active_since(T0)
    for t in (T0 + 10, T0 + 20):  # renewals go unanswered
        lease = observe(lease, Heard.NOTHING, t, TIMING)
    assert acts(lease, T0 + 29.9, TIMING)
    assert not acts(lease, T0 + 30, TIMING)


def test_a_confirmation_after_the_lease_ran_out_starts_a_new_term() -> None:
    # The daemon stopped acting in between, so it adopts again before creating anything.
    lease = observe(active_since(T0), Heard.CONFIRMED, T0 + 31, TIMING)
    assert lease.role is Role.ACTIVE
    assert (lease.term, lease.held_since) == (2, T0 + 31)


def test_github_saying_the_session_is_gone_ends_the_lease_at_once() -> None:
    lease = observe(active_since(T0), Heard.GONE, T0 + 1, TIMING)
    assert lease.role is Role.STANDBY
    assert not acts(lease, T0 + 1, TIMING)
    assert lease.term == 1  # the term number is kept, so the next one is new


def test_another_owners_session_on_the_lead_makes_the_daemon_stand_by_naming_it() -> None:
    lease = observe(active_since(T0), Heard.HELD_ELSEWHERE, T0 + 2, TIMING, holder="b/42")
    assert lease.role is Role.STANDBY
    assert (lease.holder, lease.holder_seen_at) == ("b/42", T0 + 2)
    assert not acts(lease, T0 + 2, TIMING)


def test_the_holder_seen_is_updated_by_each_conflict_and_cleared_by_a_term() -> None:
    lease = observe(Lease(), Heard.HELD_ELSEWHERE, T0, TIMING, holder="b/42")
    lease = observe(lease, Heard.HELD_ELSEWHERE, T0 + 5, TIMING, holder="b/42")
    assert lease.holder_seen_at == T0 + 5
    lease = observe(lease, Heard.CONFIRMED, T0 + 70, TIMING)
    assert (lease.role, lease.holder) == (Role.ACTIVE, "")


def test_hearing_nothing_changes_nothing_while_the_lease_holds() -> None:
    lease = active_since(T0)
    assert observe(lease, Heard.NOTHING, T0 + 5, TIMING) == lease
    assert observe(Lease(), Heard.NOTHING, T0, TIMING) == Lease()


def test_the_active_daemon_renews_every_renew_interval_and_a_standby_asks_at_once() -> None:
    lease = active_since(T0)
    assert not renewal_due(lease, T0 + 9.9, TIMING)
    assert renewal_due(lease, T0 + 10, TIMING)
    assert renewal_due(Lease(), T0, TIMING)


def test_giving_up_a_lease_keeps_its_term_number() -> None:
    assert standing_by(Lease(Role.ACTIVE, T0, T0, term=7)) == Lease(term=7)
    assert standing_by(Lease(term=2, holder="x")) == Lease(term=2, holder="x")


def test_two_daemons_never_act_at_once_when_github_frees_the_session_after_the_lease() -> None:
    # A is cut off just after GitHub confirmed its lease at T0: its renewals go unanswered.
    # GitHub frees A's session a minute after A's last poll; B's session opens and is confirmed.
    a = active_since(T0)
    b = observe(Lease(), Heard.HELD_ELSEWHERE, T0, TIMING, holder="a/1")
    github_frees_at = T0 + 60
    for t in range(int(T0), int(T0) + 120):
        a = observe(a, Heard.NOTHING, t, TIMING)
        if t < github_frees_at:
            b = observe(b, Heard.HELD_ELSEWHERE, t, TIMING, holder="a/1")
        else:  # B's session is open now: each renewal is confirmed
            b = observe(b, Heard.CONFIRMED, t, TIMING)
        assert not (acts(a, t, TIMING) and acts(b, t, TIMING)), t
    assert not acts(a, T0 + 119, TIMING)
    assert acts(b, T0 + 119, TIMING)
