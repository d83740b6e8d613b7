"""The CLI's pieces that need no daemon: socket resolution, argument parsing, cells, events.

Also that importing the commands loads no grpc, so ``rungar --help`` stays quick.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from rungar.cli import apply, events, providers, reconcile, runners, scale_sets, status
from rungar.cli.events import event_line, parse_since
from rungar.cli.render import count_of_max, fields, format_age, plural, runner_count, table
from rungar.cli.scale_sets import leftovers
from rungar.cli.socket import DEFAULT_SOCKET, socket_path

MODULES = {
    "status": status,
    "apply": apply,
    "events": events,
    "scale-sets": scale_sets,
    "providers": providers,
    "runners": runners,
    "reconcile": reconcile,
}


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rungar")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, module in MODULES.items():
        module.add_parser(subparsers, name, name)
    return parser.parse_args(argv)


def test_the_socket_is_the_flag_then_the_environment_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RUNGAR_SOCKET", raising=False)
    assert socket_path(parse(["status"])) == DEFAULT_SOCKET == "/run/rungar/rungar.sock"
    monkeypatch.setenv("RUNGAR_SOCKET", "/tmp/env.sock")
    assert socket_path(parse(["status"])) == "/tmp/env.sock"
    assert socket_path(parse(["status", "--socket", "/tmp/flag.sock"])) == "/tmp/flag.sock"


@pytest.mark.parametrize(
    "argv",
    [
        ["scale-sets", "ls", "--json"],
        ["scale-sets", "inspect", "linux", "--json"],
        ["scale-sets", "pause", "linux", "--wait"],
        ["scale-sets", "rm", "linux", "--wait"],
        ["providers", "ls", "--json"],
        ["providers", "inspect", "compute1", "--json"],
        ["providers", "drain", "compute1"],
        ["runners", "ls", "--scale-set", "linux", "--provider", "compute1", "--json"],
        ["runners", "rm", "a", "b"],
        ["events", "-f", "--scale-set", "s", "--provider", "p", "--since", "1h", "-n", "5"],
        ["reconcile", "linux", "macos"],
        ["apply", "scale_sets.yaml", "--dry-run"],
        ["status", "--json"],
    ],
)
def test_every_documented_form_parses(argv: list[str]) -> None:
    assert parse(argv).command == argv[0]


@pytest.mark.parametrize(
    "argv",
    [["scale-sets"], ["scale-sets", "pause"], ["providers", "fly", "x"], ["runners", "rm"]],
)
def test_a_usage_error_exits_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as found:
        parse(argv)
    assert found.value.code == 2


NOW = dt.datetime(2026, 9, 28, 12, 0, 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1h", dt.datetime(2026, 9, 28, 11, 0, 0)),
        ("90s", dt.datetime(2026, 9, 28, 11, 58, 30)),
        ("10:30", dt.datetime(2026, 9, 28, 10, 30, 0)),
        ("10:30:15", dt.datetime(2026, 9, 28, 10, 30, 15)),
        ("2026-09-27", dt.datetime(2026, 9, 27, 0, 0, 0)),
        ("2026-09-27 08:15", dt.datetime(2026, 9, 27, 8, 15, 0)),
    ],
)
def test_since_takes_a_duration_a_time_today_or_a_date(text: str, expected: dt.datetime) -> None:
    assert parse_since(text, NOW) == expected.timestamp()


@pytest.mark.parametrize("text", ["yesterday", "25:00", "2026-13-01", ""])
def test_since_refuses_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match="give a duration"):
        parse_since(text, NOW)


def test_an_event_is_one_line_of_time_kind_name_action_message() -> None:
    event = {
        "time": dt.datetime(2026, 9, 28, 10, 16, 40).timestamp(),
        "kind": "provider",
        "name": "compute2",
        "action": "full",
        "message": "Full for runner r1: out of disk",
    }
    assert event_line(event) == (
        "2026-09-28 10:16:40   Provider    compute2       Full   Full for runner r1: out of disk"
    )
    assert " Job started " in event_line({**event, "kind": "runner", "action": "job_started"})
    assert " Scale set " in event_line({**event, "kind": "scale_set"})


def test_a_table_aligns_columns_and_shows_unknown_as_a_dash() -> None:
    assert table(["A", "LONGER"], [["xyz", None], ["q", 7]]) == [
        "  A    LONGER",
        "  xyz  -",
        "  q    7",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (45.9, "45s"), (300, "5m"), (3 * 3600 + 5, "3h"), (2 * 86400, "2d"), (None, "-")],
)
def test_an_age_is_its_largest_whole_unit(seconds: float | None, text: str) -> None:
    assert format_age(seconds) == text


def test_counts_name_only_what_is_there() -> None:
    assert runner_count(18, busy=17, starting=1) == "18 (17 busy, 1 starting)"
    assert runner_count(2, idle=2) == "2 (2 idle)"
    assert runner_count(0) == "0"
    assert count_of_max(8, 12) == "8/12"
    assert count_of_max(8, None) == "8"
    assert plural(1, "runner") == "1 runner"
    assert plural(0, "runner") == "0 runners"


def test_fields_align_their_values_and_leave_out_empty_ones() -> None:
    assert fields([("ID", 7), ("Group", ""), ("Start timeout", "1m")]) == [
        "  ID:            7",
        "  Start timeout: 1m",
    ]


def test_runners_of_a_scale_set_no_longer_configured_list_as_leftover() -> None:
    document = {
        "scale_sets": [{"name": "linux"}],
        "runners": [{"scale_set": "linux"}, {"scale_set": "old"}, {"scale_set": "old"}],
    }
    assert leftovers(document) == [
        {"name": "old", "status": "LEFTOVER", "runners": 2, "busy": 0, "idle": 0}
    ]


def test_importing_the_commands_loads_no_grpc() -> None:
    code = (
        "import sys, rungar.cli.status, rungar.cli.apply, rungar.cli.events, "
        "rungar.cli.scale_sets, rungar.cli.providers, rungar.cli.runners, "
        "rungar.cli.reconcile; print('grpc' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"
