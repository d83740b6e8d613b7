"""The fleet page's quick check for ``make test``: the real page, script and charts in Chromium,
served by the real listener, fed by a scripted engine instead of a daemon (the tests against a
real daemon are in test_fleet_page.py, under ``make test-long``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from rungar.web.bounded import BoundedHttpServer, bind
from rungar.web.fleet.app import FleetApp
from rungar.web.fleet.feed import Feed
from tests.integration.fleet_script import ScriptedEngine, status


@pytest.fixture
def served() -> Iterator[tuple[str, ScriptedEngine]]:
    engine = ScriptedEngine()
    feed = Feed(engine.read, engine.call, refresh=0.2)
    app = FleetApp(feed, lambda by, since: {"by": by, "groups": [], "total": {}})
    server = BoundedHttpServer(app, bind("127.0.0.1:0", key="test"), background=feed.run)
    server.start()
    try:
        yield f"http://{server.address}/", engine
    finally:
        server.stop()


def test_the_fleet_page_shows_held_and_a_new_runner_without_a_reload(
    page: Page, served: tuple[str, ScriptedEngine]
) -> None:
    url, engine = served
    page.goto(url)
    expect(page.locator("#live")).to_have_text("live")
    expect(page.locator('#providers tr[data-provider="host"] .status')).to_have_text("HELD")
    expect(page.locator("#runners tr[data-runner]")).to_have_count(0)
    page.evaluate("window.loadedOnce = true")  # gone if the page were reloaded
    runner = {
        "name": "linux-1a2b3c4d",
        "scale_set": "linux",
        "provider": "host",
        "state": "starting",
        "github": "unknown",
        "age": 1.0,
        "job": "",
    }
    engine.events.append(
        {
            "time": 1001.0,
            "kind": "runner",
            "name": runner["name"],
            "action": "created",
            "scale_set": "linux",
            "provider": "host",
            "message": "",
            "attributes": {},
        }
    )
    engine.status = status([runner])
    expect(page.locator('#runners tr[data-runner="linux-1a2b3c4d"]')).to_be_visible()
    expect(page.locator('#events li[data-action="created"]')).to_contain_text("linux-1a2b3c4d")
    assert page.evaluate("window.loadedOnce") is True


def test_the_usage_tab_shows_rungar_usages_numbers_as_rungar_usage_writes_them(
    page: Page,
) -> None:
    from rungar.cli.usage import duration_text

    group = {
        "key": "octo-org/web", "jobs": 2, "runner_seconds": 3725.0,
        "conclusions": {"succeeded": 2}, "wait_p50": 92.0, "wait_p95": 118.4, "cost": None,
    }  # fmt: skip
    engine = ScriptedEngine()
    feed = Feed(engine.read, engine.call, refresh=0.2)
    app = FleetApp(feed, lambda by, since: {"by": by, "groups": [group], "total": group})
    server = BoundedHttpServer(app, bind("127.0.0.1:0", key="test"), background=feed.run)
    server.start()
    try:
        page.goto(f"http://{server.address}/")
        page.click("#tab-usage")
        row = page.locator('#usage-table tbody tr[data-key="octo-org/web"]')
        expect(row).to_be_visible()
        cells = row.locator("td")
        for i, seconds in ((5, 3725.0), (6, 92.0), (7, 118.4)):
            expect(cells.nth(i)).to_have_text(duration_text(seconds))  # 1h 02m, 1m 32s, 1m 58s
    finally:
        server.stop()


def test_the_fleet_page_says_stale_plainly_once_the_daemon_stops_answering(page: Page) -> None:
    engine = ScriptedEngine()
    feed = Feed(engine.read, engine.call, refresh=0.2)
    app = FleetApp(feed, lambda by, since: {"by": by, "groups": [], "total": {}})
    server = BoundedHttpServer(app, bind("127.0.0.1:0", key="test"), background=feed.run)
    server.start()
    stopped = False
    try:
        page.goto(f"http://{server.address}/")
        expect(page.locator("#live")).to_have_text("live")
        expect(page.locator("#stale")).to_be_hidden()
        server.stop()
        stopped = True
        banner = page.locator("#stale")
        expect(banner).to_be_visible(timeout=20_000)
        expect(banner).to_contain_text("Stale: the daemon stopped answering")
    finally:
        if not stopped:
            server.stop()


def test_the_fleet_page_shows_the_queue_reruns_and_budget_as_rungar_status_does(
    page: Page, served: tuple[str, ScriptedEngine]
) -> None:
    from rungar.cli.status import header_lines
    from rungar.daemon.status import daemon_notes

    url, engine = served
    page.goto(url)
    expect(page.locator("#live")).to_have_text("live")
    expect(page.locator("#daemon-notes")).to_be_hidden()  # nothing to say yet
    runner = {
        "name": "linux-1a2b3c4d", "scale_set": "linux", "provider": "host",
        "state": "starting", "github": "unknown", "age": 1.0, "job": "",
    }  # fmt: skip
    document = status([runner])
    daemon = document["daemon"]
    daemon["registrations"] = {
        "per_minute": 6.0, "waiting": 17, "source": "github", "throttled": 3,
        "sentence": "registering 6/min, GitHub's limit; 17 waiting",
    }  # fmt: skip
    daemon["budget"] = {"note": "API budget 998/5000 (20%) left: runner lists half as often"}
    daemon["reruns"] = {"count": 1, "last": "re-ran octo/app's build, lost with linux-9f"}
    daemon["notes"] = daemon_notes(daemon)
    document["scale_sets"][0].update(runners=16, starting=16, creating=15)
    engine.status = document

    # rungar status's header lines for the same document, label and text
    shown = {
        label.strip(): text
        for label, _, text in (
            line.partition(": ") for line in header_lines(daemon) if line.startswith("  ")
        )
    }
    assert set(shown) == {"Re-run", "API budget", "Registering"}, shown
    notes = page.locator("#daemon-notes")
    expect(notes).to_be_visible()
    for label, text in shown.items():
        expect(notes.locator(f'dd[data-label="{label}"]')).to_have_text(text.strip())
    expect(notes).to_contain_text("1 lost job; last:")
    expect(page.locator("#runner-count")).to_have_text("(1 listed, 15 being created)")
    expect(page.locator("#runners-creating")).to_have_text(
        "15 runners being created, not listed until created; 17 waiting to register with GitHub"
    )
