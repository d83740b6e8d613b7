"""GCP label encoding, search order, offer cache and settings checks (pure)."""

from __future__ import annotations

import re

import pytest
from rungar_gcp.labels import (
    decode_labels_metadata,
    encode_key,
    encode_labels,
    encode_value,
    instance_name,
    labels_filter,
    labels_metadata,
)
from rungar_gcp.search import Attempt, OfferCache, plan, rotated
from rungar_gcp.settings import GcpRunner, GcpSettings

from rungar.model.runner_block import RunnerBlock

GCP_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
GCP_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


@pytest.mark.parametrize(
    ("key", "encoded"),
    [
        ("rungar.sh/scale-set", "rungar_sh_scale-set"),
        ("rungar.sh/managed", "rungar_sh_managed"),
        ("team", "team"),
        ("9lives", "k9lives"),
        ("Env.Name", "env_name"),
    ],
)
def test_label_keys_become_gcp_keys(key: str, encoded: str) -> None:
    assert encode_key(key) == encoded


def test_values_gcp_allows_are_kept_and_others_hashed_as_h() -> None:
    assert encode_value("gh-0123abcd") == "gh-0123abcd"
    hashed = encode_value("Linux-X64/big")
    assert hashed.startswith("h-") and GCP_VALUE.match(hashed)
    assert hashed == encode_value("Linux-X64/big")
    assert hashed != encode_value("linux-x64/big")


def test_every_encoded_label_obeys_gcp_rules_even_long_ones() -> None:
    labels = encode_labels({"x" * 100 + "/Y": "V" * 100, "rungar.sh/runner": "Runner-1"})
    assert all(GCP_KEY.match(k) and GCP_VALUE.match(v) for k, v in labels.items())


def test_more_than_64_labels_are_refused() -> None:
    with pytest.raises(ValueError, match="64"):
        encode_labels({f"k{i}": "v" for i in range(65)})


def test_the_exact_labels_round_trip_through_metadata() -> None:
    labels = {"rungar.sh/scale-set": "Linux X64", "rungar.sh/managed": "true"}
    assert decode_labels_metadata(labels_metadata(labels)) == labels
    assert decode_labels_metadata("not json") is None


def test_a_selector_becomes_an_and_of_label_terms() -> None:
    text = labels_filter({"rungar.sh/managed": "true", "rungar.sh/installation": "gh-1"}, "r-1")
    assert text == (
        '(labels.rungar_sh_installation = "gh-1") AND (labels.rungar_sh_managed = "true") '
        'AND (name = "r-1")'
    )


@pytest.mark.parametrize(
    ("runner", "name"),
    [
        ("rungar-c4-m8-7f3a", "rungar-c4-m8-7f3a"),
        ("Linux-X64-abc", "linux-x64-abc"),
        ("1st", None),
        ("has_underscore", None),
        ("a" * 64, None),
        ("ends-", None),
    ],
)
def test_instance_names_are_runner_names_that_gce_accepts(runner: str, name: str | None) -> None:
    assert instance_name(runner) == name


def test_every_type_is_tried_in_a_zone_before_the_next_zone() -> None:
    assert plan(["a", "b"], ["t1", "t2"]) == [
        Attempt("a", "t1"),
        Attempt("a", "t2"),
        Attempt("b", "t1"),
        Attempt("b", "t2"),
    ]


def test_zones_rotate_from_the_start_index() -> None:
    assert rotated(["a", "b", "c"], 0) == ("a", "b", "c")
    assert rotated(["a", "b", "c"], 4) == ("b", "c", "a")


def test_offers_are_remembered_for_an_hour() -> None:
    cache = OfferCache()
    cache.put("z", "t", False, now=1000.0)
    assert cache.get("z", "t", now=1000.0 + 3599) is False
    assert cache.get("z", "t", now=1000.0 + 3600) is None


def test_settings_report_every_problem_at_once() -> None:
    with pytest.raises(ValueError) as err:
        GcpSettings.parse({"zones": ["us-central1-a", "europe-west1-b"], "bogus": 1})
    text = str(err.value)
    for part in (
        "bogus: unknown key",
        "project: required",
        "installation: required",
        "not all in one region",
    ):
        assert part in text


def test_a_service_account_to_impersonate_is_a_setting_but_not_with_anonymous() -> None:
    base = {"project": "p", "zones": ["us-central1-a"], "installation": "gh-1"}
    target = "rungar@p.iam.gserviceaccount.com"
    settings = GcpSettings.parse({**base, "impersonate_service_account": target})
    assert settings.impersonate_service_account == target
    with pytest.raises(ValueError, match="impersonate_service_account: cannot be used with anon"):
        GcpSettings.parse({**base, "impersonate_service_account": target, "anonymous": True})
    with pytest.raises(ValueError, match="impersonate_service_account: must be a service acc"):
        GcpSettings.parse({**base, "impersonate_service_account": ["a", "b"]})


def test_a_runner_needs_a_type_and_an_image_unless_a_template_gives_them() -> None:
    _, problems = GcpRunner.parse(RunnerBlock.from_mapping({}))
    assert "runner.machine_type: required unless instance_template is set" in problems
    assert "runner.image: required unless instance_template is set" in problems
    runner, problems = GcpRunner.parse(
        RunnerBlock.from_mapping({"instance_template": "global/instanceTemplates/ci"})
    )
    assert problems == [] and runner is not None


def test_runner_disks_are_whole_gib_of_at_least_10() -> None:
    block = {"machine_type": "e2-small", "image": "img"}
    assert GcpRunner.parse(RunnerBlock.from_mapping({**block, "disk_size": "5GiB"}))[1] == [
        "runner.disk_size: must be at least 10GiB"
    ]
    runner, _ = GcpRunner.parse(RunnerBlock.from_mapping({**block, "disk_size": "40GiB"}))
    assert runner is not None and runner.disk_gib == 40


def test_rungar_metadata_keys_cannot_be_overridden() -> None:
    block = {"machine_type": "e2-small", "image": "i", "metadata": {"rungar-jit-config": "x"}}
    assert GcpRunner.parse(RunnerBlock.from_mapping(block))[1] == [
        "runner.metadata.rungar-jit-config: set by Rungar, cannot be given"
    ]
