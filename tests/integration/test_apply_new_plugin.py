"""``rungar apply`` adding a provider served by a plugin: started and checked before it counts.

A provider added live is connected (its plugin process started, with its settings handed over)
and its runner blocks checked by it before the configuration changes; one that cannot start or
refuses its runner block leaves the configuration as it was and no process behind.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from rungar.config.loader import parse_scale_sets
from rungar.daemon.control import Control
from rungar.daemon.providers import PluginProvider, connect_provider
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.machine import Created, CreateRequest
from rungar.model.runner_block import RunnerBlock
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

# A plugin serving the scripted fake under the name Rungar handed over: 16GiB of room, so it
# refuses a runner block asking for more.
PLUGIN = """
import asyncio, json, os
from rungar.rpc.plugin import serve_plugin
from rungar.testing.fake_provider import FakeProvider
name = json.load(open(os.environ["RUNGAR_PLUGIN_SETTINGS"]))["name"]
asyncio.run(serve_plugin(FakeProvider(name, vcpus=8, memory_bytes=16 * 1024**3)))
"""

BEFORE = """\
providers: [{ name: compute1, type: fake, runner: { vcpus: 2, memory: 4GiB } }]
scale_sets:
  - { name: linux, max_runners: 4, providers: [compute1] }
"""

AFTER = """\
providers:
  - { name: compute1, type: fake, runner: { vcpus: 2, memory: 4GiB } }
  - name: plugged
    type: fake
    command: [PYTHON, SCRIPT]
    runner: RUNNER
scale_sets:
  - { name: linux, max_runners: 4, providers: [compute1, plugged] }
"""

pytestmark = pytest.mark.usefixtures("quiet_logs")


def _control(directory: Path, plugins: list[Any]) -> Control:
    clock = FakeClock()
    engine = Engine(
        parse_scale_sets(BEFORE, "scale_sets.yaml"),
        {"compute1": FakeProvider("compute1", vcpus=4, memory_bytes=8 * GIB, clock=clock)},
        FakeGitHub(),
        clock=clock,
        store=SqliteStore(directory / "state.db"),
        events=EventLog(clock),
    )
    return Control.of(
        engine, provider_factory=lambda p: connect_provider(p, clock, plugins, "gh-1")
    )


def _after(script: str, runner: str = "{ vcpus: 2, memory: 4GiB }") -> str:
    return (
        AFTER.replace("PYTHON", sys.executable).replace("SCRIPT", script).replace("RUNNER", runner)
    )


async def test_a_provider_added_live_has_its_plugin_started_and_answers(short_dir: Path) -> None:
    script = short_dir / "plugin.py"
    script.write_text(PLUGIN)
    plugins: list[Any] = []
    control = _control(short_dir, plugins)
    try:
        answer = await control.apply(_after(str(script)), "scale_sets.yaml", dry_run=False)
        assert answer["applied"], answer
        provider = control.ctx.providers["plugged"]
        assert isinstance(provider, PluginProvider)
        assert (await provider.info()).name == "plugged"  # the name it was handed
        runner = RunnerBlock.from_mapping({"vcpus": 2, "memory": "4GiB"})
        created = await provider.create(
            CreateRequest("linux-abc", "req-1", "linux", {}, runner, "j")
        )
        assert isinstance(created, Created)
    finally:
        for plugin in plugins:
            await plugin.stop()


async def test_a_refused_runner_block_leaves_the_config_and_no_plugin_running(
    short_dir: Path,
) -> None:
    script = short_dir / "plugin.py"
    script.write_text(PLUGIN)
    plugins: list[Any] = []
    control = _control(short_dir, plugins)
    answer = await control.apply(
        _after(str(script), "{ vcpus: 2, memory: 64GiB }"), "scale_sets.yaml", dry_run=False
    )
    assert not answer["applied"]
    # Told as every configuration problem is: FILE:LINE:COL at the key it names.
    assert any(
        re.match(r"scale_sets\.yaml:\d+:\d+: .*\[plugged\]\.runner\.memory: ", p)
        for p in answer["problems"]
    ), answer
    assert set(control.ctx.providers) == {"compute1"}
    assert [p.name for p in control.ctx.config.providers] == ["compute1"]
    assert len(plugins) == 1 and plugins[0].pid is not None
    assert plugins[0]._process.returncode is not None  # stopped, not left running


async def test_a_plugin_that_cannot_start_refuses_the_apply(short_dir: Path) -> None:
    control = _control(short_dir, [])
    answer = await control.apply(
        _after(str(short_dir / "absent.py")), "scale_sets.yaml", dry_run=False
    )
    assert not answer["applied"]
    assert answer["problems"][0].startswith("provider plugged: cannot be connected"), answer
    assert set(control.ctx.providers) == {"compute1"}


async def test_a_plugin_whose_settings_changed_is_restarted_and_the_old_one_stopped(
    short_dir: Path,
) -> None:
    script = short_dir / "plugin.py"
    script.write_text(PLUGIN)
    plugins: list[Any] = []
    control = _control(short_dir, plugins)
    try:
        answer = await control.apply(_after(str(script)), "scale_sets.yaml", dry_run=False)
        assert answer["applied"], answer
        changed = _after(str(script)).replace("    command:", "    vcpus: 16\n    command:")
        answer = await control.apply(changed, "scale_sets.yaml", dry_run=False)
        assert answer["applied"], answer
        assert "~ provider plugged: reconnecting (vcpus changed)" in answer["diff"]
        assert len(plugins) == 2  # a new plugin, handed the new settings
        provider = control.ctx.providers["plugged"]
        assert isinstance(provider, PluginProvider) and provider.plugin is plugins[1]
        assert (await provider.info()).name == "plugged"
        await control.ctx.tasks.drain()  # the old plugin had no call in flight
        assert plugins[0]._process.returncode is not None  # stopped
        serving = plugins[1]._process
        assert serving is not None and serving.returncode is None  # the new one serves
    finally:
        for plugin in plugins:
            await plugin.stop()
