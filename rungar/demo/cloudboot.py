"""What a cloud image does at boot, for the demo's AWS on moto: run the runner in the user data.

moto keeps instances as records and runs nothing. The booter watches them on moto's server and,
for each new running instance of ours, starts ``rungar fake-runner`` with the JIT config that
the AWS provider exported in its user data; a terminated instance has its runner stopped.
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

JIT = re.compile(r"^export ACTIONS_RUNNER_INPUT_JITCONFIG=['\"]?([A-Za-z0-9+/=]+)['\"]?$", re.M)


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


class CloudBooter:
    def __init__(self, endpoint: str, log_dir: Path, interval: float = 0.5) -> None:
        self.endpoint = endpoint
        self.log_dir = log_dir
        self.interval = interval
        self.booted: dict[str, subprocess.Popen[bytes]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cloudboot", daemon=True)

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for process in self.booted.values():
            if process.poll() is None:
                process.terminate()

    def _run(self) -> None:
        ec2 = _ec2(self.endpoint)
        while not self._stop.wait(self.interval):
            try:
                reservations = ec2.describe_instances(
                    Filters=[{"Name": "tag:rungar.sh/managed", "Values": ["true"]}]
                )["Reservations"]
            except Exception:  # noqa: S112 - moto busy or restarting: look again next tick
                continue
            for reservation in reservations:
                for instance in reservation["Instances"]:
                    self._boot_or_stop(ec2, instance)

    def _boot_or_stop(self, ec2: Any, instance: dict[str, Any]) -> None:
        instance_id = instance["InstanceId"]
        state = instance["State"]["Name"]
        if state in ("terminated", "shutting-down", "stopped"):
            process = self.booted.get(instance_id)
            if process is not None and process.poll() is None:
                process.terminate()
            return
        if instance_id in self.booted:
            return
        data = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
        encoded = data.get("UserData", {}).get("Value", "")
        script = base64.b64decode(encoded).decode(errors="replace") if encoded else ""
        match = JIT.search(script)
        if match is None:
            return
        log = (self.log_dir / f"{instance_id}.log").open("wb")
        self.booted[instance_id] = subprocess.Popen(  # noqa: S603 - our interpreter, our args
            [sys.executable, "-m", "rungar.cli.fake_runner", "--jitconfig", match.group(1)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
