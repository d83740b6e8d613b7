"""``make demo`` names its dashboards: the fleet page, and each host's runnerd dashboard where
this runnerd serves one (``[host] dashboard_listen``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from rungar.demo.files import examples_root
from rungar.demo.scenario import dashboards_text
from rungar.demo.stack import Stack, with_dashboard_listen


def test_the_demo_host_config_gets_dashboard_listen_in_its_host_table() -> None:
    template = (examples_root() / "demo" / "runnerd.toml").read_text()
    parsed = tomllib.loads(with_dashboard_listen(template, "127.0.0.1:8181"))
    assert parsed["host"]["dashboard_listen"] == "127.0.0.1:8181"
    assert parsed["profiles"]["small"]["slots"] == 4  # the rest as it was
    with pytest.raises(ValueError, match=r"no \[host\] table"):
        with_dashboard_listen("[sizing]\nmin_jobs = 3\n", "127.0.0.1:1")


def test_the_dashboards_are_listed_one_per_line_and_a_missing_runnerd_one_is_said(
    tmp_path: Path,
) -> None:
    stack = Stack(dir=tmp_path)
    stack.dashboard_urls = [
        ("fleet page", "http://127.0.0.1:8180/"),
        ("runnerd host1", "http://127.0.0.1:8181/"),
    ]
    assert dashboards_text(stack).splitlines() == [
        "Dashboards:",
        "  fleet page       http://127.0.0.1:8180/",
        "  runnerd host1    http://127.0.0.1:8181/",
    ]
    stack.dashboard_urls = stack.dashboard_urls[:1]
    assert dashboards_text(stack).splitlines()[-1] == (
        "  runnerd          (this runnerd serves no dashboard)"
    )
