"""Small builders for placement tests: a fleet from short specs, scripted provider answers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rungar.config.model import (
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    Timing,
)
from rungar.engine.create.placing import RoomFn, place
from rungar.errors import ProviderError, ProviderUnavailable
from rungar.model.machine import Created, Machine, MachineState, Refusal, RefusalKind
from rungar.placement import Fleet, HoldRule
from rungar.placement.plan import NotPlaced, Placed

TIMING = Timing(reconcile_interval=30, backoff_first=10, backoff_max=40)


def provider(
    name: str,
    weight: float = 1.0,
    max_runners: int = 0,
    disabled: bool = False,
    price_per_hour: float | None = None,
) -> ProviderConfig:
    return ProviderConfig(
        name=name,
        type="fake",
        weight=weight,
        max_runners=max_runners,
        disabled=disabled,
        price_per_hour=price_per_hour,
    )


def scale_set(
    name: str,
    providers: Sequence[str],
    *,
    priority: int = 0,
    placement: Placement = Placement.SPREAD,
    max_runners: int = 100,
) -> ScaleSetConfig:
    return ScaleSetConfig(
        name=name,
        max_runners=max_runners,
        providers=tuple(ScaleSetProvider(p) for p in providers),
        priority=priority,
        placement=placement,
    )


def fleet(
    providers: Sequence[ProviderConfig],
    scale_sets: Sequence[ScaleSetConfig],
    timing: Timing = TIMING,
    *,
    hold_rule: HoldRule = HoldRule.EVERY_FULL,
) -> Fleet:
    return Fleet(providers, scale_sets, timing, hold_rule=hold_rule)


FULL = Refusal(RefusalKind.FULL, "not enough memory", "memory")
INVALID = Refusal(RefusalKind.INVALID, "8 vCPUs is more than the host's 4 CPUs")
FAILED = Refusal(RefusalKind.FAILED, "connection reset")


@dataclass
class Script:
    """What each provider answers to Create, and a log of every call made."""

    answers: Mapping[str, Refusal | str] = field(default_factory=dict)  # "ok", "silent", "error"
    failing_deletes: set[str] = field(default_factory=set)
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def create(self, provider: str) -> Created | Refusal:
        self.calls.append(("create", provider))
        answer = self.answers.get(provider, "ok")
        if answer == "silent":
            raise ProviderUnavailable("connection refused")
        if answer == "error":
            raise ProviderError("connection reset")
        if isinstance(answer, Refusal):
            return answer
        return Created(Machine(name="r1", state=MachineState.STARTING))

    async def delete(self, provider: str) -> None:
        self.calls.append(("delete", provider))
        if provider in self.failing_deletes:
            raise ProviderError("delete timed out")

    async def settle(self, provider: str) -> Created | None:
        self.calls.append(("settle", provider))
        return None

    def created_on(self) -> list[str]:
        return [p for c, p in self.calls if c == "create"]


async def try_place(
    f: Fleet,
    name: str,
    script: Script,
    now: float,
    *,
    on_room: RoomFn | None = None,
    reserve: bool = False,
) -> Placed | NotPlaced:
    return await place(
        f,
        name,
        now=lambda: now,
        create=script.create,
        delete=script.delete,
        settle=script.settle,
        on_room=on_room,
        reserve=reserve,
    )
