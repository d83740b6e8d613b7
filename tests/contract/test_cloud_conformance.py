"""The conformance kit against the gcp and aws providers, served over real gRPC on a unix socket.

gcp runs on google-cloud-compute's real client against the local GCE fake, aws on boto3
against moto's server. Both backends are given a small capacity (the fake stocks out; the
EC2 hooks answer ``InsufficientInstanceCapacity``) so the kit's FULL and concurrency checks
run too. The kit's checks are run one by one with a :class:`Run` whose installation is the
provider's: the providers refuse runners labelled for another installation, which
``check_provider``'s random installation would be.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from rungar_aws.provider import open_aws_provider
from rungar_aws.settings import AwsSettings
from rungar_gcp.provider import open_gcp_provider
from rungar_gcp.settings import GcpSettings

from rungar.model.runner_block import RunnerBlock
from rungar.rpc.client import GrpcProvider
from rungar.rpc.server import ProviderServer, serve
from rungar.testing.clock import JumpingClock
from rungar.testing.conformance import CHECKS, Run, check_every_refusal_has_a_human_message
from rungar.testing.gce_fake import GceFake
from tests.integration.test_aws_provider import (  # the moto fixtures and EC2 hooks
    REGION,
    Ec2Faults,
    aws_env,
    image,
    moto_endpoint,
)

__all__ = ["aws_env", "image", "moto_endpoint"]  # fixtures used by name
INSTALL = "gh-conformance1"
CAPACITY = 3


async def run_kit(address: str, run: Run) -> list[str]:
    """Every check of the kit, each on a fresh gRPC connection; the names that passed."""
    passed = []
    for name, check in CHECKS.items():
        client = GrpcProvider("cloud", address, timeout=30)
        try:
            await check(client, run)
        finally:
            await client.close()
        passed.append(name)
    check_every_refusal_has_a_human_message(run)
    return passed


@pytest.fixture
def gce() -> Iterator[GceFake]:
    zones = {"us-central1-a": {"e2-small"}, "us-central1-b": {"e2-small"}}
    with GceFake(offered=zones, capacity=CAPACITY) as fake:
        yield fake


@pytest.fixture
async def gcp_server(gce: GceFake, tmp_path: Path) -> AsyncIterator[ProviderServer]:
    settings = GcpSettings.parse(
        {
            "project": gce.project,
            "zones": ["us-central1-a", "us-central1-b"],
            "installation": INSTALL,
            "endpoint": gce.endpoint,
            "anonymous": True,
        }
    )
    provider = open_gcp_provider(settings, JumpingClock())
    server = await serve(provider, f"unix://{tmp_path}/gcp.sock")
    yield server
    await server.stop(None)
    provider.close()


async def test_the_gcp_provider_conforms_over_grpc(gcp_server: ProviderServer) -> None:
    image = "projects/debian-cloud/global/images/family/debian-12"
    run = Run(
        capacity_runner=RunnerBlock(image=image, extra={"machine_type": "e2-small"}),
        impossible_runner=RunnerBlock(image=image, extra={"machine_type": "a2-megagpu-16g"}),
        installation=INSTALL,
        max_fill=CAPACITY + 2,
    )
    passed = await run_kit(gcp_server.address, run)
    assert "concurrent_creates" in passed and "full_refusal" in passed


@pytest.fixture
async def aws_server(
    aws_env: str, image: str, tmp_path: Path
) -> AsyncIterator[tuple[ProviderServer, str]]:
    import boto3

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=aws_env)
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.0.0/24")["Subnet"]["SubnetId"]
    settings = AwsSettings.parse(
        {"region": REGION, "subnets": [subnet], "installation": INSTALL, "endpoint_url": aws_env}
    )
    provider = open_aws_provider(settings, JumpingClock())
    # why the ignore[attr-defined] below: reaches into the AWS provider's client
    Ec2Faults(capacity=CAPACITY).install(provider._api.client)  # type: ignore[attr-defined]
    server = await serve(provider, f"unix://{tmp_path}/aws.sock")
    yield server, image
    await server.stop(None)
    provider.close()


async def test_the_aws_provider_conforms_over_grpc(
    aws_server: tuple[ProviderServer, str],
) -> None:
    server, ami = aws_server
    run = Run(
        capacity_runner=RunnerBlock(image=ami, extra={"instance_type": "t3.small"}),
        impossible_runner=RunnerBlock(image="ami-00000000000000000", extra={"instance_type": "x"}),
        installation=INSTALL,
        max_fill=CAPACITY + 2,
    )
    passed = await run_kit(server.address, run)
    assert "concurrent_creates" in passed and "full_refusal" in passed


def _created(answer: object) -> str:
    from rungar.model.machine import Created

    assert isinstance(answer, Created), answer
    return answer.machine.name


async def test_the_gcp_provider_answers_the_serial_ports_last_lines(
    gcp_server: ProviderServer, gce: GceFake
) -> None:
    image = "projects/debian-cloud/global/images/family/debian-12"
    run = Run(
        capacity_runner=RunnerBlock(image=image, extra={"machine_type": "e2-small"}),
        impossible_runner=RunnerBlock(image=image),
        installation=INSTALL,
    )
    request = run.request()
    client = GrpcProvider("gcp", gcp_server.address, timeout=30)
    try:
        name = _created(await client.create(request))
        (instance,) = [n for n in gce.names() if n.startswith(name[:20])]
        gce.serial[instance] = "boot\nstarting runner\nError: runner config invalid\n"
        assert await client.last_output(name, 2) == [
            "starting runner",
            "Error: runner config invalid",
        ]
        await client.delete(name)
        assert await client.last_output(name, 2) == [], "a deleted machine has no output"
    finally:
        await client.close()


async def test_the_aws_provider_answers_the_console_outputs_last_lines(
    aws_server: tuple[ProviderServer, str],
) -> None:
    server, ami = aws_server
    run = Run(
        capacity_runner=RunnerBlock(image=ami, extra={"instance_type": "t3.small"}),
        impossible_runner=RunnerBlock(image=ami),
        installation=INSTALL,
    )
    request = run.request()
    client = GrpcProvider("aws", server.address, timeout=30)
    try:
        name = _created(await client.create(request))
        lines = await client.last_output(name, 3)
        # moto answers a fixed console text for every instance, as EC2 answers the real one.
        assert 0 < len(lines) <= 3 and all(isinstance(line, str) for line in lines)
    finally:
        await client.delete(request.runner_name)
        await client.close()
