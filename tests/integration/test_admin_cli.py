"""The CLI against a real Control served over a real unix socket (docs/commands.md).

The engine is the real one (fake GitHub, fake providers, SQLite in a temporary directory, a
fake clock); the admin server runs in the test's event loop and each CLI command runs its
``run(args)`` in a thread, as the ``rungar`` process would, talking gRPC over the socket.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rungar.cli import apply, events, providers, reconcile, runners, scale_sets, status
from rungar.config.loader import parse_scale_sets
from rungar.daemon.control import Control
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.machine import Conclusion, JobHint
from rungar.model.phase import Phase
from rungar.rpc.admin_server import AdminServer, serve_admin
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

CONFIG = """\
timing: { reconcile_interval: 30s, left_grace: 0s }
providers:
  - { name: compute1, type: fake, runner: { vcpus: 2, memory: 4GiB } }
  - { name: compute2, type: fake, max_runners: 6, runner: { vcpus: 2, memory: 4GiB } }
scale_sets:
  - name: linux
    max_runners: 10
    placement: pack
    start_timeout: 60s
    providers: [compute1, compute2]
"""
COMMANDS = {
    "status": status,
    "apply": apply,
    "events": events,
    "scale-sets": scale_sets,
    "providers": providers,
    "runners": runners,
    "reconcile": reconcile,
}
FORBIDDEN = ("AVAILABLE", "SPARE", "ROOM", "Room for", "room for", "largest size")

pytestmark = pytest.mark.usefixtures("quiet_logs")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rungar")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        module.add_parser(subparsers, name, name)
    return parser.parse_args(argv)


class Daemon:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.socket = str(directory / "rungar.sock")
        self.clock = FakeClock()
        self.github = FakeGitHub()
        self.providers = {
            "compute1": FakeProvider("compute1", vcpus=4, memory_bytes=8 * GIB, clock=self.clock),
            "compute2": FakeProvider("compute2", vcpus=8, memory_bytes=16 * GIB, clock=self.clock),
        }
        self.engine = Engine(
            parse_scale_sets(CONFIG, "scale_sets.yaml"),
            self.providers,
            self.github,
            clock=self.clock,
            store=SqliteStore(directory / "state.db"),
            events=EventLog(self.clock, directory / "events.jsonl"),
            installation="gh-test",
        )
        self.control = Control.of(self.engine)
        self.server: AdminServer | None = None

    async def start(self) -> None:
        for state in self.engine.sets.values():
            state.id = await self.github.ensure_scale_set(state.config)
            state.phase = Phase.LISTENING
        self.server = await serve_admin(
            self.control, self.socket, clock=self.clock, poll_interval=1.0
        )

    async def demand(self, assigned: int) -> None:
        self.engine.on_demand("linux", assigned)
        await self.engine.drain_tasks()

    def runner_names(self, provider: str | None = None) -> list[str]:
        return sorted(r.name for r in self.engine.runners if provider in (None, r.provider))

    async def cli(self, *argv: str) -> int:
        """``rungar ARGV --socket S`` in a thread; the fake clock keeps moving while it runs."""
        args = parse([*argv, "--socket", self.socket])
        done = asyncio.ensure_future(asyncio.to_thread(COMMANDS[argv[0]].run, args))
        while not done.done():
            await asyncio.wait({done}, timeout=0.02)
            await self.clock.run_for(1.0)
        code: int = done.result()
        return code


@pytest.fixture
async def daemon(short_dir: Path) -> AsyncIterator[Daemon]:
    d = Daemon(short_dir)
    await d.start()
    yield d
    assert d.server is not None
    await d.server.stop(None)


def outputs(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    captured = capsys.readouterr()
    return captured.out, captured.err


async def test_status_json_is_the_daemons_status_document(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    await daemon.demand(3)
    assert await daemon.cli("status", "--json") == 0
    document = json.loads(outputs(capsys)[0])
    now = json.loads(json.dumps(daemon.control.status()))  # the fake clock has moved since
    assert document["scale_sets"] == now["scale_sets"]
    assert document["providers"] == now["providers"]
    (skip,) = document["skips"]
    assert skip["sentence"].startswith("linux found compute1 full; tries it again in ")
    assert {r["name"] for r in document["runners"]} == set(daemon.runner_names())
    assert document["scale_sets"][0]["runners"] == 3


async def test_a_full_provider_is_worded_alike_in_status_and_in_its_event(
    daemon: Daemon,
) -> None:
    await daemon.demand(3)
    (skip,) = daemon.control.status()["skips"]
    (full,) = [e for e in daemon.engine.events.recent() if e.action == "full"]
    # The event says it when it happened (the whole backoff left), status a moment later:
    # the same sentence up to the time left.
    said = skip["sentence"].split(" tries it again in ")[0]
    assert said == "linux found compute1 full;"
    assert full.message.startswith(said + " tries it again in ")


async def test_status_shows_each_section_and_never_claims_spare_room(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    await daemon.demand(3)
    assert await daemon.cli("status") == 0
    out, err = outputs(capsys)
    assert err == ""
    lines = out.splitlines()
    assert lines[0].startswith("Rungar v")
    assert "  Installation:  gh-test" in lines
    assert "Scale sets (1)" in lines and "Providers (2)" in lines and "Runners (3)" in lines
    row = next(line for line in lines if line.startswith("  linux "))
    assert row.split()[:3] == ["linux", "LISTENING", "compute1,compute2"]
    assert "3 (3 starting)" in row
    assert any(line.split() == ["compute2", "fake", "OK", "1/6"] for line in lines)
    assert lines[-1] == "3 runners; the scale sets allow 10 between them."
    for word in FORBIDDEN:
        assert word not in out


async def test_status_explains_a_skip_in_the_daemons_words(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    await daemon.demand(3)  # compute1 takes two and refuses the third: FULL
    assert await daemon.cli("status") == 0
    out = outputs(capsys)[0]
    assert "  linux found compute1 full; tries it again in " in out


async def test_pause_and_resume_say_they_last_until_the_daemon_restarts(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await daemon.cli("scale-sets", "pause", "linux") == 0
    assert outputs(capsys)[0] == "linux is paused until resumed or the daemon restarts\n"
    assert daemon.engine.sets["linux"].paused
    assert await daemon.cli("status") == 0
    out = outputs(capsys)[0]
    assert "PAUSED" in out
    assert "  linux: taking no jobs, which wait on GitHub; 0 runners left;" in out
    assert await daemon.cli("scale-sets", "resume", "linux") == 0
    assert outputs(capsys)[0] == "linux is resumed until the daemon restarts\n"
    assert not daemon.engine.sets["linux"].paused


async def test_pause_wait_reports_runners_left_until_none_is(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    await daemon.demand(1)
    (name,) = daemon.runner_names()
    daemon.github.start_runner(name)
    daemon.engine.on_job_started("linux", "j1", name, JobHint("octo/app", "ci.yml", "build"))
    command = asyncio.ensure_future(daemon.cli("scale-sets", "pause", "linux", "--wait"))
    while "Waiting" not in capsys.readouterr().out and not command.done():
        await asyncio.sleep(0.02)
    daemon.github.finish_runner(name)
    daemon.engine.on_job_completed("linux", "j1", name, Conclusion.SUCCEEDED)
    assert await command == 0
    assert outputs(capsys)[0].splitlines()[-1] == "linux is paused, and no runner of it is left"


async def test_removing_a_scale_set_with_busy_runners_needs_wait(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    await daemon.demand(1)
    (name,) = daemon.runner_names()
    daemon.github.start_runner(name)
    daemon.engine.on_job_started("linux", "j1", name, JobHint("octo/app", "ci.yml", "build"))
    assert await daemon.cli("scale-sets", "rm", "linux") == 1
    out, err = outputs(capsys)
    assert out == ""
    assert "linux has 1 busy runners; run again when they finish, or use --wait" in err
    assert "linux" in daemon.engine.sets


async def test_an_unknown_name_is_a_usage_error_naming_the_closest_one(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await daemon.cli("scale-sets", "pause", "linx") == 2
    assert outputs(capsys)[1] == "rungar: no scale set named linx; did you mean linux?\n"
    assert await daemon.cli("scale-sets", "inspect", "nope") == 2
    assert outputs(capsys)[1] == "rungar: no scale set named nope (known: linux)\n"
    assert await daemon.cli("providers", "inspect", "compute") == 2
    assert outputs(capsys)[1] == "rungar: no provider named compute; did you mean compute1?\n"
    assert await daemon.cli("events", "--provider", "comptue2") == 2
    assert outputs(capsys) == ("", "rungar: no provider named comptue2; did you mean compute2?\n")
    assert await daemon.cli("events", "--scale-set", "linx") == 2
    assert outputs(capsys)[1] == "rungar: no scale set named linx; did you mean linux?\n"
    assert await daemon.cli("runners", "ls", "--provider", "comptue1") == 2
    assert outputs(capsys) == ("", "rungar: no provider named comptue1; did you mean compute1?\n")
    assert await daemon.cli("events", "--provider", "compute1") == 0


async def test_scale_sets_ls_and_inspect(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    await daemon.demand(2)
    assert await daemon.cli("scale-sets", "ls") == 0
    header, row = outputs(capsys)[0].splitlines()
    assert header.split() == [
        "NAME",
        "STATUS",
        "ID",
        "GROUP",
        "RUNNERS",
        "ASSIGNED",
        "BUSY",
        "IDLE",
        "STARTING",
    ]
    assert row.split()[:2] == ["linux", "LISTENING"]
    assert await daemon.cli("scale-sets", "inspect", "linux", "--json") == 0
    found = json.loads(outputs(capsys)[0])
    assert found["id"] == daemon.engine.sets["linux"].id
    assert {r["name"] for r in found["runner_list"]} == set(daemon.runner_names())
    assert await daemon.cli("scale-sets", "inspect", "linux") == 0
    out = outputs(capsys)[0]
    assert out.startswith("Scale set linux\n")
    assert "Runners (2)" in out


async def test_providers_disable_and_enable_show_in_the_listing(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await daemon.cli("providers", "disable", "compute2") == 0
    assert outputs(capsys)[0] == "Provider compute2 is disabled until the daemon restarts.\n"
    assert await daemon.cli("providers", "ls") == 0
    lines = outputs(capsys)[0].splitlines()
    assert lines[0].split() == ["NAME", "TYPE", "STATUS", "RUNNERS", "WEIGHT", "SCALE", "SETS"]
    row = next(line for line in lines if line.startswith("compute2 "))
    assert "DISABLED until the daemon restarts" in row and "0/6" in row and "linux" in row
    await daemon.demand(3)
    assert daemon.runner_names("compute2") == [], "nothing is placed on a disabled provider"
    assert await daemon.cli("providers", "enable", "compute2") == 0
    assert outputs(capsys)[0] == "Provider compute2 is enabled until the daemon restarts.\n"
    assert await daemon.cli("providers", "ls", "--json") == 0
    entries = {e["name"]: e for e in json.loads(outputs(capsys)[0])}
    assert entries["compute2"]["disabled"] is False
    assert entries["compute2"]["scale_sets"] == ["linux"]


async def test_drain_streams_progress_until_the_provider_is_empty(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    await daemon.demand(2)
    busy, idle = daemon.runner_names("compute1")
    daemon.github.start_runner(busy)
    daemon.engine.on_job_started("linux", "j1", busy, JobHint("octo/app", "ci.yml", "build"))
    command = asyncio.ensure_future(daemon.cli("providers", "drain", "compute1"))
    seen = ""
    while "Waiting for 1 runners on compute1 to finish" not in seen and not command.done():
        await asyncio.sleep(0.02)
        seen += capsys.readouterr().out
    assert seen.startswith("Provider compute1 is disabled until the daemon restarts.\n")
    assert idle not in daemon.runner_names(), "the idle runner goes at once"
    daemon.github.finish_runner(busy)
    daemon.engine.on_job_completed("linux", "j1", busy, Conclusion.SUCCEEDED)
    assert await command == 0
    seen += capsys.readouterr().out
    assert seen.splitlines()[-1] == "compute1 is drained: no runner is left on it"
    assert daemon.runner_names("compute1") == []


async def test_runners_rm_reports_each_and_fails_if_any_failed(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    await daemon.demand(2)
    first, second = daemon.runner_names()
    # why the ignore[union-attr] below: the runner was just created: get() finds it
    provider = daemon.engine.runners.get(first).provider  # type: ignore[union-attr]
    assert await daemon.cli("runners", "rm", first, "ghost") == 1
    out, err = outputs(capsys)
    assert out == f"{first}: removed from {provider}\n"
    assert err == f"rungar: no runner named ghost (known: {second})\n"
    assert daemon.runner_names() == [second]
    assert await daemon.cli("runners", "rm", second) == 0


async def test_runners_ls_filters_by_provider(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    await daemon.demand(3)
    assert await daemon.cli("runners", "ls", "--provider", "compute2", "--json") == 0
    listed = json.loads(outputs(capsys)[0])
    assert [r["name"] for r in listed] == daemon.runner_names("compute2")
    assert await daemon.cli("runners", "ls") == 0
    lines = outputs(capsys)[0].splitlines()
    assert lines[0].split()[:3] == ["RUNNER", "SCALE", "SET"]
    assert len(lines) == 4


def write(directory: Path, text: str) -> str:
    path = directory / "scale_sets.yaml"
    path.write_text(text)
    return str(path)


async def test_apply_dry_run_prints_the_diff_and_changes_nothing(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(daemon.directory, CONFIG.replace("max_runners: 10", "max_runners: 4"))
    assert await daemon.cli("apply", path, "--dry-run") == 0
    out = outputs(capsys)[0]
    assert out.splitlines() == [
        "~ scale_sets[linux].max_runners: 10 -> 4",
        "not applied (--dry-run)",
    ]
    assert daemon.engine.config.scale_sets[0].max_runners == 10


async def test_apply_changes_the_running_configuration(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(daemon.directory, CONFIG.replace("max_runners: 10", "max_runners: 4"))
    assert await daemon.cli("apply", path) == 0
    assert outputs(capsys)[0].splitlines()[-1] == "applied"
    assert daemon.engine.sets["linux"].config.max_runners == 4


async def test_apply_refuses_a_bad_file_before_asking_the_daemon(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(short_dir, CONFIG.replace("max_runners: 10", "max_runners: 0"))
    args = parse(["apply", path, "--socket", str(short_dir / "nobody.sock")])
    assert await asyncio.to_thread(apply.run, args) == 2
    out, err = outputs(capsys)
    assert out == ""
    assert err.startswith(f"{path}:7:5: scale_sets[0].max_runners: ")
    assert "cannot reach" not in err


async def test_events_lists_history_filters_and_prints_json(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    await daemon.demand(2)
    daemon.engine.events.record("provider", "compute2", "full", provider="compute2", message="x")
    assert await daemon.cli("events", "--json") == 0
    listed = [json.loads(line) for line in outputs(capsys)[0].splitlines()]
    assert [e["action"] for e in listed].count("created") == 2
    assert await daemon.cli("events", "--provider", "compute2") == 0
    (line,) = outputs(capsys)[0].splitlines()
    assert line.split()[2:6] == ["Provider", "compute2", "Full", "x"]
    assert await daemon.cli("events", "-n", "1", "--json") == 0
    (last,) = outputs(capsys)[0].splitlines()
    assert json.loads(last)["name"] == "compute2"


async def test_a_bad_since_is_a_usage_error(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await daemon.cli("events", "--since", "yesterday-ish") == 2
    assert "--since 'yesterday-ish'" in outputs(capsys)[1]


async def test_reconcile_reports_each_scale_set(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    await daemon.demand(3)
    assert await daemon.cli("reconcile") == 0
    assert outputs(capsys)[0] == "linux: 3 runners, 3 desired\n"
    assert await daemon.cli("reconcile", "nope") == 2


async def test_no_daemon_means_cannot_reach_and_exit_1(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(short_dir / "rungar.sock")
    for argv in (["status"], ["status", "--json"], ["runners", "ls"], ["reconcile"]):
        args = parse([*argv, "--socket", path])
        assert await asyncio.to_thread(COMMANDS[argv[0]].run, args) == 1
        out, err = outputs(capsys)
        assert out == ""
        assert err.startswith(f"rungar: cannot reach the rungar daemon at {path}: ")


async def test_a_socket_file_nobody_listens_on_is_reported_as_unreachable(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(short_dir / "rungar.sock")
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(path)  # bound, never listening, then closed: the file stays, as after a crash
    left.close()
    args = parse(["status", "--socket", path])
    assert await asyncio.to_thread(status.run, args) == 1
    assert f"cannot reach the rungar daemon at {path}: " in outputs(capsys)[1]


async def test_the_environment_names_the_socket(
    daemon: Daemon, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNGAR_SOCKET", daemon.socket)
    assert await asyncio.to_thread(status.run, parse(["status", "--json"])) == 0
    assert json.loads(outputs(capsys)[0])["daemon"]["installation"] == "gh-test"


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def test_the_socket_file_has_the_mode_asked(daemon: Daemon) -> None:
    assert _mode(daemon.socket) == 0o660


async def test_events_follow_prints_new_events_until_the_daemon_goes(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.engine.events.record("scale_set", "linux", "paused", scale_set="linux")
    args = parse(["events", "-f", "--socket", daemon.socket])
    command = asyncio.ensure_future(asyncio.to_thread(events.run, args))
    seen = ""
    while " Paused" not in seen:
        await asyncio.sleep(0.02)
        seen += capsys.readouterr().out
    daemon.engine.events.record("scale_set", "linux", "resumed", scale_set="linux")
    while " Resumed" not in seen:
        await asyncio.sleep(0.02)
        seen += capsys.readouterr().out
    assert daemon.server is not None
    await daemon.server.stop(None)
    assert await command == 1
    assert [line.split()[5] for line in seen.splitlines()] == ["Paused", "Resumed"]
    assert capsys.readouterr().err.startswith("rungar: the daemon ended the stream: ")


async def test_apply_shows_a_label_or_group_change_as_an_update_and_patches_the_scale_set(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    changed = CONFIG.replace("    max_runners: 10\n", "    max_runners: 10\n    labels: [gpu]\n")
    path = write(daemon.directory, changed)
    assert await daemon.cli("apply", path, "--dry-run") == 0
    assert outputs(capsys)[0].splitlines() == [
        '~ scale_sets[linux].labels: [] -> ["gpu"] (updates the scale set on GitHub in place)',
        "not applied (--dry-run)",
    ]
    github = daemon.engine.github
    before = [c for c in github.calls if c[0] == "ensure_scale_set"]  # type: ignore[attr-defined]
    assert await daemon.cli("apply", path) == 0
    await daemon.engine.drain_tasks()
    after = [c for c in github.calls if c[0] == "ensure_scale_set"]  # type: ignore[attr-defined]
    assert len(after) == len(before) + 1  # the scale set is updated, not a new one made
    assert daemon.engine.sets["linux"].config.labels == ("gpu",)


async def test_a_provider_taken_off_a_scale_set_has_its_idle_runners_listed_then_drained(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    with_floor = CONFIG.replace(
        "    providers: [compute1, compute2]",
        "    min_runners: 2\n    providers: [compute1, compute2]",
    )
    assert await daemon.cli("apply", write(daemon.directory, with_floor)) == 0
    await daemon.engine.reconcile()
    await daemon.engine.drain_tasks()
    assert len(daemon.runner_names("compute1")) == 2, "pack: the reserve is on compute1"
    for name in daemon.runner_names("compute1"):
        daemon.github.start_runner(name, busy=False)  # connected and idle
    await daemon.engine.reconcile()
    capsys.readouterr()
    path = write(daemon.directory, with_floor.replace("[compute1, compute2]", "[compute2]"))
    assert await daemon.cli("apply", path, "--dry-run") == 0
    assert outputs(capsys)[0].splitlines() == [
        "- scale_sets[linux].providers[compute1] (its runners there: 2 idle drained and replaced)",
        "not applied (--dry-run)",
    ]
    assert await daemon.cli("apply", path) == 0
    for _ in range(4):  # one replaced a pass, as an outdated runner is
        await daemon.engine.reconcile()
        await daemon.engine.drain_tasks()
    assert daemon.runner_names("compute1") == [], "nothing idle is left where it is not listed"
    assert len(daemon.runner_names("compute2")) == 2, "the reserve is kept on compute2"
