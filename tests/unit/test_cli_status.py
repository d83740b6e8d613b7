"""``rungar status`` rendered from fixture status documents (docs/troubleshooting.md).

Every status word and sentence the daemon can report is in the fixture; the rendering must
keep the layout to the character and never claim to know a provider's spare room.
"""

# ruff: noqa: E501  # the expected report is kept verbatim, and its table rows are wide

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rungar.cli.status import github_kind, render_status
from rungar.model.sentences import skip_sentence

NOW = 1_790_589_600.0  # 2026-09-28 10:00:00 UTC


def scale_set(name: str, status: str, note: str = "", **kw: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "status": status,
        "note": note,
        "runners": 0,
        "busy": 0,
        "idle": 0,
        "starting": 0,
        "desired": 0,
        "min": 0,
        "max": 4,
        "priority": 0,
        "placement": "spread",
        "providers": ["compute1"],
        "paused": status == "PAUSED",
        "assigned": 0,
        "labels": [name],
    }
    entry.update(kw)
    return entry


def provider(name: str, status: str, runners: int = 0, **kw: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "type": "runnerd",
        "status": status,
        "runners": runners,
        "max_runners": None,
        "leaving": 0,
        "weight": 1.0,
        "reachable": True,
        "disabled": False,
        "draining": False,
        "runtime_change": False,
        "hold": None,
    }
    entry.update(kw)
    return entry


def skip(
    scale_set: str, provider: str, full: bool, refusals: int, left: float, error: str = ""
) -> dict[str, Any]:
    return {
        "scale_set": scale_set,
        "provider": provider,
        "full": full,
        "refusals": refusals,
        "left": left,
        "error": error,
        "resource": "memory" if full else "",
        "sentence": skip_sentence(scale_set, provider, full, refusals, left, error),
    }


DOCUMENT: dict[str, Any] = {
    "daemon": {
        "version": "0.3.0",
        "installation": "gh-0123456789ab",
        "started_at": NOW - 3 * 3600,
        "now": NOW,
        "config_path": "/etc/rungar/scale_sets.yaml",
        "github": "https://github.com/my-org",
    },
    "scale_sets": [
        scale_set(
            "rungar-c4-m8",
            "LISTENING",
            runners=18,
            busy=17,
            starting=1,
            desired=18,
            max=24,
            placement="pack",
            providers=["compute1", "compute2", "aws"],
        ),
        scale_set(
            "rungar-small",
            "HOLDING BACK",
            'holding back from compute2 for scale set "rungar-big", which is waiting for room '
            "and takes priority",
        ),
        scale_set("rungar-big", "WAITING", priority=10, max=2),
        scale_set(
            "rungar-paused",
            "PAUSED",
            "taking no jobs, which wait on GitHub; 0 runners left; until resumed or the daemon "
            "restarts",
        ),
        scale_set("rungar-gh", "UNREACHABLE", "GitHub does not answer"),
        scale_set("rungar-new", "STARTING", "being looked up on GitHub, and its runners adopted"),
    ],
    "providers": [
        provider("compute1", "OK", 8),
        provider("aws", "OK enabled until the daemon restarts", 8, type="aws", max_runners=12),
        provider(
            "compute2",
            "HELD for rungar-big (priority 10), renewed while it asks",
            2,
            hold={"holder": "rungar-big", "priority": 10, "left": 25.0},
        ),
        provider("compute3", "UNREACHABLE", reachable=False),
        provider("compute4", "DISABLED until the daemon restarts", disabled=True),
        provider(
            "compute5",
            "DRAINING 2 runners left until the daemon restarts",
            2,
            draining=True,
            disabled=True,
        ),
    ],
    "skips": [
        skip("rungar-c4-m8", "compute1", True, 1, 47.0),
        skip("rungar-big", "compute3", False, 2, 30.0, "connection reset"),
    ],
    "runners": [
        {
            "name": "rungar-c4-m8-0a1b2c3d",
            "scale_set": "rungar-c4-m8",
            "provider": "compute1",
            "state": "busy",
            "machine": "running",
            "github": "busy",
            "age": 300.0,
            "job": "octo/app: build",
        },
        {
            "name": "rungar-c4-m8-4e5f6a7b",
            "scale_set": "rungar-c4-m8",
            "provider": "aws",
            "state": "starting",
            "machine": "starting",
            "github": "not_registered",
            "age": 45.4,
            "job": "",
        },
    ],
}

EXPECTED = """\
Rungar v0.3.0

  GitHub:        https://github.com/my-org (organisation)
  Installation:  gh-0123456789ab
  Running:       since 2026-09-28 07:00:00 (3h)
  Configuration: /etc/rungar/scale_sets.yaml

Scale sets (6)
  SCALE SET      STATUS        PROVIDERS                     LABELS         RUNNER  RUNNERS                   DESIRED  MIN  MAX  PRIORITY
  rungar-c4-m8   LISTENING     compute1,compute2,aws (pack)  rungar-c4-m8   -       18 (17 busy, 1 starting)  18       0    24   0
  rungar-small   HOLDING BACK  compute1 (spread)             rungar-small   -       0                         0        0    4    0
  rungar-big     WAITING       compute1 (spread)             rungar-big     -       0                         0        0    2    10
  rungar-paused  PAUSED        compute1 (spread)             rungar-paused  -       0                         0        0    4    0
  rungar-gh      UNREACHABLE   compute1 (spread)             rungar-gh      -       0                         0        0    4    0
  rungar-new     STARTING      compute1 (spread)             rungar-new     -       0                         0        0    4    0
  rungar-small: holding back from compute2 for scale set "rungar-big", which is waiting for room and takes priority
  rungar-big: another message session owns the scale set; standing by until it ends
  rungar-paused: taking no jobs, which wait on GitHub; 0 runners left; until resumed or the daemon restarts
  rungar-gh: GitHub does not answer
  rungar-new: being looked up on GitHub, and its runners adopted

Providers (6)
  PROVIDER  TYPE     STATUS                                                    RUNNERS
  compute1  runnerd  OK                                                        8
  aws       aws      OK enabled until the daemon restarts                      8/12
  compute2  runnerd  HELD for rungar-big (priority 10), renewed while it asks  2
  compute3  runnerd  UNREACHABLE                                               0
  compute4  runnerd  DISABLED until the daemon restarts                        0
  compute5  runnerd  DRAINING 2 runners left until the daemon restarts         2
  compute3 cannot be reached
  rungar-c4-m8 found compute1 full; tries it again in 47s
  rungar-big found compute3 failing (2 in a row); tries it again in 30s: connection reset

Runners (2)
  RUNNER                 SCALE SET     PROVIDER  STATE     MACHINE   GITHUB          AGE  JOB
  rungar-c4-m8-0a1b2c3d  rungar-c4-m8  compute1  Busy      Running   Busy            5m   octo/app: build
  rungar-c4-m8-4e5f6a7b  rungar-c4-m8  aws       Starting  Starting  Not registered  45s  -

2 runners; the scale sets allow 42 between them.
"""
FORBIDDEN = ("AVAILABLE", "SPARE", "ROOM", "Room for", "room for", "largest size")


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_the_status_report_is_laid_out_to_the_character() -> None:
    assert render_status(DOCUMENT) == EXPECTED


def test_the_report_never_claims_to_know_spare_room() -> None:
    text = render_status(DOCUMENT)
    for word in FORBIDDEN:
        assert word not in text, word


def test_the_output_is_plain_text() -> None:
    assert "\x1b" not in render_status(DOCUMENT)


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("rungar-c4-m8", "LISTENING"),
        ("rungar-small", "HOLDING BACK"),
        ("rungar-big", "WAITING"),
        ("rungar-paused", "PAUSED"),
        ("rungar-gh", "UNREACHABLE"),
        ("rungar-new", "STARTING"),
    ],
)
def test_each_scale_set_status_word_is_in_its_row(name: str, status: str) -> None:
    lines = render_status(DOCUMENT).splitlines()
    row = next(line for line in lines if line.startswith(f"  {name} "))
    assert f" {status} " in row


def test_a_note_line_follows_for_each_scale_set_not_plainly_listening() -> None:
    lines = render_status(DOCUMENT).splitlines()
    notes = [x for x in lines if x.startswith("  rungar-") and " " not in x.split(":")[0].strip()]
    assert [n.split(":")[0].strip() for n in notes] == [
        "rungar-small",
        "rungar-big",
        "rungar-paused",
        "rungar-gh",
        "rungar-new",
    ]


def test_a_listening_scale_set_with_a_note_shows_it() -> None:
    document = copy.deepcopy(DOCUMENT)
    note = "resumed until the daemon restarts; the configuration has it paused"
    document["scale_sets"][0]["note"] = note
    assert f"  rungar-c4-m8: {note}" in render_status(document).splitlines()


@pytest.mark.parametrize(
    "status",
    [
        "OK",
        "OK enabled until the daemon restarts",
        "HELD for rungar-big (priority 10), renewed while it asks",
        "UNREACHABLE",
        "DISABLED until the daemon restarts",
        "DRAINING 2 runners left until the daemon restarts",
    ],
)
def test_each_provider_status_is_shown_as_the_daemon_words_it(status: str) -> None:
    lines = render_status(DOCUMENT).splitlines()
    assert any(f"  {status}  " in line or line.endswith(status) for line in lines)


def test_runners_show_as_count_of_max_only_when_a_max_is_set() -> None:
    lines = render_status(DOCUMENT).splitlines()
    assert next(x for x in lines if x.startswith("  aws ")).endswith(" 8/12")
    assert next(x for x in lines if x.startswith("  compute1 ")).endswith(" 8")


def test_each_skip_is_one_line_in_the_daemons_sentence() -> None:
    lines = render_status(DOCUMENT).splitlines()
    assert "  rungar-c4-m8 found compute1 full; tries it again in 47s" in lines
    assert (
        "  rungar-big found compute3 failing (2 in a row); tries it again in 30s: "
        "connection reset" in lines
    )


def test_an_unreachable_provider_says_why_when_the_daemon_knows() -> None:
    document = copy.deepcopy(DOCUMENT)
    document["providers"][3]["error"] = "connection refused"
    assert "  compute3 cannot be reached: connection refused" in render_status(document)


def test_an_unreachable_provider_says_how_many_runners_it_still_counts_and_until_when() -> None:
    document = copy.deepcopy(DOCUMENT)
    document["providers"][3].update(kept=2, written_off_in=272.5)
    lines = render_status(document).splitlines()
    reached = lines.index("  compute3 cannot be reached")
    assert lines[reached + 1] == (
        "  compute3's 2 runners still count against the limits until it answers; "
        "written off in 4m unless it does"
    )
    document["providers"][3].update(kept=1, written_off_in=None)
    text = render_status(document)
    assert "  compute3's 1 runner still counts against the limits until it answers\n" in text


def test_one_runner_is_counted_in_the_singular() -> None:
    document = copy.deepcopy(DOCUMENT)
    document["runners"] = document["runners"][:1]
    document["scale_sets"] = [document["scale_sets"][2]]
    last = render_status(document).splitlines()[-1]
    assert last == "1 runner; the scale sets allow 2 between them."


def test_an_empty_daemon_renders_every_section() -> None:
    document = {"daemon": {"version": "0.3.0"}, "scale_sets": [], "providers": [], "runners": []}
    assert render_status(document) == (
        "Rungar v0.3.0\n\n\nScale sets (0)\n\nProviders (0)\n\nRunners (0)\n\n"
        "0 runners; the scale sets allow 0 between them.\n"
    )


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("https://github.com/my-org", "organisation"),
        ("https://github.com/my-org/app", "repository"),
        ("https://github.com/enterprises/acme", "enterprise"),
        ("https://ghe.example.com/my-org/", "organisation"),
    ],
)
def test_the_github_line_names_what_the_url_is(url: str, kind: str) -> None:
    assert github_kind(url) == kind


def role_line(lease: dict[str, Any]) -> str:
    document = {
        "daemon": {"version": "0.3.0", "now": NOW, "lease": lease},
        "scale_sets": [],
        "providers": [],
        "runners": [],
    }
    lines = [line for line in render_status(document).splitlines() if "Role:" in line]
    assert len(lines) == 1, render_status(document)
    return lines[0].split("Role:", 1)[1].strip()


def test_the_active_daemon_says_since_when_it_holds_the_lease_and_its_last_renewal() -> None:
    held = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(NOW - 600))
    lease = {"role": "active", "held_since": NOW - 600, "renewed_at": NOW - 3, "adopted": True}
    assert role_line(lease) == f"active (lease held since {held}, renewed 3s ago)"


def test_an_active_daemon_still_adopting_says_so() -> None:
    lease = {"role": "active", "held_since": NOW, "renewed_at": NOW, "adopted": False}
    assert role_line(lease).endswith("renewed 0s ago; adopting what exists)")


def test_a_standby_names_the_active_daemon_and_when_github_last_said_it_holds_the_lease() -> None:
    lease = {"role": "standby", "holder": "host-b/4242", "holder_seen_at": NOW - 3, "lead": "l"}
    assert role_line(lease) == "standby; active is host-b/4242, seen holding the lease 3s ago"


def test_a_standby_that_knows_no_holder_says_what_it_waits_for() -> None:
    lease = {"role": "standby", "holder": "", "holder_seen_at": None, "lead": "linux"}
    assert role_line(lease) == "standby; waiting for the message session of scale set linux"


NO_ANSWER = "GitHub does not answer: the lease renewal timed out after 10 s"


def test_an_active_daemon_github_leaves_unconfirmed_says_why_and_for_how_long() -> None:
    lease = {
        "role": "active",
        "held_since": NOW - 600,
        "renewed_at": NOW - 25,
        "adopted": True,
        "unconfirmed_since": NOW - 15,
        "unconfirmed_why": NO_ANSWER,
    }
    assert role_line(lease).endswith(f"renewed 25s ago); {NO_ANSWER}; 15s without a confirmation")


def test_a_daemon_cut_off_from_github_stands_by_saying_so_not_waiting_for_a_session() -> None:
    lease = {
        "role": "standby",
        "holder": "",
        "lead": "linux",
        "unconfirmed_since": NOW - 45,
        "unconfirmed_why": NO_ANSWER,
    }
    assert role_line(lease) == (
        f"standby; {NO_ANSWER}; 45s without a confirmation; it acts again once GitHub "
        "confirms the lease"
    )


def test_shape_one_gives_scripts_written_against_it_the_words_and_counts_they_read() -> None:
    from rungar.cli.status import shape_one

    two: dict[str, Any] = {
        "version": 2,
        "daemon": {"installation": "i"},
        "scale_sets": [{"name": "linux", "runners": 3, "creating": 1, "busy": 1, "idle": 1}],
        "providers": [{"name": "a", "max_runners": None}, {"name": "b", "max_runners": 4}],
        "runners": [
            {"name": "r1", "state": "busy", "machine": "not_listed", "github": "not_registered"},
            {"name": "r2", "state": "idle", "machine": "running", "github": "idle"},
        ],
    }
    one = shape_one(two)
    assert "version" not in one
    assert one["scale_sets"][0]["runners"] == 2  # shape 1 left the creates in flight out
    assert [p["max_runners"] for p in one["providers"]] == [0, 4]
    assert [(r["state"], r["machine"], r["github"]) for r in one["runners"]] == [
        ("Busy", "Not listed yet", "Not registered"),
        ("Idle", "Running", "Idle"),
    ]
    assert two["version"] == 2 and two["runners"][0]["state"] == "busy", "the input is kept"


def test_status_takes_shape_one_or_two_and_refuses_another() -> None:
    from rungar.cli.main import build_parser

    parser = build_parser("status")
    assert parser.parse_args(["status", "--json", "--shape", "1"]).shape == 1
    assert parser.parse_args(["status", "--json"]).shape == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["status", "--json", "--shape", "3"])
