"""The fleet page in a real Chromium, against a real daemon serving it on ``dashboard.listen``.

One daemon serves the whole module (see :mod:`tests.browser.fleet_world`); each test opens the
page afresh. What a person looks for: a new runner and its events appear while they watch,
without a reload; a provider held for a higher-priority scale set says HELD; the Usage tab
names the repository whose job was served, with its cost on a priced provider.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import shoot
from tests.browser.fleet_world import FleetWorld, runners_on


@pytest.fixture(scope="module")
def fleet() -> Iterator[FleetWorld]:
    world = FleetWorld()
    world.start()
    try:
        yield world
    finally:
        world.stop()


def open_page(page: Page, fleet: FleetWorld) -> None:
    page.goto(fleet.url)
    expect(page.locator("#live")).to_have_text("live")
    expect(page.locator('#scale-sets tr[data-scale-set="small"]')).to_be_visible()


@pytest.mark.long
def test_a_new_runner_and_its_events_appear_on_an_open_page_without_a_reload(
    page: Page, fleet: FleetWorld
) -> None:
    open_page(page, fleet)
    expect(page.locator('#runners tr[data-runner^="cloudy-"]')).to_have_count(0)
    page.evaluate("window.loadedOnce = true")  # gone if the page were reloaded
    fleet.queue(labels=["cloud"], name="live-check", duration=60)
    expect(page.locator('#runners tr[data-runner^="cloudy-"]')).to_have_count(1)
    expect(page.locator('#events li[data-action="created"]').first).to_contain_text("cloudy-")
    assert page.evaluate("window.loadedOnce") is True


@pytest.mark.long
def test_the_usage_tab_names_the_repository_of_a_served_job_and_its_cost(
    page: Page, fleet: FleetWorld
) -> None:
    fleet.queue(labels=["cloud"], repository="octo-org/payments", name="unit", duration=10)
    fleet.wait_for(
        lambda s: (
            not any(r["job"].startswith("octo-org/payments") for r in s["runners"])
            and s["scale_sets"][2]["assigned"] == 0
        ),
        "the payments job to be served",
    )
    open_page(page, fleet)
    page.click("#tab-usage")
    row = page.locator('#usage-table tbody tr[data-key="octo-org/payments"]')
    expect(row).to_be_visible()
    expect(row.locator("td").nth(1)).to_have_text("1")  # jobs
    expect(row.locator("td").nth(8)).not_to_have_text("-")  # priced: a cost is shown


@pytest.mark.long
def test_a_provider_held_for_a_higher_priority_scale_set_shows_held_while_the_hold_lasts(
    page: Page, fleet: FleetWorld
) -> None:
    fleet.wait_for(lambda s: runners_on(s, "small") == 3, "small's three idle runners: host full")
    open_page(page, fleet)
    host = page.locator('#providers tr[data-provider="host"]')
    expect(host).not_to_contain_text("HELD")
    fleet.queue(labels=["big"], name="needs-room", duration=600)
    expect(host.locator(".status")).to_have_text("HELD", timeout=20_000)
    expect(host).to_contain_text("for big (priority 10)")
    status = fleet.wait_for(lambda s: s["providers"][0]["hold"] is not None, "the hold")
    assert runners_on(status, "small") == 3


@pytest.mark.long
@pytest.mark.screenshot
def test_screenshots_of_the_fleet_overview_and_usage_tab(page: Page, fleet: FleetWorld) -> None:
    fleet.wait_for(lambda s: runners_on(s, "small") == 3, "small's three idle runners: host full")
    fleet.queue(labels=["big"], name="integration", duration=600)  # holds the full host
    served = [
        ("octo-org/web", "lint", 20),
        ("octo-org/web", "test", 40),
        ("octo-org/api", "build", 30),
        ("octo-org/api", "test", 60),
        ("octo-org/payments", "unit", 25),
    ]
    for repository, name, duration in served:
        fleet.queue(labels=["cloud"], repository=repository, name=name, duration=duration)
    fleet.wait_for(
        lambda s: s["providers"][0]["hold"] is not None and runners_on(s, "cloudy") == 0,
        "the cloud jobs served and the hold in force",
        60,
    )
    for repository, name in (("octo-org/web", "e2e"), ("octo-org/docs", "publish")):
        fleet.queue(labels=["cloud"], repository=repository, name=name, duration=900)
    fleet.wait_for(lambda s: runners_on(s, "cloudy") == 2, "two cloud runners at work")
    open_page(page, fleet)
    page.wait_for_timeout(3000)  # a few live samples on the runners chart
    shoot(page, "fleet-overview")
    page.click("#tab-usage")
    expect(page.locator('#usage-table tbody tr[data-key="octo-org/web"]')).to_be_visible()
    shoot(page, "fleet-usage")


def overflow(page: Page) -> int:
    """How many pixels the page is wider than its viewport (0: nothing runs off-screen)."""
    return int(page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


@pytest.mark.long
@pytest.mark.screenshot
def test_at_phone_width_nothing_runs_off_screen_and_the_charts_fit_their_cards(
    page: Page, fleet: FleetWorld
) -> None:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.set_viewport_size({"width": 390, "height": 844})
    open_page(page, fleet)
    assert overflow(page) <= 0
    # the scale sets' and providers' tables fit their cards, without scrolling sideways
    for table in ("#scale-sets", "#providers"):
        wider = page.eval_on_selector(table, "t => t.scrollWidth - t.parentElement.clientWidth")
        assert wider <= 0, (table, wider)
    header = page.locator("header").bounding_box()
    assert header is not None and header["height"] < 110, header  # two short rows, not ten
    for chart in ("#chart-runners", "#chart-waits"):
        card = page.locator(chart).bounding_box()
        canvas = page.locator(f"{chart} canvas").bounding_box()
        assert card is not None and canvas is not None
        assert canvas["x"] + canvas["width"] <= card["x"] + card["width"] + 1, (chart, canvas)
    # the charts' two boxes one above the other, not overlapping
    first = page.locator("#chart-runners").bounding_box()
    second = page.locator("#chart-waits").bounding_box()
    assert first is not None and second is not None
    assert second["y"] >= first["y"] + first["height"]
    # no time label with a second line run into the next, no "--" placeholder in a legend
    legend = page.locator("#chart-runners .u-legend").inner_text()
    assert "--" not in legend, legend
    shoot(page, "fleet-phone")
    page.click("#tab-usage")
    expect(page.locator("#usage-table")).to_be_visible()
    assert overflow(page) <= 0
    assert not [e for e in errors if "404" in e or "favicon" in e], errors


@pytest.mark.long
def test_the_usage_tab_is_in_the_url_so_a_reload_stays_on_it(page: Page, fleet: FleetWorld) -> None:
    open_page(page, fleet)
    page.click("#tab-usage")
    assert page.url.endswith("#usage")
    page.reload()
    expect(page.locator("#usage")).to_be_visible()
    expect(page.locator("#fleet")).to_be_hidden()
    expect(page.locator("#tab-usage")).to_have_class("tab active")
