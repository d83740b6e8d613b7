"""``runnerd simulate`` over a window of many jobs: its latest whole weeks, and saying so."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from runnerd.cli import main as runnerd_main
from runnerd.history import JobKey
from runnerd.history_generate import example_config, generate, write_history
from runnerd.simulate.sample import WEEK, latest_weeks
from runnerd.sizing.runs import DAY, SizingRun

G = 1024**3
END = 100 * DAY
KEY = JobKey("node", "acme/web", "ci", "build")


def jobs_queued_at(times: list[float]) -> list[SizingRun]:
    return [SizingRun(KEY, "succeeded", G, 2 * G, 4.0, t + 5, t + 65, t) for t in sorted(times)]


def test_a_window_within_the_bound_is_replayed_whole_and_says_nothing() -> None:
    jobs = jobs_queued_at([END - d * DAY for d in range(1, 30)])
    span = latest_weeks(jobs, END - 30 * DAY, END, max_jobs=29)
    assert (span.start, span.weeks, span.jobs) == (END - 30 * DAY, 0, 29)
    assert span.note() == ""


def test_more_jobs_than_the_bound_replay_the_latest_whole_weeks_that_hold_at_most_it() -> None:
    # Ten jobs a day for 30 days: three whole weeks hold 210, four 280.
    jobs = jobs_queued_at([END - d * DAY - k * 60 for d in range(30) for k in range(1, 11)])
    span = latest_weeks(jobs, END - 30 * DAY, END, max_jobs=279)
    assert (span.start, span.weeks, span.jobs, span.window_jobs) == (END - 3 * WEEK, 3, 210, 300)
    assert span.note().startswith(
        "Replayed the latest 3 weeks of the 30 days: 210 of the window's 300 jobs, "
        "as it holds more than 279 (--max-jobs; --all replays every job)."
    )
    assert latest_weeks(jobs, END - 30 * DAY, END, max_jobs=280).weeks == 4
    assert latest_weeks(jobs, END - 30 * DAY, END, max_jobs=None).weeks == 0


def test_never_less_than_one_week_however_many_jobs_it_holds() -> None:
    jobs = jobs_queued_at([END - d * DAY - k for d in range(30) for k in range(1, 11)])
    span = latest_weeks(jobs, END - 30 * DAY, END, max_jobs=5)
    assert (span.weeks, span.jobs) == (1, 70)
    assert "the latest week of" in span.note()


def test_a_window_of_a_week_or_less_is_replayed_whole() -> None:
    jobs = jobs_queued_at([END - d * DAY - k for d in range(7) for k in range(1, 11)])
    assert latest_weeks(jobs, END - WEEK, END, max_jobs=5).weeks == 0


def test_simulate_replays_the_latest_weeks_as_a_window_of_them_says_so_and_all_replays_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "history.db"
    now = time.time()  # simulate reads the window back from now
    write_history(db, generate(1000, 20.0, seed=3, until=now))
    config = tmp_path / "runnerd.toml"
    config.write_text(example_config(str(db), 1000, 20.0))
    given = ["simulate", "-c", str(config), "--memory-max", "24G"]  # tight: predictions matter
    args = [*given, "--since", "20d"]
    assert runnerd_main([*args, "--max-jobs", "700"]) == 0
    sampled = capsys.readouterr().out
    assert "\nReplayed the latest " in sampled and " of the 20 days: " in sampled
    replayed = int(sampled.split()[0])
    window = int(sampled.split("of the window's ")[1].split()[0])
    assert replayed <= 700 < window
    weeks = sampled.split("Replayed the latest ")[1].split(" of the")[0]
    since = "1w" if weeks == "week" else f"{weeks.split()[0]}w"
    # The same replay as a window of those weeks: the jobs before them are its history.
    assert runnerd_main([*given, "--since", since, "--all"]) == 0
    assert capsys.readouterr().out.split("POLICY")[1] == sampled.split("POLICY")[1]
    assert runnerd_main([*args, "--all"]) == 0
    every = capsys.readouterr().out
    assert "Replayed the latest" not in every
    assert int(every.split()[0]) == window
