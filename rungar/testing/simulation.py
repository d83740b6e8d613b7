"""A deterministic, seeded simulation of placement under faults (docs/architecture.md).

Each seed builds a random fleet — providers with room in vCPUs and memory, weights and limits;
scale sets with priorities, placements, runner sizes and limits — and then takes random steps
on a virtual clock: runners asked for (several at once, interleaved), runners finishing, deletes
failing and recovering, providers going silent and answering again, providers refusing for
reasons of their own. After every step it checks the invariants:

1. no scale set and no provider ever has more than its ``max_runners``;
2. no create reaches a provider inside that scale set's backoff (checked against an independent
   model of the documented backoff rule) or while a higher priority holds it;
3. no runner is ever placed twice;
4. a runner is not placed only when every provider of its scale set was skipped for a reason or
   refused it: none that had room and could be tried was passed over.

A failure raises :class:`InvariantBroken` naming the seed and step; ``simulate(seed, steps)``
replays it.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rungar.config.model import (
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    Timing,
)
from rungar.engine.create.placing import Observer, RoomFn, place
from rungar.errors import ProviderError, ProviderUnavailable
from rungar.model.machine import Created, Machine, MachineState, Refusal, RefusalKind
from rungar.placement import Fleet, RoomOpened
from rungar.placement.backoff import backoff_wait
from rungar.placement.plan import NotPlaced, Outcome, Placed, Try


class InvariantBroken(AssertionError):
    def __init__(self, seed: int, step: int, message: str) -> None:
        self.seed, self.step = seed, step
        super().__init__(
            f"seed {seed}, step {step}: {message} "
            f"(replay: rungar.testing.simulation.simulate(seed={seed}, steps={step}))"
        )


@dataclass
class SimProvider:
    """A backend with room: refuses FULL when a runner does not fit, and scripted faults."""

    name: str
    vcpus: int
    memory: int
    machines: dict[str, tuple[int, int]] = field(default_factory=dict)  # runner -> size
    silent: bool = False
    failing_deletes: bool = False
    refuse_failed: bool = False

    def fits(self, vcpus: int, memory: int) -> bool:
        used_cpu = sum(c for c, _ in self.machines.values())
        used_mem = sum(m for _, m in self.machines.values())
        return used_cpu + vcpus <= self.vcpus and used_mem + memory <= self.memory

    def create(self, runner: str, vcpus: int, memory: int) -> Created | Refusal:
        if self.silent:
            raise ProviderUnavailable(f"{self.name} does not answer")
        if vcpus > self.vcpus or memory > self.memory:
            return Refusal(RefusalKind.INVALID, f"{vcpus} vCPUs is more than {self.vcpus}")
        if self.refuse_failed:
            return Refusal(RefusalKind.FAILED, "image pull failed")
        if runner in self.machines:
            return Created(Machine(runner, MachineState.STARTING))
        if not self.fits(vcpus, memory):
            return Refusal(RefusalKind.FULL, "not enough memory", "memory")
        self.machines[runner] = (vcpus, memory)
        return Created(Machine(runner, MachineState.STARTING))

    def delete(self, runner: str) -> None:
        if self.silent or self.failing_deletes:
            raise ProviderError(f"{self.name} failed to delete {runner}")
        self.machines.pop(runner, None)


async def place_on_backends(
    fleet: Fleet,
    backends: dict[str, SimProvider],
    scale_set: str,
    runner: str,
    size: tuple[int, int],
    now: float,
    *,
    before_create: Callable[[str], Awaitable[None]] | None = None,
    observe: Observer | None = None,
    on_room: RoomFn | None = None,
) -> Placed | NotPlaced:
    """Run the engine's try-in-order loop against simulated backends (no settling: they
    answer)."""

    async def create(provider: str) -> Created | Refusal:
        if before_create is not None:
            await before_create(provider)
        return backends[provider].create(runner, *size)

    async def delete(provider: str) -> None:
        backends[provider].delete(runner)

    async def settle(provider: str) -> Created | None:
        return None

    return await place(
        fleet,
        scale_set,
        now=lambda: now,
        create=create,
        delete=delete,
        settle=settle,
        observe=observe,
        on_room=on_room,
    )


@dataclass
class Stats:
    steps: int = 0
    placed: int = 0
    not_placed: int = 0
    refusals: int = 0
    finished: int = 0
    holds_seen: int = 0


class Simulation:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = 1_800_000_000.0
        self.step = 0
        self.stats = Stats()
        self.timing = Timing(reconcile_interval=30, backoff_first=15, backoff_max=120)
        self.backends: dict[str, SimProvider] = {}
        providers = []
        for i in range(self.rng.randint(1, 5)):
            name = f"p{i}"
            size = self.rng.choice([4, 8, 16, 32])
            self.backends[name] = SimProvider(name, size, size * 2)
            providers.append(
                ProviderConfig(
                    name=name,
                    type="fake",
                    weight=self.rng.choice([1.0, 1.0, 2.0, 0.5]),
                    max_runners=self.rng.choice([0, 0, 1, 2, 3, 5]),
                )
            )
        self.scale_sets: list[ScaleSetConfig] = []
        self.sizes: dict[str, tuple[int, int]] = {}
        for j in range(self.rng.randint(1, 4)):
            names = [p.name for p in providers]
            self.rng.shuffle(names)
            chosen = names[: self.rng.randint(1, len(names))]
            vcpus = self.rng.choice([1, 2, 4, 8])
            name = f"s{j}"
            self.sizes[name] = (vcpus, vcpus * 2)
            self.scale_sets.append(
                ScaleSetConfig(
                    name=name,
                    max_runners=self.rng.randint(1, 12),
                    providers=tuple(ScaleSetProvider(p) for p in chosen),
                    priority=self.rng.choice([0, 0, 5, 10]),
                    placement=self.rng.choice([Placement.SPREAD, Placement.PACK]),
                )
            )
        self.fleet = Fleet(providers, self.scale_sets, self.timing)
        self.runners: dict[str, tuple[str, str]] = {}  # runner -> (scale set, provider)
        self.leaving: dict[str, str] = {}  # runner -> provider, machine not yet deleted
        self.streaks: dict[tuple[str, str], tuple[int, float]] = {}  # oracle: (n, until)
        self.serial = 0
        self.in_flight = 0  # placements running now
        self.started = 0  # placements started so far

    # ----------------------------------------------------------------- checks

    def fail(self, message: str) -> None:
        raise InvariantBroken(self.seed, self.step, message)

    def check(self) -> None:
        per_set: defaultdict[str, int] = defaultdict(int)
        for scale_set, _ in self.runners.values():
            per_set[scale_set] += 1
        for config in self.scale_sets:
            if per_set[config.name] > config.max_runners:
                self.fail(f"{config.name} has {per_set[config.name]} > {config.max_runners}")
        seen: dict[str, str] = {}
        for backend in self.backends.values():
            limit = self.fleet.providers[backend.name].max_runners
            if limit and len(backend.machines) > limit:
                self.fail(f"{backend.name} holds {len(backend.machines)} machines > {limit}")
            for runner in backend.machines:
                if runner in seen:
                    self.fail(f"{runner} placed twice: on {seen[runner]} and {backend.name}")
                seen[runner] = backend.name
                if runner not in self.runners and runner not in self.leaving:
                    self.fail(f"{runner} on {backend.name} is tracked by nobody")

    def check_create_allowed(self, scale_set: str, provider: str) -> None:
        n_until = self.streaks.get((scale_set, provider))
        if n_until is not None and self.now < n_until[1]:
            self.fail(f"{scale_set} created on {provider} inside its backoff")
        priority = self.fleet.scale_sets[scale_set].priority
        hold = self.fleet.hold_on(provider, self.now)
        if hold is not None and hold.holder != scale_set and hold.priority > priority:
            self.fail(f"{scale_set} created on {provider} held for {hold.holder}")

    # ----------------------------------------------------------------- actions

    async def ask_for_runner(self, scale_set: str) -> None:
        if self.fleet.cannot_place(scale_set, self.now):
            self.fleet.hold_full_providers(scale_set, self.now)
            return
        # Whether another placement ran beside this one: its claim may have taken a provider's
        # last place for a moment and given it back when its create failed.
        others_at_start, started_before = self.in_flight, self.started
        self.in_flight += 1
        self.started += 1
        try:
            await self._ask_for_runner(scale_set, others_at_start, started_before)
        finally:
            self.in_flight -= 1

    async def _ask_for_runner(
        self, scale_set: str, others_at_start: int, started_before: int
    ) -> None:
        self.serial += 1
        runner = f"{scale_set}-{self.serial:08x}"
        vcpus, memory = self.sizes[scale_set]
        tried: list[str] = []
        room_before = {
            name: backend.fits(vcpus, memory) and not backend.silent and not backend.refuse_failed
            for name, backend in self.backends.items()
        }
        tryable_before = set(self.fleet.candidates(scale_set, self.now).order)

        async def before_create(provider: str) -> None:
            self.check_create_allowed(scale_set, provider)
            tried.append(provider)
            for _ in range(self.rng.randint(0, 3)):
                await asyncio.sleep(0)  # interleave with other placements

        result = await place_on_backends(
            self.fleet,
            self.backends,
            scale_set,
            runner,
            (vcpus, memory),
            self.now,
            before_create=before_create,
            observe=self.refusal_seen,
            on_room=self.room_opened,
        )
        if isinstance(result, Placed):
            self.runners[runner] = (scale_set, result.provider)
            self.streaks.pop((scale_set, result.provider), None)
            self.stats.placed += 1
        else:
            self.stats.not_placed += 1
            concurrent = others_at_start > 0 or self.started > started_before + 1
            self.check_no_room_passed_over(
                scale_set, result, room_before, tryable_before, tried, concurrent
            )

    def refusal_seen(self, scale_set: str, attempt: Try) -> None:
        """The model's streak grows the moment a refusal is recorded, not when its placement
        ends: room a placement beside it opens in between lifts the wait (the fleet's order)."""
        if attempt.outcome in (Outcome.REFUSED, Outcome.TIMED_OUT):
            self.stats.refusals += 1
            n, _ = self.streaks.get((scale_set, attempt.provider), (0, 0.0))
            wait = backoff_wait(n + 1, self.timing.backoff_first, self.timing.backoff_max)
            self.streaks[(scale_set, attempt.provider)] = (n + 1, self.now + wait)

    def check_no_room_passed_over(
        self,
        scale_set: str,
        result: NotPlaced,
        room_before: dict[str, bool],
        tryable_before: set[str],
        tried: list[str],
        concurrent: bool = False,
    ) -> None:
        if result.stranded_on:
            return  # placement stopped on purpose at a provider it could not settle
        config = self.fleet.scale_sets[scale_set]
        set_full = self.fleet.runners_of(scale_set) + self.fleet.creating_of(scale_set)
        for name in tryable_before:
            if not room_before[name] or name in tried:
                continue
            # A concurrent placement may have made the provider skippable in the meantime
            # (its own refusal, a hold, the last place taken): then the skip must still stand.
            skips = [t.message for t in result.tries if t.provider == name]
            stands = bool(skips) and self.fleet.skip_reason(scale_set, name, self.now) == skips[0]
            limit = self.fleet.providers[name].max_runners
            raced = limit > 0 and self.fleet.provider_count(name) >= limit
            # ...or a placement beside this one claimed its last place and gave it back (its
            # create failed) before this check: the skip was true when it was made.
            raced = raced or (concurrent and bool(skips) and skips[0].startswith("at its limit"))
            if not (stands or raced) and set_full < config.max_runners:
                self.fail(f"{scale_set} was not placed while {name} had room and was tryable")

    def finish_runner(self) -> None:
        if not self.runners:
            return
        runner = self.rng.choice(sorted(self.runners))
        scale_set, provider = self.runners.pop(runner)
        self.fleet.remove_runner(scale_set, provider, leaving=True)
        self.leaving[runner] = provider
        self.stats.finished += 1

    def settle_leaving(self) -> None:
        for runner, provider in sorted(self.leaving.items()):
            try:
                self.backends[provider].delete(runner)
            except ProviderError:
                continue
            del self.leaving[runner]
            self.room_opened(self.fleet.machine_deleted(provider, self.now))

    def room_opened(self, opened: RoomOpened) -> None:
        """Room opening lifts FULL waits there: the model's streaks follow (the count kept)."""
        for scale_set in {*opened.forgiven, opened.holder} - {""}:
            n_until = self.streaks.get((scale_set, opened.provider))
            if n_until is not None:
                self.streaks[(scale_set, opened.provider)] = (n_until[0], self.now)

    def list_providers(self) -> None:
        """A reconcile pass: every provider that answers a List is reachable again."""
        for name, backend in self.backends.items():
            self.fleet.set_reachable(name, not backend.silent)

    def inject_fault(self) -> None:
        backend = self.backends[self.rng.choice(sorted(self.backends))]
        fault = self.rng.choice(["silent", "failing_deletes", "refuse_failed"])
        setattr(backend, fault, not getattr(backend, fault))

    async def take_step(self) -> None:
        self.step += 1
        roll = self.rng.random()
        if roll < 0.45:
            names = [s.name for s in self.scale_sets]
            burst = [self.rng.choice(names) for _ in range(self.rng.randint(1, 4))]
            await asyncio.gather(*(self.ask_for_runner(n) for n in burst))
        elif roll < 0.70:
            self.finish_runner()
        elif roll < 0.78:
            self.inject_fault()
        elif roll < 0.90:
            self.list_providers()
            self.settle_leaving()
        self.now += self.rng.choice([0.0, 1.0, 5.0, 15.0, 31.0])
        self.stats.holds_seen += sum(
            1 for p in self.backends if self.fleet.hold_on(p, self.now) is not None
        )
        self.check()


async def run(seed: int, steps: int) -> Stats:
    sim = Simulation(seed)
    for _ in range(steps):
        await sim.take_step()
    sim.stats.steps = sim.step
    return sim.stats


def simulate(seed: int, steps: int = 1000) -> Stats:
    """Run (or replay) one seed; raises :class:`InvariantBroken` on a broken invariant."""
    return asyncio.run(run(seed, steps))


async def run_many(seeds: range, steps: int) -> Stats:
    total = Stats()
    for seed in seeds:
        stats = await run(seed, steps)
        for name in ("steps", "placed", "not_placed", "refusals", "finished", "holds_seen"):
            setattr(total, name, getattr(total, name) + getattr(stats, name))
    return total
