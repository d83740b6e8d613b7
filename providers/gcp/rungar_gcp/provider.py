"""The gcp provider: create or refuse on Compute Engine (docs/providers/gcp.md).

``create`` follows :mod:`rungar.cloudkit.search`: it first looks for the runner's instance in
every zone (a retried create must never make a second machine, even when the first landed in
another zone of the rotation), then walks the zones × machine types of
:mod:`rungar_gcp.search`. Each insert carries a request id derived from the runner's
``request_id`` and the instance name is the runner's name, so a repeated insert is
deduplicated by GCE or answered 409, which is adopted when the instance carries this runner's
labels. An uncertain insert (5xx, no answer) is sent again up to three times with the same id
and then settled by looking the instance up before anything is reported. Machines are listed
and deleted only when they carry this installation's labels.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

import structlog

from rungar.clock import Clock, SystemClock
from rungar.cloudkit.search import (
    PlaceAnswer,
    capabilities,
    own_labels,
    runner_problems,
    search,
    send_until_certain,
)
from rungar.errors import ProviderError
from rungar.model.labels import installation_selector
from rungar.model.machine import (
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    ProviderInfo,
    Refusal,
    RefusalKind,
    Removal,
)
from rungar.model.output import tail_lines
from rungar_gcp.api import GceApi, Instance, InstanceSpec
from rungar_gcp.errors import classify, is_already_exists
from rungar_gcp.labels import (
    JIT_METADATA_KEY,
    LABELS_METADATA_KEY,
    NAME_METADATA_KEY,
    REQUEST_METADATA_KEY,
    encode_labels,
    instance_name,
    labels_filter,
    labels_metadata,
    selector_matches,
)
from rungar_gcp.search import Attempt, OfferCache, Tried, plan, rotated, settle
from rungar_gcp.settings import RUNNER_KEYS, GcpRunner, GcpSettings

log = structlog.get_logger(__name__)

KIND = "gcp"
VERSION = "0.1.0"
REQUEST_NAMESPACE = uuid.UUID("5d0b8f5e-4a53-4a51-9f0c-6b9a3f1c2e77")
MIN_DEADLINE_AHEAD = 300.0  # GCE refuses a termination time in the past
_STARTING = frozenset({"PROVISIONING", "STAGING", "REPAIRING"})


def request_uuid(request: CreateRequest, attempt: Attempt) -> str:
    """The insert's ``requestId``: the same for every resend of one attempt, another for each
    zone and type (GCE could otherwise answer a new zone with an earlier zone's failure)."""
    key = f"{request.runner_name}/{request.request_id}/{attempt.zone}/{attempt.machine_type}"
    return str(uuid.uuid5(REQUEST_NAMESPACE, key))


def termination_time(deadline: float, now: float) -> str:
    """The deadline backstop as RFC 3339, never sooner than five minutes from ``now``."""
    if deadline <= 0:
        return ""
    when = max(deadline, now + MIN_DEADLINE_AHEAD)
    return datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")


def machine_state(status: str) -> MachineState:
    if status == "RUNNING":
        return MachineState.RUNNING
    if status in _STARTING:
        return MachineState.STARTING
    return MachineState.STOPPED


class GcpProvider:
    """``Provider`` for one project and region of Compute Engine."""

    def __init__(self, settings: GcpSettings, api: GceApi, clock: Clock | None = None) -> None:
        self._s = settings
        self._api = api
        self._clock = clock or SystemClock()
        self._rotation: dict[str, int] = {}
        self._offers = OfferCache()

    @property
    def settings(self) -> GcpSettings:
        return self._s

    async def info(self) -> ProviderInfo:
        keys = capabilities(RUNNER_KEYS)
        return ProviderInfo(name=self._s.name, kind=KIND, version=VERSION, capabilities=keys)

    async def validate_runner(self, runner: Mapping[str, Any]) -> list[str]:
        return runner_problems(runner, GcpRunner.parse)

    async def create(self, request: CreateRequest) -> Created | Refusal:
        name = instance_name(request.runner_name)
        if name is None:
            return Refusal(
                RefusalKind.INVALID,
                f"runner name {request.runner_name!r} is not a GCE instance name "
                "(a letter, then letters, digits and '-', at most 63 characters)",
                "runner name",
            )
        runner, problems = GcpRunner.parse(request.runner)
        if runner is None:
            return Refusal(RefusalKind.INVALID, "; ".join(problems), "runner")
        labels = own_labels(request.labels, self._s.installation)
        if isinstance(labels, Refusal):
            return labels
        existing = await self._find_ours(name)
        if existing is not None:
            log.info("gcp.create.adopted", runner=request.runner_name, zone=existing.zone)
            return Created(self._machine(existing))
        try:
            gcp_labels = {**runner.labels, **encode_labels(labels)}
        except ValueError as e:
            return Refusal(RefusalKind.INVALID, str(e), "labels")
        start = self._rotation.get(request.scale_set, 0)
        self._rotation[request.scale_set] = start + 1
        unoffered: list[Attempt] = []

        async def attempt(where: Attempt) -> Created | Tried | None:
            if where.machine_type and await self._offered(where) is False:
                unoffered.append(where)  # skipped without an insert
                return None
            spec = self._spec(request, runner, name, where, labels, gcp_labels)
            return await self._attempt(request, spec, where, runner.spot)

        attempts = plan(rotated(self._s.zones, start), runner.machine_types)
        result = await search(attempts, lambda a: a.machine_type, attempt)
        if isinstance(result, Created):
            return result
        return settle(result, unoffered, self._s.region)

    async def _offered(self, attempt: Attempt) -> bool | None:
        now = self._clock.now()
        known = self._offers.get(attempt.zone, attempt.machine_type, now)
        if known is not None:
            return known
        offered = await self._api.offers(attempt.zone, attempt.machine_type)
        if offered is not None:
            self._offers.put(attempt.zone, attempt.machine_type, offered, now)
        return offered

    def _spec(
        self,
        request: CreateRequest,
        runner: GcpRunner,
        name: str,
        attempt: Attempt,
        labels: Mapping[str, str],
        gcp_labels: Mapping[str, str],
    ) -> InstanceSpec:
        metadata = dict(runner.metadata)
        if runner.startup_script:
            metadata["startup-script"] = runner.startup_script
        metadata[LABELS_METADATA_KEY] = labels_metadata(labels)
        metadata[NAME_METADATA_KEY] = request.runner_name
        metadata[REQUEST_METADATA_KEY] = request.request_id
        metadata[JIT_METADATA_KEY] = request.jit_config
        return InstanceSpec(
            name=name,
            zone=attempt.zone,
            machine_type=attempt.machine_type,
            labels=gcp_labels,
            metadata=metadata,
            image=runner.image,
            disk_gib=runner.disk_gib,
            disk_type=runner.disk_type,
            instance_template=runner.instance_template,
            spot=runner.spot,
            termination_time=termination_time(request.deadline, self._clock.now()),
            network_tags=runner.network_tags,
            network=self._s.network,
            subnetwork=self._s.subnetwork,
            external_ip=self._s.external_ip,
            service_account=self._s.service_account,
            scopes=self._s.scopes,
        )

    async def _attempt(
        self, request: CreateRequest, spec: InstanceSpec, attempt: Attempt, spot: bool
    ) -> Created | Tried:
        """One zone and type: an insert, resent with the same request id while uncertain."""
        request_id = request_uuid(request, attempt)

        async def send() -> Created | Tried:
            failure = await self._api.insert(spec, request_id)
            if failure is None:
                try:
                    found = await self._api.get(spec.zone, spec.name)
                except ProviderError:
                    found = None
                if found is None:  # created, but not readable now: report what was asked for
                    return Created(self._asked_for(request, spec))
                return Created(self._machine(found))
            if is_already_exists(failure.codes, failure.status):
                adopted = await self._adopt(spec.name)
                if adopted is not None:
                    return adopted
                taken = f"an instance named {spec.name} exists and is not this runner's"
                return Tried(attempt, PlaceAnswer.REFUSED, taken)
            outcome = classify(failure.codes, failure.status, failure.plane, spot=spot)
            return Tried(attempt, outcome, failure.describe())

        def uncertain(sent: int, tried: Tried) -> None:
            log.warning(
                "gcp.create.uncertain",
                runner=request.runner_name,
                attempt=str(attempt),
                sent=sent,
                detail=tried.detail,
            )

        find = partial(self._adopt, spec.name)
        result = await send_until_certain(send, find, self._clock, uncertain)
        if not isinstance(result, Created):
            log.info(
                "gcp.create.refused",
                runner=request.runner_name,
                attempt=str(attempt),
                outcome=str(result.outcome),
            )
        return result

    async def _find_ours(self, name: str) -> Instance | None:
        """This installation's instance called ``name`` in any zone of the provider."""
        found = await self._ours(installation_selector(self._s.installation), name)
        return found[0] if found else None

    async def _adopt(self, name: str) -> Created | None:
        found = await self._find_ours(name)
        return Created(self._machine(found)) if found is not None else None

    async def _ours(self, selector: Mapping[str, str], name: str = "") -> list[Instance]:
        own = installation_selector(self._s.installation)
        wanted = {**selector, **own}
        zones = set(self._s.zones)
        return [
            inst
            for inst in await self._api.find(labels_filter(wanted, name))
            if inst.zone in zones
            and inst.labels is not None
            and selector_matches(inst.labels, wanted)
            and (not name or inst.name == name)
        ]

    def _machine(self, inst: Instance) -> Machine:
        return Machine(
            name=inst.runner_name or inst.name,
            state=machine_state(inst.status),
            labels=dict(inst.labels or {}),
            size=inst.machine_type,
            created_at=inst.created_at,
            provider=self._s.name,
        )

    def _asked_for(self, request: CreateRequest, spec: InstanceSpec) -> Machine:
        return Machine(
            name=request.runner_name,
            state=MachineState.STARTING,
            labels=dict(request.labels),
            size=spec.machine_type,
            created_at=self._clock.now(),
            provider=self._s.name,
        )

    async def delete(self, name: str, removal: Removal | None = None) -> None:
        """A cloud machine learns nothing from its job: ``removal`` is only logged."""
        iname = instance_name(name)
        if iname is None:
            return  # no instance can carry a name GCE refuses
        why = removal.describe() if removal else None
        for inst in await self._ours({}, iname):
            await self._api.delete(inst.zone, inst.name, str(uuid.uuid4()))
            log.info("gcp.delete.done", runner=name, zone=inst.zone, why=why)

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        return [self._machine(inst) for inst in await self._ours(selector)]

    async def update_runner(self, name: str, job: JobHint) -> None:
        """Nothing to do: a cloud machine has no job-aware admission."""

    async def last_output(self, name: str, lines: int = 20) -> Sequence[str]:
        """The tail of the instance's serial port output (the runner's console)."""
        iname = instance_name(name)
        if iname is None:
            return []
        for inst in await self._ours({}, iname):
            return tail_lines(await self._api.serial_output(inst.zone, inst.name), lines)
        return []

    def close(self) -> None:
        self._api.close()


def open_gcp_provider(settings: GcpSettings, clock: Clock | None = None) -> GcpProvider:
    """A provider on the real SDK; this is where google-cloud-compute gets imported."""
    from rungar_gcp.compute import ComputeApi

    return GcpProvider(settings, ComputeApi(settings), clock)
