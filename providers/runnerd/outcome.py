"""What runnerd records of a runner's job when Rungar removes the runner (docs/learning.md, "How
runnerd learns under Rungar").

Pure: what runnerd saw of the runner's end and what Rungar's Delete said, in; the result to
record, out. The job's conclusion is GitHub's, passed on by Rungar: a runner exits 0 after a
failed job, so its exit status says how the runner ended, not the job. ``cancelled`` is recorded
only for a job that was cancelled on GitHub or stopped while it ran; a runner removed without a
job records no job run, so sizing and predictions never see runs that never happened.
"""

from __future__ import annotations

from dataclasses import dataclass

from rungar.model.machine import Removal
from rungar.model.runner import RemovalReason
from runnerd.admission.model import CANCELLED, FAILURE, SUCCESS


@dataclass(frozen=True, slots=True)
class Ending:
    """How the runner ended, as runnerd saw it."""

    took_job: bool  # runnerd knows a job it took (UpdateRunner, or the Delete's removal)
    exited: bool  # it ended by itself; False: runnerd stopped it while it ran
    exit_code: int | None = None
    met_cap: bool = False


def recorded_result(removal: Removal | None, ending: Ending) -> str | None:
    """The result to record for the runner's job; None when it ran none (no row is kept)."""
    if removal is not None and removal.reason is RemovalReason.JOB_COMPLETED:
        if removal.conclusion is not None:
            return removal.conclusion.value
        took_job = True  # GitHub said its job completed, in a word Rungar has none for
    else:
        took_job = ending.took_job
    if not took_job:
        return None
    if not ending.exited:
        return CANCELLED  # stopped while its job ran
    # Rungar did not say how the job ended (an older Rungar, or a machine that ended before
    # GitHub reported its job): the exit status is all there is.
    return SUCCESS if ending.exit_code == 0 and not ending.met_cap else FAILURE


def waits_for_exit(removal: Removal | None) -> bool:
    """Whether a runner still running is given the exit grace before it is stopped: only when
    its job completed, as an ephemeral runner then exits by itself."""
    return removal is not None and removal.reason is RemovalReason.JOB_COMPLETED
