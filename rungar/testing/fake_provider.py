"""``FakeProvider``: a scripted provider for simulations, tests and demos (docs/architecture.md).

A sync core (the ``*_now`` methods) holds machines in a room of vCPUs and memory (and optionally a
maximum count) and answers create-or-refuse exactly as the protocol says
(proto/rungar/provider/v1/provider.proto): FULL with the resource that ran out and a human message,
INVALID for a runner larger than the whole provider, Created (the same machine) for a repeat of a
(runner name, request id) it already took. The async :class:`~rungar.model.provider.Provider`
methods wrap the core, first waiting ``latency`` seconds on the injected
:class:`~rungar.clock.Clock` (none by default), so the same fake serves engine tests, the demo and
gRPC.

Faults are scripted for the next N calls or for every call: refusals of a chosen kind, no
answer (optionally after creating the machine: an *uncertain* create), failing deletes and
failing lists. Calls are counted by name in ``calls``; ``set_state`` moves a machine (to
STOPPED, say) as its host would, and the job hints of ``update_runner`` are kept in ``jobs``;
``output[name]`` is what ``last_output`` answers for a machine; ``live`` counts the machines
that are not stopped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rungar.clock import Clock, SystemClock
from rungar.config.loader import FAKE_TYPE
from rungar.config.model import ProviderConfig
from rungar.errors import ProviderError, ProviderUnavailable
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
from rungar.model.runner_block import TYPED_KEYS, RunnerBlock
from rungar.model.units import format_bytes, parse_bytes

if TYPE_CHECKING:
    from rungar.daemon.provider_kinds import ProviderKinds

GIB = 1024**3


@dataclass(slots=True)
class Script:
    """A fault for the next ``remaining`` calls, or for every call when ``remaining`` is None."""

    remaining: int | None = 0

    def fire(self) -> bool:
        if self.remaining is None:
            return True
        if self.remaining > 0:
            self.remaining -= 1
            return True
        return False


@dataclass(slots=True)
class _Held:
    machine: Machine
    request_id: str
    runner: RunnerBlock


@dataclass(slots=True)
class _RefusalScript:
    script: Script = field(default_factory=Script)
    kind: RefusalKind = RefusalKind.FAILED
    resource: str = ""
    message: str = ""
    leave_machine: bool = False


def _count(count: int | None, always: bool) -> int | None:
    return None if always else count


class FakeProvider:
    """A provider with ``vcpus`` and ``memory_bytes`` of room and at most ``max_machines``."""

    def __init__(
        self,
        name: str = "fake",
        *,
        vcpus: float = 8.0,
        memory_bytes: int = 16 * GIB,
        max_machines: int | None = None,
        clock: Clock | None = None,
        kind: str = "fake",
        extra_keys: tuple[str, ...] = (),
        runner_version: str = "",
    ) -> None:
        self.name = name
        self.runner_version = runner_version  # what Info says its machines run
        self.kind = kind
        self.total_vcpus = vcpus
        self.total_memory = memory_bytes
        self.max_machines = max_machines
        self.extra_keys = extra_keys
        self.latency = 0.0  # seconds each async call waits on the clock before answering
        self.calls: Counter[str] = Counter()
        self.created = 0  # machines actually made (repeats and refusals excluded)
        self.jobs: dict[str, JobHint] = {}
        self.output: dict[str, list[str]] = {}  # what last_output answers, per machine
        self.removals: dict[str, Removal] = {}  # why each machine was deleted, when told
        self._clock: Clock = clock or SystemClock()
        self._held: dict[str, _Held] = {}
        # What the machines that are not stopped take, kept as they change rather than summed
        # over every machine at each create (a burst's creates would each walk hundreds).
        self.live = 0
        self._used_vcpus = 0.0
        self._used_memory = 0
        self._refuse = _RefusalScript()
        self._unanswered = Script()
        self._unanswered_after_create = False
        self._failing_deletes = Script()
        self._deletes_unanswered = False
        self._failing_lists = Script()

    # --- scripting -------------------------------------------------------------------------

    def refuse(
        self,
        kind: RefusalKind,
        *,
        count: int | None = 1,
        always: bool = False,
        resource: str = "",
        message: str = "",
        leave_machine: bool = False,
    ) -> None:
        """Refuse the next ``count`` creates (or all of them) with ``kind``, room or not. With
        ``leave_machine`` each refused create leaves its machine behind, stopped, as a cloud
        does when an instance is made and then fails to start: the engine must delete it."""
        text = message or f"refused by script ({kind.value})"
        self._refuse = _RefusalScript(
            Script(_count(count, always)), kind, resource, text, leave_machine
        )

    def unanswered(
        self, *, count: int | None = 1, always: bool = False, after_create: bool = False
    ) -> None:
        """No answer to the next creates; with ``after_create`` the machine is made first."""
        self._unanswered = Script(_count(count, always))
        self._unanswered_after_create = after_create

    def fail_deletes(
        self, *, count: int | None = 1, always: bool = False, unanswered: bool = False
    ) -> None:
        self._failing_deletes = Script(_count(count, always))
        self._deletes_unanswered = unanswered

    def fail_lists(self, *, count: int | None = 1, always: bool = False) -> None:
        self._failing_lists = Script(_count(count, always))

    def heal(self) -> None:
        """Forget every scripted fault and the latency."""
        self._refuse = _RefusalScript()
        self._unanswered = Script()
        self._failing_deletes = Script()
        self._failing_lists = Script()
        self.latency = 0.0

    def set_state(self, name: str, state: MachineState) -> None:
        """Move a held machine to ``state`` (a runner that ended is STOPPED)."""
        held = self._held[name]
        m = held.machine
        self._count(held, -1)
        held.machine = Machine(m.name, state, m.labels, m.size, m.created_at, m.provider)
        self._count(held, +1)

    def _count(self, held: _Held, sign: int) -> None:
        """Add (+1) or take away (-1) what ``held`` takes, when it is not stopped."""
        if held.machine.state is not MachineState.STOPPED:
            self.live += sign
            self._used_vcpus += sign * held.runner.vcpus
            self._used_memory += sign * held.runner.memory_bytes

    # --- the sync core ---------------------------------------------------------------------

    @property
    def machines(self) -> list[Machine]:
        return [h.machine for h in self._held.values()]

    def used(self) -> tuple[float, int]:
        """vCPUs and memory taken by machines that are not stopped."""
        return self._used_vcpus, self._used_memory

    def create_now(self, request: CreateRequest, now: float) -> Created | Refusal:
        """Create or refuse at ``now``; raises ProviderUnavailable when scripted to not answer."""
        self.calls["create"] += 1
        unanswered = self._unanswered.fire()
        if unanswered and not self._unanswered_after_create:
            raise ProviderUnavailable(f"{self.name}: no answer to create (scripted)")
        held = self._held.get(request.runner_name)
        if held is not None and held.request_id == request.request_id:
            outcome: Created | Refusal = Created(held.machine)
        else:
            outcome = self._decide(request, now)
        if unanswered:  # the work is done, the answer is lost: an uncertain create
            raise ProviderUnavailable(f"{self.name}: no answer to create (scripted, after it)")
        return outcome

    def _decide(self, request: CreateRequest, now: float) -> Created | Refusal:
        if request.runner_name in self._held:
            return Refusal(
                RefusalKind.FAILED,
                f"a machine named {request.runner_name} already exists for another request",
            )
        if self._refuse.script.fire():
            r = self._refuse
            if r.leave_machine:
                self._hold(request, now, MachineState.STOPPED)
            return Refusal(r.kind, r.message, r.resource)
        runner = request.runner
        too_big = self._too_big(runner)
        if too_big:
            return Refusal(RefusalKind.INVALID, too_big)
        full = self._out_of_room(runner)
        if full is not None:
            return full
        self.created += 1
        return Created(self._hold(request, now, MachineState.RUNNING))

    def _hold(self, request: CreateRequest, now: float, state: MachineState) -> Machine:
        machine = Machine(
            name=request.runner_name,
            state=state,
            labels=dict(request.labels),
            size=request.runner.describe(),
            created_at=now,
            provider=self.name,
        )
        held = _Held(machine, request.request_id, request.runner)
        self._held[request.runner_name] = held
        self._count(held, +1)
        return machine

    def _too_big(self, runner: RunnerBlock) -> str:
        if runner.vcpus > self.total_vcpus:
            return (
                f"needs {runner.vcpus:g} vCPUs, more than the {self.total_vcpus:g} of {self.name}"
            )
        if runner.memory_bytes > self.total_memory:
            return (
                f"needs {format_bytes(runner.memory_bytes)} of memory, more than the "
                f"{format_bytes(self.total_memory)} of {self.name}"
            )
        return ""

    def _out_of_room(self, runner: RunnerBlock) -> Refusal | None:
        if self.max_machines is not None and self.live >= self.max_machines:
            return Refusal(
                RefusalKind.FULL, f"all {self.max_machines} slots of {self.name} are taken", "slots"
            )
        vcpus, memory = self.used()
        free_memory = self.total_memory - memory
        if runner.memory_bytes > free_memory:
            return Refusal(
                RefusalKind.FULL,
                f"needs {format_bytes(runner.memory_bytes)} of memory, "
                f"{format_bytes(max(0, free_memory))} free",
                "memory",
            )
        free_vcpus = self.total_vcpus - vcpus
        if runner.vcpus > free_vcpus + 1e-9:
            return Refusal(
                RefusalKind.FULL,
                f"needs {runner.vcpus:g} vCPUs, {max(0.0, free_vcpus):g} free",
                "cpu",
            )
        return None

    def delete_now(self, name: str) -> None:
        self.calls["delete"] += 1
        if self._failing_deletes.fire():
            if self._deletes_unanswered:
                raise ProviderUnavailable(f"{self.name}: no answer to delete (scripted)")
            raise ProviderError(f"{self.name}: delete of {name} failed (scripted)")
        held = self._held.pop(name, None)
        if held is not None:
            self._count(held, -1)

    def list_now(self, selector: Mapping[str, str]) -> list[Machine]:
        self.calls["list"] += 1
        if self._failing_lists.fire():
            raise ProviderUnavailable(f"{self.name}: no answer to list (scripted)")
        return [
            h.machine
            for h in self._held.values()
            if all(h.machine.labels.get(k) == v for k, v in selector.items())
        ]

    def validate_now(self, runner: Mapping[str, Any]) -> list[str]:
        self.calls["validate_runner"] += 1
        try:
            block = RunnerBlock.from_mapping(runner)
        except ValueError as e:
            return [str(e)]
        problems = [
            f"{key}: not a key provider {self.name} understands"
            for key in block.extra
            if key not in self.extra_keys
        ]
        too_big = self._too_big(block)
        if too_big:
            problems.append(("vcpus: " if "vCPU" in too_big else "memory: ") + too_big)
        return problems

    # --- the async Provider role -----------------------------------------------------------

    async def _wait(self) -> None:
        if self.latency > 0:
            await self._clock.sleep(self.latency)

    async def info(self) -> ProviderInfo:
        self.calls["info"] += 1
        await self._wait()
        return ProviderInfo(
            self.name,
            self.kind,
            "0",
            (*TYPED_KEYS, *self.extra_keys),
            runner_version=self.runner_version,
        )

    async def validate_runner(self, runner: Mapping[str, Any]) -> list[str]:
        await self._wait()
        return self.validate_now(runner)

    async def create(self, request: CreateRequest) -> Created | Refusal:
        await self._wait()
        return self.create_now(request, self._clock.now())

    async def delete(self, name: str, removal: Removal | None = None) -> None:
        await self._wait()
        if removal is not None and name in self._held:
            self.removals[name] = removal
        self.delete_now(name)

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        await self._wait()
        return self.list_now(selector)

    async def update_runner(self, name: str, job: JobHint) -> None:
        self.calls["update_runner"] += 1
        await self._wait()
        if name in self._held:
            self.jobs[name] = job

    async def last_output(self, name: str, lines: int = 20) -> Sequence[str]:
        """What a test wrote in ``output[name]``, the last ``lines`` of it."""
        self.calls["last_output"] += 1
        await self._wait()
        return list(self.output.get(name, ()))[-lines:] if lines > 0 else []


def fake_from_config(config: ProviderConfig, clock: Clock) -> FakeProvider:
    """The provider of a ``type: fake`` entry: its ``vcpus`` and ``memory`` options as its
    room (unbounded when unset), on the daemon's clock."""
    options = config.options
    vcpus = float(options.get("vcpus", 1e9))
    memory = parse_bytes(options["memory"]) if "memory" in options else 10**18
    return FakeProvider(config.name, vcpus=vcpus, memory_bytes=memory, clock=clock)


def with_fake(kinds: ProviderKinds | None = None) -> ProviderKinds:
    """``kinds`` (a new set when None) serving ``type: fake`` in process."""
    from rungar.daemon.provider_kinds import ProviderKinds

    kinds = kinds if kinds is not None else ProviderKinds()
    kinds.register(FAKE_TYPE, fake_from_config)
    return kinds
