"""Two placement examples (pack; priority), replayed through the placement engine on a virtual
clock.

``pack``: compute1, compute2 and gcp; a runner goes to compute1 while it takes them, to compute2
at once when compute1 refuses it for being full, then to gcp. ``priority``: rungar-c8-m16
(priority 10) finds both hosts full of rungar-c2-m4 runners and holds the small ones off until
the room it needs opens up. Each returns the timeline as lines a person reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from rungar.config.model import Placement, ProviderConfig, ScaleSetConfig, ScaleSetProvider, Timing
from rungar.model import sentences
from rungar.model.units import format_duration
from rungar.placement import Fleet
from rungar.placement.plan import Outcome, Placed, Try
from rungar.testing.simulation import SimProvider, place_on_backends

GIB = 1


@dataclass
class Story:
    title: str
    fleet: Fleet
    backends: dict[str, SimProvider]
    sizes: dict[str, tuple[int, int]]
    start: float = 0.0
    now: float = 0.0
    lines: list[str] = field(default_factory=list)
    runners: dict[str, tuple[str, str]] = field(default_factory=dict)
    serial: int = 0

    def say(self, text: str) -> None:
        self.lines.append(f"  t+{format_duration(self.now - self.start):>4}  {text}")

    def observe(self, scale_set: str, attempt: Try) -> None:
        if attempt.outcome is Outcome.CREATED:
            return
        if attempt.outcome is Outcome.REFUSED and attempt.refusal is not None:
            backoff = self.fleet.backoff(scale_set, attempt.provider)
            wait = format_duration(backoff.remaining(self.now)) if backoff else "0s"
            kind = attempt.refusal.kind.value.upper()
            self.say(
                f"{attempt.provider} refuses {scale_set}'s runner: {kind} ({attempt.message}); "
                f"{scale_set} skips it for {wait} and tries the next at once"
            )
        else:
            self.say(f"{attempt.provider}: {attempt.outcome.value} ({attempt.message})")

    async def ask(self, scale_set: str) -> str | None:
        found = self.fleet.candidates(scale_set, self.now)
        if not found.any:
            self.say(f"{scale_set} registers nothing: {found.why_none()}")
            self.fleet.hold_full_providers(scale_set, self.now)
            self.report_holds()
            return None
        for skip in found.skips:
            self.say(f"{scale_set} skips {skip.provider}: {skip.reason}")
        self.serial += 1
        runner = f"{scale_set}-{self.serial:08x}"
        result = await place_on_backends(
            self.fleet,
            self.backends,
            scale_set,
            runner,
            self.sizes[scale_set],
            self.now,
            observe=self.observe,
        )
        if isinstance(result, Placed):
            self.runners[runner] = (scale_set, result.provider)
            self.say(f"{result.provider} creates {runner}")
            return runner
        self.say(f"{scale_set}: {result.reason}; its registration is removed and it waits")
        self.report_holds()
        return None

    def report_holds(self) -> None:
        for name in self.backends:
            hold = self.fleet.hold_on(name, self.now)
            if hold is not None:
                self.say(f"{name} is {sentences.held_status(hold.holder, hold.priority)}")

    async def finish(self, runner: str) -> None:
        scale_set, provider = self.runners.pop(runner)
        self.fleet.remove_runner(scale_set, provider, leaving=True)
        self.backends[provider].delete(runner)
        opened = self.fleet.machine_deleted(provider, self.now)
        self.say(f"{runner} finishes its job; its machine on {provider} is deleted")
        if opened.holder:
            self.say(f"room opened on {provider}, held for {opened.holder}: it is tried there now")
            await self.ask(opened.holder)

    def wait(self, seconds: float) -> None:
        self.now += seconds


def _fleet(
    providers: list[ProviderConfig], scale_sets: list[ScaleSetConfig]
) -> tuple[Fleet, Timing]:
    timing = Timing()
    return Fleet(providers, scale_sets, timing), timing


async def pack_story() -> Story:
    providers = [
        ProviderConfig("compute1", "runnerd"),
        ProviderConfig("compute2", "runnerd"),
        ProviderConfig("gcp", "gcp", max_runners=20),
    ]
    scale_sets = [
        ScaleSetConfig(
            "rungar-c4-m8",
            max_runners=10,
            placement=Placement.PACK,
            providers=tuple(ScaleSetProvider(p.name) for p in providers),
        )
    ]
    fleet, _ = _fleet(providers, scale_sets)
    backends = {
        "compute1": SimProvider("compute1", 8, 16),
        "compute2": SimProvider("compute2", 4, 8),
        "gcp": SimProvider("gcp", 1000, 2000),
    }
    story = Story("pack: compute1, compute2, then gcp", fleet, backends, {"rungar-c4-m8": (4, 8)})
    story.say("five jobs are assigned to rungar-c4-m8 (4 vCPU, 8 GiB each; pack)")
    made = [await story.ask("rungar-c4-m8") for _ in range(5)]
    story.wait(10)
    first = next(r for r in made if r is not None)
    await story.finish(first)
    story.say("a job is assigned; room opened on compute1, so its FULL wait is lifted")
    await story.ask("rungar-c4-m8")
    return story


async def priority_story() -> Story:
    providers = [ProviderConfig("compute1", "runnerd"), ProviderConfig("compute2", "runnerd")]
    both = tuple(ScaleSetProvider(p.name) for p in providers)
    scale_sets = [
        ScaleSetConfig("rungar-c2-m4", max_runners=12, providers=both),
        ScaleSetConfig("rungar-c8-m16", max_runners=2, priority=10, providers=both),
    ]
    fleet, _ = _fleet(providers, scale_sets)
    backends = {
        "compute1": SimProvider("compute1", 8, 16),
        "compute2": SimProvider("compute2", 8, 16),
    }
    sizes = {"rungar-c2-m4": (2, 4), "rungar-c8-m16": (8, 16)}
    story = Story("priority: rungar-c8-m16 holds small runners off", fleet, backends, sizes)
    story.say("eight rungar-c2-m4 jobs fill both hosts (2 vCPU, 4 GiB each; spread)")
    small = [await story.ask("rungar-c2-m4") for _ in range(8)]
    story.wait(5)
    story.say("a rungar-c8-m16 job (8 vCPU, 16 GiB, priority 10) is assigned")
    await story.ask("rungar-c8-m16")
    story.wait(5)
    on_compute1 = [r for r in small if r and story.runners[r][1] == "compute1"]
    await story.finish(on_compute1[0])
    story.say("a rungar-c2-m4 job is assigned: the room on compute1 is held for rungar-c8-m16")
    await story.ask("rungar-c2-m4")
    for runner in on_compute1[1:]:
        story.wait(3)
        await story.finish(runner)
    story.say("the hold is released: rungar-c2-m4 uses whatever room opens up again")
    story.wait(5)
    on_compute2 = [r for r in small if r and story.runners.get(r, ("", ""))[1] == "compute2"]
    await story.finish(on_compute2[0])
    await story.ask("rungar-c2-m4")
    return story


SCENARIOS: dict[str, Callable[[], object]] = {"pack": pack_story, "priority": priority_story}


def timelines() -> list[Story]:
    async def both() -> list[Story]:
        return [await pack_story(), await priority_story()]

    return asyncio.run(both())
