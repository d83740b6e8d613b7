"""The gcp provider's settings and runner block, parsed and checked offline (docs/providers/gcp.md).

Provider keys: ``project`` (required), ``zones`` (at least one, all in one region),
``installation`` (required: the only machines this provider lists or deletes carry it),
``network``, ``subnetwork``, ``external_ip`` (true), ``service_account``, ``scopes``,
``credentials_file`` (unset = application default credentials), ``impersonate_service_account``
(the API is called as this service account, with the credentials above as the source),
``timeout`` (30s),
``endpoint`` (an API endpoint other than compute.googleapis.com, e.g. the local fake) and
``anonymous`` (no credentials; only for a local fake).

Runner keys: ``machine_type`` (a string or a list, tried in each zone before the next zone),
``image`` (required unless ``instance_template``), ``disk_size`` (50GiB, whole GiB, at least
10GiB), ``disk_type``, ``instance_template``, ``spot``, ``network_tags``, ``labels``,
``metadata``, ``startup_script``.
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
from rungar_gcp.labels import (
    JIT_METADATA_KEY,
    LABELS_METADATA_KEY,
    NAME_METADATA_KEY,
    REQUEST_METADATA_KEY,
    encode_key,
    encode_value,
)

MIN_DISK = 10 * GIB
DEFAULT_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
DISK_TYPES = ("pd-balanced", "pd-ssd", "pd-standard", "hyperdisk-balanced")
RESERVED_METADATA = (
    LABELS_METADATA_KEY,
    JIT_METADATA_KEY,
    REQUEST_METADATA_KEY,
    NAME_METADATA_KEY,
)
SETTINGS_KEYS = frozenset(
    {
        "name",
        "project",
        "zones",
        "installation",
        "network",
        "subnetwork",
        "external_ip",
        "service_account",
        "scopes",
        "credentials_file",
        "impersonate_service_account",
        "timeout",
        "endpoint",
        "anonymous",
    }
)
RUNNER_KEYS = frozenset(
    {
        "runner_version",
        "machine_type",
        "disk_size",
        "disk_type",
        "instance_template",
        "spot",
        "network_tags",
        "labels",
        "metadata",
        "startup_script",
    }
)


def region_of(zone: str) -> str:
    """``us-central1-a`` → ``us-central1``."""
    return zone.rsplit("-", 1)[0]


@dataclass(frozen=True, slots=True)
class GcpSettings:
    project: str
    zones: tuple[str, ...]
    installation: str
    name: str = "gcp"
    network: str = ""
    subnetwork: str = ""
    external_ip: bool = True
    service_account: str = ""
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    credentials_file: str = ""
    impersonate_service_account: str = ""
    timeout: float = 30.0
    endpoint: str = ""
    anonymous: bool = False

    @property
    def region(self) -> str:
        return region_of(self.zones[0])

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> GcpSettings:
        """Settings from a mapping; raises ``SettingsProblems`` listing every problem."""
        problems = unknown_keys(raw, SETTINGS_KEYS)
        require_strings(raw, ("project", "installation"), problems)
        zones = string_list(raw.get("zones"), "zones", problems)
        if not zones:
            problems.append("zones: at least one zone is required")
        elif len({region_of(z) for z in zones}) > 1:
            problems.append(f"zones: {', '.join(zones)} are not all in one region")
        scopes = string_list(raw.get("scopes"), "scopes", problems) or DEFAULT_SCOPES
        seconds = timeout(raw, problems)
        external_ip = flag(raw, "external_ip", True, problems)
        anonymous = flag(raw, "anonymous", False, problems)
        impersonate = raw.get("impersonate_service_account") or ""
        if not isinstance(impersonate, str):
            problems.append("impersonate_service_account: must be a service account's email")
            impersonate = ""
        elif impersonate and anonymous:
            problems.append("impersonate_service_account: cannot be used with anonymous")
        if problems:
            raise SettingsProblems(problems)
        return cls(
            project=str(raw["project"]),
            zones=zones,
            installation=str(raw["installation"]),
            name=str(raw.get("name", "gcp")),
            network=str(raw.get("network", "")),
            subnetwork=str(raw.get("subnetwork", "")),
            external_ip=external_ip,
            service_account=str(raw.get("service_account", "")),
            scopes=scopes,
            credentials_file=str(raw.get("credentials_file", "")),
            impersonate_service_account=impersonate,
            timeout=seconds,
            endpoint=str(raw.get("endpoint", "")),
            anonymous=anonymous,
        )


@dataclass(frozen=True, slots=True)
class GcpRunner:
    """A runner block as the gcp provider reads it."""

    machine_types: tuple[str, ...]
    image: str = ""
    disk_gib: int = DEFAULT_DISK // GIB
    disk_type: str = "pd-balanced"
    instance_template: str = ""
    spot: bool = False
    network_tags: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, str] = field(default_factory=dict)
    startup_script: str = ""

    @classmethod
    def parse(cls, block: RunnerBlock) -> tuple[GcpRunner | None, list[str]]:
        """The runner, or ``None`` and every problem found."""
        extra = block.extra
        problems = unknown_keys(extra, RUNNER_KEYS, "runner.")
        types, template = types_and_template(
            block, "machine_type", "instance_template", "a string", problems
        )
        disk = disk_bytes(block, problems)
        if disk % GIB:
            problems.append("runner.disk_size: must be a whole number of GiB")
        elif disk < MIN_DISK:
            problems.append("runner.disk_size: must be at least 10GiB")
        disk_type = extra.get("disk_type", "pd-balanced")
        if disk_type not in DISK_TYPES:
            problems.append(f"runner.disk_type: must be one of {', '.join(DISK_TYPES)}")
        spot = flag(extra, "spot", False, problems, "runner.")
        runner_version(extra, problems)
        tags = string_list(extra.get("network_tags"), "runner.network_tags", problems)
        labels = string_map(extra.get("labels"), "runner.labels", problems)
        for k, v in labels.items():
            if encode_key(k) != k or encode_value(v) != v:
                problems.append(f"runner.labels.{k}: not a valid GCP label ([a-z0-9_-], ≤63)")
        metadata = string_map(extra.get("metadata"), "runner.metadata", problems)
        for k in metadata:
            if k in RESERVED_METADATA or k == "startup-script":
                problems.append(f"runner.metadata.{k}: set by Rungar, cannot be given")
        script = extra.get("startup_script") or ""
        if not isinstance(script, str):
            problems.append("runner.startup_script: must be a string")
            script = ""
        if problems:
            return None, problems
        runner = cls(
            machine_types=types,
            image=block.image,
            disk_gib=disk // GIB,
            disk_type=str(disk_type),
            instance_template=template,
            spot=spot,
            network_tags=tags,
            labels=labels,
            metadata=metadata,
            startup_script=script,
        )
        return runner, []
