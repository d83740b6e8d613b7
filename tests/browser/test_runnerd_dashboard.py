"""runnerd's dashboard driven in Chromium against a real ``runnerd serve`` started here.

runnerd runs with the process runtime (each runner a sleeping Python process), a job history
written before it starts, and ``dashboard_listen`` on a free loopback port. Runners are created
through its provider socket as Rungar would create them. The tests check what a person sees:
the budget bar's parts add up to MemoryMax, a runner created while the page is open appears
without a reload, applying advice through the editor changes the file, and a save over a file
changed since the editor opened it is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from playwright.sync_api import Page, expect
from runnerd.ctl import main as runnerctl
from runnerd.history import JobEnd, JobKey, JobStart
from runnerd.history_generate import GeneratedJob, write_history

from rungar.model.machine import Created, CreateRequest, JobHint
from rungar.model.runner_block import RunnerBlock
from rungar.rpc.client import GrpcProvider
from tests.browser.conftest import shoot
from tests.waiting import WAIT, until_sync

G = 1024**3
T = TypeVar("T")
MEMORY_MAX = 32 * G
# A runner that takes 8M every quarter second up to 256M, then sleeps: a shape to chart.
GROW = (
    "import time\nheld = []\nfor _ in range(32):\n"
    "    held.append(bytearray(8 << 20)); time.sleep(0.25)\ntime.sleep(120)\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def history(db: Path, now: float) -> None:
    """30 runs of one node job peaking at 1G under its 3G cap over the last day, and some
    busier hours: the advice lowers node's memory to 2G."""
    rows = []
    for i in range(30):
        at = now - 86400 + i * 2400
        start = JobStart(
            f"old{i}", "node", "node", 3 * G, 2.0, "caps", 3 * G, 2.0, "its profile's memory",
            None, None, at - 1800, queued_at=at - 1830,
        )  # fmt: skip
        end = JobEnd("succeeded", 1 * G, 0.6, False, False, 0, at)
        rows.append(GeneratedJob(start, JobKey("node", "octo/app", "ci", "test"), end, str(i)))
    write_history(db, rows)


def config_text(port: int) -> str:
    """runnerd.toml beside its state folder; the runners run the host's python3."""
    return f"""# runnerd for the dashboard's browser tests
[host]
slice = "rddash{uuid.uuid4().hex[:8]}.slice"
memory_max = "32G"  # past what this host leaves the slice: the bar hatches the rest
cpus = 4
state_dir = "state"
dashboard_listen = "127.0.0.1:{port}"
sample_interval = "0.5s"

[profiles.node]
command = ["/usr/bin/env", "python3", "-c", {json.dumps(GROW)}]
cpus = 2
memory = "3G"
slots = 2
"""


def on_own_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a loop of its own thread: Playwright's sync API holds this thread's."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(timeout=30)


@dataclass
class Runnerd:
    config: Path
    state: Path
    url: str
    process: subprocess.Popen[str]
    log: Path
    token: str = ""
    link: str = ""

    def ready(self, page: Page) -> None:
        """Wait until the dashboard answers, then sign ``page`` in with the link
        ``runnerctl dashboard`` prints."""

        def answers() -> bool:
            if self.process.poll() is not None:
                pytest.fail(f"runnerd stopped: {self.log.read_text()}")
            with contextlib.suppress(httpx.HTTPError):  # not listening yet
                return httpx.get(f"{self.url}/api/status", timeout=5).status_code == 401
            return False

        until_sync(answers, "answered on its dashboard")
        if not self.token:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                assert runnerctl(["-c", str(self.config), "dashboard"]) == 0
            self.link = printed.getvalue().strip()
        link = self.link
        assert link.startswith(f"{self.url}/?token="), link
        self.token = link.partition("?token=")[2]
        page.goto(link)  # the token becomes a cookie; the address drops it
        assert page.url == f"{self.url}/"

    def create(self, name: str, job: JobHint | None = None) -> None:
        async def go() -> None:
            client = GrpcProvider("host", f"unix://{self.state / 'provider.sock'}", timeout=WAIT)
            try:
                made = await client.create(
                    CreateRequest(name, f"q-{name}", "node", {}, RunnerBlock(), "jit-secret")
                )
                assert isinstance(made, Created), made
                if job is not None:
                    await client.update_runner(name, job)
            finally:
                await client.close()

        on_own_loop(go())

    def wait_for_samples(self, job: str, count: int) -> None:
        """Until the job's runner has ``count`` samples (one every 0.5 s) to chart."""

        def sampled() -> bool:
            found = httpx.get(
                f"{self.url}/api/jobs/{job}",
                headers={"authorization": f"Bearer {self.token}"},
                timeout=WAIT,
            ).json()
            return bool(found.get("series")) and len(found["series"]["times"]) >= count

        until_sync(sampled, f"had {count} samples of job {job}'s runner")


@pytest.fixture(scope="module")
def runnerd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runnerd]:
    """runnerd, starting: each test waits for it with ``ready()``, so Chromium (the ``page``
    fixture, asked for after this one) starts while runnerd does."""
    root = tmp_path_factory.mktemp("runnerd-dashboard")
    state = root / "state"
    state.mkdir()
    history(state / "history.db", time.time())
    port = free_port()
    config = root / "runnerd.toml"
    config.write_text(config_text(port))
    log = root / "runnerd.log"  # a file, not a pipe nobody reads that could fill and stall it
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
        daemon.terminate()
        daemon.wait(timeout=WAIT)


def bar_parts(page: Page) -> dict[str, int]:
    found: dict[str, int] = page.eval_on_selector_all(
        "#bar [data-part]",
        "parts => Object.fromEntries(parts.map(p => [p.dataset.part, Number(p.dataset.bytes)]))",
    )
    return found


@pytest.mark.screenshot
def test_the_budget_bar_adds_up_to_memory_max_and_a_new_runner_appears_without_reload(
    runnerd: Runnerd, page: Page
) -> None:
    runnerd.ready(page)
    page.goto(runnerd.url + "/")
    expect(page.locator("#bar [data-part]").first).to_be_visible()
    expect(page.locator("#live.on")).to_be_visible()  # the live stream is open
    parts = bar_parts(page)
    assert sum(parts.values()) == MEMORY_MAX, parts
    page.evaluate("window.notReloaded = true")

    runnerd.create("dash-r1", JobHint("octo/app", "ci", "build", "4242"))

    row = page.locator('#runners tr[data-runner="dash-r1"]')
    expect(row).to_contain_text("octo/app ci/build")
    expect(row).to_contain_text("3G")
    assert page.evaluate("window.notReloaded") is True
    # The runner's reservation is now a part of the bar, which still adds up to MemoryMax.
    expect(page.locator('#bar [data-part="reserved"]')).to_be_visible()
    parts = bar_parts(page)
    assert sum(parts.values()) == MEMORY_MAX and parts["reserved"] + parts.get("in_use", 0) >= 3 * G
    expect(page.locator("#host-line")).to_contain_text("host: ")
    # Its memory over the last minutes, live: two samples make a line.
    page.wait_for_function(
        """() => Number(document.querySelector('tr[data-runner="dash-r1"] td[data-points]')
            ?.dataset.points) >= 2"""
    )
    expect(row.locator("canvas")).to_be_visible()
    shoot(page, "runnerd-overview")


@pytest.mark.long
@pytest.mark.screenshot
def test_apply_through_the_editor_changes_the_file_and_a_stale_save_is_refused(
    runnerd: Runnerd, page: Page
) -> None:
    runnerd.ready(page)
    page.goto(runnerd.url + "/sizing")
    node = page.locator('article.profile[data-profile="node"]')
    expect(node.locator(".advice")).to_contain_text("lower")
    shoot(page, "runnerd-sizing")

    node.locator("[data-apply]").click()
    editor = page.locator("#editor")
    expect(editor).to_have_value(re.compile('memory = "2G"'))
    # The lines this Apply writes are shown before it is saved, with what they replace.
    changed = page.locator("#changed li")
    expect(changed).to_have_count(1)
    expect(changed.first).to_contain_text('memory = "3G"')
    expect(changed.first.locator("ins")).to_contain_text('memory = "2G"')
    page.locator("#save").click()
    expect(page.locator("#message.ok")).to_contain_text("saved")
    written = runnerd.config.read_text()
    assert 'memory = "2G"' in written and "# runnerd for the dashboard" in written
    page.goto(runnerd.url + "/sizing")  # the change is listed, with a way back
    expect(page.locator("#changes")).to_contain_text("node: apply lower: memory 3G → 2G")
    expect(page.locator("#changes")).not_to_contain_text("slots 2 → 2")  # only what changed
    expect(node.locator("[data-undo]")).to_contain_text("back to memory 3G")

    # An editor opened, then the file changed on disk: its save is refused and writes nothing.
    page.goto(runnerd.url + "/config")
    expect(editor).to_have_value(re.compile('memory = "2G"'))
    on_disk = written.replace("slots = 2", "slots = 1")
    runnerd.config.write_text(on_disk)
    editor.fill(editor.input_value().replace('memory = "2G"', 'memory = "1G"'))
    page.locator("#save").click()
    expect(page.locator("#message.stale")).to_contain_text("changed since this editor opened it")
    assert runnerd.config.read_text() == on_disk
    # The user's text is kept, the file's new text beside it, the differing lines marked.
    expect(editor).to_have_value(re.compile('memory = "1G"'))
    expect(page.locator("#conflict")).to_be_visible()
    expect(page.locator("#theirs")).to_have_value(on_disk)
    expect(page.locator("#conflict-lines li")).to_have_count(2)  # slots and memory differ
    shoot(page, "runnerd-config-editor")
    page.locator("#save").click()  # a second Save writes the user's text over the file's
    expect(page.locator("#message.ok")).to_contain_text("saved")
    assert 'memory = "1G"' in runnerd.config.read_text()
    runnerd.config.write_text(on_disk)

    # A save the check refuses lists each problem as FILE:LINE:COL: key: what.
    page.goto(runnerd.url + "/config")
    expect(editor).to_have_value(re.compile("slots = 1"))
    editor.fill(editor.input_value().replace("slots = 1", "slots = 20"))
    page.locator("#save").click()
    expect(page.locator("#message.refused")).to_contain_text("the check refused it")
    expect(page.locator("#problems li").first).to_contain_text(
        f"{runnerd.config}:2:1: profiles: slots × memory"
    )
    assert runnerd.config.read_text() == on_disk


@pytest.mark.long
@pytest.mark.screenshot
def test_the_job_page_says_its_admission_and_charts_it_and_utilization_reads_the_slots(
    runnerd: Runnerd, page: Page
) -> None:
    runnerd.ready(page)
    runnerd.create("dash-r2", JobHint("octo/app", "ci", "lint", "4343"))
    runnerd.wait_for_samples("4343", 8)
    page.goto(runnerd.url + "/jobs/4343")
    expect(page.locator("#sentence")).to_contain_text("admitted by caps: reserved")
    expect(page.locator("#memory-chart canvas")).to_be_visible()
    expect(page.locator("#cpu-chart canvas")).to_be_visible()
    legend = page.locator("#memory-chart .u-legend")
    expect(legend).to_contain_text("reservation")
    # the cap says its value, in MemoryMax's units (the editor test may have changed it)
    expect(legend).to_contain_text(re.compile(r"cap \d+(\.\d+)?[MG]"))
    assert "--" not in legend.inner_text()  # no placeholder while the cursor is elsewhere
    shoot(page, "runnerd-job")
    page.goto(runnerd.url + "/jobs")  # the finished and running jobs, each linked
    link = page.locator('#jobs tr[data-job="4343"] a')
    expect(link).to_have_attribute("href", "/jobs/4343")
    missing = page.goto(runnerd.url + "/jobs/does-not-exist")
    assert missing is not None and missing.status == 404
    expect(page.locator("main")).to_contain_text("No job does-not-exist")

    page.goto(runnerd.url + "/utilization")
    node = page.locator('article.profile[data-profile="node"]')
    expect(node.locator(".reading")).not_to_be_empty()
    expect(node.locator("canvas")).to_be_visible()
    expect(node.locator(".u-legend")).to_contain_text("concurrency")
    shoot(page, "runnerd-utilization")


@pytest.mark.screenshot
def test_at_phone_width_every_page_fits_the_screen_and_the_charts_their_cards(
    runnerd: Runnerd, page: Page
) -> None:
    runnerd.ready(page)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(runnerd.url + "/")
    expect(page.locator("#bar [data-part]").first).to_be_visible()
    expect(page.locator("#slice-memory canvas")).to_be_visible()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, overflow
    header = page.locator("header").bounding_box()
    assert header is not None and header["height"] < 90, header
    for chart in ("#slice-memory", "#slice-cpu"):
        box = page.locator(f"{chart} canvas").bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390, (chart, box)
    expect(page.locator("#cpu-line")).not_to_be_empty()
    shoot(page, "runnerd-phone")
    for path in ("/sizing", "/jobs", "/utilization", "/config"):
        page.goto(runnerd.url + path)
        page.wait_for_load_state("networkidle")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, (path, overflow)
