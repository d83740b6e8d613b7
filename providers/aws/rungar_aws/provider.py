"""The aws provider: create or refuse on EC2 (issue 8; rungar-go §1.5, §1.6, §2.1).

``create`` first looks for the runner's instance by its ``Name`` and installation tags (a
retried create must never launch a second machine, even when the first landed in a later
subnet), then walks subnets × instance types (:mod:`rungar_aws.launch`). Each RunInstances
carries a ``ClientToken`` derived from the runner, and tags arrive with the launch. An
uncertain launch (5xx, no answer) is sent again up to three times with the same token, then
settled by listing before anything is reported. Only instances carrying this installation's
tags are listed or terminated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from rungar.clock import Clock, SystemClock
from rungar.model.labels import INSTALLATION, MANAGED, installation_selector
from rungar.model.machine import (
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    ProviderInfo,
    Refusal,
    RefusalKind,
)
from rungar.model.runner_block import RunnerBlock
from rungar_aws.api import Ec2, Ec2Instance
from rungar_aws.errors import Outcome, classify, resource_of
from rungar_aws.launch import (
    STOPS_SEARCH,
    UNCERTAIN_RETRIES,
    Attempt,
    Tried,
    plan,
    run_params,
    settle,
    tag_filters,
)
from rungar_aws.settings import RUNNER_KEYS, AwsRunner, AwsSettings

log = structlog.get_logger(__name__)

KIND = "aws"
VERSION = "0.1.0"
RETRY_DELAYS = (1.0, 2.0, 4.0)
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
        keys = tuple(sorted(RUNNER_KEYS | {"image", "disk"}))
        return ProviderInfo(name=self._s.name, kind=KIND, version=VERSION, capabilities=keys)

    async def validate_runner(self, runner: Mapping[str, Any]) -> list[str]:
        try:
            block = RunnerBlock.from_mapping(runner)
        except ValueError as e:
            return [f"runner.{e}"]
        return AwsRunner.parse(block)[1]

    async def create(self, request: CreateRequest) -> Created | Refusal:
        runner, problems = AwsRunner.parse(request.runner)
        if runner is None:
            return Refusal(RefusalKind.INVALID, "; ".join(problems), "runner")
        labels = dict(request.labels)
        if labels.setdefault(INSTALLATION, self._s.installation) != self._s.installation:
            return Refusal(
                RefusalKind.INVALID,
                f"the runner belongs to installation {labels[INSTALLATION]!r}; this provider "
                f"serves {self._s.installation!r}",
                "installation",
            )
        labels.setdefault(MANAGED, "true")
        if len(labels) + len(runner.tags) + 1 > MAX_TAGS:
            return Refusal(RefusalKind.INVALID, f"more than EC2's {MAX_TAGS} tags", "labels")
        existing = await self._ours({}, request.runner_name)
        if existing:
            log.info("aws.create.adopted", runner=request.runner_name)
            return Created(self._machine(existing[0]))
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
        tried: list[Tried] = []
        out_of_quota: set[str] = set()
        for attempt in plan(self._s.subnets, runner.instance_types):
            if attempt.instance_type in out_of_quota:
                continue
            params = run_params(self._s, runner, request, labels, attempt, root_device)
            result = await self._attempt(request, params, attempt)
            if isinstance(result, Created):
                return result
            log.info(
                "aws.create.refused",
                runner=request.runner_name,
                attempt=str(attempt),
                code=result.code,
            )
            tried.append(result)
            if result.outcome is Outcome.QUOTA:
                out_of_quota.add(attempt.instance_type)
            if result.outcome in STOPS_SEARCH:
                break
        return settle(tried, self._s.region)

    async def _root_device(self, image: str) -> str | None:
        if image not in self._root_devices:
            self._root_devices[image] = await self._api.root_device(image)
        return self._root_devices[image]

    async def _attempt(
        self, request: CreateRequest, params: Mapping[str, Any], attempt: Attempt
    ) -> Created | Tried:
        detail, code = "", ""
        for sent in range(UNCERTAIN_RETRIES + 1):
            result = await self._api.run(params)  # the same ClientToken every time
            if isinstance(result, Ec2Instance):
                return Created(self._machine(result))
            outcome = classify(result.code, result.status)
            detail, code = result.describe(), result.code
            if outcome is not Outcome.UNCERTAIN:
                return Tried(attempt, outcome, code, detail, resource_of(code))
            log.warning(
                "aws.create.uncertain",
                runner=request.runner_name,
                attempt=str(attempt),
                sent=sent + 1,
                code=code,
            )
            if sent < UNCERTAIN_RETRIES:
                await self._clock.sleep(RETRY_DELAYS[sent])
        # Settle before reporting: the instance may exist although no answer said so.
        found = await self._ours({}, request.runner_name)
        if found:
            return Created(self._machine(found[0]))
        return Tried(attempt, Outcome.UNCERTAIN, code, detail)

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

    async def delete(self, name: str) -> None:
        ids = [inst.instance_id for inst in await self._ours({}, name)]
        if ids:
            await self._api.terminate(ids)
            log.info("aws.delete.done", runner=name, instances=len(ids))

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        return [self._machine(inst) for inst in await self._ours(selector)]

    async def update_runner(self, name: str, job: JobHint) -> None:
        """Nothing to do: a cloud machine has no job-aware admission."""

    def close(self) -> None:
        self._api.close()


def open_aws_provider(settings: AwsSettings, clock: Clock | None = None) -> AwsProvider:
    """A provider on the real SDK; this is where boto3 gets imported."""
    from rungar_aws.ec2 import Ec2Api

    return AwsProvider(settings, Ec2Api(settings), clock)
