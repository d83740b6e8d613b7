"""Every EC2 code of the reference tables lands in its outcome; launch parameters (pure)."""

from __future__ import annotations

import pytest
from rungar_aws.errors import NO_ANSWER, classify, resource_of
from rungar_aws.launch import (
    Attempt,
    Tried,
    client_token,
    launch_template,
    plan,
    run_params,
    settle,
    tag_filters,
    user_data,
)
from rungar_aws.settings import AwsRunner, AwsSettings

from rungar.cloudkit.search import PlaceAnswer
from rungar.model.machine import CreateRequest, RefusalKind
from rungar.model.runner_block import RunnerBlock

CASES = [
    ("InsufficientInstanceCapacity", 500, PlaceAnswer.STOCK),
    ("InsufficientHostCapacity", 500, PlaceAnswer.STOCK),
    ("InsufficientReservedInstanceCapacity", 500, PlaceAnswer.STOCK),
    ("InsufficientCapacity", 500, PlaceAnswer.STOCK),
    ("InsufficientAddressCapacity", 500, PlaceAnswer.STOCK),
    ("InsufficientVolumeCapacity", 500, PlaceAnswer.STOCK),
    ("InsufficientFreeAddressesInSubnet", 400, PlaceAnswer.STOCK),
    ("SpotMaxPriceTooLow", 400, PlaceAnswer.STOCK),
    ("UnfulfillableCapacity", 400, PlaceAnswer.STOCK),
    ("ReservationCapacityExceeded", 400, PlaceAnswer.STOCK),
    ("InstanceLimitExceeded", 400, PlaceAnswer.QUOTA),
    ("VcpuLimitExceeded", 400, PlaceAnswer.QUOTA),
    ("MaxSpotInstanceCountExceeded", 400, PlaceAnswer.QUOTA),
    ("MaxFleetCountExceeded", 400, PlaceAnswer.QUOTA),
    ("Unsupported", 400, PlaceAnswer.UNOFFERED),
    ("InvalidParameterValue", 400, PlaceAnswer.INVALID),
    ("InvalidParameterCombination", 400, PlaceAnswer.INVALID),
    ("InvalidAMIID.NotFound", 400, PlaceAnswer.INVALID),
    ("InvalidAMIID.Malformed", 400, PlaceAnswer.INVALID),
    ("InvalidSubnetID.NotFound", 400, PlaceAnswer.INVALID),
    ("InvalidGroup.NotFound", 400, PlaceAnswer.INVALID),
    ("InvalidKeyPair.NotFound", 400, PlaceAnswer.INVALID),
    ("InvalidUserData.Malformed", 400, PlaceAnswer.INVALID),
    ("InvalidInstanceType.NotFound", 400, PlaceAnswer.INVALID),
    ("MissingParameter", 400, PlaceAnswer.INVALID),
    ("UnknownParameter", 400, PlaceAnswer.INVALID),
    ("IdempotentParameterMismatch", 400, PlaceAnswer.INVALID),
    ("NoCredentialsError", None, PlaceAnswer.INVALID),
    ("UnauthorizedOperation", 403, PlaceAnswer.DENIED),
    ("AuthFailure", 401, PlaceAnswer.DENIED),
    ("Blocked", 400, PlaceAnswer.DENIED),
    ("OptInRequired", 400, PlaceAnswer.DENIED),
    ("PendingVerification", 400, PlaceAnswer.REFUSED),
    ("RequestLimitExceeded", 503, PlaceAnswer.REFUSED),
    ("InternalError", 500, PlaceAnswer.UNCERTAIN),
    ("InternalFailure", 500, PlaceAnswer.UNCERTAIN),
    ("ServiceUnavailable", 503, PlaceAnswer.UNCERTAIN),
    ("Unavailable", 503, PlaceAnswer.UNCERTAIN),
    (NO_ANSWER, None, PlaceAnswer.UNCERTAIN),
    ("SomethingNew", 502, PlaceAnswer.UNCERTAIN),
    ("SomethingNew", 400, PlaceAnswer.REFUSED),
]


@pytest.mark.parametrize(("code", "status", "expected"), CASES)
def test_each_aws_error_code_is_classified(
    code: str, status: int | None, expected: PlaceAnswer
) -> None:
    assert classify(code, status) is expected


def test_throttling_is_not_uncertain_although_it_may_come_as_a_5xx() -> None:
    # RequestLimitExceeded means nothing was launched; resending would only add load.
    assert classify("RequestLimitExceeded", 503) is PlaceAnswer.REFUSED


@pytest.mark.parametrize(
    ("code", "resource"),
    [
        ("InsufficientInstanceCapacity", "zone stock"),
        ("VcpuLimitExceeded", "quota"),
        ("MaxSpotInstanceCountExceeded", "quota"),
        ("InsufficientFreeAddressesInSubnet", "subnet addresses"),
    ],
)
def test_full_refusals_name_the_resource(code: str, resource: str) -> None:
    assert resource_of(code) == resource


def _tried(*items: tuple[PlaceAnswer, str]) -> list[Tried]:
    return [
        Tried(Attempt(f"subnet-{i}", "m7i.large"), o, c, c, resource_of(c))
        for i, (o, c) in enumerate(items)
    ]


def test_only_unsupported_everywhere_is_invalid() -> None:
    refusal = settle(_tried((PlaceAnswer.UNOFFERED, "Unsupported")), "eu-west-1")
    assert refusal.kind is RefusalKind.INVALID
    assert "no subnet of eu-west-1 offers instance type m7i.large" in refusal.message


def test_full_subnets_and_quota_settle_as_full_naming_both() -> None:
    refusal = settle(
        _tried(
            (PlaceAnswer.STOCK, "InsufficientInstanceCapacity"),
            (PlaceAnswer.UNOFFERED, "Unsupported"),
            (PlaceAnswer.QUOTA, "VcpuLimitExceeded"),
        ),
        "eu-west-1",
    )
    assert (refusal.kind, refusal.resource) == (RefusalKind.FULL, "quota and zone stock")


@pytest.mark.parametrize(
    ("outcome", "kind"),
    [
        (PlaceAnswer.INVALID, RefusalKind.INVALID),
        (PlaceAnswer.DENIED, RefusalKind.INVALID),
        (PlaceAnswer.REFUSED, RefusalKind.FAILED),
        (PlaceAnswer.UNCERTAIN, RefusalKind.FAILED),
    ],
)
def test_a_stopping_outcome_decides_the_kind(outcome: PlaceAnswer, kind: RefusalKind) -> None:
    tried = _tried((PlaceAnswer.STOCK, "InsufficientInstanceCapacity"), (outcome, "X"))
    assert settle(tried, "eu-west-1").kind is kind


def test_subnets_in_order_with_every_type_in_each() -> None:
    assert plan(["s1", "s2"], ["a", "b"]) == [
        Attempt("s1", "a"),
        Attempt("s1", "b"),
        Attempt("s2", "a"),
        Attempt("s2", "b"),
    ]


def test_the_jit_config_is_exported_right_after_the_shebang() -> None:
    text = user_data("#!/bin/bash\necho hi\n", "abc'def")
    assert text.splitlines()[:3] == [
        "#!/bin/bash",
        "export ACTIONS_RUNNER_INPUT_JITCONFIG='abc'\"'\"'def'",
        "echo hi",
    ]
    assert user_data("", "x").startswith("#!/bin/sh\nexport ACTIONS_RUNNER_INPUT_JITCONFIG=x\n")


def test_launch_templates_by_id_or_name_with_optional_version() -> None:
    assert launch_template("lt-0abc:3") == {"LaunchTemplateId": "lt-0abc", "Version": "3"}
    assert launch_template("ci") == {"LaunchTemplateName": "ci", "Version": "$Default"}


def _request(name: str = "r-1", request_id: str = "req-1") -> CreateRequest:
    return CreateRequest(
        runner_name=name,
        request_id=request_id,
        scale_set="s",
        labels={"rungar.sh/managed": "true"},
        runner=RunnerBlock(),
        jit_config="JIT",
    )


def test_client_tokens_are_stable_per_attempt_and_short_enough() -> None:
    a = Attempt("subnet-1", "m7i.large")
    token = client_token(_request(), a)
    assert token == client_token(_request(), a) and len(token) <= 64
    assert token != client_token(_request(request_id="req-2"), a)
    assert token != client_token(_request(), Attempt("subnet-2", "m7i.large"))


def test_run_parameters_carry_tags_spot_disk_and_network() -> None:
    settings = AwsSettings.parse(
        {
            "region": "eu-west-1",
            "subnets": ["subnet-1"],
            "installation": "gh-1",
            "security_groups": ["sg-1"],
            "public_ip": False,
            "instance_profile": "runner",
        }
    )
    runner, problems = AwsRunner.parse(
        RunnerBlock.from_mapping(
            {
                "instance_type": "m7i.large",
                "image": "ami-1",
                "spot": True,
                "disk_size": "40GiB",
                "disk_iops": 4000,
                "tags": {"team": "ci"},
            }
        )
    )
    assert runner is not None, problems
    p = run_params(
        settings,
        runner,
        _request(),
        {"rungar.sh/managed": "true"},
        Attempt("subnet-1", "m7i.large"),
        "/dev/xvda",
    )
    tags = {t["Key"]: t["Value"] for t in p["TagSpecifications"][0]["Tags"]}
    assert tags == {"Name": "r-1", "rungar.sh/managed": "true", "team": "ci"}
    assert p["InstanceMarketOptions"]["MarketType"] == "spot"
    assert p["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 40
    assert p["BlockDeviceMappings"][0]["Ebs"]["Iops"] == 4000
    assert p["NetworkInterfaces"][0] == {
        "DeviceIndex": 0,
        "SubnetId": "subnet-1",
        "AssociatePublicIpAddress": False,
        "Groups": ["sg-1"],
    }
    assert p["IamInstanceProfile"] == {"Name": "runner"}
    assert p["InstanceType"] == "m7i.large" and p["MinCount"] == p["MaxCount"] == 1


def test_list_filters_are_tag_filters_on_live_instances() -> None:
    filters = tag_filters({"rungar.sh/installation": "gh-1"}, "r-1")
    assert filters[0] == {"Name": "tag:rungar.sh/installation", "Values": ["gh-1"]}
    assert filters[1] == {"Name": "tag:Name", "Values": ["r-1"]}
    assert "terminated" not in filters[2]["Values"]


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ({}, "runner.instance_type: required unless launch_template is set"),
        ({"instance_type": "t3.micro"}, "runner.image: required unless launch_template is set"),
        (
            {"instance_type": "t3.micro", "image": "a", "tags": {"Name": "x"}},
            "runner.tags.Name: set by Rungar or AWS, cannot be given",
        ),
        (
            {"instance_type": "t3.micro", "image": "a", "user_data": "echo"},
            "runner.user_data: must be a script starting with #!",
        ),
        (
            {"instance_type": "t3.micro", "image": "a", "disk_type": "io2"},
            "runner.disk_type: must be gp3 or gp2",
        ),
        (
            {"instance_type": "t3.micro", "image": "a", "disk_iops": 90000},
            "runner.disk_iops: must be 3000–80000 and at most 500 per GiB",
        ),
    ],
)
def test_runner_blocks_are_checked_offline(block: dict[str, object], problem: str) -> None:
    _, problems = AwsRunner.parse(RunnerBlock.from_mapping(block))
    assert problem in problems


def test_settings_report_every_problem() -> None:
    with pytest.raises(ValueError) as err:
        AwsSettings.parse({"subnets": [], "zzz": 1})
    for part in (
        "zzz: unknown key",
        "region: required",
        "installation: required",
        "subnets: at least one subnet is required",
    ):
        assert part in str(err.value)
