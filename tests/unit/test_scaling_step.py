"""One scaling step as a plan: creates (work first, then reserve refills) and idle surplus.
(Counting the creates already asked for as nothing, or marking work runners as reserve, fails
these.)"""

from __future__ import annotations

from rungar.model.runner import RunnerState, RunnerView
from rungar.scaling import Desired, InForce
from rungar.scaling.step import ScalePlan, plan_scale


def want(total: int, reserve: int = 0) -> Desired:
    return Desired(total, reserve, InForce(reserve, ""))


def runner(name: str, created_at: float, state: RunnerState = RunnerState.IDLE) -> RunnerView:
    return RunnerView(name, "linux", "compute1", "rev-1", created_at, state)


def test_missing_runners_are_created_work_first_then_reserve_refills() -> None:
    plan = plan_scale(want(4, reserve=2), removed=False, live=[], creating=1, revisions={})
    # one create is already asked for: three more, the first for the job, two refill the reserve
    assert plan == ScalePlan(4, 2, 0, create=(False, True, True))


def test_idle_surplus_goes_oldest_first_and_busy_runners_stay() -> None:
    live = [
        runner("old", 1.0),
        runner("busy", 0.5, RunnerState.BUSY),
        runner("new", 2.0),
    ]
    plan = plan_scale(want(2), removed=False, live=live, creating=0, revisions={})
    assert (plan.create, plan.remove) == ((), ("old",))


def test_a_removed_scale_set_wants_nothing_and_creates_nothing() -> None:
    plan = plan_scale(want(3, reserve=1), removed=True, live=[], creating=0, revisions={})
    assert plan == ScalePlan(0, 0, 0)


def test_the_warm_pool_part_of_the_reserve_is_carried_and_a_removed_scale_set_keeps_none() -> None:
    decision = Desired(5, 3, InForce(1, ""), warm=2)
    assert plan_scale(decision, removed=False, live=[], creating=0, revisions={}).warm == 2
    assert plan_scale(decision, removed=True, live=[], creating=0, revisions={}).warm == 0
