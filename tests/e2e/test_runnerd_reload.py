"""``runnerctl tui``'s apply has ``runnerd serve`` run with the new file at once, through the
local API's ``POST /reload``: the reload SIGHUP and the dashboard's save run. Here against a
real ``runnerd serve`` process, through the TUI's own client."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from runnerd.tui.source import Source

from tests.e2e.test_runnerd_learning import Host


@pytest.fixture
async def host() -> AsyncIterator[Host]:
    root = Path(tempfile.mkdtemp(prefix="rdr-", dir="/tmp"))  # unix socket paths are short
    found = Host(root)
    found.start()
    try:
        await found.wait_ready()
        yield found
    finally:
        await found.stop()
        shutil.rmtree(root, ignore_errors=True)


async def test_a_reload_over_the_api_runs_runnerd_with_the_file_or_names_its_problems(
    host: Host,
) -> None:
    source = Source(str(host.config), str(host.dir / "runnerd.sock"))
    host.config.write_text(host.config.read_text().replace("slots = 6", "slots = 3"))
    assert await source.reload() == []
    assert "runnerd.reloaded" in host.log()
    # A file the check refuses leaves runnerd on the one it runs with, and says why.
    host.config.write_text(host.config.read_text().replace("slots = 3", "slots = 0"))
    problems = await source.reload()
    assert problems and any("slots" in p for p in problems), problems
    assert (await host.status())["budget"].startswith("budget:")  # still answering
