"""Warm pools (docs/scale-sets.md, "Warm pool"): how many runners are kept ready is a pure function
of the scale set's job history and the clock, bounded by ``warm_pool.max``, added to the idle
reserve (so the ceiling cuts it first), and every rule the config breaks is a FILE:LINE:COL
problem."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from rungar.config.loader import parse_scale_sets
from rungar.config.model import ScaleSetConfig, ScaleSetProvider, WarmPool
from rungar.errors import ConfigError
from rungar.scaling import desired, predict
from rungar.scaling.warm_pool import history_span

BASE = """\
providers:
  - name: compute1
    type: fake
scale_sets:
  - name: ci
    max_runners: 8
    min_runners: 1
    providers: [compute1]
"""


def config(
    pool: WarmPool | None = None, *, max_runners: int = 20, minimum: int = 0
) -> ScaleSetConfig:
    return ScaleSetConfig(
        "ci",
        max_runners=max_runners,
        min_runners=minimum,
        providers=(ScaleSetProvider("compute1"),),
        warm_pool=pool,
    )


def at(text: str, zone: str = "UTC") -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()


def jobs_on(days: list[str], clock: str, counts: list[int], zone: str = "UTC") -> list[float]:
    """``counts[i]`` jobs assigned at ``clock`` (plus a minute each) on ``days[i]``."""
    times = []
    for day, count in zip(days, counts, strict=True):
        start = at(f"{day}T{clock}", zone)
        times += [start + 60 * i for i in range(count)]
    return sorted(times)


# 2026-12-07 is a Monday. The five weekdays before it: Dec 4 (Fri) back to Nov 30 (Mon).
LAST_WEEKDAYS = ["2026-12-04", "2026-12-03", "2026-12-02", "2026-12-01", "2026-11-30"]
POOL = WarmPool(max=5)


def predicted_runners(config: ScaleSetConfig, history: Sequence[float], now: float) -> int:
    warm = predict(config, history, now)
    assert warm is not None, "the scale set has a warm pool: a prediction is made"
    return warm.runners


def test_the_pool_keeps_the_p90_of_the_same_slot_on_the_last_five_weekdays() -> None:
    history = jobs_on(LAST_WEEKDAYS, "08:16", [3, 2, 3, 1, 3])
    warm = predict(config(POOL), history, at("2026-12-07T08:20"))
    assert warm is not None
    assert (warm.runners, warm.slot, warm.kind, warm.counts) == (
        3,
        "08:15",
        "weekdays",
        (3, 2, 3, 1, 3),
    )
    assert warm.reason == "p90 of 3 jobs at 08:15 on the last 5 weekdays"


def test_a_burst_on_one_day_in_five_is_the_p90_but_not_the_p50() -> None:
    history = jobs_on(LAST_WEEKDAYS, "08:16", [4, 0, 0, 0, 0])
    assert predicted_runners(config(POOL), history, at("2026-12-07T08:20")) == 4
    median = WarmPool(max=5, percentile=50)
    assert predicted_runners(config(median), history, at("2026-12-07T08:20")) == 0


def test_weekend_days_are_predicted_from_weekend_days_only() -> None:
    weekdays = jobs_on(LAST_WEEKDAYS, "10:01", [5, 5, 5, 5, 5])
    weekends = jobs_on(["2026-12-06", "2026-12-05", "2026-11-29", "2026-11-28", "2026-11-22"],
                       "10:01", [1, 1, 1, 1, 1])  # fmt: skip
    warm = predict(config(POOL), sorted(weekdays + weekends), at("2026-12-12T10:05"))  # Sat
    assert warm is not None and (warm.runners, warm.kind) == (1, "weekend days")


def test_the_pool_fills_ahead_of_the_slot_it_predicts_for() -> None:
    history = jobs_on(LAST_WEEKDAYS, "08:16", [3, 3, 3, 3, 3])
    before = predict(config(POOL), history, at("2026-12-07T08:09"))
    assert before is not None and (before.runners, before.slot) == (0, "08:00"), "too early"
    warming = predict(config(POOL), history, at("2026-12-07T08:11"))  # 08:15 is 4 minutes away
    assert warming is not None and (warming.runners, warming.slot) == (3, "08:15")
    after = predict(config(POOL), history, at("2026-12-07T08:31"))
    assert after is not None and after.runners == 0, "the slot is over: the pool empties"


def test_the_pool_never_exceeds_its_max_and_says_so() -> None:
    history = jobs_on(LAST_WEEKDAYS, "08:16", [7, 7, 7, 7, 7])
    warm = predict(config(WarmPool(max=2)), history, at("2026-12-07T08:20"))
    assert warm is not None and (warm.runners, warm.predicted) == (2, 7)
    assert warm.reason.endswith("at most warm_pool.max 2")


def test_slots_are_wall_clock_times_in_the_pools_timezone() -> None:
    # 08:16 in Vilnius is 06:16 UTC in winter; the prediction at 08:20 Vilnius finds them.
    history = jobs_on(LAST_WEEKDAYS, "08:16", [2, 2, 2, 2, 2], zone="Europe/Vilnius")
    pool = WarmPool(max=5, timezone="Europe/Vilnius")
    assert predicted_runners(config(pool), history, at("2026-12-07T08:20", "Europe/Vilnius")) == 2
    assert predicted_runners(config(POOL), history, at("2026-12-07T08:20")) == 0


def test_a_scale_set_without_a_warm_pool_predicts_nothing() -> None:
    assert predict(config(None), [at("2026-12-04T08:16")], at("2026-12-07T08:20")) is None


def test_the_warm_pool_comes_on_top_of_min_runners_and_the_ceiling_cuts_it_first() -> None:
    found = desired(config(POOL, minimum=2), 1, paused=False, now=0.0, warm=3)
    assert (found.total, found.reserve, found.warm) == (6, 5, 3)
    capped = desired(config(POOL, max_runners=4, minimum=2), 1, paused=False, now=0.0, warm=3)
    assert (capped.total, capped.reserve, capped.warm) == (4, 3, 1)
    assert desired(config(POOL, minimum=2), 1, paused=True, now=0.0, warm=3).total == 0


def test_the_history_kept_covers_the_longest_lookback() -> None:
    # Five weekend days go back three weekends: at least 15 calendar days.
    assert history_span(WarmPool(max=1, lookback=5)) >= timedelta(days=16).total_seconds()
    assert history_span(WarmPool(max=1, lookback=1)) < history_span(WarmPool(max=1, lookback=5))


def load(pool: str) -> ScaleSetConfig:
    return parse_scale_sets(BASE + f"    warm_pool: {pool}\n", "s.yaml").scale_sets[0]


def problems(pool: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(pool)
    return caught.value.problems


def test_warm_pool_defaults_are_the_documented_ones() -> None:
    found = load("{max: 3}").warm_pool
    assert found == WarmPool(max=3, slot=900.0, lookback=5, percentile=90, ahead=300.0)


def test_every_warm_pool_problem_names_its_file_line_and_column() -> None:
    found = problems("{max: 9, slot: 7m, lookback: 0, percentile: 101, timezone: Local}")
    assert found == [
        "s.yaml:9:17: scale_sets[0].warm_pool.max: is 9; at most max_runners (8)",
        "s.yaml:9:25: scale_sets[0].warm_pool.slot: is 7m; a day must divide into whole slots "
        "of whole minutes (such as 5m, 15m, 30m or 1h)",
        "s.yaml:9:35: scale_sets[0].warm_pool.lookback: must be at least 1",
        "s.yaml:9:48: scale_sets[0].warm_pool.percentile: must be at most 100",
        "s.yaml:9:65: scale_sets[0].warm_pool.timezone: the host's own zone is refused; name "
        "an IANA zone such as Europe/Vilnius or UTC",
    ]


def test_a_warm_pool_needs_its_max() -> None:
    assert problems("{slot: 15m}") == ["s.yaml:9:16: scale_sets[0].warm_pool.max: is required"]


def test_utc_offsets_do_not_move_a_slot_across_midnight() -> None:
    # A job at 23:50 belongs to the 23:45 slot of its own day.
    history = jobs_on(LAST_WEEKDAYS, "23:50", [1, 1, 1, 1, 1])
    warm = predict(config(POOL), history, datetime(2026, 12, 7, 23, 46, tzinfo=UTC).timestamp())
    assert warm is not None and (warm.runners, warm.slot) == (1, "23:45")


def test_jobs_already_assigned_in_the_slot_today_need_no_warm_runner_any_more() -> None:
    history = jobs_on(LAST_WEEKDAYS, "08:16", [3, 3, 3, 3, 3])
    today = [*history, at("2026-12-07T08:16"), at("2026-12-07T08:17")]
    warm = predict(config(POOL), sorted(today), at("2026-12-07T08:20"))
    assert warm is not None and (warm.runners, warm.predicted, warm.come) == (1, 3, 2)
    assert warm.reason == "p90 of 3 jobs at 08:15 on the last 5 weekdays, 2 assigned so far"
    later = predict(config(POOL), sorted(today), at("2026-12-07T08:16:30"))
    assert later is not None and later.come == 1, "only those assigned by now count"
