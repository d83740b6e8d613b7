"""What a reconcile pass does with each tracked runner after the listings: a pure plan. (Taking
the stopped runner's registration although it took a job, or writing off a runner before
``unreachable_grace``, fails these.)"""

from __future__ import annotations

from rungar.engine.core.records import RunnerRecord
from rungar.engine.reconcile import sightings as S
from rungar.engine.reconcile.sightings import Sighting, plan_sightings
from rungar.github.interface import RunnerStatus
from rungar.model.machine import Machine, MachineState
from rungar.model.runner import RunnerState

GRACE = 300.0
INTERVAL = 30.0


def record(name: str = "r-1", **fields: object) -> RunnerRecord:
    found = RunnerRecord(name, "linux", "compute1", "rev", created_at=0.0, state=RunnerState.IDLE)
    for key, value in fields.items():
        setattr(found, key, value)
    return found


def listed(name: str, state: MachineState = MachineState.RUNNING) -> dict[str, tuple[str, Machine]]:
    return {name: ("compute1", Machine(name, state))}


def sight(
    runner: RunnerRecord,
    *,
    answered: bool = True,
    machines: dict[str, tuple[str, Machine]] | None = None,
    registrations: dict[str, dict[str, RunnerStatus]] | None = None,
    now: float = 100.0,
) -> Sighting:
    [found] = plan_sightings(
        [runner],
        listings={"compute1": [] if answered else None},
        machines=machines or {},
        registrations=registrations,
        pass_began=50.0,
        now=now,
        unreachable_grace=GRACE,
        reconcile_interval=INTERVAL,
    )
    return found


def test_a_runner_on_an_unreachable_provider_is_kept_until_the_grace_then_written_off() -> None:
    kept = sight(record(unreachable_since=10.0), answered=False, now=10.0 + GRACE)
    assert (kept.kind, kept.since) == (S.UNREACHABLE, 10.0)
    gone = sight(record(unreachable_since=10.0), answered=False, now=10.0 + GRACE + 1)
    assert gone.kind == S.WRITTEN_OFF


def test_a_machine_missing_from_the_listing_is_gone_unless_created_after_the_pass_began() -> None:
    assert sight(record(created_at=40.0)).kind == S.GONE
    assert sight(record(created_at=60.0)).kind == S.REACHABLE


def test_a_runner_stopped_before_any_job_has_its_registration_taken_now() -> None:
    found = sight(record(runner_id=7), machines=listed("r-1", MachineState.STOPPED))
    assert (found.kind, found.unregister, found.since) == (S.STOPPED, True, 100.0)


def test_a_runner_stopped_after_its_job_waits_one_pass_for_githubs_word_then_ends() -> None:
    stopped = listed("r-1", MachineState.STOPPED)
    waiting = sight(record(runner_id=7, job_id="j", stopped_at=90.0), machines=stopped)
    assert waiting.kind == S.STOPPED_AWAITING_JOB
    ended = sight(record(runner_id=7, job_id="j", stopped_at=60.0), machines=stopped)
    assert (ended.kind, ended.unregister) == (S.STOPPED, False)


def test_a_running_runner_is_synced_with_githubs_view_only_when_github_answered() -> None:
    status = RunnerStatus("r-1", 7, online=True, busy=True)
    found = sight(record(), machines=listed("r-1"), registrations={"linux": {"r-1": status}})
    assert (found.kind, found.synced, found.registration) == (S.LISTED, True, status)
    unknown = sight(record(), machines=listed("r-1"), registrations=None)
    assert (unknown.kind, unknown.synced) == (S.LISTED, False)


def test_a_leaving_runner_github_still_lists_idle_has_its_registration_taken_now() -> None:
    leaving = record(state=RunnerState.LEAVING)
    idle = RunnerStatus("r-1", 7, online=False, busy=False)
    found = sight(leaving, registrations={"linux": {"r-1": idle}})
    assert (found.kind, found.registration) == (S.LEFT_REGISTERED, idle)
    busy = RunnerStatus("r-1", 7, online=True, busy=True)  # its job ends first
    assert sight(leaving, registrations={"linux": {"r-1": busy}}).kind == S.REACHABLE
    assert sight(leaving, registrations={"linux": {}}).kind == S.REACHABLE
    assert sight(leaving, registrations=None).kind == S.REACHABLE
