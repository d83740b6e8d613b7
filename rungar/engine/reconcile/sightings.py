"""What a reconcile pass does with each tracked runner after the listings: a pure plan from the
runner's record, what its provider listed (or that it could not be listed), GitHub's view and
``now`` (docs/architecture.md: a reconcile pass, step 4).

Each runner gets one :class:`Sighting`, with the reason as its kind:

- ``unreachable``: its provider did not answer; kept, counting from ``since``;
- ``written_off``: ... for longer than ``unreachable_grace``; forgotten, its machine left alone;
- ``gone``: no provider lists its machine any more (deleted outside Rungar, or ended);
- ``stopped``: its machine stopped; it ends, and when it never took a job its registration goes
  now (``unregister``), not at the next orphan sweep;
- ``stopped_awaiting_job``: stopped right after its job; GitHub's word on how the job ended is
  awaited for one pass;
- ``listed``: its machine runs; GitHub's view (``registration``, when GitHub answered) is synced;
- ``left_registered``: a leaving runner GitHub still lists, idle or offline (a stopped machine
  adopted after a crash, say): its registration goes now, not at the next orphan sweep.

Other leaving runners, runners created after the pass began and runners whose listing could
not be believed this pass (``doubtful``: named twice with different states, say) are left out
(their provider's reachability is still noted).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass

from rungar.engine.core.records import RunnerRecord
from rungar.github.interface import RunnerStatus
from rungar.model.machine import Machine, MachineState
from rungar.model.runner import RunnerState

UNREACHABLE = "unreachable"
WRITTEN_OFF = "written_off"
GONE = "gone"
STOPPED = "stopped"
STOPPED_AWAITING_JOB = "stopped_awaiting_job"
LISTED = "listed"
LEFT_REGISTERED = "left_registered"
REACHABLE = "reachable"  # its provider answered, but nothing else is done with it this pass


@dataclass(frozen=True, slots=True)
class Sighting:
    runner: str
    kind: str
    machine: Machine | None = None
    since: float | None = None  # unreachable: since when; stopped: first seen stopped
    unregister: bool = False  # stopped before it took a job: its registration goes now
    registration: RunnerStatus | None = None  # listed: GitHub's view of it
    synced: bool = False  # listed: GitHub answered for its scale set


def plan_sightings(
    records: Iterable[RunnerRecord],
    *,
    listings: Mapping[str, object | None],
    machines: Mapping[str, tuple[str, Machine]],
    registrations: Mapping[str, Mapping[str, RunnerStatus]] | None,
    pass_began: float,
    now: float,
    unreachable_grace: float,
    reconcile_interval: float,
    doubtful: Container[str] = frozenset(),
) -> list[Sighting]:
    """``listings``: each provider's answer this pass (None: it did not answer); ``machines``:
    the listed machines by runner name, with their provider, each from its own runner's
    provider's listing only (:func:`rungar.engine.reconcile.ownership.sort_listings`);
    ``registrations``: GitHub's registrations by scale set and runner name, None when GitHub
    could not be asked; ``doubtful``: names whose listing is not believed this pass."""
    plan: list[Sighting] = []
    for record in records:
        if record.provider in listings and listings[record.provider] is None:
            since = record.unreachable_since or now
            kind = WRITTEN_OFF if now - since > unreachable_grace else UNREACHABLE
            plan.append(Sighting(record.name, kind, since=since))
            continue
        if record.name in doubtful:
            plan.append(Sighting(record.name, REACHABLE))
            continue
        listed = machines.get(record.name)
        if record.state is RunnerState.LEAVING:
            status = None
            if registrations is not None:
                status = registrations.get(record.scale_set, {}).get(record.name)
            if status is not None and not status.busy:
                plan.append(Sighting(record.name, LEFT_REGISTERED, registration=status))
            else:
                plan.append(Sighting(record.name, REACHABLE))
            continue
        if listed is None:
            kind = GONE if record.created_at <= pass_began else REACHABLE
            plan.append(Sighting(record.name, kind))
            continue
        machine = listed[1]
        if machine.state is MachineState.STOPPED:
            stopped_at = record.stopped_at or now
            if record.job_id and now - stopped_at < reconcile_interval:
                plan.append(Sighting(record.name, STOPPED_AWAITING_JOB, machine, since=stopped_at))
                continue
            unregister = bool(record.runner_id) and not record.view().busy and not record.job_id
            plan.append(Sighting(record.name, STOPPED, machine, stopped_at, unregister))
            continue
        status = None
        synced = registrations is not None and record.scale_set in registrations
        if registrations is not None and synced:
            status = registrations[record.scale_set].get(record.name)
        plan.append(Sighting(record.name, LISTED, machine, registration=status, synced=synced))
    return plan
