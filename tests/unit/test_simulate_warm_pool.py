"""``rungar simulate`` replays warm pools through the daemon's own prediction, and its
``--no-warm-pool`` and ``--warm-pool N`` rows report the p95 wait the pool saves against the
runner-hours it costs (docs/simulate.md, "What-ifs")."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rungar.simulate.run import SimulateRequest, simulate

START = datetime(2026, 12, 7, 2, 0, tzinfo=UTC).timestamp()  # a Monday, 02:00 UTC
DAY = 86400.0
WEEKDAYS = [week * 7 + day for week in range(4) for day in range(5)]  # four weeks' Mon-Fri


def files(
    tmp_path: Path, pool: str, *, min_runners: int = 0, weeks: int = 4
) -> tuple[str, str, str]:
    config = tmp_path / "scale_sets.yaml"
    config.write_text(
        "providers:\n  - {name: cloud, type: fake}\nscale_sets:\n"
        f"  - name: nightly\n    max_runners: 10\n    min_runners: {min_runners}\n"
        f"    providers: [cloud]\n{pool}"
    )
    models = tmp_path / "models.yaml"
    models.write_text("providers:\n  cloud:\n    cloud: {boot: 60s}\n")
    history = tmp_path / "jobs.jsonl"
    lines = []
    # A nightly matrix of 4 jobs at 02:00 on weekdays: the first night's wait for their
    # runners to boot (nothing to predict from yet), 5 % of the jobs of four weeks.
    for day in WEEKDAYS[: 5 * weeks]:
        for n in range(4):
            queued = START + day * DAY + 10 * n
            lines.append(json.dumps({"scale_set": "nightly", "queued_at": queued, "duration": 300}))
    history.write_text("\n".join(lines) + "\n")
    return str(config), str(history), str(models)


def test_the_warm_pool_applies_in_the_replay_and_the_what_if_reports_what_it_saved(
    tmp_path: Path,
) -> None:
    config, history, models = files(tmp_path, "    warm_pool: {max: 6}\n")
    report = simulate(SimulateRequest(config, (history,), models=models, no_warm_pool=True))
    (effect,) = report.json["warm_pool"]
    assert (effect["with"], effect["without"]) == ("baseline", "no warm pool")
    figures = effect["scale_sets"]["nightly"]
    # Without the pool every job waits for a boot; with it only the first night's.
    assert figures["p95_wait_without"] == 60.0
    assert figures["p95_wait_with"] == 0.0
    assert figures["p95_wait_saved_s"] == 60.0
    assert figures["runner_hours_spent"] > 0, "the pool's runners boot ahead and cost"
    assert "Warm pool (baseline against no warm pool):" in report.text
    assert "nightly   p95 wait 1m00s -> 0s (1m00s saved) for 5.4 more runner-hours" in report.text


def test_a_warm_pool_what_if_tries_a_pool_the_configuration_does_not_have(
    tmp_path: Path,
) -> None:
    config, history, models = files(tmp_path, "", weeks=1)
    report = simulate(SimulateRequest(config, (history,), models=models, warm_pools=(6,)))
    (effect,) = report.json["warm_pool"]
    assert (effect["with"], effect["without"]) == ("warm pool 6", "baseline")
    assert effect["all"]["runner_hours_spent"] > 0, "the pool this row added kept runners"
    assert report.json["scenarios"][1]["scale_sets"]["nightly"]["wait_p50"] == 0.0


def test_a_replay_with_an_idle_reserve_ends_once_its_last_job_has_finished(
    tmp_path: Path,
) -> None:
    # This replay never ended before: the reserve kept a runner alive, so passes went on.
    config, history, models = files(tmp_path, "", min_runners=1, weeks=1)
    report = simulate(SimulateRequest(config, (history,), models=models))
    (row,) = report.json["scenarios"]
    assert row["scale_sets"]["nightly"]["jobs"] == 20
    assert row["scale_sets"]["nightly"]["runner_hours"] > 4 * 24, "the reserve ran all along"


def test_a_warm_pool_what_if_below_one_is_refused(tmp_path: Path) -> None:
    from rungar.errors import ConfigError

    config, history, models = files(tmp_path, "")
    with pytest.raises(ConfigError, match="--warm-pool 0: must be at least 1"):
        simulate(SimulateRequest(config, (history,), models=models, warm_pools=(0,)))


def test_a_schedule_window_keeps_its_reserve_ready_in_a_replay_with_no_job_to_wake_it(
    tmp_path: Path,
) -> None:
    # One job at 07:00 on a Monday, the next at 08:30; the window 08:00-09:00 keeps 2 ready.
    config, _, models = files(
        tmp_path,
        "    schedule:\n      windows:\n"
        '        - {days: mon-fri, from: "08:00", to: "09:00", min_runners: 2}\n',
    )
    history = tmp_path / "two.jsonl"
    monday = datetime(2026, 12, 7, tzinfo=UTC).timestamp()
    history.write_text(
        "".join(
            json.dumps({"scale_set": "nightly", "queued_at": monday + hour * 3600, "duration": 300})
            + "\n"
            for hour in (7.0, 8.5)
        )
    )
    report = simulate(SimulateRequest(config, (str(history),), models=models))
    (row,) = report.json["scenarios"]
    assert row["scale_sets"]["nightly"]["wait_max"] == 60.0, "07:00: nothing ready, one boot"
    assert row["scale_sets"]["nightly"]["wait_p50"] == 0.0, "08:30: a reserve runner was ready"
