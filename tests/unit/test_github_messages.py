"""Message parsing and the job tracker that keeps duplicates out."""

from __future__ import annotations

import json

from rungar.github.interface import JobEventKind
from rungar.github.jobs import JobTracker
from rungar.github.wire import (
    BOM,
    JobMessage,
    Message,
    decode_json,
    list_answer,
    scale_set_labels,
    timestamp,
)

A, S, C = JobEventKind.ASSIGNED, JobEventKind.STARTED, JobEventKind.COMPLETED


def _job(kind: str, job_id: str = "j1", request_id: int = 0) -> JobMessage:
    return JobMessage(kind=kind, job_id=job_id, runner_request_id=request_id)


def test_the_body_is_a_string_holding_a_json_array() -> None:
    raw = {
        "messageId": 100000171,
        "messageType": "RunnerScaleSetJobMessages",
        "statistics": {"totalAssignedJobs": 2, "totalRunningJobs": 1},
        "body": json.dumps(
            [{"messageType": "JobStarted", "jobId": "x", "runnerId": 4, "runnerName": "r"}]
        ),
    }
    message = Message.from_json(raw)
    assert message.statistics is not None
    assert message.statistics.assigned == 2 and message.statistics.running == 1
    assert message.jobs[0].runner_name == "r" and message.jobs[0].runner_id == 4


def test_an_empty_or_garbled_body_carries_statistics_only() -> None:
    for body in ("", "not json", "{}", None):
        assert Message.from_json({"messageId": 1, "body": body}).jobs == ()


def test_a_bom_and_an_empty_body_are_tolerated() -> None:
    assert decode_json(BOM + b'{"a": 1}') == {"a": 1}
    assert decode_json(b"  ") is None


def test_jobs_are_keyed_by_job_id_falling_back_to_the_request_id() -> None:
    assert _job("JobAssigned", "abc", 7).key == "abc"
    assert _job("JobAssigned", "", 7).key == "request:7"


def test_scale_set_labels_put_the_name_first_and_drop_duplicates() -> None:
    assert [x["name"] for x in scale_set_labels("linux", ["gpu", "LINUX", "gpu"])] == [
        "linux",
        "gpu",
    ]


def test_the_tracker_passes_each_transition_once() -> None:
    tracker = JobTracker()
    seen = [
        tracker.accept(_job(k))
        for k in (
            "JobAssigned",
            "JobAssigned",
            "JobStarted",
            "jobstarted",
            "JobCompleted",
            "JobCompleted",
        )
    ]
    assert seen == [A, None, S, None, C, None]


def test_a_reassignment_after_a_cancel_is_news_but_a_late_start_is_not() -> None:
    tracker = JobTracker()
    assert tracker.accept(_job("JobAssigned")) is A
    assert tracker.accept(_job("JobCompleted")) is C
    assert tracker.accept(_job("JobStarted")) is None
    assert tracker.accept(_job("JobAssigned")) is A


def test_available_and_unknown_kinds_are_not_job_events() -> None:
    tracker = JobTracker()
    assert tracker.accept(_job("JobAvailable")) is None
    assert tracker.accept(_job("SomethingNew")) is None


def test_the_tracker_forgets_the_oldest_jobs_beyond_its_capacity() -> None:
    tracker = JobTracker(capacity=2)
    for job_id in ("a", "b", "c"):
        tracker.accept(_job("JobAssigned", job_id))
    assert tracker.phase("a") is None and tracker.phase("c") is A


def test_a_message_without_its_statistics_block_says_so_instead_of_reading_zero() -> None:
    # Before: a missing block parsed as all zeros, which scaled runners down.
    assert Message.from_json({"messageId": 1, "body": ""}).statistics is None
    assert Message.from_json({"messageId": 1, "statistics": {}}).statistics is not None


def test_job_times_are_read_and_the_zero_value_is_zero() -> None:
    job = JobMessage.from_json(
        {
            "messageType": "JobStarted",
            "jobId": "x",
            "queueTime": "2026-01-01T00:00:00.1234567Z",
            "scaleSetAssignTime": "2026-01-01T00:00:02Z",
            "runnerAssignTime": "2026-01-01T00:00:12.5+00:00",
            "finishTime": "0001-01-01T00:00:00Z",
        }
    )
    assert job.queue_time == timestamp("2026-01-01T00:00:00Z") + 0.123456
    assert job.runner_assign_time - job.scale_set_assign_time == 10.5
    assert job.finish_time == 0.0
    assert timestamp("yesterday") == 0.0 and timestamp(None) == 0.0


def test_a_list_answer_counts_what_it_says_it_found() -> None:
    assert list_answer({"count": 2, "value": [{"id": 1}]}) == (2, [{"id": 1}])
    assert list_answer({"value": [{"id": 1}, {"id": 2}]})[0] == 2
    assert list_answer(None) == (0, [])


def test_a_job_hint_carries_the_workflow_file_its_branch_and_its_run() -> None:
    from rungar.github.listener import job_hint

    message = JobMessage.from_json(
        {
            "messageType": "JobStarted",
            "jobId": "j1",
            "ownerName": "octo-org",
            "repositoryName": "app",
            "jobWorkflowRef": "octo-org/app/.github/workflows/ci.yml@refs/heads/feature/x",
            "jobDisplayName": "build",
            "workflowRunId": 4321,
            "queueTime": "2026-12-03T08:41:42Z",
            "runnerAssignTime": "2026-12-03T08:41:44Z",
            "finishTime": "0001-01-01T00:00:00Z",
        }
    )
    hint = job_hint(message)
    assert hint.started_at - hint.queued_at == 2.0 and hint.completed_at == 0.0
    assert (hint.repository, hint.workflow, hint.job) == (
        "octo-org/app",
        ".github/workflows/ci.yml",
        "build",
    )
    assert (hint.branch, hint.run_id, hint.job_id) == ("feature/x", "4321", "j1")
    pull = JobMessage.from_json(
        {"jobWorkflowRef": "o/r/.github/workflows/ci.yml@refs/pull/3/merge"}
    )
    assert pull.branch == "refs/pull/3/merge"


def test_githubs_two_words_for_each_conclusion_map_to_one_and_unknown_words_to_none() -> None:
    from rungar.model.machine import Conclusion, conclusion_from_github

    assert [conclusion_from_github(w) for w in ("Succeeded", "success")] == [
        Conclusion.SUCCEEDED
    ] * 2
    assert [conclusion_from_github(w) for w in ("failed", "failure")] == [Conclusion.FAILED] * 2
    assert [conclusion_from_github(w) for w in ("canceled", "cancelled")] == [
        Conclusion.CANCELLED
    ] * 2
    assert conclusion_from_github("timed_out") is Conclusion.TIMED_OUT
    assert conclusion_from_github("skipped") is None and conclusion_from_github("") is None


def test_a_messages_clock_offset_is_its_arrival_less_the_newest_of_githubs_times_in_it() -> None:
    from rungar.github.listener import clock_offset, job_hint

    # GitHub's clock runs 60 times as fast as Rungar's: its times say nothing of Rungar's
    # clock but the newest, made about as the long poll answered.
    queued = JobMessage(kind="JobAssigned", job_id="j1", queue_time=9_000.0)
    assigned = JobMessage(
        kind="JobAssigned", job_id="j2", queue_time=8_000.0, scale_set_assign_time=9_060.0
    )
    assert clock_offset([queued, assigned], 1_000.5) == 1_000.5 - 9_060.0
    assert clock_offset([JobMessage(kind="JobAssigned", job_id="j3")], 1_000.5) is None
    hint = job_hint(assigned, -8_059.5)
    assert (hint.queued_at, hint.clock_offset) == (8_000.0, -8_059.5)
