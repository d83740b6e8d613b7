"""The two clouds of the end-to-end tests, for :class:`tests.e2e.daemon_world.DaemonWorld`:
GCP on the local GCE fake, AWS on moto's server, each with its real plugin started by the
daemon (``command`` in scale_sets.yaml) and a booter that runs each machine's runner.

Neither fake runs anything on the machines it makes. As for the demo's clouds, a booter of
:mod:`rungar.demo.cloudboot` does what a cloud image does at boot: it reads each new instance's
JIT config over the cloud's own API (the ``rungar-jit-config`` metadata item on GCP, the user
data on AWS) and starts ``rungar fake-runner`` with it; when the instance is gone or
terminated, it stops that runner. :meth:`Cloud.lose` takes a runner's machine away behind
Rungar's back, through the cloud's API, as an operator or a Spot reclaim would.

On AWS the booter and the loss call boto3 in this process and the plugin inherits its
environment: both need :data:`AWS_CREDENTIALS` in the environment first.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Protocol

import httpx
import yaml

from rungar.demo.cloudboot import CloudBooter, GceBooter, prepare_region
from rungar.testing.gce_fake import GceFake

BIN = Path(sys.executable).parent
AWS_REGION = "us-east-1"  # where prepare_region makes its subnets, and the booter looks
# Made-up keys moto accepts; no file of the machine's own is read.
AWS_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": AWS_REGION,
    "AWS_CONFIG_FILE": "/nonexistent",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
}


class Cloud(Protocol):
    """A cloud fake with its booter: the provider entry to run on it, and a way to lose a
    runner's machine."""

    def start(self) -> None: ...

    def provider(self, name: str) -> dict[str, Any]: ...

    def machines(self) -> list[str]:
        """The runners whose machines are alive there now."""
        ...

    def lose(self, runner: str) -> None: ...

    def stop(self) -> None: ...


class GcpCloud:
    """One project of one zone on the GCE fake."""

    project = "rungar-e2e"
    zone = "us-central1-a"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fake = GceFake(project=self.project)
        self.booter: GceBooter | None = None

    def start(self) -> None:
        self.fake.start()
        self.booter = GceBooter(self.fake.endpoint, self.project, self.root / "gcp-machines")
        self.booter.start()

    def provider(self, name: str) -> dict[str, Any]:
        own = self.root / f"{name}.yaml"  # the plugin's own file: the endpoint alone
        own.write_text(yaml.safe_dump({"endpoint": self.fake.endpoint, "anonymous": True}))
        return {
            "name": name,
            "type": "gcp",
            "command": [str(BIN / "rungar-provider-gcp"), "--config", str(own)],
            "project": self.project,
            "zones": [self.zone],
            "runner": {
                "machine_type": "e2-standard-2",
                "image": "projects/debian-cloud/global/images/family/debian-12",
                "disk_size": "20GiB",
            },
        }

    def machines(self) -> list[str]:
        return self.fake.names()

    def lose(self, runner: str) -> None:
        """``instances.delete`` over the REST API, as ``gcloud compute instances delete`` sends."""
        url = (
            f"{self.fake.endpoint}/compute/v1/projects/{self.project}"
            f"/zones/{self.zone}/instances/{runner}"
        )
        httpx.delete(url, timeout=30).raise_for_status()

    def stop(self) -> None:
        if self.booter is not None:
            self.booter.stop()
        self.fake.stop()


class AwsCloud:
    """A VPC with two subnets in one region of moto's server."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.server: Any = None
        self.endpoint = ""
        self.subnets: list[str] = []
        self.image = ""
        self.booter: CloudBooter | None = None

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.subnets, self.image = prepare_region(self.endpoint)
        self.booter = CloudBooter(self.endpoint, self.root / "aws-machines")
        self.booter.start()

    def provider(self, name: str) -> dict[str, Any]:
        own = self.root / f"{name}.yaml"  # the plugin's own file: the endpoint alone
        own.write_text(yaml.safe_dump({"endpoint_url": self.endpoint}))
        return {
            "name": name,
            "type": "aws",
            "command": [str(BIN / "rungar-provider-aws"), "--config", str(own)],
            "region": AWS_REGION,
            "subnets": self.subnets,
            "runner": {"instance_type": "t3.small", "image": self.image},
        }

    def _ec2(self) -> Any:
        import boto3

        return boto3.client("ec2", region_name=AWS_REGION, endpoint_url=self.endpoint)

    def _instances(self, runner: str = "") -> list[dict[str, Any]]:
        filters = [
            {"Name": "tag:rungar.sh/managed", "Values": ["true"]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
        if runner:
            filters.append({"Name": "tag:Name", "Values": [runner]})
        reservations = self._ec2().describe_instances(Filters=filters)["Reservations"]
        return [i for r in reservations for i in r["Instances"]]

    def machines(self) -> list[str]:
        return sorted(
            tag["Value"]
            for instance in self._instances()
            for tag in instance.get("Tags", [])
            if tag["Key"] == "Name"
        )

    def lose(self, runner: str) -> None:
        """TerminateInstances on the runner's instance, as the console or a Spot reclaim does."""
        ids = [i["InstanceId"] for i in self._instances(runner)]
        if not ids:
            raise LookupError(f"no live instance of runner {runner}")
        self._ec2().terminate_instances(InstanceIds=ids)

    def stop(self) -> None:
        if self.booter is not None:
            self.booter.stop()
        if self.server is not None:
            self.server.stop()
