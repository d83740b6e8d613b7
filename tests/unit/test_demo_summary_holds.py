"""The demo's summary: each priority hold once with how often it was taken, and what each
runnerd host learnt."""

from __future__ import annotations

from rungar.demo.scenario import Summary


def test_repeated_holds_are_named_once_with_their_count_in_the_order_first_taken() -> None:
    holds = ["host1 for big", "host2 for big", "host1 for big", "host3 for big", "host1 for big"]
    assert Summary(holds=holds).holds_text() == (
        "host1 for big (3 times); host2 for big; host3 for big"
    )


def test_no_holds_reads_none() -> None:
    assert Summary().holds_text() == "none"


def test_a_hosts_learning_counts_its_jobs_by_conclusion_and_its_predicted_admissions() -> None:
    from rungar.demo.learning import learning_of

    m = 1024**2
    rows = [
        ("succeeded", "measured", "its cap, as its profile has fewer than 3 runs", 160 * m,
         160 * m),
        ("failed", "measured", "its profile's largest peak, as its job has no runs yet, + the "
         "margin, held to its cap", 160 * m, 160 * m),
        ("succeeded", "measured", "the largest peak of its job's 3 runs + the margin", 256 * m,
         512 * m),
        ("succeeded", "caps", "its profile's memory", 160 * m, 160 * m),
    ]  # fmt: skip
    learning = learning_of("host1", rows)
    assert learning.text() == (
        "4 jobs: 3 succeeded, 1 failed; 2 admitted by a prediction, 1 below the cap"
    )
    assert learning_of("host2", []).text() == "no jobs recorded"


def test_the_waits_are_counted_as_rungar_usage_counts_them_and_say_so() -> None:
    # Nearest rank over the same waits for the whole and for each scale set, so the rows agree
    # with each other and with `rungar usage` (p50 of [10, 20, 30, 40] is 20 by nearest rank;
    # an interpolating median would say 25).
    summary = Summary(
        waits=[10.0, 20.0, 30.0, 40.0],
        waits_by_scale_set={"big": [10.0, 40.0], "small": [20.0, 30.0]},
        clock_factor=20.0,
    )
    rows = rendered_rows(summary)
    # Fewer than 20 waits: no p95, which would be only the longest of them.
    assert rows["wait for a runner"].startswith(
        "p50 20s, longest 40s of 4 jobs (GitHub's clock, 20x"
    )
    assert "from assigned to a scale set until a runner took the job" in rows["wait for a runner"]
    assert rows["wait, big"] == "p50 10s, longest 40s of 2 jobs"
    assert rows["wait, small"] == "p50 20s, longest 30s of 2 jobs"


def test_the_run_time_is_real_time_and_also_given_on_githubs_faster_clock() -> None:
    summary = Summary(jobs=32, completed=32, seconds=27.2, clock_factor=20.0)
    assert summary.jobs_text() == "32 of 32 in 27s real time (9m 04s on GitHub's clock)"
    assert Summary(jobs=1, completed=1, seconds=3.0).jobs_text() == "1 of 1 in 3s real time"


def rendered_rows(summary: Summary) -> dict[str, str]:
    from rich.console import Console

    console = Console(width=400, record=True)
    console.print(summary.table())
    rows = {}
    for line in console.export_text().splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 2 and cells[0]:
            rows[cells[0]] = cells[1]
    return rows


def test_a_p95_is_shown_only_of_twenty_waits_or_more() -> None:
    from rungar.demo.scenario import _percentiles

    assert _percentiles([float(n) for n in range(1, 20)]) == "p50 10s, longest 19s of 19 jobs"
    assert _percentiles([float(n) for n in range(1, 21)]) == "p50 10s, p95 19s of 20 jobs"
