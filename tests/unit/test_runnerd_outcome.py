"""What runnerd records of a runner's job: GitHub's conclusion from Rungar's Delete, never the
exit status while that is known; cancelled only for a job stopped while it ran; nothing for a
runner that ran no job."""

from __future__ import annotations

import pytest
from runnerd.outcome import Ending, recorded_result, waits_for_exit

from rungar.model.machine import Conclusion, Removal
from rungar.model.runner import RemovalReason as R

DONE_OK = Ending(took_job=True, exited=True, exit_code=0)
RUNNING = Ending(took_job=True, exited=False)
IDLE = Ending(took_job=False, exited=False)
IDLE_EXITED = Ending(took_job=False, exited=True, exit_code=0)


@pytest.mark.parametrize(
    ("removal", "ending", "recorded"),
    [
        (Removal(R.JOB_COMPLETED, Conclusion.FAILED), DONE_OK, "failed"),
        (Removal(R.JOB_COMPLETED, Conclusion.SUCCEEDED), RUNNING, "succeeded"),
        (Removal(R.JOB_COMPLETED, Conclusion.CANCELLED), DONE_OK, "cancelled"),
        (Removal(R.JOB_COMPLETED, Conclusion.TIMED_OUT), IDLE, "timed_out"),
        (Removal(R.JOB_COMPLETED), Ending(False, True, 1), "failed"),
        (Removal(R.EXPIRED), RUNNING, "cancelled"),
        (Removal(R.STUCK), RUNNING, "cancelled"),
        (Removal(R.SCALED_DOWN), IDLE, None),
        (Removal(R.NEVER_CONNECTED), IDLE, None),
        (Removal(R.DRAINED), IDLE_EXITED, None),
        (Removal(R.REQUESTED), IDLE, None),
        (Removal(R.ENDED), DONE_OK, "succeeded"),
        (Removal(R.ENDED), Ending(True, True, 0, met_cap=True), "failed"),
        (None, RUNNING, "cancelled"),
        (None, IDLE, None),
    ],
    ids=[
        "a_completed_job_is_githubs_conclusion_though_its_runner_exited_0",
        "a_completed_job_stopped_after_the_grace_keeps_its_conclusion",
        "a_job_cancelled_on_github_is_cancelled",
        "a_completed_job_runnerd_never_heard_of_is_still_recorded",
        "a_completed_job_in_an_unknown_word_falls_back_on_the_exit_status",
        "a_job_stopped_past_max_age_is_cancelled",
        "a_stuck_runners_job_is_cancelled",
        "a_runner_scaled_down_without_a_job_records_nothing",
        "a_runner_that_never_connected_records_nothing",
        "a_drained_idle_runner_records_nothing",
        "an_operators_removal_of_an_idle_runner_records_nothing",
        "a_machine_that_ended_without_githubs_word_falls_back_on_its_exit_status",
        "a_runner_that_met_its_cap_without_githubs_word_failed",
        "without_a_reason_a_running_job_stopped_is_cancelled",
        "without_a_reason_a_runner_with_no_job_records_nothing",
    ],
)
def test_what_runnerd_records(
    removal: Removal | None, ending: Ending, recorded: str | None
) -> None:
    assert recorded_result(removal, ending) == recorded


def test_only_a_runner_whose_job_completed_is_given_the_grace_to_exit() -> None:
    assert waits_for_exit(Removal(R.JOB_COMPLETED, Conclusion.SUCCEEDED))
    assert not waits_for_exit(Removal(R.SCALED_DOWN))
    assert not waits_for_exit(None)
