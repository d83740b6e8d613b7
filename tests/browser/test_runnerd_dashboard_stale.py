"""runnerd's dashboard says plainly what it no longer knows: an open job page stops saying
"running" once the job has ended, and a page whose daemon stopped answering says it is stale
(docs/runnerd-dashboard.md). Its own ``runnerd serve``, since the test stops it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from rungar.model.machine import Conclusion, JobHint, Removal
from rungar.model.runner import RemovalReason
from rungar.rpc.client import GrpcProvider
from tests.browser.test_runnerd_dashboard import (
    Runnerd,
    config_text,
    free_port,
    history,
    on_own_loop,
)


@pytest.fixture
def runnerd(tmp_path: Path) -> Iterator[Runnerd]:
    state = tmp_path / "state"
    state.mkdir()
    history(state / "history.db", time.time())
    port = free_port()
    config = tmp_path / "runnerd.toml"
    config.write_text(
        config_text(port).replace(
            'sample_interval = "0.5s"', 'sample_interval = "0.5s"\nexit_grace = "1s"'
        )
    )
    log = tmp_path / "runnerd.log"
    with log.open("w") as written:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "runnerd.cli", "serve", "-c", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=written,
            text=True,
        )
    try:
        yield Runnerd(config, state, f"http://127.0.0.1:{port}", daemon, log)
    finally:
        if daemon.poll() is None:
            daemon.terminate()
            daemon.wait(timeout=20)


def test_an_open_job_page_follows_its_job_to_its_end_and_says_stale_once_runnerd_stops(
    runnerd: Runnerd, page: Page
) -> None:
    runnerd.ready(page)
    runnerd.create("stale-r1", JobHint("octo/app", "ci", "build", "5151"))
    page.goto(runnerd.url + "/jobs/5151")
    sentence = page.locator("#sentence")
    expect(sentence).to_contain_text(": running")

    async def finish() -> None:
        client = GrpcProvider("host", f"unix://{runnerd.state / 'provider.sock'}", timeout=30)
        try:
            done = Removal(RemovalReason.JOB_COMPLETED, Conclusion.SUCCEEDED)
            await client.delete("stale-r1", done)
        finally:
            await client.close()

    on_own_loop(finish())
    expect(sentence).to_contain_text(": succeeded", timeout=20_000)  # no reload
    expect(page.locator("#stale")).to_be_hidden()

    page.goto(runnerd.url + "/")
    expect(page.locator("#live.on")).to_be_visible()
    runnerd.process.terminate()
    runnerd.process.wait(timeout=20)
    banner = page.locator("#stale")
    expect(banner).to_be_visible(timeout=20_000)
    expect(banner).to_contain_text("Stale: runnerd stopped answering")
