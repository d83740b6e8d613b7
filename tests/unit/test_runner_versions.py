"""Runner versions: their form is checked before they are compared, and placement skips a
provider whose runner GitHub would refuse, falling through to one it accepts."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError
from rungar_aws.settings import AwsRunner
from rungar_gcp.settings import GcpRunner
from runnerd.config import parse_config

from rungar.config.model import Placement, ScaleSetProvider
from rungar.daemon.settings import RunnerVersionSettings
from rungar.errors import ConfigError
from rungar.model.machine import ProviderInfo
from rungar.model.runner_block import RunnerBlock
from rungar.model.runner_version import RunnerVersion, parse_runner_version, version_problem
from rungar.placement import Fleet, Skip
from rungar.placement.plan import plan_placement
from rungar.rpc import convert
from tests.unit.placement_helpers import fleet, provider, scale_set

T0 = 1000.0
REASON = "runner 2.320.0 is below GitHub's minimum 2.329.0"


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("2.329.0", RunnerVersion(2, 329, 0)),
        ("v2.330.1", RunnerVersion(2, 330, 1)),
        ("2.329", None),
        ("2.329.0-beta", None),
        ("2.329.0; rm -rf /", None),
        ("1" * 30 + ".0.0", None),  # longer than VERSION_MAX
        (2, None),
        ("", None),
    ],
)
def test_only_three_dotted_numbers_of_bounded_length_are_a_version(
    text: object, parsed: RunnerVersion | None
) -> None:
    assert parse_runner_version(text) == parsed
    assert (version_problem(text) == "") is (parsed is not None)


def test_versions_compare_as_numbers_not_text() -> None:
    assert RunnerVersion(2, 1000, 0) > RunnerVersion(2, 999, 9)
    assert parse_runner_version("2.1000.0") == RunnerVersion(2, 1000, 0)


def outdated_fleet(minimum: str = "2.329.0") -> Fleet:
    f = fleet(
        [provider("old"), provider("new")],
        [scale_set("s", ["old", "new"], placement=Placement.PACK)],
    )
    f.versions.minimum = parse_runner_version(minimum)
    f.versions.report("old", "2.320.0")
    f.versions.report("new", "2.330.0")
    return f


def test_a_provider_below_the_minimum_is_skipped_and_placement_falls_through() -> None:
    f = outdated_fleet()
    plan = plan_placement(f, "s", T0)
    assert plan.order == ("new",)
    assert plan.skips == (Skip("old", REASON),)


def test_the_skip_lifts_when_the_minimum_is_not_above_the_runner() -> None:
    f = outdated_fleet("2.320.0")
    assert plan_placement(f, "s", T0).order == ("old", "new")


def test_an_unknown_version_or_minimum_places_as_before() -> None:
    f = fleet([provider("a")], [scale_set("s", ["a"])])
    f.versions.report("a", "2.1.0")
    assert plan_placement(f, "s", T0).order == ("a",), "no minimum: nothing refused"
    f.versions.minimum = parse_runner_version("2.329.0")
    f.versions.report("a", "")
    assert plan_placement(f, "s", T0).order == ("a",), "no version: nothing refused"


def test_with_every_provider_outdated_nothing_is_tried_and_the_reason_says_why() -> None:
    f = fleet([provider("a")], [scale_set("s", ["a"])])
    f.versions.minimum = parse_runner_version("2.329.0")
    f.versions.report("a", "2.320.0")
    plan = plan_placement(f, "s", T0)
    assert plan.order == () and REASON in plan.why_none
    assert f.cannot_place("s", T0) and f.first_tryable("s", T0) == []


def test_a_runner_blocks_runner_version_names_the_images_runner_and_wins() -> None:
    named = (ScaleSetProvider("cloud", {"runner_version": "2.320.0"}),)
    cloud = dataclasses.replace(scale_set("s", ["cloud"]), providers=named)
    f = fleet([provider("cloud")], [cloud])
    f.versions.minimum = parse_runner_version("2.329.0")
    f.versions.report("cloud", "2.330.0")
    assert plan_placement(f, "s", T0).skips == (Skip("cloud", REASON),)


def test_info_keeps_a_runner_version_only_in_a_versions_form() -> None:
    def through(version: str) -> str:
        info = ProviderInfo("h", "runnerd", "1", (), runner_version=version)
        return convert.info_from_pb(convert.info_to_pb(info)).runner_version

    assert through("2.329.0") == "2.329.0"
    assert through("v2.329.0") == "2.329.0"
    assert through("9" * 5000) == ""
    assert through("2.329.0\n\x1b[31m") == ""
    assert through("") == ""


@pytest.mark.parametrize("runner", [GcpRunner, AwsRunner])
def test_the_cloud_runner_key_runner_version_is_checked(runner: type[GcpRunner]) -> None:
    base = (
        {"machine_type": "e2-small", "image": "img"}
        if runner is GcpRunner
        else {"instance_type": "m7i.large", "image": "ami-1"}
    )
    good = runner.parse(RunnerBlock.from_mapping({**base, "runner_version": "2.330.0"}))
    assert good[1] == []
    bad = runner.parse(RunnerBlock.from_mapping({**base, "runner_version": "latest"}))
    assert bad[1] == ["runner.runner_version: must be a runner version such as 2.329.0"]


def test_runnerd_reports_its_runner_version_and_refuses_one_not_in_a_versions_form() -> None:
    config = parse_config('[host]\nrunner_version = "2.330.0"\n')
    assert config.host.runner_version == "2.330.0"
    with pytest.raises(ConfigError) as e:
        parse_config('[host]\nrunner_version = "newest"\n', "/etc/runnerd.toml")
    assert e.value.problems == [
        "/etc/runnerd.toml:2:1: host.runner_version: must be a runner version such as 2.329.0"
    ]


def test_the_minimum_setting_must_be_a_version() -> None:
    assert RunnerVersionSettings().minimum == "2.329.0"
    assert RunnerVersionSettings(minimum="v2.330.0").minimum == "2.330.0"
    with pytest.raises(ValidationError, match=r"must be a runner version such as 2\.329\.0"):
        RunnerVersionSettings(minimum="2.330")
