"""The aws provider with boto3 against moto's server on loopback, refusals injected.

moto never refuses for capacity or quota and does not deduplicate ``ClientToken``,
so :class:`Ec2Faults` sits in the real client's event hooks: ``before-send``
answers a RunInstances with EC2's error XML (the real parser runs), and a small table of
answered tokens emulates EC2's documented ClientToken contract. A "lost" answer lets moto
launch the instance and then raises botocore's ``ReadTimeoutError`` to the caller.
"""

from __future__ import annotations

import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import botocore.exceptions as bexc
import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from moto.server import ThreadedMotoServer
from rungar_aws.provider import AwsProvider, open_aws_provider
from rungar_aws.settings import AwsSettings

from rungar.clock import SystemClock
from rungar.config.loader import parse_scale_sets
from rungar.daemon.providers import PluginProvider, make_provider
from rungar.errors import ProviderUnavailable
from rungar.model.labels import installation_selector
from rungar.model.machine import Created, CreateRequest, MachineState, Refusal, RefusalKind
from rungar.testing.clock import JumpingClock
from tests.cloud_helpers import INSTALL, closed_port, runner_request

REGION = "eu-west-1"


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def _answer(url: str, status: int, body: bytes) -> AWSResponse:
    return AWSResponse(url, status, HTTPHeaders(), _Raw(body))


def error_xml(code: str, message: str) -> bytes:
    return (
        f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error>"
        f"</Errors><RequestID>req</RequestID></Response>"
    ).encode()


@dataclass
class Fault:
    code: str
    status: int
    plane: str = "refuse"  # refuse | lost (launch, then time out) | down (answer, launch nothing)
    subnet: str | None = None
    instance_type: str | None = None
    times: int = 1


@dataclass
class Ec2Faults:
    """Refusals and EC2's ClientToken contract, installed on one boto3 client."""

    faults: list[Fault] = field(default_factory=list)
    sent: list[tuple[str, str, str]] = field(default_factory=list)  # (subnet, type, token)
    answered: dict[str, bytes] = field(default_factory=dict)
    losing: set[str] = field(default_factory=set)
    capacity: int | None = None  # instances the region holds before ICE; None = no limit
    used: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self, client: Any) -> None:
        client.meta.events.register("before-send.ec2.RunInstances", self._before_send)
        client.meta.events.register("after-call.ec2.RunInstances", self._after_call)
        client.meta.events.register("before-call.ec2.RunInstances", self._before_call)
        client.meta.events.register("after-call.ec2.TerminateInstances", self._after_terminate)

    def _after_terminate(self, http_response: Any, **_: Any) -> None:
        if http_response.status_code == 200 and self.capacity is not None:
            with self.lock:
                self.used = max(0, self.used - 1)

    def _take(self, plane: str, subnet: str, itype: str) -> Fault | None:
        for f in self.faults:
            if (
                f.times > 0
                and f.plane == plane
                and f.subnet in (None, subnet)
                and f.instance_type in (None, itype)
            ):
                f.times -= 1
                return f
        return None

    def _before_call(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        # ``params`` is botocore's serialised request: the form fields are under "body".
        body = params.get("body")
        context["client_token"] = body.get("ClientToken", "") if isinstance(body, dict) else ""

    def _before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        raw = request.body
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        form = {k: v[0] for k, v in parse_qs(text).items()}
        subnet = form.get("SubnetId") or form.get("NetworkInterface.1.SubnetId", "")
        itype, token = form.get("InstanceType", ""), form.get("ClientToken", "")
        self.sent.append((subnet, itype, token))
        down = self._take("down", subnet, itype)
        if down is not None:
            return _answer(request.url, down.status, error_xml(down.code, "down"))
        if token in self.answered:  # EC2: same token, same parameters → the same answer
            return _answer(request.url, 200, self.answered[token])
        fault = self._take("refuse", subnet, itype)
        if fault is not None:
            return _answer(request.url, fault.status, error_xml(fault.code, "injected"))
        if self._take("lost", subnet, itype) is not None:
            self.losing.add(token)
        if self.capacity is not None:
            with self.lock:  # boto3 calls run in threads: reserve a slot atomically
                if self.used >= self.capacity:
                    body = error_xml("InsufficientInstanceCapacity", "no capacity (emulated)")
                    return _answer(request.url, 500, body)
                self.used += 1
        return None

    def _after_call(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        token = context.get("client_token", "")
        if http_response.status_code == 200 and token:
            self.answered.setdefault(token, http_response.content)
        if token in self.losing:
            self.losing.discard(token)
            raise bexc.ReadTimeoutError(endpoint_url="http://127.0.0.1 (injected)")


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="module")
def image(moto_endpoint: str) -> str:
    """One of moto's stock AMIs; they survive a reset, and listing them all takes a second."""
    import boto3

    ec2 = boto3.client(
        "ec2",
        region_name=REGION,
        endpoint_url=moto_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return str(ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"])


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, moto_endpoint: str) -> str:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    }.items():
        monkeypatch.setenv(key, value)
    reset = urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset).close()
    return moto_endpoint


@dataclass
class World:
    provider: AwsProvider
    faults: Ec2Faults
    subnets: list[str]
    image: str
    client: Any
    clock: JumpingClock


@pytest.fixture
def world(aws_env: str, image: str) -> Iterator[World]:
    import boto3

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=aws_env)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{REGION}{z}")[
            "Subnet"
        ]["SubnetId"]
        for i, z in enumerate("abc")
    ]
    settings = AwsSettings.parse(
        {"region": REGION, "subnets": subnets, "installation": INSTALL, "endpoint_url": aws_env}
    )
    clock = JumpingClock()
    provider = open_aws_provider(settings, clock)
    faults = Ec2Faults()
    # why the ignore[attr-defined] below: reaches into the AWS provider's client
    client = provider._api.client  # type: ignore[attr-defined]
    faults.install(client)
    yield World(provider, faults, subnets, image, ec2, clock)
    provider.close()


def request(w: World, name: str = "rungar-c4-1", **runner: Any) -> CreateRequest:
    block = {"instance_type": ["m7i.large", "m6i.large"], "image": w.image, **runner}
    return runner_request(name, block)


def live(w: World) -> list[dict[str, Any]]:
    pages = w.client.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )
    return [i for r in pages["Reservations"] for i in r["Instances"]]


def launch_foreign(w: World, tags: dict[str, str]) -> None:
    """An instance Rungar did not launch, straight through moto."""
    w.client.run_instances(
        ImageId=w.image,
        MinCount=1,
        MaxCount=1,
        InstanceType="t3.micro",
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )


async def test_a_runner_is_launched_with_tags_and_the_jit_config_in_user_data(w: World) -> None:
    result = await w.provider.create(request(w, spot=True))
    assert isinstance(result, Created)
    assert result.machine.name == "rungar-c4-1" and result.machine.size == "m7i.large"
    assert result.machine.state in (MachineState.STARTING, MachineState.RUNNING)
    (inst,) = live(w)
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags["Name"] == "rungar-c4-1" and tags["rungar.sh/installation"] == INSTALL
    assert inst["SubnetId"] == w.subnets[0]
    attr = w.client.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")
    import base64

    script = base64.b64decode(attr["UserData"]["Value"]).decode()
    assert script.startswith("#!/bin/sh\nexport ACTIONS_RUNNER_INPUT_JITCONFIG=SECRET-JIT\n")


@pytest.fixture
def w(world: World) -> World:
    return world


async def test_capacity_errors_are_not_retried_by_botocore_and_the_next_subnet_is_tried(
    w: World,
) -> None:
    w.faults.faults.append(Fault("InsufficientInstanceCapacity", 500, subnet=w.subnets[0], times=9))
    result = await w.provider.create(request(w))
    assert isinstance(result, Created)
    assert [(s, t) for s, t, _ in w.faults.sent] == [
        (w.subnets[0], "m7i.large"),
        (w.subnets[0], "m6i.large"),
        (w.subnets[1], "m7i.large"),
    ]
    assert live(w)[0]["SubnetId"] == w.subnets[1]


async def test_every_subnet_out_of_capacity_is_full(w: World) -> None:
    w.faults.faults.append(Fault("InsufficientInstanceCapacity", 500, times=99))
    result = await w.provider.create(request(w))
    assert isinstance(result, Refusal)
    assert (result.kind, result.resource) == (RefusalKind.FULL, "zone stock")
    assert len(w.faults.sent) == 6 and live(w) == []


async def test_a_type_out_of_quota_is_skipped_in_other_subnets(w: World) -> None:
    w.faults.faults.append(Fault("VcpuLimitExceeded", 400, instance_type="m7i.large", times=9))
    w.faults.faults.append(
        Fault("InsufficientInstanceCapacity", 500, instance_type="m6i.large", times=9)
    )
    result = await w.provider.create(request(w))
    assert isinstance(result, Refusal) and result.kind is RefusalKind.FULL
    assert [t for _, t, _ in w.faults.sent].count("m7i.large") == 1
    assert result.resource == "quota and zone stock"


async def test_unsupported_in_some_subnets_is_skipped_and_everywhere_is_invalid(w: World) -> None:
    w.faults.faults.append(Fault("Unsupported", 400, subnet=w.subnets[0], times=9))
    assert isinstance(await w.provider.create(request(w, "r-a")), Created)
    w.faults.faults.append(Fault("Unsupported", 400, times=99))
    result = await w.provider.create(request(w, "r-b"))
    assert isinstance(result, Refusal) and result.kind is RefusalKind.INVALID
    assert "no subnet of eu-west-1 offers instance type m6i.large or m7i.large" in result.message


@pytest.mark.parametrize(
    ("code", "status", "kind", "resource"),
    [
        ("InsufficientFreeAddressesInSubnet", 400, RefusalKind.FULL, "subnet addresses"),
        ("MaxSpotInstanceCountExceeded", 400, RefusalKind.FULL, "quota"),
        ("InstanceLimitExceeded", 400, RefusalKind.FULL, "quota"),
        ("InvalidParameterValue", 400, RefusalKind.INVALID, "runner"),
        ("UnauthorizedOperation", 403, RefusalKind.INVALID, "permission"),
        ("RequestLimitExceeded", 503, RefusalKind.FAILED, "api"),
        ("IdempotentParameterMismatch", 400, RefusalKind.INVALID, "runner"),
    ],
)
async def test_each_cloud_error_lands_as_its_refusal_kind(
    w: World, code: str, status: int, kind: RefusalKind, resource: str
) -> None:
    w.faults.faults.append(Fault(code, status, times=99))
    result = await w.provider.create(request(w))
    assert isinstance(result, Refusal)
    assert (result.kind, result.resource) == (kind, resource)
    assert live(w) == []


async def test_an_image_that_does_not_exist_is_invalid_before_any_launch(w: World) -> None:
    result = await w.provider.create(request(w, image="ami-00000000000000000"))
    assert isinstance(result, Refusal) and result.kind is RefusalKind.INVALID
    assert w.faults.sent == []


async def test_a_lost_answer_is_resent_with_the_same_token_and_launches_one_instance(
    w: World,
) -> None:
    w.faults.faults.append(Fault("", 0, plane="lost"))
    result = await w.provider.create(request(w))
    assert isinstance(result, Created)
    assert len(live(w)) == 1
    assert len({tok for _, _, tok in w.faults.sent}) == 1 and len(w.faults.sent) == 2
    assert w.clock.slept == [1.0]


async def test_a_launch_never_answered_is_settled_by_listing(w: World) -> None:
    w.faults.faults.append(Fault("", 0, plane="lost"))
    w.faults.faults.append(Fault("InternalError", 500, plane="down", times=3))
    result = await w.provider.create(request(w))
    assert isinstance(result, Created)
    assert len(live(w)) == 1 and len(w.faults.sent) == 4


async def test_an_uncertain_launch_that_made_nothing_fails_after_three_resends(w: World) -> None:
    w.faults.faults.append(Fault("ServiceUnavailable", 503, plane="down", times=4))
    result = await w.provider.create(request(w))
    assert isinstance(result, Refusal) and result.kind is RefusalKind.FAILED
    assert len(w.faults.sent) == 4 and w.clock.slept == [1.0, 2.0, 4.0]
    assert live(w) == []


async def test_a_retried_create_never_launches_a_second_instance(w: World) -> None:
    w.faults.faults.append(Fault("InsufficientInstanceCapacity", 500, subnet=w.subnets[0], times=2))
    first = await w.provider.create(request(w))
    second = await w.provider.create(request(w))  # subnet 0 has room again now
    assert isinstance(first, Created) and isinstance(second, Created)
    assert len(live(w)) == 1


async def test_list_by_tags_returns_only_this_installation(w: World) -> None:
    await w.provider.create(request(w, "r-1"))
    await w.provider.create(request(w, "r-2"))
    launch_foreign(
        w, {"Name": "r-1", "rungar.sh/installation": "gh-x", "rungar.sh/managed": "true"}
    )
    listed = await w.provider.list(installation_selector(INSTALL))
    assert sorted(m.name for m in listed) == ["r-1", "r-2"]
    assert all(m.labels["rungar.sh/installation"] == INSTALL for m in listed)
    only = await w.provider.list({"rungar.sh/runner": "r-2"})
    assert [m.name for m in only] == ["r-2"]


async def test_delete_terminates_only_this_installations_instance(w: World) -> None:
    await w.provider.create(request(w, "r-1"))
    launch_foreign(w, {"Name": "r-1"})
    await w.provider.delete("r-1")
    remaining = live(w)
    assert len(remaining) == 1 and "Tags" in remaining[0]
    assert {t["Key"] for t in remaining[0]["Tags"]} == {"Name"}
    await w.provider.delete("r-1")  # gone already: success
    assert await w.provider.list(installation_selector(INSTALL)) == []


async def test_no_answer_from_ec2_is_provider_unavailable(aws_env: str) -> None:
    settings = AwsSettings.parse(
        {
            "region": REGION,
            "subnets": ["subnet-1"],
            "installation": INSTALL,
            "endpoint_url": f"http://127.0.0.1:{closed_port()}",
            "timeout": "2s",
        }
    )
    provider = open_aws_provider(settings, JumpingClock())
    with pytest.raises(ProviderUnavailable):
        await provider.list(installation_selector(INSTALL))


async def test_a_plugin_started_without_a_settings_file_takes_its_keys_from_scale_sets_yaml(
    aws_env: str, image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rungar starts ``rungar-provider-aws`` with no ``--config``: region, subnets, name and
    installation reach it only from scale_sets.yaml and the daemon. Only the endpoint comes from
    elsewhere, botocore's own variable for it, since a real region needs none."""
    import boto3

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=aws_env)
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.1.{i}.0/24")["Subnet"]["SubnetId"]
        for i in (1, 2)
    ]
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", aws_env)  # the plugin inherits the environment
    scale_sets = f"""
version: 1
providers:
  - name: aws-eu
    type: aws
    command: ["{Path(sys.executable).parent / "rungar-provider-aws"}"]
    region: {REGION}
    subnets: [{subnets[1]}, {subnets[0]}]
scale_sets:
  - {{ name: rungar-c4, max_runners: 2, providers: [aws-eu] }}
"""
    [config] = parse_scale_sets(scale_sets, "scale_sets.yaml").providers
    plugins: list[Any] = []
    provider = make_provider(config, SystemClock(), plugins, installation=INSTALL)
    assert isinstance(provider, PluginProvider)
    await provider.start()
    try:
        assert (await provider.info()).name == "aws-eu"
        block = {"instance_type": "t3.small", "image": image}
        result = await provider.create(runner_request("rungar-c4-1", block))
        assert isinstance(result, Created), result  # of another installation it is refused
        (inst,) = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
        assert inst["SubnetId"] == subnets[1], "the first subnet scale_sets.yaml lists"
        tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
        assert tags["rungar.sh/installation"] == INSTALL
        assert [m.name for m in await provider.list(installation_selector(INSTALL))] == [
            "rungar-c4-1"
        ]
    finally:
        await provider.close()
        for plugin in plugins:
            await plugin.stop()
