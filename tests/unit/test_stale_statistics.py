"""GitHub's assigned count is believed unless idle runners disprove it for long enough."""

from __future__ import annotations

from rungar.scaling.stale_statistics import Judged, StatisticsCheck, judge

AFTER = 120.0


def step(check: StatisticsCheck, now: float, *, reported: int, known: int, idle: int) -> Judged:
    return judge(check, reported=reported, known=known, idle=idle, now=now, after=AFTER)


def run(steps: list[tuple[float, int, int, int]]) -> Judged:
    """(now, reported, known, idle) in turn; the last judgement."""
    check = StatisticsCheck()
    judged = None
    for now, reported, known, idle in steps:
        judged = step(check, now, reported=reported, known=known, idle=idle)
        check = judged.check
    assert judged is not None
    return judged


def test_a_count_the_jobs_sent_explain_is_counted_as_given() -> None:
    judged = run([(0, 5, 5, 3), (500, 5, 5, 3)])
    assert judged.counted == 5 and judged.sentence == ""


def test_an_unexplained_count_with_no_idle_runner_is_counted_as_given() -> None:
    # After a restart: jobs assigned before it, whose messages came before it; their runners
    # take them at once, so none stays idle.
    judged = run([(0, 8, 0, 0), (300, 8, 3, 0), (600, 8, 6, 0)])
    assert judged.counted == 8


def test_idle_runners_for_the_whole_window_disprove_as_many_unexplained_jobs() -> None:
    judged = run([(0, 12, 2, 10), (60, 12, 2, 10), (AFTER, 12, 2, 10)])
    assert judged.counted == 2
    assert judged.sentence == (
        "GitHub counts 12 jobs assigned, but sent 2 and its idle runners get none: counting 2"
    )


def test_nothing_is_disproved_before_the_window_has_passed() -> None:
    judged = run([(0, 12, 2, 10), (AFTER - 1, 12, 2, 10)])
    assert judged.counted == 12


def test_only_the_fewest_runners_idle_all_along_disprove_jobs() -> None:
    # 10 unexplained; runners idle dipped to 3 in the window: 3 judged not to exist.
    judged = run([(0, 12, 2, 10), (60, 12, 2, 3), (AFTER, 12, 2, 6)])
    assert judged.counted == 9


def test_a_moment_with_no_idle_runner_starts_the_window_over() -> None:
    judged = run([(0, 12, 2, 10), (60, 12, 2, 0), (AFTER, 12, 2, 10), (AFTER + 60, 12, 2, 10)])
    assert judged.counted == 12


def test_the_judgement_holds_once_the_surplus_runners_are_gone() -> None:
    # Judged at AFTER; scaled down, no runner idle any more: the discount stays.
    judged = run([(0, 12, 2, 10), (AFTER, 12, 2, 10), (AFTER + 30, 12, 2, 0), (5000, 12, 2, 0)])
    assert judged.counted == 2


def test_a_count_github_brings_down_shrinks_the_judgement_at_once() -> None:
    # 10 judged not to exist; GitHub's count falls to 4: only 2 of them are still counted.
    judged = run([(0, 12, 2, 10), (AFTER, 12, 2, 10), (AFTER + 30, 4, 2, 0)])
    assert judged.counted == 2
    assert judged.check.discount == 2 and judged.sentence


def test_new_jobs_sent_on_top_of_a_stale_count_are_counted() -> None:
    # 10 phantom jobs judged; then 5 real jobs come with their messages.
    judged = run([(0, 12, 2, 10), (AFTER, 12, 2, 10), (AFTER + 30, 17, 7, 0)])
    assert judged.counted == 7


def test_a_stale_count_believed_again_leaves_no_sentence() -> None:
    judged = run([(0, 12, 2, 10), (AFTER, 12, 2, 10), (AFTER + 30, 2, 2, 0)])
    assert judged.counted == 2 and judged.check.discount == 0 and judged.sentence == ""
