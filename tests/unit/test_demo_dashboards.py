"""``make demo`` names its dashboards: the fleet page, and each host's runnerd dashboard where
this runnerd serves one (``[host] dashboard_listen``)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from string import Template

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
        "They stop with the demo, after its summary: `rungar demo --keep` keeps them running.",
    ]
    assert dashboards_text(stack, kept=True).splitlines()[-1] == "They stop when the demo stops."
    stack.dashboard_urls = stack.dashboard_urls[:1]
    assert dashboards_text(stack).splitlines()[-2] == (
        "  runnerd          (this runnerd serves no dashboard)"
    )


async def test_a_hosts_dashboard_is_listed_as_the_login_link_with_runnerds_token(
    tmp_path: Path,
) -> None:
    template = (examples_root() / "demo" / "runnerd.toml").read_text()
    host_dir = tmp_path / "host1"
    host_dir.mkdir()
    values = {"NAME": "host1", "RUN": "t", "MEMORY_MAX": "1G", "DIR": str(tmp_path), "PYTHON": "py"}
    toml = with_dashboard_listen(Template(template).substitute(values), "127.0.0.1:8181")
    (host_dir / "runnerd.toml").write_text(toml)
    (host_dir / "dashboard.token").write_text("s3cret\n")  # as runnerd makes it when it serves
    stack = Stack(dir=tmp_path)
    stack.dashboard_urls = [
        ("fleet page", "http://127.0.0.1:8180/"),
        ("runnerd host1", "http://127.0.0.1:8181/"),
    ]

    await stack._login_links()

    assert stack.dashboard_urls == [
        ("fleet page", "http://127.0.0.1:8180/"),
        ("runnerd host1", "http://127.0.0.1:8181/?token=s3cret"),
    ]
