"""Local plugins started by Rungar: handshake, private socket, stop, restart.

The plugin is a real executable: a Python script serving the scripted fake provider through
``serve_plugin``, started with this interpreter.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import pytest
import structlog

from rungar.errors import ProviderUnavailable
from rungar.rpc.client import GrpcProvider
from rungar.rpc.plugin import (
    SETTINGS_ENV,
    PluginError,
    PluginProcess,
    exited_sentence,
    next_backoff,
    parse_handshake,
)
from tests.waiting import WAIT, until, until_awaited

PLUGIN = """
import asyncio, signal, sys
from rungar.rpc.plugin import serve_plugin
from rungar.testing.fake_provider import FakeProvider
if "--ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
asyncio.run(serve_plugin(FakeProvider("plugin-fake")))
"""


# Answers Info with the name Rungar handed over, and where it read it, so a test sees what the
# plugin itself saw.
SETTINGS_PLUGIN = """
import asyncio, json, os
from rungar.rpc.plugin import serve_plugin
from rungar.testing.fake_provider import FakeProvider
path = os.environ.get("RUNGAR_PLUGIN_SETTINGS")
name = json.load(open(path))["name"] + "@" + path if path else "no settings"
asyncio.run(serve_plugin(FakeProvider(name)))
"""


@pytest.fixture
def plugin_script(tmp_path: Path) -> Path:
    path = tmp_path / "plugin.py"
    path.write_text(PLUGIN)
    return path


@pytest.fixture
def settings_script(tmp_path: Path) -> Path:
    path = tmp_path / "settings_plugin.py"
    path.write_text(SETTINGS_PLUGIN)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_handshake_line_names_the_address() -> None:
    assert parse_handshake("RUNGAR_PLUGIN 1 unix:///run/x/provider.sock\n") == (
        "unix:///run/x/provider.sock"
    )
    assert parse_handshake("starting up...") is None
    with pytest.raises(PluginError, match="version 2"):
        parse_handshake("RUNGAR_PLUGIN 2 unix:///x")


def test_a_plugin_that_exits_says_so_never_that_the_daemon_stopped() -> None:
    assert exited_sentence("gcp", 1, 2.0) == "plugin gcp exited (code 1); restarting in 2 s"


def test_restart_backoff_doubles_and_resets_after_a_stable_run() -> None:
    assert next_backoff(0, 1, 60, ran_for=0.1, stable=60) == 1
    assert next_backoff(1, 1, 60, ran_for=0.1, stable=60) == 2
    assert next_backoff(32, 1, 60, ran_for=0.1, stable=60) == 60
    assert next_backoff(32, 1, 60, ran_for=61, stable=60) == 1


async def test_a_plugin_is_started_on_a_private_socket_and_answers(plugin_script: Path) -> None:
    plugin = PluginProcess([sys.executable, str(plugin_script)], name="fake", ready_timeout=WAIT)
    address = await plugin.start()
    try:
        socket_dir = Path(address[len("unix://") :]).parent
        assert stat.S_IMODE(socket_dir.stat().st_mode) == 0o700
        client = GrpcProvider("fake", address, timeout=WAIT)
        assert (await client.info()).name == "plugin-fake"
        await client.close()
    finally:
        await plugin.stop()
    assert plugin.pid is not None and not _alive(plugin.pid)
    assert not socket_dir.exists()


async def test_a_plugin_that_dies_is_restarted_and_reached_again(plugin_script: Path) -> None:
    plugin = PluginProcess(
        [sys.executable, str(plugin_script)], name="fake", ready_timeout=WAIT, backoff_first=0.05
    )
    told: list[tuple[str, str]] = []
    plugin.on_exit = lambda name, sentence: told.append((name, sentence))
    address = await plugin.start()
    client = GrpcProvider("fake", address, timeout=WAIT)
    try:
        await client.list({})
        await _kill_and_await_restart(plugin)
        assert told == [("fake", "plugin fake exited (killed by signal 9); restarting in 0.05 s")]
        assert await until_awaited(
            lambda: answered(client.list({})), "reached the restarted plugin"
        ) == [[]]
    finally:
        await client.close()
        await plugin.stop()


async def test_a_plugin_ignoring_sigterm_is_killed_after_the_grace(plugin_script: Path) -> None:
    plugin = PluginProcess(
        [sys.executable, str(plugin_script), "--ignore-term"],
        name="stubborn",
        ready_timeout=WAIT,
        stop_grace=0.3,
    )
    await plugin.start()
    pid = plugin.pid
    await plugin.stop()
    assert pid is not None and not _alive(pid)


async def test_a_plugin_that_exits_before_its_handshake_is_an_error(tmp_path: Path) -> None:
    plugin = PluginProcess([sys.executable, "-c", "print('hello'); raise SystemExit(3)"])
    with pytest.raises(PluginError, match="exited with code 3 before its handshake"):
        await plugin.start()


async def test_a_plugins_stderr_goes_to_rungars_log_not_its_terminal(
    plugin_script: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    chatty = plugin_script.with_name("chatty.py")
    chatty.write_text(
        "import sys\nprint('plugin log line', file=sys.stderr, flush=True)\n" + PLUGIN
    )
    plugin = PluginProcess([sys.executable, str(chatty)], name="chatty")
    with structlog.testing.capture_logs() as logs:
        await plugin.start()
        try:
            await until(  # the line is read beside the handshake, on the loop
                lambda: any(e.get("line", "").strip() == "plugin log line" for e in logs),
                "logged the plugin's line",
            )
        finally:
            await plugin.stop()
    outputs = [e for e in logs if e["event"] == "plugin.output"]
    assert [e["provider"] for e in outputs if "plugin log line" in e["line"]] == ["chatty"]
    assert "plugin log line" not in capfd.readouterr().err


async def test_a_missing_executable_is_an_error() -> None:
    plugin = PluginProcess(["/nonexistent/provider"], name="ghost")
    with pytest.raises(PluginError, match="cannot start /nonexistent/provider"):
        await plugin.start()


async def test_settings_are_handed_over_in_a_private_file_named_in_the_environment(
    settings_script: Path,
) -> None:
    handed = {"name": "gcp-eu", "zones": ["europe-west1-b"], "installation": "gh-1"}
    plugin = PluginProcess(
        [sys.executable, str(settings_script)],
        name="gcp-eu",
        settings=handed,
        ready_timeout=WAIT,
        backoff_first=0.05,
    )
    address = await plugin.start()
    client = GrpcProvider("gcp-eu", address, timeout=WAIT)
    try:
        path = Path(plugin.settings_path)
        assert path.parent == Path(address[len("unix://") :]).parent
        assert path.name == "settings.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert json.loads(path.read_text()) == handed
        assert (await client.info()).name == f"gcp-eu@{path}"
        await _kill_and_await_restart(plugin)
        (info,) = await until_awaited(
            lambda: answered(client.info()), "reached the restarted plugin"
        )
        assert info.name == f"gcp-eu@{path}", "the restart reads the same file"
    finally:
        await client.close()
        await plugin.stop()
    assert not path.exists()


async def test_without_settings_no_file_is_named_even_one_in_rungars_environment(
    settings_script: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SETTINGS_ENV, "/somewhere/else/settings.json")
    plugin = PluginProcess([sys.executable, str(settings_script)], name="bare", ready_timeout=WAIT)
    address = await plugin.start()
    client = GrpcProvider("bare", address, timeout=WAIT)
    try:
        assert plugin.settings_path == ""
        assert (await client.info()).name == "no settings"
        assert sorted(p.name for p in Path(address[len("unix://") :]).parent.iterdir()) == [
            "provider.sock"
        ]
    finally:
        await client.close()
        await plugin.stop()


async def test_settings_that_are_not_json_are_refused_before_anything_starts() -> None:
    plugin = PluginProcess(["/nonexistent/provider"], name="odd", settings={"when": object()})
    with pytest.raises(PluginError, match="plugin odd: its settings are not JSON"):
        await plugin.start()


T = TypeVar("T")


async def answered(call: Awaitable[T]) -> list[T]:
    """``[call's answer]``, or [] while the provider is unavailable (a list is true once answered,
    whatever the answer)."""
    try:
        return [await call]
    except ProviderUnavailable:
        return []


async def _kill_and_await_restart(plugin: PluginProcess) -> None:
    """SIGKILL the plugin and wait for Rungar to have started it again."""
    first = plugin.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    await until(lambda: plugin.restarts == 1, "restarted the plugin")
    assert plugin.restarts == 1 and plugin.pid != first
