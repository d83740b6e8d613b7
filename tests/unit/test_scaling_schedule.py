"""Schedules on scale sets (docs/scale-sets.md, "Schedules"): the window in force is a pure function
of the schedule and ``now``, and every rule a schedule breaks is a FILE:LINE:COL problem."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from rungar.config.loader import parse_scale_sets
from rungar.config.model import ScaleSetConfig
from rungar.errors import ConfigError
from rungar.scaling import desired, in_force

BASE = """\
providers:
  - name: compute1
    type: fake
scale_sets:
  - name: rungar-c4-m8
    max_runners: 8
    min_runners: 1
    providers: [compute1]
    schedule:
"""


def load(schedule: str) -> ScaleSetConfig:
    return parse_scale_sets(BASE + schedule, "s.yaml").scale_sets[0]


def problems(schedule: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_scale_sets(BASE + schedule, "s.yaml")
    return caught.value.problems


def at(text: str, zone: str = "Europe/Vilnius") -> float:
    """Epoch seconds of a wall-clock time in ``zone``."""
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()


OFFICE = load(
    "      timezone: Europe/Vilnius\n"
    "      windows:\n"
    '        - {days: mon-fri, from: "08:00", to: "18:00", min_runners: 4}\n'
)


def test_a_window_sets_min_runners_while_it_is_open_in_its_timezone() -> None:
    # 2026-12-01 is a Tuesday; 08:00 in Vilnius is 06:00 UTC.
    assert in_force(OFFICE, at("2026-12-01T08:00")).min_runners == 4
    assert in_force(OFFICE, at("2026-12-01T17:59")).min_runners == 4
    assert in_force(OFFICE, at("2026-12-01T07:59")).min_runners == 1


def test_outside_every_window_the_scale_sets_own_min_runners_applies() -> None:
    found = in_force(OFFICE, at("2026-12-05T12:00"))  # a Saturday
    assert (found.min_runners, found.window) == (1, "")


def test_the_next_change_is_when_the_window_closes() -> None:
    found = in_force(OFFICE, at("2026-12-01T12:00"))
    assert found.window == "mon-fri 08:00-18:00"
    assert found.next_change == at("2026-12-01T18:00")
    assert found.next_min_runners == 1


def test_after_friday_the_next_change_is_monday_morning() -> None:
    found = in_force(OFFICE, at("2026-12-04T18:30"))
    assert found.next_change == at("2026-12-07T08:00")
    assert found.next_min_runners == 4


def test_an_unset_timezone_is_utc_never_the_hosts() -> None:
    config = load('      windows: [{days: mon-sun, from: "08:00", to: "09:00", min_runners: 3}]\n')
    assert config.schedule is not None and config.schedule.timezone == "UTC"
    assert in_force(config, at("2026-12-01T08:30", "UTC")).min_runners == 3
    assert in_force(config, at("2026-12-01T09:30", "UTC")).min_runners == 1


def test_a_window_running_past_midnight_belongs_to_the_day_it_opens_on() -> None:
    config = load(
        "      timezone: UTC\n"
        '      windows: [{days: fri, from: "22:00", to: "06:00", min_runners: 2}]\n'
    )
    assert in_force(config, at("2026-12-04T23:00", "UTC")).min_runners == 2  # Friday night
    assert in_force(config, at("2026-12-05T05:59", "UTC")).min_runners == 2  # Saturday early
    assert in_force(config, at("2026-12-05T06:00", "UTC")).min_runners == 1
    assert in_force(config, at("2026-12-04T05:00", "UTC")).min_runners == 1  # Friday early


def test_a_day_range_may_wrap_over_the_week_end() -> None:
    config = load('      windows: [{days: fri-mon, from: "00:00", to: "24:00", min_runners: 5}]\n')
    for day in ("2026-12-04", "2026-12-05", "2026-12-06", "2026-12-07"):
        assert in_force(config, at(f"{day}T12:00", "UTC")).min_runners == 5, day
    assert in_force(config, at("2026-12-08T12:00", "UTC")).min_runners == 1  # Tuesday


def test_a_window_may_end_at_24_00() -> None:
    config = load('      windows: [{days: tue, from: "20:00", to: "24:00", min_runners: 2}]\n')
    assert in_force(config, at("2026-12-01T23:59", "UTC")).min_runners == 2
    found = in_force(config, at("2026-12-01T21:00", "UTC"))
    assert found.next_change == at("2026-12-02T00:00", "UTC")


def test_the_first_matching_window_wins() -> None:
    config = load(
        "      windows:\n"
        '        - {days: tue, from: "10:00", to: "11:00", min_runners: 6}\n'
        '        - {days: mon-fri, from: "08:00", to: "18:00", min_runners: 2}\n'
    )
    assert in_force(config, at("2026-12-01T10:30", "UTC")).min_runners == 6
    assert in_force(config, at("2026-12-01T09:00", "UTC")).min_runners == 2
    found = in_force(config, at("2026-12-01T09:00", "UTC"))
    assert (found.next_change, found.next_min_runners) == (at("2026-12-01T10:00", "UTC"), 6)


def test_a_window_keeps_local_hours_across_a_daylight_saving_change() -> None:
    # Vilnius leaves summer time on 2026-10-25: 08:00 is 05:00 UTC before and 06:00 UTC after.
    assert in_force(OFFICE, at("2026-10-23T08:00")).min_runners == 4
    assert datetime.fromtimestamp(at("2026-10-26T08:00"), UTC).hour == 6
    assert in_force(OFFICE, at("2026-10-26T08:00")).min_runners == 4
    assert in_force(OFFICE, at("2026-10-26T07:30")).min_runners == 1


def test_the_window_in_force_is_the_reserve_on_top_of_assigned_jobs() -> None:
    found = desired(OFFICE, 3, paused=False, now=at("2026-12-01T09:00"))
    assert (found.total, found.reserve, found.work) == (7, 4, 3)
    assert desired(OFFICE, 3, paused=False, now=at("2026-12-01T19:00")).total == 4


def test_the_host_zone_is_refused() -> None:
    found = problems(
        '      timezone: Local\n      windows: [{days: mon, from: "08:00", to: "09:00"}]\n'
    )
    assert found == [
        "s.yaml:10:7: scale_sets[0].schedule.timezone: the host's own zone is refused; name an "
        "IANA zone such as Europe/Vilnius or UTC"
    ]


def test_an_unknown_timezone_is_refused() -> None:
    found = problems(
        '      timezone: Europe/Vilnus\n      windows: [{days: mon, from: "08:00", to: "09:00"}]\n'
    )
    assert found == [
        "s.yaml:10:7: scale_sets[0].schedule.timezone: 'Europe/Vilnus' is not an IANA timezone "
        "(such as Europe/Vilnius or UTC)"
    ]


def test_a_timezone_with_no_windows_is_refused() -> None:
    assert problems("      timezone: UTC\n") == [
        "s.yaml:10:7: scale_sets[0].schedule.windows: is required"
    ]
    assert problems("      timezone: UTC\n      windows: []\n") == [
        "s.yaml:11:7: scale_sets[0].schedule.windows: must have at least 1 item"
    ]


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (
            '{days: mon-fry, from: "08:00", to: "09:00"}',
            "s.yaml:11:12: scale_sets[0].schedule.windows[0].days: 'fry' is not a day; use mon, "
            "tue, wed, thu, fri, sat or sun, or a range",
        ),
        (
            '{days: mon, from: "24:00", to: "09:00"}',
            "s.yaml:11:23: scale_sets[0].schedule.windows[0].from: '24:00': 24:00 may end a "
            "window, not open one",
        ),
        (
            '{days: mon, from: "08:00", to: "08:00"}',
            "s.yaml:11:38: scale_sets[0].schedule.windows[0].to: equals from (08:00); a window "
            "needs a length (to before from runs past midnight)",
        ),
        (
            '{days: mon, from: "08:00", to: "25:00"}',
            "s.yaml:11:38: scale_sets[0].schedule.windows[0].to: '25:00' is not a time of day "
            "(00:00 to 23:59)",
        ),
        (
            '{days: mon, from: "8:00", to: "09:00"}',
            "s.yaml:11:23: scale_sets[0].schedule.windows[0].from: '8:00' is not valid: HH:MM "
            "such as 08:00, quoted",
        ),
        (
            '{days: mon, from: "08:00", to: 18:00}',
            "s.yaml:11:38: scale_sets[0].schedule.windows[0].to: 18:00 is read as the number "
            "1080; quote it",
        ),
        (
            '{days: mon, from: "08:00", to: "09:00", min_runners: 9}',
            "s.yaml:11:51: scale_sets[0].schedule.windows[0].min_runners: is 9; at most "
            "max_runners (8)",
        ),
    ],
)
def test_every_rule_a_window_breaks_is_a_problem_at_its_key(window: str, expected: str) -> None:
    found = problems(f"      windows:\n        - {window}\n")
    assert found == [expected]
