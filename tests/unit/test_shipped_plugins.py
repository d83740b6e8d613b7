"""`type: gcp` and `type: aws` with neither address nor command start the plugin shipped beside
the running `rungar`; `command:` still overrides; runnerd still needs an address."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rungar.clock import SystemClock
from rungar.config.loader import parse_scale_sets
from rungar.daemon.providers import PluginProvider, make_provider
from rungar.daemon.shipped_plugins import shipped_command

SCALE_SETS = """
providers:
  - { name: gcp, type: gcp, max_runners: 20, project: acme, zones: [europe-west1-b] }
  - { name: aws, type: aws, region: eu-west-1 }
  - { name: mine, type: gcp, command: [my-gcp-plugin], project: acme, zones: [europe-west1-b] }
scale_sets:
  - name: ci
    max_runners: 4
    providers: [gcp, aws, mine]
"""


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_plugin_beside_the_running_rungar_is_found_first(tmp_path: Path) -> None:
    rungar = executable(tmp_path / "bin" / "rungar")
    plugin = executable(tmp_path / "bin" / "rungar-provider-gcp")
    executable(tmp_path / "python" / "rungar-provider-gcp")  # beside Python: second choice
    found = shipped_command("gcp", argv0=str(rungar), executable=str(tmp_path / "python" / "py"))
    assert found == (str(plugin),)


def test_the_plugin_beside_python_is_used_when_rungar_runs_as_a_module(tmp_path: Path) -> None:
    plugin = executable(tmp_path / "venv" / "rungar-provider-aws")
    python = str(tmp_path / "venv" / "python")
    found = shipped_command("aws", argv0="/src/rungar/cli/main.py", executable=python)
    assert found == (str(plugin),)


def test_without_the_executable_the_plugin_module_runs_on_the_same_python(tmp_path: Path) -> None:
    python = str(tmp_path / "python")
    found = shipped_command("gcp", argv0=str(tmp_path / "rungar"), executable=python)
    assert found == (python, "-m", "rungar_gcp.server")


def plugin_command(name: str) -> list[str]:
    config = {p.name: p for p in parse_scale_sets(SCALE_SETS, "s.yaml").providers}
    plugins: list[Any] = []
    provider = make_provider(config[name], SystemClock(), plugins)
    assert isinstance(provider, PluginProvider)
    return list(provider.plugin.command)


def test_a_gcp_entry_without_address_or_command_starts_the_shipped_plugin() -> None:
    assert plugin_command("gcp") == list(shipped_command("gcp"))
    assert plugin_command("aws") == list(shipped_command("aws"))
    assert Path(plugin_command("aws")[0]).name in ("rungar-provider-aws", Path(sys.executable).name)


def test_a_command_overrides_the_shipped_plugin() -> None:
    assert plugin_command("mine") == ["my-gcp-plugin"]
