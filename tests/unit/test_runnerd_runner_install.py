"""runnerd tells Rungar the runner version of its runner install: what the install's
``bin/Runner.Listener --version`` prints, found from ``[host] runner_dir`` or the folder of a
process profile's ``run.sh``, falling back to ``[host] runner_version`` (docs/runnerd.md)."""

from __future__ import annotations

import os
from pathlib import Path

from runnerd.config import parse_config
from runnerd.history import History
from runnerd.provider import RunnerdProvider
from runnerd.runner_install import install_of, listener_version, version_in

from rungar.model.runner_version import RunnerVersion
from rungar.testing.clock import FakeClock
from tests.unit.test_runnerd_provider import FakeRuntime

G = 1024**3


def install(root: Path, prints: str) -> Path:
    """A runner install whose Runner.Listener prints ``prints`` for --version."""
    folder = root / "actions-runner"
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    (folder / "run.sh").write_text("#!/bin/sh\nexit 0\n")
    listener = folder / "bin" / "Runner.Listener"
    # A shell script, quick to start: it answers --version only.
    listener.write_text(f'#!/bin/sh\n[ "$*" = "--version" ] || exit 2\necho "{prints}"\n')
    os.chmod(listener, 0o755)
    return folder


def provider(tmp_path: Path, host: str, command: str, clock: FakeClock) -> RunnerdProvider:
    config = parse_config(
        f'[host]\nstate_dir = "{tmp_path}"\nmemory_max = "8G"\n{host}\n'
        f'[profiles.node]\ncommand = ["{command}"]\ncpus = 1\nmemory = "1G"\nslots = 1\n',
        str(tmp_path / "runnerd.toml"),
    )
    history = History(tmp_path / "history.db")
    return RunnerdProvider(config, FakeRuntime(), history, clock, 8 * G, 2.0)


async def test_info_tells_the_version_its_runner_install_prints_over_the_configured_one(
    tmp_path: Path,
) -> None:
    folder = install(tmp_path, "2.331.0")
    clock = FakeClock()
    p = provider(tmp_path, 'runner_version = "2.329.0"', f"{folder}/run.sh", clock)
    assert (await p.info()).runner_version == "2.331.0"
    # The install is upgraded in place: told once the last answer is a minute old.
    install(tmp_path, "2.332.0")
    assert (await p.info()).runner_version == "2.331.0"
    clock.advance(60)
    assert (await p.info()).runner_version == "2.332.0"


async def test_without_an_install_to_ask_the_configured_version_is_told(tmp_path: Path) -> None:
    clock = FakeClock()
    p = provider(tmp_path, 'runner_version = "2.329.0"', "/usr/local/bin/start-runner", clock)
    assert (await p.info()).runner_version == "2.329.0"
    folder = install(tmp_path, "Runner listener version: unknown")  # prints no version
    p = provider(tmp_path, 'runner_version = "2.329.0"', f"{folder}/run.sh", clock)
    assert (await p.info()).runner_version == "2.329.0"


async def test_runner_dir_names_the_install_relative_to_the_config(tmp_path: Path) -> None:
    install(tmp_path, "v2.330.0")
    p = provider(tmp_path, 'runner_dir = "actions-runner"', "/usr/local/bin/wrapper", FakeClock())
    assert p.config.host.runner_dir == str(tmp_path / "actions-runner")
    assert (await p.info()).runner_version == "2.330.0"


async def test_a_listener_that_does_not_answer_is_given_up_on(tmp_path: Path) -> None:
    folder = install(tmp_path, "")
    (folder / "bin" / "Runner.Listener").write_text("#!/bin/sh\nexec sleep 60\n")
    assert await listener_version(str(folder), timeout=0.3) is None


def test_the_install_is_the_folder_of_the_command_that_starts_it() -> None:
    assert install_of(["/opt/actions-runner/run.sh"]) == "/opt/actions-runner"
    assert install_of(["/opt/actions-runner/bin/Runner.Listener", "run"]) == "/opt/actions-runner"
    assert install_of(["rungar", "fake-runner"]) == ""
    assert install_of([]) == ""
    assert version_in(b"2.330.0\n") == RunnerVersion(2, 330, 0)
    assert version_in(b"x" * 5000 + b" 2.330.0") is None, "past what is read"
