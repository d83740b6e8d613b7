"""The gcp provider with google-cloud-compute's real REST client against the local GCE fake."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from rungar_gcp.provider import GcpProvider, open_gcp_provider, request_uuid
from rungar_gcp.search import Attempt
from rungar_gcp.settings import GcpSettings

from rungar.errors import ProviderUnavailable
from rungar.model.labels import installation_selector, machine_labels
from rungar.model.machine import Created, CreateRequest, MachineState, Refusal, RefusalKind
from rungar.testing.clock import JumpingClock
from rungar.testing.gce_fake import GceFake, GceFault
from tests.cloud_helpers import INSTALL, closed_port, runner_request

ZONES = ["us-central1-a", "us-central1-b", "us-central1-c"]
IMAGE = "projects/debian-cloud/global/images/family/debian-12"


@pytest.fixture
def fake() -> Iterator[GceFake]:
    with GceFake(offered={"us-central1-c": {"e2-standard-4"}}) as f:
        yield f


def settings_for(endpoint: str, **over: Any) -> GcpSettings:
    raw = {
        "project": "rungar-test",
        "zones": ZONES,
        "installation": INSTALL,
        "endpoint": endpoint,
        "anonymous": True,
        "timeout": "5s",
        **over,
    }
    return GcpSettings.parse(raw)


@pytest.fixture
def clock() -> JumpingClock:
    return JumpingClock()


@pytest.fixture
def provider(fake: GceFake, clock: JumpingClock) -> Iterator[GcpProvider]:
    p = open_gcp_provider(settings_for(fake.endpoint), clock)
    yield p
    p.close()


def request(name: str = "rungar-c4-1", **runner: Any) -> CreateRequest:
    block = {"machine_type": ["e2-standard-4", "n2-standard-4"], "image": IMAGE, **runner}
    return runner_request(name, block, deadline=1_800_003_600.0)


def metadata(fake: GceFake, zone: str, name: str) -> dict[str, str]:
    items = fake.instances[(zone, name)]["metadata"]["items"]
    return {i["key"]: i["value"] for i in items}


async def test_a_runner_is_created_with_labels_jit_metadata_spot_and_a_deadline(
    provider: GcpProvider, fake: GceFake
) -> None:
    result = await provider.create(request(spot=True))
    assert isinstance(result, Created)
    assert result.machine.name == "rungar-c4-1"
    assert result.machine.state is MachineState.RUNNING
    assert result.machine.labels["rungar.sh/runner"] == "rungar-c4-1"
    body = fake.instances[("us-central1-a", "rungar-c4-1")]
    assert body["labels"]["rungar_sh_installation"] == INSTALL
    assert body["labels"]["rungar_sh_scale-set"] == "rungar-c4"
    assert body["machineType"].endswith("/machineTypes/e2-standard-4")
    assert body["scheduling"]["provisioningModel"] == "SPOT"
    assert body["scheduling"]["instanceTerminationAction"] == "DELETE"
    assert body["scheduling"]["terminationTime"].startswith("2027-01-15T09:00:00")
    meta = metadata(fake, "us-central1-a", "rungar-c4-1")
    assert meta["rungar-jit-config"] == "SECRET-JIT"
    assert json.loads(meta["rungar-labels"])["rungar.sh/scale-set"] == "rungar-c4"
    assert "SECRET-JIT" not in repr(request())


async def test_the_insert_request_id_is_a_uuid_derived_from_the_runner(
    provider: GcpProvider, fake: GceFake
) -> None:
    await provider.create(request())
    (call,) = fake.insert_requests
    assert str(uuid.UUID(call.request_id)) == call.request_id
    assert request_uuid(request(), Attempt(call.zone, call.machine_type)) == call.request_id
    assert request_uuid(request("other"), Attempt(call.zone, call.machine_type)) != call.request_id


async def test_zones_rotate_per_scale_set(provider: GcpProvider, fake: GceFake) -> None:
    for i in range(3):
        assert isinstance(await provider.create(request(f"r-{i}")), Created)
    assert [c.zone for c in fake.insert_requests] == ZONES


async def test_each_type_is_tried_in_a_zone_before_the_next_zone(
    provider: GcpProvider, fake: GceFake
) -> None:
    fake.inject(GceFault("ZONE_RESOURCE_POOL_EXHAUSTED", zone="us-central1-a", times=9))
    result = await provider.create(request())
    assert isinstance(result, Created)
    assert [(c.zone, c.machine_type) for c in fake.insert_requests] == [
        ("us-central1-a", "e2-standard-4"),
        ("us-central1-a", "n2-standard-4"),
        ("us-central1-b", "e2-standard-4"),
    ]
    assert fake.names() == ["rungar-c4-1"]


async def test_every_zone_out_of_stock_is_full(provider: GcpProvider, fake: GceFake) -> None:
    fake.inject(GceFault("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", times=99))
    result = await provider.create(request())
    assert isinstance(result, Refusal)
    assert (result.kind, result.resource) == (RefusalKind.FULL, "zone stock")
    # us-central1-c offers only e2-standard-4: n2 is skipped there without an insert
    assert len(fake.insert_requests) == 5
    assert fake.names() == []


async def test_a_zone_not_offering_a_type_is_skipped_and_remembered(
    provider: GcpProvider, fake: GceFake
) -> None:
    fake.offered = {z: set() for z in ZONES}
    first = await provider.create(request(machine_type="a2-megagpu-16g"))
    assert isinstance(first, Refusal) and first.kind is RefusalKind.INVALID
    assert "no zone of us-central1 offers machine type a2-megagpu-16g" in first.message
    fake.offered = {}
    again = await provider.create(request(machine_type="a2-megagpu-16g"))
    assert isinstance(again, Refusal) and again.kind is RefusalKind.INVALID
    assert fake.insert_requests == []


async def test_a_type_out_of_quota_is_not_tried_in_other_zones(
    provider: GcpProvider, fake: GceFake
) -> None:
    fake.inject(GceFault("QUOTA_EXCEEDED", 403, machine_type="e2-standard-4", times=9))
    fake.inject(GceFault("ZONE_RESOURCE_POOL_EXHAUSTED", machine_type="n2-standard-4", times=9))
    result = await provider.create(request())
    assert isinstance(result, Refusal)
    assert (result.kind, result.resource) == (RefusalKind.FULL, "zone stock and quota")
    assert len(fake.insert_requests) == 3  # e2 once; n2 in a and b (c does not offer n2)


@pytest.mark.parametrize(
    ("fault", "kind", "resource"),
    [
        (GceFault("quotaExceeded", 403, plane="http", times=99), RefusalKind.FULL, "quota"),
        (GceFault("invalid", 400, plane="http"), RefusalKind.INVALID, "runner"),
        (GceFault("RESOURCE_NOT_FOUND", 404), RefusalKind.INVALID, "runner"),
        (GceFault("forbidden", 403, plane="http"), RefusalKind.INVALID, "permission"),
        (GceFault("IAM_PERMISSION_DENIED", 403), RefusalKind.INVALID, "permission"),
        (GceFault("rateLimitExceeded", 403, plane="http"), RefusalKind.FAILED, "api"),
        (GceFault("INTERNAL_ERROR", 500, times=99), RefusalKind.FAILED, "zone"),
    ],
)
async def test_refusals_from_either_plane_land_as_their_refusal_kind(
    provider: GcpProvider, fake: GceFake, fault: GceFault, kind: RefusalKind, resource: str
) -> None:
    fake.inject(fault)
    result = await provider.create(request())
    assert isinstance(result, Refusal)
    assert (result.kind, result.resource) == (kind, resource)
    assert fake.names() == []


async def test_an_operation_error_without_http_status_is_still_a_refusal(
    provider: GcpProvider, fake: GceFake
) -> None:
    # The SDK's result() would report success here (the second trap in rungar_gcp.compute).
    fault = GceFault("ZONE_RESOURCE_POOL_EXHAUSTED", times=99, http_status_in_operation=False)
    fake.inject(fault)
    result = await provider.create(request())
    assert isinstance(result, Refusal) and result.kind is RefusalKind.FULL


async def test_a_lost_answer_is_resent_with_the_same_id_and_makes_one_machine(
    provider: GcpProvider, fake: GceFake, clock: JumpingClock
) -> None:
    fake.inject(GceFault("backendError", 503, plane="lost"))
    result = await provider.create(request())
    assert isinstance(result, Created)
    assert fake.names() == ["rungar-c4-1"]
    assert len({c.request_id for c in fake.insert_requests}) == 1
    assert clock.slept == [1.0]


async def test_an_insert_never_answered_is_settled_by_listing_before_reporting(
    provider: GcpProvider, fake: GceFake, clock: JumpingClock
) -> None:
    fake.inject(GceFault("backendError", 503, plane="lost"))
    fake.inject(GceFault("backendError", 503, plane="unavailable", times=3))
    result = await provider.create(request())
    assert isinstance(result, Created)
    assert len(fake.insert_requests) == 4
    assert fake.names() == ["rungar-c4-1"]


async def test_an_uncertain_insert_that_made_nothing_fails_after_three_resends(
    provider: GcpProvider, fake: GceFake, clock: JumpingClock
) -> None:
    fake.inject(GceFault("backendError", 503, plane="unavailable", times=4))
    result = await provider.create(request())
    assert isinstance(result, Refusal) and result.kind is RefusalKind.FAILED
    assert "after 4 tries" in result.message
    assert len(fake.insert_requests) == 4 and clock.slept == [1.0, 2.0, 4.0]
    assert fake.names() == []


async def test_a_retried_create_never_makes_a_second_machine(
    provider: GcpProvider, fake: GceFake
) -> None:
    fake.inject(GceFault("ZONE_RESOURCE_POOL_EXHAUSTED", zone="us-central1-a"))
    first = await provider.create(request())
    second = await provider.create(request())  # rotation now starts at another zone
    assert isinstance(first, Created) and isinstance(second, Created)
    assert fake.names() == ["rungar-c4-1"]
    assert len(fake.instances) == 1


async def test_a_409_for_our_own_instance_is_adopted(fake: GceFake, clock: JumpingClock) -> None:
    settings = settings_for(fake.endpoint, zones=["us-central1-a"])
    a = open_gcp_provider(settings, clock)
    assert isinstance(await a.create(request()), Created)
    # A second provider process that knows nothing: its pre-check finds the instance.
    b = open_gcp_provider(settings, clock)
    result = await b.create(request())
    assert isinstance(result, Created) and len(fake.instances) == 1


async def test_a_name_taken_by_a_machine_not_ours_is_not_adopted(
    provider: GcpProvider, fake: GceFake
) -> None:
    for zone in ZONES:
        fake.instances[(zone, "rungar-c4-1")] = {"name": "rungar-c4-1", "labels": {}}
    result = await provider.create(request())
    assert isinstance(result, Refusal) and result.kind is RefusalKind.FAILED
    assert "is not this runner's" in result.message


async def test_operations_still_running_are_waited_on_with_our_own_client(
    fake: GceFake, clock: JumpingClock
) -> None:
    fake.running_polls = 2
    p = open_gcp_provider(settings_for(fake.endpoint), clock)
    assert isinstance(await p.create(request()), Created)


async def test_list_returns_only_this_installations_machines_in_its_zones(
    provider: GcpProvider, fake: GceFake
) -> None:
    await provider.create(request("r-1"))
    await provider.create(request("r-2"))
    elsewhere = fake.instances[("us-central1-a", "r-1")]
    fake.instances[("europe-west1-b", "r-9")] = dict(elsewhere, name="r-9", zone="europe-west1-b")
    foreign = dict(fake.instances[("us-central1-a", "r-1")], name="r-x", labels={})
    fake.instances[("us-central1-a", "r-x")] = foreign
    listed = await provider.list(installation_selector(INSTALL))
    assert sorted(m.name for m in listed) == ["r-1", "r-2"]
    only = await provider.list({"rungar.sh/runner": "r-2"})
    assert [m.name for m in only] == ["r-2"]
    assert only[0].size == "e2-standard-4" and only[0].provider == "gcp"


async def test_delete_by_name_and_an_unknown_name_is_success(
    provider: GcpProvider, fake: GceFake
) -> None:
    await provider.create(request())
    await provider.delete("rungar-c4-1")
    assert fake.names() == []
    await provider.delete("rungar-c4-1")
    await provider.delete("Not_A_Valid_Name")


async def test_delete_never_touches_a_machine_without_our_labels(
    provider: GcpProvider, fake: GceFake
) -> None:
    fake.instances[("us-central1-a", "someone-else")] = {"name": "someone-else", "labels": {}}
    await provider.delete("someone-else")
    assert fake.names() == ["someone-else"]


async def test_a_runner_of_another_installation_is_refused(provider: GcpProvider) -> None:
    req = request()
    other = CreateRequest(
        runner_name=req.runner_name,
        request_id=req.request_id,
        scale_set=req.scale_set,
        labels=machine_labels("gh-other", "rungar-c4", "r", "1"),
        runner=req.runner,
        jit_config="x",
    )
    result = await provider.create(other)
    assert isinstance(result, Refusal) and result.kind is RefusalKind.INVALID


async def test_no_answer_from_the_api_is_provider_unavailable(clock: JumpingClock) -> None:
    p = open_gcp_provider(settings_for(f"http://127.0.0.1:{closed_port()}"), clock)
    with pytest.raises(ProviderUnavailable):
        await p.list(installation_selector(INSTALL))
    with pytest.raises(ProviderUnavailable):
        await p.create(request())
