"""The vendored charting library loads and draws in the real browser the dashboards use."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page

import rungar.web

STATIC = Path(rungar.web.__file__).parent / "static" / "vendor" / "uplot"


def test_vendored_uplot_draws_a_series_in_chromium(page: Page) -> None:
    page.set_content(
        "<html><head><style>"
        + (STATIC / "uPlot.min.css").read_text()
        + "</style></head><body><div id=chart></div></body></html>"
    )
    page.add_script_tag(content=(STATIC / "uPlot.iife.min.js").read_text())
    drawn = page.evaluate(
        """() => {
            const chart = new uPlot(
                {width: 400, height: 200, series: [{}, {label: "memory", stroke: "red"}]},
                [[1, 2, 3], [10, 30, 20]],
                document.getElementById("chart"),
            );
            const canvas = !!document.querySelector("#chart canvas");
            return {canvas: canvas, points: chart.data[1].length};
        }"""
    )
    assert drawn == {"canvas": True, "points": 3}
    assert page.locator(".u-legend").inner_text().count("memory") == 1
