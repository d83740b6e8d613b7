"""What the demo's summary shows of GitHub (rungar.demo.on_github): per scale set, the run whose
job waited on a hold when there is one, what its status said while it waited and how it ended."""

from __future__ import annotations

from typing import Any

from rungar.demo.on_github import Told, told_on_github


def status(sha: str, scale_set: str, state: str, description: str) -> dict[str, Any]:
    return {
        "sha": sha,
        "context": f"rungar: {scale_set}",
        "state": state,
        "description": description,
    }


def test_a_run_that_waited_on_a_hold_is_shown_with_what_it_said_then_how_it_ended() -> None:
    statuses = [
        status(
            "a", "small", "pending", "waiting 4s: next: tries host1 then host2 then host3 then aws"
        ),
        status("a", "small", "success", "waited 5s: next: tries host1"),
        status("b", "small", "pending", "waiting 4s: host1: held for scale set large"),
        status("b", "small", "pending", "waiting 7s: host1: held for scale set large; aws: full"),
        status("b", "small", "pending", "waiting 9s: next: its runner is starting on aws"),
        status("b", "small", "success", "waited 11s: next: its runner is starting on aws"),
        status("c", "huge", "pending", "waiting 4s: huge found host1 failing"),
        status("c", "huge", "failure", "no provider of huge can take its runner (…)"),
        {"sha": "c", "context": "ci/other", "state": "success", "description": "not ours"},
    ]
    huge, small = told_on_github(statuses)
    assert small == Told(
        "small",
        waiting="waiting 7s: host1: held for scale set large; aws: full",
        ended="waited 11s: next: its runner is starting on aws",
        state="success",
        held=True,
    )
    assert small.text() == (
        'pending "waiting 7s: host1: held for scale set large; aws: full" → '
        'success "waited 11s: next: its runner is starting on aws"'
    )
    assert huge.state == "failure" and not huge.held
    assert huge.text().endswith('failure "no provider of huge can take its runner (…)"')


def test_a_status_still_pending_shows_only_what_it_says() -> None:
    (told,) = told_on_github([status("a", "small", "pending", "waiting 4s: host1: full")])
    assert told.text() == 'pending "waiting 4s: host1: full"'
