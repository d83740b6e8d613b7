"""The aws provider's settings and runner block, parsed and checked offline (docs/providers/aws.md).

Provider keys: ``region`` (required), ``subnets`` (at least one, tried in order),
``installation`` (required: the only instances listed or terminated carry its tag),
``security_groups``, ``public_ip`` (unset = the subnet's default), ``instance_profile``,
``profile``, ``credentials_file``, ``timeout`` (30s), ``endpoint_url`` (another EC2 endpoint,
e.g. moto's server in tests).

Runner keys: ``instance_type`` (a string or a list), ``image`` (AMI; required unless
``launch_template``), ``disk_size`` (50GiB), ``disk_type`` (gp3|gp2), ``disk_iops``
(3000–80000, at most 500 per GiB), ``disk_throughput`` (125–2000, at most 0.25 per IOPS),
``launch_template`` (``id|name[:version]``), ``spot``, ``tags`` (no ``Name``, ``rungar.sh/…``
or ``aws:`` keys), ``user_data`` (must start with ``#!``, at most 10KiB).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rungar.cloudkit.settings import (
    DEFAULT_DISK,
    GIB,
    SettingsProblems,
    disk_bytes,
    flag,
    require_strings,
    runner_version,
    string_list,
    string_map,
    timeout,
    types_and_template,
    unknown_keys,
)
from rungar.model.runner_block import RunnerBlock

MAX_USER_DATA = 10 * 1024
SETTINGS_KEYS = frozenset(
    {
        "name",
        "region",
        "subnets",
        "installation",
        "security_groups",
        "public_ip",
        "instance_profile",
        "profile",
        "credentials_file",
        "timeout",
        "endpoint_url",
    }
)
RUNNER_KEYS = frozenset(
    {
        "runner_version",
        "instance_type",
        "disk_size",
        "disk_type",
        "disk_iops",
        "disk_throughput",
        "launch_template",
        "spot",
        "tags",
        "user_data",
    }
)


@dataclass(frozen=True, slots=True)
class AwsSettings:
    region: str
    subnets: tuple[str, ...]
    installation: str
    name: str = "aws"
    security_groups: tuple[str, ...] = ()
    public_ip: bool | None = None
    instance_profile: str = ""
    profile: str = ""
    credentials_file: str = ""
    timeout: float = 30.0
    endpoint_url: str = ""

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> AwsSettings:
        """Settings from a mapping; raises ``SettingsProblems`` listing every problem."""
        problems = unknown_keys(raw, SETTINGS_KEYS)
        require_strings(raw, ("region", "installation"), problems)
        subnets = string_list(raw.get("subnets"), "subnets", problems)
        if not subnets:
            problems.append("subnets: at least one subnet is required")
        groups = string_list(raw.get("security_groups"), "security_groups", problems)
        public_ip = raw.get("public_ip")  # unset keeps the subnet's default
        if public_ip is not None and not isinstance(public_ip, bool):
            problems.append("public_ip: must be true or false")
        seconds = timeout(raw, problems)
        if problems:
            raise SettingsProblems(problems)
        return cls(
            region=str(raw["region"]),
            subnets=subnets,
            installation=str(raw["installation"]),
            name=str(raw.get("name", "aws")),
            security_groups=groups,
            public_ip=public_ip,
            instance_profile=str(raw.get("instance_profile", "")),
            profile=str(raw.get("profile", "")),
            credentials_file=str(raw.get("credentials_file", "")),
            timeout=seconds,
            endpoint_url=str(raw.get("endpoint_url", "")),
        )


@dataclass(frozen=True, slots=True)
class AwsRunner:
    """A runner block as the aws provider reads it."""

    instance_types: tuple[str, ...]
    image: str = ""
    disk_gib: int = DEFAULT_DISK // GIB
    disk_type: str = "gp3"
    disk_iops: int = 0
    disk_throughput: int = 0
    launch_template: str = ""
    spot: bool = False
    tags: Mapping[str, str] = field(default_factory=dict)
    user_data: str = ""

    @classmethod
    def parse(cls, block: RunnerBlock) -> tuple[AwsRunner | None, list[str]]:
        """The runner, or ``None`` and every problem found."""
        extra = block.extra
        problems = unknown_keys(extra, RUNNER_KEYS, "runner.")
        types, template = types_and_template(
            block, "instance_type", "launch_template", "id|name[:version]", problems
        )
        disk_gib = max(1, -(-disk_bytes(block, problems) // GIB))  # EBS sizes are whole GiB, up
        disk_type = extra.get("disk_type", "gp3")
        if disk_type not in ("gp3", "gp2"):
            problems.append("runner.disk_type: must be gp3 or gp2")
        iops = _int(extra, "disk_iops", problems)
        if iops and not (3000 <= iops <= 80000 and iops <= 500 * disk_gib):
            problems.append("runner.disk_iops: must be 3000–80000 and at most 500 per GiB")
        throughput = _int(extra, "disk_throughput", problems)
        if throughput and not (125 <= throughput <= 2000 and throughput <= 0.25 * (iops or 3000)):
            problems.append("runner.disk_throughput: must be 125–2000 and at most 0.25 per IOPS")
        if (iops or throughput) and disk_type != "gp3":
            problems.append("runner.disk_iops, disk_throughput: only for gp3")
        spot = flag(extra, "spot", False, problems, "runner.")
        runner_version(extra, problems)
        tags = string_map(extra.get("tags") or None, "runner.tags", problems)
        for key in tags:
            if key == "Name" or key.startswith(("rungar.sh/", "aws:")):
                problems.append(f"runner.tags.{key}: set by Rungar or AWS, cannot be given")
        user_data = extra.get("user_data") or ""
        if not isinstance(user_data, str) or (user_data and not user_data.startswith("#!")):
            problems.append("runner.user_data: must be a script starting with #!")
            user_data = ""
        elif len(user_data.encode()) > MAX_USER_DATA:
            problems.append("runner.user_data: must be at most 10KiB")
        if problems:
            return None, problems
        return (
            cls(
                instance_types=types,
                image=block.image,
                disk_gib=disk_gib,
                disk_type=str(disk_type),
                disk_iops=iops,
                disk_throughput=throughput,
                launch_template=template,
                spot=spot,
                tags=tags,
                user_data=user_data,
            ),
            [],
        )


def _int(extra: Mapping[str, Any], key: str, problems: list[str]) -> int:
    value = extra.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.append(f"runner.{key}: must be a whole number")
        return 0
    return value
