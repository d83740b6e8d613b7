"""The least-privilege policies in config/iam/ say what docs/providers/*.md say they say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def statements() -> list[dict[str, Any]]:
    policy = json.loads((ROOT / "config/iam/aws-policy.json").read_text())
    found: list[dict[str, Any]] = policy["Statement"]
    return found


def test_instances_are_launched_only_with_this_installations_tags() -> None:
    launch = [s for s in statements() if s["Action"] == "ec2:RunInstances" and "Condition" in s]
    assert len(launch) == 1
    tags = launch[0]["Condition"]["StringEquals"]
    assert tags["aws:RequestTag/rungar.sh/installation"] == "INSTALLATION"
    assert tags["aws:RequestTag/rungar.sh/managed"] == "true"
    assert all(":instance/" in r or ":volume/" in r for r in launch[0]["Resource"])


def test_terminate_is_allowed_only_on_instances_carrying_the_installation_tag() -> None:
    (terminate,) = [s for s in statements() if "TerminateInstances" in str(s["Action"])]
    tags = terminate["Condition"]["StringEquals"]
    assert tags["ec2:ResourceTag/rungar.sh/installation"] == "INSTALLATION"


def test_no_statement_grants_a_wildcard_action() -> None:
    for s in statements():
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        assert all("*" not in a for a in actions)
        assert s["Effect"] == "Allow"


def test_tags_can_only_be_written_by_the_launch_itself() -> None:
    (tagging,) = [s for s in statements() if s["Action"] == "ec2:CreateTags"]
    assert tagging["Condition"]["StringEquals"]["ec2:CreateAction"] == "RunInstances"


def test_the_gcp_role_lists_exact_permissions_and_every_documented_one() -> None:
    role = yaml.safe_load((ROOT / "config/iam/gcp-role.yaml").read_text())
    permissions = role["includedPermissions"]
    assert all("*" not in p for p in permissions) and len(set(permissions)) == len(permissions)
    doc = (ROOT / "docs/providers/gcp.md").read_text()
    assert all(f"`{p}`" in doc for p in permissions)
    for needed in (
        "compute.instances.create",
        "compute.instances.delete",
        "compute.instances.list",
        "compute.zoneOperations.get",
        "compute.machineTypes.get",
    ):
        assert needed in permissions


def test_every_aws_action_is_documented() -> None:
    doc = (ROOT / "docs/providers/aws.md").read_text()
    for s in statements():
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        assert all(f"`{a}`" in doc for a in actions)
