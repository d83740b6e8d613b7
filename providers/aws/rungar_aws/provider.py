"""The aws provider: create or refuse on EC2 (docs/providers/aws.md).

``create`` follows :mod:`rungar.cloudkit.search`: it first looks for the runner's instance by
its ``Name`` and installation tags (a retried create must never launch a second machine, even
when the first landed in a later subnet), then walks subnets × instance types
(:mod:`rungar_aws.launch`). Each RunInstances carries a ``ClientToken`` derived from the
runner, and tags arrive with the launch. An uncertain launch (5xx, no answer) is sent again up
to three times with the same token, then settled by listing before anything is reported. Only
instances carrying this installation's tags are listed or terminated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import structlog

from rungar.clock import Clock, SystemClock
from rungar.cloudkit.search import (
    capabilities,
    own_labels,
    runner_problems,
    search,
    send_until_certain,
)
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
from rungar_aws.api import Ec2, Ec2Instance
from rungar_aws.errors import classify, resource_of
from rungar_aws.launch import Attempt, Tried, plan, run_params, settle, tag_filters
from rungar_aws.settings import RUNNER_KEYS, AwsRunner, AwsSettings

log = structlog.get_logger(__name__)

KIND = "aws"
VERSION = "0.1.0"
MAX_TAGS = 50


def machine_state(state: str) -> MachineState:
    if state == "running":
        return MachineState.RUNNING
    if state == "pending":
        return MachineState.STARTING
    return MachineState.STOPPED


class AwsProvider:
    """``Provider`` for one EC2 region."""

    def __init__(self, settings: AwsSettings, api: Ec2, clock: Clock | None = None) -> None:
        self._s = settings
        self._api = api
        self._clock = clock or SystemClock()
        self._root_devices: dict[str, str | None] = {}

    @property
    def settings(self) -> AwsSettings:
        return self._s

    async def info(self) -> ProviderInfo:
        keys = capabilities(RUNNER_KEYS)
        return ProviderInfo(name=self._s.name, kind=KIND, version=VERSION, capabilities=keys)

    async def validate_runner(self, runner: Mapping[str, Any]) -> list[str]:
        return runner_problems(runner, AwsRunner.parse)

    async def create(self, request: CreateRequest) -> Created | Refusal:
        runner, problems = AwsRunner.parse(request.runner)
        if runner is None:
            return Refusal(RefusalKind.INVALID, "; ".join(problems), "runner")
        labels = own_labels(request.labels, self._s.installation)
        if isinstance(labels, Refusal):
            return labels
        if len(labels) + len(runner.tags) + 1 > MAX_TAGS:
            return Refusal(RefusalKind.INVALID, f"more than EC2's {MAX_TAGS} tags", "labels")
        existing = await self._find_ours(request.runner_name)
        if existing is not None:
            log.info("aws.create.adopted", runner=request.runner_name)
            return existing
        root_device = ""
        if runner.image:
            found = await self._root_device(runner.image)
            if found is None:
                return Refusal(
                    RefusalKind.INVALID,
                    f"image {runner.image} does not exist in {self._s.region}",
                    "image",
                )
            root_device = found

        async def attempt(where: Attempt) -> Created | Tried:
            params = run_params(self._s, runner, request, labels, where, root_device)
            return await self._attempt(request, params, where)

        attempts = plan(self._s.subnets, runner.instance_types)
        result = await search(attempts, lambda a: a.instance_type, attempt)
        return result if isinstance(result, Created) else settle(result, self._s.region)

    async def _root_device(self, image: str) -> str | None:
        if image not in self._root_devices:
            self._root_devices[image] = await self._api.root_device(image)
        return self._root_devices[image]

    async def _attempt(
        self, request: CreateRequest, params: Mapping[str, Any], attempt: Attempt
    ) -> Created | Tried:
        """One subnet and type: RunInstances, resent with the same ClientToken while uncertain."""

        async def send() -> Created | Tried:
            result = await self._api.run(params)
            if isinstance(result, Ec2Instance):
                return Created(self._machine(result))
            outcome = classify(result.code, result.status)
            return Tried(attempt, outcome, result.code, result.describe(), resource_of(result.code))

        def uncertain(sent: int, tried: Tried) -> None:
            log.warning(
                "aws.create.uncertain",
                runner=request.runner_name,
                attempt=str(attempt),
                sent=sent,
                code=tried.code,
            )

        find = partial(self._find_ours, request.runner_name)
        result = await send_until_certain(send, find, self._clock, uncertain)
        if not isinstance(result, Created):
            log.info(
                "aws.create.refused",
                runner=request.runner_name,
                attempt=str(attempt),
                code=result.code,
            )
        return result

    async def _find_ours(self, name: str) -> Created | None:
        """The runner's live instance, adopted as created; ``None`` when there is none."""
        found = await self._ours({}, name)
        return Created(self._machine(found[0])) if found else None

    async def _ours(self, selector: Mapping[str, str], name: str = "") -> list[Ec2Instance]:
        """This installation's live instances carrying ``selector`` (and ``name``)."""
        wanted = {**selector, **installation_selector(self._s.installation)}
        return [
            inst
            for inst in await self._api.find(tag_filters(wanted, name))
            if all(inst.tags.get(k) == v for k, v in wanted.items())
            and (not name or inst.name == name)
        ]

    def _machine(self, inst: Ec2Instance) -> Machine:
        labels = {k: v for k, v in inst.tags.items() if k != "Name"}
        return Machine(
            name=inst.name,
            state=machine_state(inst.state),
            labels=labels,
            size=inst.instance_type,
            created_at=inst.launched_at,
            provider=self._s.name,
        )

    async def delete(self, name: str, removal: Removal | None = None) -> None:
        """A cloud machine learns nothing from its job: ``removal`` is only logged."""
        ids = [inst.instance_id for inst in await self._ours({}, name)]
        if ids:
            await self._api.terminate(ids)
            why = removal.describe() if removal else None
            log.info("aws.delete.done", runner=name, instances=len(ids), why=why)

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        return [self._machine(inst) for inst in await self._ours(selector)]

    async def update_runner(self, name: str, job: JobHint) -> None:
        """Nothing to do: a cloud machine has no job-aware admission."""

    async def last_output(self, name: str, lines: int = 20) -> Sequence[str]:
        """The tail of the instance's console output."""
        for inst in await self._ours({}, name):
            return tail_lines(await self._api.console_output(inst.instance_id), lines)
        return []

    def close(self) -> None:
        self._api.close()


def open_aws_provider(settings: AwsSettings, clock: Clock | None = None) -> AwsProvider:
    """A provider on the real SDK; this is where boto3 gets imported."""
    from rungar_aws.ec2 import Ec2Api

    return AwsProvider(settings, Ec2Api(settings), clock)
