"""The plan of what to tell on GitHub of waiting jobs (rungar.engine.jobs.reason_plan): from a
snapshot and ``now`` only."""

from __future__ import annotations

from dataclasses import replace

from rungar.config.model import JobReasonsConfig
from rungar.engine.jobs.reason_plan import (
    Notice,
    NoticeKey,
    ReasonSnapshot,
    WaitingJob,
    allowance,
    plan_reasons,
    scale_set_reason,
    unservable_of,
)
from rungar.model.sentences import found_full
from tests.unit.placement_helpers import FULL, INVALID, fleet, provider, scale_set

ON = JobReasonsConfig(enabled=True, after=60.0, update_every=60.0)
RUN = NoticeKey("octo-org/app", "77", "linux")
SHA = "a" * 40


def snapshot(**changes: object) -> ReasonSnapshot:
    base = ReasonSnapshot(
        waiting=(),
        reasons={"linux": "host: full"},
        notices={},
        heads={RUN.run: SHA},
        spent=(),
        budget_limit=5000,
        check_runs=True,
        settings=ON,
    )
    return replace(base, **changes)  # type: ignore[arg-type]  # a test's changes, by name


def job(job_id: str, at: float, key: NoticeKey = RUN) -> WaitingJob:
    return WaitingJob(job_id, key, at)


def test_a_job_waiting_less_than_the_threshold_gets_nothing_and_one_past_it_gets_a_check_run() -> (
    None
):
    early = plan_reasons(snapshot(waiting=(job("j1", 100.0),)), 159.0)
    assert early.writes == () and early.heads == ()
    due = plan_reasons(snapshot(waiting=(job("j1", 100.0),)), 160.0)
    (write,) = due.writes
    assert write.kind == "publish" and write.key == RUN
    assert write.body["name"] == "rungar: linux" and write.body["head_sha"] == SHA
    assert write.body["status"] == "in_progress"
    assert "host: full" in str(write.body["output"])


def test_jobs_of_one_run_make_one_notice_and_its_head_is_read_once_first() -> None:
    other = NoticeKey("octo-org/app", "77", "gpu")
    waiting = (job("j1", 0.0), job("j2", 10.0), job("j3", 0.0, other))
    plan = plan_reasons(snapshot(waiting=waiting, heads={}), 100.0)
    assert [(h.repository, h.run_id) for h in plan.heads] == [RUN.run]
    assert plan.writes == ()
    known = plan_reasons(snapshot(waiting=waiting), 100.0)
    assert sorted(w.key.scale_set for w in known.writes) == ["gpu", "linux"]


def test_a_head_is_read_only_with_room_left_for_its_publish() -> None:
    # 5 % of 1000 an hour is 50, 5 in a minute: two runs' heads and their publishes, not five.
    runs = [NoticeKey("octo-org/app", str(n), "linux") for n in range(5)]
    waiting = tuple(job(f"j{n}", float(n), k) for n, k in enumerate(runs))
    plan = plan_reasons(snapshot(waiting=waiting, heads={}, budget_limit=1000), 100.0)
    assert [h.run_id for h in plan.heads] == ["0", "1"]
    assert plan.deferred == 3
    read = {k.run: SHA for k in runs[:2]}
    spent = (100.0, 100.0)
    then = plan_reasons(snapshot(waiting=waiting, heads=read, budget_limit=1000, spent=spent), 101)
    assert [(w.kind, w.key.run_id) for w in then.writes] == [("publish", "0"), ("publish", "1")]
    assert [h.run_id for h in then.heads] == []  # one call left: no head without its publish


def test_a_notice_is_rewritten_only_when_its_reason_changed_and_no_oftener_than_update_every() -> (
    None
):
    notice = Notice(RUN, 9, written_at=100.0, reason="host: full", since=0.0)
    same = snapshot(waiting=(job("j1", 0.0),), notices={RUN: notice})
    assert plan_reasons(same, 500.0).writes == ()
    changed = replace(same, reasons={"linux": "host: held for scale set big"})
    assert plan_reasons(changed, 159.0).writes == ()
    (write,) = plan_reasons(changed, 160.0).writes
    assert write.kind == "update" and "held for scale set big" in str(write.body["output"])


def test_a_notice_whose_jobs_no_longer_wait_is_concluded_neutral_with_the_wait() -> None:
    notice = Notice(RUN, 9, written_at=100.0, reason="host: full", since=8.0)
    (write,) = plan_reasons(snapshot(notices={RUN: notice}), 260.0).writes
    assert write.kind == "conclude"
    assert write.body["conclusion"] == "neutral" and write.body["status"] == "completed"
    assert write.body["output"] == {
        "title": "waited 4m 12s: host: full",
        "summary": "waited 4m 12s: host: full",
    }


def test_a_token_gets_a_commit_status_cut_to_140_characters() -> None:
    long_reason = "host: " + "x" * 300
    plan = plan_reasons(
        snapshot(waiting=(job("j1", 0.0),), check_runs=False, reasons={"linux": long_reason}),
        100.0,
    )
    (write,) = plan.writes
    assert write.body["state"] == "pending" and write.body["context"] == "rungar: linux"
    description = str(write.body["description"])
    assert len(description) == 140 and description.endswith("…")


def test_the_writes_keep_to_their_share_of_the_budget_concludes_first() -> None:
    # 5 % of 1000 an hour is 50, at most 5 in a minute.
    runs = [NoticeKey("octo-org/app", str(n), "linux") for n in range(20)]
    ended = NoticeKey("octo-org/app", "999", "linux")
    notices = {ended: Notice(ended, 1, 0.0, "host: full", 0.0)}
    heads = {k.run: SHA for k in runs}
    waiting = tuple(job(f"j{n}", float(n), k) for n, k in enumerate(runs))
    snap = snapshot(
        waiting=waiting, notices=notices, heads=heads, budget_limit=1000, spent=(3560.0,)
    )
    plan = plan_reasons(snap, 3590.0)
    assert plan.allowance == 4  # a tenth of 50, one already spent this minute
    assert [w.kind for w in plan.writes] == ["conclude", "publish", "publish", "publish"]
    assert [w.key.run_id for w in plan.writes[1:]] == ["0", "1", "2"]  # the oldest first
    assert plan.deferred == 17
    spent_hour = snapshot(budget_limit=1000, spent=tuple(float(n) for n in range(50)))
    assert allowance(spent_hour, 3000.0) == 0
    assert allowance(spent_hour, 3600.5) == 1  # the first call left the trailing hour


def test_the_burst_share_and_window_are_the_configured_ones() -> None:
    # 5 % of 1000 an hour is 50; a burst_share of 20 % allows 10 within a 5-minute window.
    wide = replace(ON, burst_share=20, burst_window=300.0)
    spent = tuple(float(n) for n in range(4))  # four calls at 0-3 s
    assert allowance(snapshot(budget_limit=1000, spent=spent, settings=wide), 200.0) == 6
    assert allowance(snapshot(budget_limit=1000, spent=spent, settings=wide), 304.0) == 10
    # The defaults: a tenth of the share in any minute; the same calls left it at 70 s.
    assert allowance(snapshot(budget_limit=1000, spent=spent), 30.0) == 1
    assert allowance(snapshot(budget_limit=1000, spent=spent), 70.0) == 5


def test_a_scale_sets_reason_is_the_status_skip_line_then_what_happens_next() -> None:
    f = fleet([provider("host1"), provider("host2")], [scale_set("linux", ["host1", "host2"])])
    f.record_refusal("linux", "host1", FULL, 100.0)
    left = f.backoff("linux", "host1").remaining(100.0)  # type: ignore[union-attr]  # just set
    reason = scale_set_reason(f, "linux", 100.0)
    assert reason == f"{found_full('linux', 'host1', left)}; next: tries host2"
    assert scale_set_reason(f, "linux", 100.0, ["host2"]).endswith(
        "next: its runner is starting on host2"
    )
    # Its backoff over, host1 is tried next: its last answer still says why the job waits.
    later = 100.0 + left
    assert scale_set_reason(f, "linux", later) == (
        f"{found_full('linux', 'host1', 0.0)}; next: tries host1 then host2"
    )


def test_a_run_no_provider_can_ever_serve_is_cancelled_after_its_deadline_with_the_reason() -> None:
    f = fleet([provider("host1"), provider("host2")], [scale_set("linux", ["host1", "host2"])])
    f.record_refusal("linux", "host1", INVALID, 10.0)
    assert unservable_of(f, "linux", 600.0, {}, {}) is None  # host2 may yet take it
    never = unservable_of(f, "linux", 600.0, {"host2": 50.0}, {"host2": "connection refused"})
    assert never is not None and never.since == 50.0
    waiting = snapshot(waiting=(job("j1", 0.0),), unservable={"linux": never})
    assert plan_reasons(waiting, 649.0).cancels == ()  # host2 silent for less than 600 s
    (cancel,) = plan_reasons(waiting, 650.0).cancels
    assert cancel.write.kind == "fail" and cancel.write.body["conclusion"] == "failure"
    summary = str(cancel.write.body["output"])
    assert "host1 refuses its runner as invalid: 8 vCPUs is more than the host's 4 CPUs" in summary
    assert "host2 cannot be reached: connection refused" in summary
    # Cancelled, its run is told nothing more, and its notice is not concluded as waited.
    notice = Notice(RUN, 9, 100.0, "host: full", 0.0)
    told = replace(waiting, notices={RUN: notice})
    assert [w.kind for w in plan_reasons(told, 650.0).writes] == []
    after = replace(told, cancelled=frozenset({RUN.run}))
    assert plan_reasons(after, 700.0).cancels == ()


def test_a_job_waiting_on_a_full_provider_is_never_cancelled() -> None:
    f = fleet([provider("host1"), provider("host2")], [scale_set("linux", ["host1", "host2"])])
    f.record_refusal("linux", "host1", INVALID, 10.0)
    f.record_refusal("linux", "host2", FULL, 10.0)
    assert unservable_of(f, "linux", 600.0, {}, {}) is None
    f.record_refusal("linux", "host2", INVALID, 20.0)
    assert unservable_of(f, "linux", 600.0, {}, {}) is not None
