"""What a cloud image does at boot, for the demo's clouds: run the runner its machine was given.

moto and the local GCE fake keep instances as records and run nothing. A booter watches them
over the cloud's own API and, for each new running instance of ours, starts ``rungar
fake-runner`` with the JIT config the provider handed over: in the user data on AWS (an
``export`` line after the shebang), in the ``rungar-jit-config`` metadata item on GCP. An
instance that is terminated or gone has its runner stopped. Each booter remembers where every
machine it booted ran (subnet and lifecycle on AWS, zone on GCP) so the examples can show it.
"""

from __future__ import annotations

import abc
import base64
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

JIT = re.compile(r"^export ACTIONS_RUNNER_INPUT_JITCONFIG=['\"]?([A-Za-z0-9+/=]+)['\"]?$", re.M)
GCE_JIT_KEY = "rungar-jit-config"  # rungar_gcp.labels.JIT_METADATA_KEY: the demo is no plugin's
GCE_MANAGED = '(labels.rungar_sh_managed = "true")'  # rungar_gcp.labels.labels_filter's encoding


def _ec2(endpoint: str) -> Any:
    import boto3

    return boto3.client("ec2", region_name="us-east-1", endpoint_url=endpoint)


def prepare_region(endpoint: str) -> tuple[list[str], str]:
    """A VPC with two subnets, and an image to launch: what an account would already have."""
    ec2 = _ec2(endpoint)
    vpc = ec2.create_vpc(CidrBlock="10.77.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.77.{i}.0/24")["Subnet"]["SubnetId"]
        for i in (1, 2)
    ]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    return subnets, str(image)


@dataclass(frozen=True, slots=True)
class Booted:
    """A machine a booter started a runner on, and where the cloud put it."""

    machine: str  # instance id on AWS, instance name on GCP
    place: str  # subnet on AWS, zone on GCP
    spot: bool


@dataclass(frozen=True, slots=True)
class Seen:
    """One instance of ours as a poll found it."""

    machine: str
    alive: bool
    place: str = ""
    spot: bool = False


class _Booter(abc.ABC):
    """Polls a cloud in a thread; starts a fake runner per new live machine, stops it when gone."""

    name = "cloudboot"

    def __init__(self, log_dir: Path, interval: float = 0.5) -> None:
        self.log_dir = log_dir
        self.interval = interval
        self.booted: dict[str, subprocess.Popen[bytes]] = {}
        self.machines: dict[str, Booted] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for process in self.booted.values():
            if process.poll() is None:
                process.terminate()

    @abc.abstractmethod
    def _poll(self) -> Iterator[Seen]:
        """The cloud's machines of ours, as they are now."""

    @abc.abstractmethod
    def _jit_config(self, seen: Seen) -> str | None:
        """The JIT config a machine was given at launch, if it has one."""

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                found = list(self._poll())
            except Exception:  # noqa: S112 - the cloud busy or restarting: look again next tick
                continue
            live = {seen.machine for seen in found if seen.alive}
            for seen in found:
                if seen.alive and seen.machine not in self.booted:
                    self._boot(seen)
            for machine, process in self.booted.items():
                if machine not in live and process.poll() is None:
                    process.terminate()

    def _boot(self, seen: Seen) -> None:
        try:
            jit = self._jit_config(seen)
        except Exception:  # not readable this tick: try again on the next
            return
        if jit is None:
            return
        log = (self.log_dir / f"{seen.machine}.log").open("wb")
        self.machines[seen.machine] = Booted(seen.machine, seen.place, seen.spot)
        self.booted[seen.machine] = subprocess.Popen(
            [sys.executable, "-m", "rungar.cli.fake_runner"],
            # As a real runner takes it: in the environment, never on the command line.
            env={**os.environ, "ACTIONS_RUNNER_INPUT_JITCONFIG": jit},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


class CloudBooter(_Booter):
    """The AWS booter: instances tagged ``rungar.sh/managed`` on moto's server."""

    name = "cloudboot-aws"

    def __init__(self, endpoint: str, log_dir: Path, interval: float = 0.5) -> None:
        super().__init__(log_dir, interval)
        self.endpoint = endpoint
        self._ec2: Any = None

    def _poll(self) -> Iterator[Seen]:
        if self._ec2 is None:
            self._ec2 = _ec2(self.endpoint)
        reservations = self._ec2.describe_instances(
            Filters=[{"Name": "tag:rungar.sh/managed", "Values": ["true"]}]
        )["Reservations"]
        for reservation in reservations:
            for instance in reservation["Instances"]:
                state = instance["State"]["Name"]
                yield Seen(
                    instance["InstanceId"],
                    alive=state not in ("terminated", "shutting-down", "stopped"),
                    place=str(instance.get("SubnetId", "")),
                    spot=instance.get("InstanceLifecycle") == "spot",
                )

    def _jit_config(self, seen: Seen) -> str | None:
        data = self._ec2.describe_instance_attribute(InstanceId=seen.machine, Attribute="userData")
        encoded = data.get("UserData", {}).get("Value", "")
        script = base64.b64decode(encoded).decode(errors="replace") if encoded else ""
        match = JIT.search(script)
        return match.group(1) if match else None


class GceBooter(_Booter):
    """The GCP booter: instances of one project on the local GCE fake, read over its REST API."""

    name = "cloudboot-gcp"

    def __init__(self, endpoint: str, project: str, log_dir: Path, interval: float = 0.5) -> None:
        super().__init__(log_dir, interval)
        self._url = f"{endpoint}/compute/v1/projects/{project}/aggregated/instances"
        self._metadata: dict[str, dict[str, str]] = {}

    def _poll(self) -> Iterator[Seen]:
        answer = httpx.get(self._url, params={"filter": GCE_MANAGED}, timeout=5)
        answer.raise_for_status()
        for scope in answer.json().get("items", {}).values():
            for instance in scope.get("instances", []):
                name = str(instance["name"])
                items = instance.get("metadata", {}).get("items", [])
                self._metadata[name] = {str(i["key"]): str(i.get("value", "")) for i in items}
                scheduling = instance.get("scheduling", {})
                yield Seen(
                    name,
                    alive=instance.get("status") in ("PROVISIONING", "STAGING", "RUNNING"),
                    place=str(instance.get("zone", "")).rsplit("/", 1)[-1],
                    spot=scheduling.get("provisioningModel") == "SPOT",
                )

    def _jit_config(self, seen: Seen) -> str | None:
        return self._metadata.get(seen.machine, {}).get(GCE_JIT_KEY) or None
