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
