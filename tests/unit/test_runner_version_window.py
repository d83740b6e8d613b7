"""When GitHub stops queueing jobs to a provider's runner, and when Rungar starts warning of it:
a pure decision on a snapshot and the ``now`` it is handed (docs/github.md, "Runner
versions"); and GitHub's release answer, read as untrusted input."""

from __future__ import annotations

import pytest

from rungar.model.runner_release import RunnerRelease, parse_date, release_of
from rungar.model.runner_version import RunnerVersion, parse_runner_version
from rungar.placement.version_window import (
    DAY,
    VersionSnapshot,
    VersionWindow,
    latest_release,
    runner_deadlines,
)


def date(text: str) -> float:
    found = parse_date(text)
    assert found is not None
    return found


T0 = date("2026-11-01")


def v(text: str) -> RunnerVersion:
    version = parse_runner_version(text)
    assert version is not None
    return version


def release(text: str, days_after_t0: float, source: str = "github") -> RunnerRelease:
    return RunnerRelease(v(text), T0 + days_after_t0 * DAY, source)


def snapshot(*releases: RunnerRelease, **runners: str) -> VersionSnapshot:
    return VersionSnapshot(tuple(releases), {name: v(ver) for name, ver in runners.items()})


def test_the_warning_starts_seven_days_before_the_thirty_day_window_closes() -> None:
    seen = snapshot(release("2.330.0", 0), old="2.329.0", new="2.330.0")
    window = VersionWindow()
    before = runner_deadlines(seen, T0 + 23 * DAY - 1, window)
    at = runner_deadlines(seen, T0 + 23 * DAY, window)
    assert [d.provider for d in before] == ["old"], "new runs the latest"
    (early,), (warned,) = before, at
    assert not early.warn and warned.warn
    assert warned.stops_at == T0 + 30 * DAY
    assert warned.days_left == pytest.approx(7.0)
    assert (str(warned.version), str(warned.latest.version)) == ("2.329.0", "2.330.0")
    assert not warned.stopped
    (after,) = runner_deadlines(seen, T0 + 30 * DAY, window)
    assert after.stopped and after.warn and after.days_left == 0


def test_the_window_lengths_are_configurable() -> None:
    seen = snapshot(release("2.330.0", 0), old="2.329.0")
    window = VersionWindow(days=10, warn_days=2)
    (early,) = runner_deadlines(seen, T0 + 8 * DAY - 1, window)
    (warned,) = runner_deadlines(seen, T0 + 8 * DAY, window)
    assert not early.warn and warned.warn and warned.stops_at == T0 + 10 * DAY


def test_the_oldest_release_newer_than_the_runner_opens_its_window() -> None:
    # 2.330.0 came out first; 2.331.0 is the latest. A 2.329.0 runner had to take 2.330.0
    # within 30 days of it; a 2.330.0 runner has until 30 days after 2.331.0.
    seen = snapshot(
        release("2.331.0", 20), release("2.330.0", 0), behind="2.329.0", one_behind="2.330.0"
    )
    behind, one_behind = runner_deadlines(seen, T0 + 24 * DAY, VersionWindow())
    assert behind.provider == "behind" and behind.stops_at == T0 + 30 * DAY and behind.warn
    assert behind.latest.version == v("2.331.0") and behind.opened_by.version == v("2.330.0")
    assert one_behind.stops_at == T0 + 50 * DAY and not one_behind.warn


def test_a_current_runner_or_no_release_known_has_no_deadline() -> None:
    assert runner_deadlines(snapshot(old="2.300.0"), T0, VersionWindow()) == []
    seen = snapshot(release("2.330.0", 0), ahead="2.331.0", same="2.330.0")
    assert runner_deadlines(seen, T0 + 40 * DAY, VersionWindow()) == []


def test_githubs_record_of_a_release_wins_over_the_configured_one() -> None:
    configured, github = release("2.330.0", 2, "configured"), release("2.330.0", 0)
    assert latest_release((configured, github)) == github
    assert latest_release(()) is None


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"tag_name": "v2.330.0", "published_at": "2026-11-01T00:00:00Z"}, "2.330.0"),
        ({"tag_name": "2.330.0", "published_at": "2026-11-01"}, "2.330.0"),
        ({"tag_name": "v2.330.0", "published_at": "2026-11-01T00:00:00Z", "draft": True}, None),
        ({"tag_name": "v2.330.0", "published_at": "2026-11-01", "prerelease": True}, None),
        ({"tag_name": "v2.330.0-rc1", "published_at": "2026-11-01"}, None),
        ({"tag_name": "v2.330.0", "published_at": "yesterday"}, None),
        ({"tag_name": "v2.330.0", "published_at": "2026-11-01" + "0" * 60}, None),
        ({"tag_name": "v2.330.0"}, None),
        ({"tag_name": ["v2.330.0"], "published_at": "2026-11-01"}, None),
        (["v2.330.0"], None),
    ],
)
def test_githubs_answer_names_a_release_only_with_a_version_and_a_date(
    answer: object, expected: str | None
) -> None:
    found = release_of(answer)
    assert (str(found.version) if found else None) == expected
    if found is not None:
        assert found.published_at == T0 and found.source == "github"
