"""What one RunInstances call asks for, and what to answer when no attempt worked (pure).

docs/providers/aws.md, "What a create does": subnets are tried in their written order, and in each
every instance type of the list; a type refused for quota is skipped in the other subnets; a subnet
whose AZ does not offer a type (``Unsupported``) is skipped, and only when no subnet offers it is
the runner INVALID. The JIT config is exported in the user data right after the shebang. The
``ClientToken`` is derived from the runner's request id, the subnet and the type, so a resend of one
attempt is deduplicated by EC2 and never launches a second instance.
"""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rungar.cloudkit.search import PlaceAnswer, details, stop_refusal, unoffered_refusal
from rungar.model.machine import CreateRequest, Refusal, RefusalKind
from rungar_aws.settings import AwsRunner, AwsSettings

TOKEN_NAMESPACE = uuid.UUID("0f6d2b1e-8c4a-4f7e-9b3d-2a5c7e1f9d40")
DEFAULT_USER_DATA = "#!/bin/sh\nexport RUNNER_ALLOW_RUNASROOT=1\nexec /home/runner/run.sh\n"
JIT_VARIABLE = "ACTIONS_RUNNER_INPUT_JITCONFIG"
LIVE_STATES = ("pending", "running", "stopping", "stopped")


@dataclass(frozen=True, slots=True)
class Attempt:
    subnet: str
    instance_type: str  # "" = the launch template's own type

    def __str__(self) -> str:
        return f"{self.subnet}/{self.instance_type or 'template'}"


@dataclass(frozen=True, slots=True)
class Tried:
    attempt: Attempt
    outcome: PlaceAnswer
    code: str
    detail: str
    resource: str = ""


def plan(subnets: Sequence[str], instance_types: Sequence[str]) -> list[Attempt]:
    types = list(instance_types) or [""]
    return [Attempt(s, t) for s in subnets for t in types]


def client_token(request: CreateRequest, attempt: Attempt) -> str:
    """≤ 64 ASCII characters, one per (runner request, subnet, type)."""
    key = f"{request.runner_name}/{request.request_id}/{attempt.subnet}/{attempt.instance_type}"
    return str(uuid.uuid5(TOKEN_NAMESPACE, key))


def user_data(script: str, jit_config: str) -> str:
    """The runner's script with the JIT config exported right after its shebang line."""
    shebang, _, rest = (script or DEFAULT_USER_DATA).partition("\n")
    return f"{shebang}\nexport {JIT_VARIABLE}={shlex.quote(jit_config)}\n{rest}"


def launch_template(spec: str) -> dict[str, str]:
    """``lt-0abc[:3]`` or ``name[:version]`` as RunInstances' LaunchTemplate."""
    ident, _, version = spec.partition(":")
    key = "LaunchTemplateId" if ident.startswith("lt-") else "LaunchTemplateName"
    return {key: ident, "Version": version or "$Default"}


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def run_params(
    settings: AwsSettings,
    runner: AwsRunner,
    request: CreateRequest,
    labels: Mapping[str, str],
    attempt: Attempt,
    root_device: str,
) -> dict[str, Any]:
    """RunInstances parameters for one attempt (``root_device`` "" = keep the AMI's disk)."""
    tags = {**runner.tags, **labels, "Name": request.runner_name}
    params: dict[str, Any] = {
        "MinCount": 1,
        "MaxCount": 1,
        "ClientToken": client_token(request, attempt),
        "UserData": user_data(runner.user_data, request.jit_config),
        "InstanceInitiatedShutdownBehavior": "terminate",
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tag_list(tags)},
            {"ResourceType": "volume", "Tags": tag_list(tags)},
        ],
    }
    if attempt.instance_type:
        params["InstanceType"] = attempt.instance_type
    if runner.image:
        params["ImageId"] = runner.image
    if runner.launch_template:
        params["LaunchTemplate"] = launch_template(runner.launch_template)
    if root_device:
        ebs: dict[str, Any] = {
            "VolumeSize": runner.disk_gib,
            "VolumeType": runner.disk_type,
            "DeleteOnTermination": True,
        }
        if runner.disk_iops:
            ebs["Iops"] = runner.disk_iops
        if runner.disk_throughput:
            ebs["Throughput"] = runner.disk_throughput
        params["BlockDeviceMappings"] = [{"DeviceName": root_device, "Ebs": ebs}]
    if settings.public_ip is None:
        params["SubnetId"] = attempt.subnet
        if settings.security_groups:
            params["SecurityGroupIds"] = list(settings.security_groups)
    else:
        nic: dict[str, Any] = {
            "DeviceIndex": 0,
            "SubnetId": attempt.subnet,
            "AssociatePublicIpAddress": settings.public_ip,
        }
        if settings.security_groups:
            nic["Groups"] = list(settings.security_groups)
        params["NetworkInterfaces"] = [nic]
    if settings.instance_profile:
        key = "Arn" if settings.instance_profile.startswith("arn:") else "Name"
        params["IamInstanceProfile"] = {key: settings.instance_profile}
    if runner.spot:
        params["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {
                "SpotInstanceType": "one-time",
                "InstanceInterruptionBehavior": "terminate",
            },
        }
    return params


def tag_filters(selector: Mapping[str, str], name: str = "") -> list[dict[str, Any]]:
    """DescribeInstances filters for live instances carrying every tag of ``selector``."""
    filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(selector.items())]
    if name:
        filters.append({"Name": "tag:Name", "Values": [name]})
    filters.append({"Name": "instance-state-name", "Values": list(LIVE_STATES)})
    return filters


def settle(tried: Sequence[Tried], region: str) -> Refusal:
    """The refusal for a search that launched nothing."""
    made = [t for t in tried if t.outcome is not PlaceAnswer.UNOFFERED]
    if not made:
        types = (t.attempt.instance_type for t in tried)
        return unoffered_refusal("subnet", region, "instance type", types)
    stopped = stop_refusal(made, "instance")
    if stopped is not None:
        return stopped
    resources = sorted({t.resource for t in made})
    return Refusal(
        RefusalKind.FULL, f"every subnet is full: {details(made)}", " and ".join(resources)
    )
