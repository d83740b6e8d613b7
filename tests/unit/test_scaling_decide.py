"""Scaling decisions: desired count, surplus, and what can no longer serve."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rungar.config.model import ScaleSetConfig, ScaleSetProvider
from rungar.model.runner import GitHubState, RemovalReason, RunnerState, RunnerView
from rungar.scaling import decide_removal, desired_runners, surplus_to_remove
from rungar.scaling.decide import decide_one

NOW = 100_000.0
CONFIG = ScaleSetConfig(
    "s",
    max_runners=10,
    min_runners=2,
    providers=(ScaleSetProvider("a"),),
    start_timeout=300,
    max_idle_age=3600,
    max_age=7200,
)
IDLE = RunnerView(
    name="s-00000001",
    scale_set="s",
    provider="a",
    revision="r1",
    created_at=NOW - 600,
    state=RunnerState.IDLE,
    github=GitHubState.IDLE,
    connected=True,
)


def test_scale_up_to_assigned_jobs_plus_the_minimum() -> None:
    assert desired_runners(CONFIG, 3, paused=False) == 5


def test_scale_up_stops_at_the_ceiling() -> None:
    assert desired_runners(CONFIG, 50, paused=False) == 10


def test_no_jobs_keeps_the_minimum_and_a_pause_wants_none() -> None:
    assert desired_runners(CONFIG, 0, paused=False) == 2
    assert desired_runners(CONFIG, 5, paused=True) == 0


def test_scale_down_spares_busy_runners_and_removes_outdated_first_then_oldest() -> None:
    runners = [
        replace(IDLE, name="old", created_at=NOW - 900),
        replace(IDLE, name="new", created_at=NOW - 100),
        replace(IDLE, name="outdated", created_at=NOW - 50, revision="r0"),
        replace(IDLE, name="busy", created_at=NOW - 5000, state=RunnerState.BUSY),
    ]
    assert surplus_to_remove(runners, 2, {"a": "r1"}) == ["outdated", "old"]
    assert surplus_to_remove(runners, 10, {"a": "r1"}) == ["outdated", "old", "new"]
    assert surplus_to_remove(runners, 0, {"a": "r1"}) == []


@pytest.mark.parametrize(
    ("runner", "expected", "forced"),
    [
        (IDLE, None, False),
        (replace(IDLE, github=GitHubState.NOT_REGISTERED), RemovalReason.UNREGISTERED, False),
        (
            replace(
                IDLE,
                github=GitHubState.NOT_REGISTERED,
                state=RunnerState.STARTING,
                connected=False,
                created_at=NOW - 10,
            ),
            None,
            False,
        ),
        (
            replace(IDLE, state=RunnerState.STARTING, connected=False, created_at=NOW - 301),
            RemovalReason.NEVER_CONNECTED,
            False,
        ),
        (
            replace(IDLE, state=RunnerState.STARTING, connected=False, created_at=NOW - 100),
            None,
            False,
        ),
        (
            replace(IDLE, github=GitHubState.OFFLINE, offline_since=NOW - 301),
            RemovalReason.DISCONNECTED,
            False,
        ),
        (replace(IDLE, github=GitHubState.OFFLINE, offline_since=NOW - 100), None, False),
        (replace(IDLE, revision="r0"), RemovalReason.OUTDATED, False),
        (replace(IDLE, created_at=NOW - 3601), RemovalReason.IDLE_TOO_LONG, False),
        (replace(IDLE, created_at=0), None, False),
        (replace(IDLE, state=RunnerState.BUSY, created_at=NOW - 3601), None, False),
        (replace(IDLE, state=RunnerState.BUSY, created_at=NOW - 7201), RemovalReason.EXPIRED, True),
        (
            replace(
                IDLE, state=RunnerState.BUSY, github=GitHubState.OFFLINE, offline_since=NOW - 400
            ),
            RemovalReason.STUCK,
            True,
        ),
        (replace(IDLE, state=RunnerState.BUSY, revision="r0"), None, False),
        (replace(IDLE, state=RunnerState.LEAVING, created_at=NOW - 9999), None, False),
    ],
    ids=[
        "an_idle_runner_stays",
        "an_unregistered_runner_goes",
        "a_young_runner_not_yet_listed_stays",
        "a_runner_that_never_connects_goes",
        "a_starting_runner_has_its_start_timeout",
        "a_runner_that_stays_disconnected_goes",
        "a_short_disconnection_is_tolerated",
        "an_outdated_runner_is_replaced",
        "an_idle_runner_past_max_idle_age_goes_as_idle_too_long",
        "a_runner_of_unknown_age_never_expires",
        "a_busy_runner_is_not_touched_for_idle_age",
        "a_busy_runner_past_max_age_is_forced_out",
        "a_busy_runner_offline_too_long_is_stuck",
        "a_busy_outdated_runner_waits_for_its_job",
        "a_leaving_runner_is_left_alone",
    ],
)
def test_reconciliation_removes_only_what_can_no_longer_serve(
    runner: RunnerView, expected: RemovalReason | None, forced: bool
) -> None:
    removal = decide_one(runner, CONFIG, "r1", NOW)
    assert (removal.reason if removal else None) == expected
    assert (removal.forced if removal else False) == forced


def test_outdated_runners_are_replaced_one_at_a_time() -> None:
    runners = [replace(IDLE, name=f"r{i}", revision="old", created_at=NOW - i) for i in range(5)]
    removals = decide_removal(runners, CONFIG, {"a": "r1"}, NOW)
    assert len(removals) == 1 and removals[0].reason is RemovalReason.OUTDATED
    broken = replace(IDLE, name="gone", github=GitHubState.NOT_REGISTERED)
    removals = decide_removal([*runners, broken], CONFIG, {"a": "r1"}, NOW)
    assert sorted(r.reason for r in removals) == [
        RemovalReason.OUTDATED,
        RemovalReason.UNREGISTERED,
    ]


def test_the_graces_are_configurable_and_default_to_start_timeout() -> None:
    from rungar.config.model import Timing

    offline = replace(IDLE, github=GitHubState.OFFLINE, offline_since=NOW - 100)
    assert decide_one(offline, CONFIG, "r1", NOW) is None
    removal = decide_one(offline, CONFIG, "r1", NOW, Timing(disconnected_grace=60))
    assert removal is not None and removal.reason is RemovalReason.DISCONNECTED
    starting = replace(IDLE, state=RunnerState.STARTING, connected=False, created_at=NOW - 100)
    removal = decide_one(starting, CONFIG, "r1", NOW, Timing(never_connected_grace=60))
    assert removal is not None and removal.reason is RemovalReason.NEVER_CONNECTED


def test_an_idle_runner_on_a_provider_taken_off_the_scale_sets_list_is_drained_and_replaced() -> (
    None
):
    moved = replace(IDLE, name="on-b", provider="b")  # b was listed; the new list has only a
    removal = decide_one(moved, CONFIG, "", NOW)
    assert removal is not None and removal.reason is RemovalReason.DRAINED
    assert removal.replacement and not removal.forced
    busy = replace(moved, github=GitHubState.BUSY, state=RunnerState.BUSY)
    assert decide_one(busy, CONFIG, "", NOW) is None, "a busy one finishes its job first"
    assert decide_one(IDLE, CONFIG, "r1", NOW) is None, "one on a listed provider stays"
