"""The least wait a job of one scale set could have had, from the replay's state as it is queued
(``benchmarks/fleet.py``'s large-job bound; docs/benchmarks.md).

As each job of the watched scale set is queued, :class:`BoundWatch` computes the earliest it
could start under any placement from that moment that keeps nothing empty in advance and takes
no runner away, knowing every job's duration:

- every runner already on a host keeps its room until it ends: a busy one at its job's end; a
  booting one takes, when it connects, the oldest job of its scale set still queued (booting
  runners connect in order, and take the queued jobs in order), and keeps its room to that
  job's end; one left with no queued job to take, or an idle one, is counted gone at once;
- nothing else is placed on any host from then on but the watched scale set's own runners, so
  the hosts only drain (the most room any placement can leave them);
- the jobs of the watched scale set queued before this one start first (the queue is first
  come, first served): booting runners of the scale set take the oldest, and each of the rest
  needs a runner placed where its reservation fits, within the scale set's ``max_runners``,
  holding that room and place from its placement until its job ends (boot, then the job). Such
  runners are placed one after another, each as early as the drain and the earlier ones allow.

Placing each in turn as early as possible is optimal here: every host's room only grows, apart
from the watched runners, so room for one watched runner is a set of slots each open from some
moment on, and a runner placed later never ends sooner. The bound is the moment the job's own
runner connects, less its queue time; no placement started it sooner, which the caller checks
on every job (:attr:`BoundWatch.starts`).

It reads runnerd hosts (:class:`rungar.simulate.backends.RunnerdHost`) admitting by their
profiles' memory (caps): a runner reserves its profile's memory, so room is memory alone.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from rungar.simulate.backends import RunnerdHost
from rungar.simulate.world import World, _Runner


class BoundWatch(World):
    """A replay that notes, as each job of ``watched`` is queued, the least wait it could have
    had (:func:`least_wait`), and when each of them started."""

    def __init__(self, *args: Any, watched: str = "large", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.watched = watched
        self.bounds: dict[int, float] = {}  # job index -> the least wait it could have had
        self.starts: dict[int, float] = {}  # job index -> when it started

    async def arrive(self, index: int) -> None:
        if self.jobs[index].scale_set == self.watched:
            self.bounds[index] = self.least_wait(index)
        await super().arrive(index)

    def start_job(self, record: _Runner) -> None:
        if record.scale_set == self.watched:
            self.starts[self.queue[record.scale_set][0]] = self.now
        super().start_job(record)

    def least_wait(self, index: int) -> float:
        """The earliest job ``index`` (of the watched scale set, being queued now) could start,
        less now; ``math.inf`` when no host could ever take its runner."""
        name = self.watched
        if self.idle[name]:
            return 0.0  # an idle runner takes it at once
        now = self.now
        queued = {s: [self.jobs[i] for i in q] for s, q in self.queue.items()}
        queued[name].append(self.jobs[index])
        # Booting runners, in the order they connect; each takes its scale set's oldest job.
        booting = sorted(
            (r.created_at + self.backends[r.provider].boot, order, r)
            for order, r in enumerate(self.runners.values())
            if not r.connected and not r.killed
        )
        taken: dict[str, int] = defaultdict(int)
        ends: dict[str, float] = {}  # runner -> when its room is free again
        connects: list[float] = []  # the watched scale set's booting runners, in order
        for connect, _, r in booting:
            position = taken[r.scale_set]
            taken[r.scale_set] += 1
            waiting = queued[r.scale_set]
            ends[r.name] = connect + (waiting[position].duration if position < len(waiting) else 0)
            if r.scale_set == name:
                connects.append(connect)
        position = len(queued[name]) - 1  # 0: the oldest queued
        if position < len(connects):
            return connects[position] - now
        for r in self.runners.values():
            if r.name in ends:
                continue
            ends[r.name] = r.started + self.jobs[r.job].duration if r.job is not None else now
        hosts = {
            p: b for p in self.placeable(name) if isinstance(b := self.backends[p], RunnerdHost)
        }
        slots = room_slots(hosts, self.runners, ends, self.need(name, hosts), now)
        live = [ends[r.name] for r in self.of_set[name].values()]
        places = sorted([now] * max(0, self.sets[name].max_runners - len(live)) + live)
        boot = min((b.boot for b in hosts.values()), default=0.0)
        rest = [job.duration for job in queued[name][len(connects) :]]
        placed = place_in_turn(rest, slots, places, boot, now)
        return placed + boot - now

    def placeable(self, name: str) -> list[str]:
        return [entry.name for entry in self.sets[name].providers]

    def need(self, name: str, hosts: Mapping[str, RunnerdHost]) -> dict[str, int]:
        """The memory the watched scale set's runner reserves on each host (its profile's)."""
        blocks = {entry.name: entry.runner for entry in self.sets[name].providers}
        out = {}
        for provider, host in hosts.items():
            profile = str(blocks.get(provider, {}).get("profile") or name)
            out[provider] = host.config.profiles[profile].memory
        return out


def room_slots(
    hosts: Mapping[str, RunnerdHost],
    runners: Mapping[str, _Runner],
    ends: Mapping[str, float],
    need: Mapping[str, int],
    now: float,
) -> list[float]:
    """When each slot for one more runner opens, every host draining with nothing placed: a
    host opens a slot each time its free memory passes another multiple of the runner's
    reservation (the watched runners placed in the slots give theirs back when they end)."""
    on: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for r in runners.values():
        if r.provider in hosts:
            held = hosts[r.provider].runners.get(r.name)
            if held is not None:
                on[r.provider].append((ends[r.name], held.reserved))
    slots: list[float] = []
    for provider, host in hosts.items():
        size, budget = need[provider], host.limits.memory_max
        if budget is None:
            raise ValueError(f"{provider}: the bound reads hosts with a MemoryMax")
        free = budget - sum(memory for _, memory in on[provider])
        opened = max(0, free // size)
        slots += [now] * opened
        for end, memory in sorted(on[provider]):
            free += memory
            more = max(0, free // size) - opened
            slots += [max(now, end)] * more
            opened += more
    return slots


def place_in_turn(
    durations: Sequence[float], slots: list[float], places: list[float], boot: float, now: float
) -> float:
    """When the last of runners placed one after another (each needing a room slot and one of
    the scale set's places, holding both for ``boot`` plus its job's duration) is placed, each
    as early as it can be; ``math.inf`` when they cannot all be."""
    heapq.heapify(slots)
    heapq.heapify(places)
    at = now
    for duration in durations:
        if not slots or not places:
            return math.inf
        at = max(at, heapq.heappop(slots), heapq.heappop(places))
        heapq.heappush(slots, at + boot + duration)
        heapq.heappush(places, at + boot + duration)
    return at


def checked_bounds(world: BoundWatch) -> tuple[int, int]:
    """How many of the watched jobs that started were checked against their bound, and how
    many of them started sooner than it (none, if it is a bound)."""
    checks = broken = 0
    for index, started in world.starts.items():
        bound = world.bounds.get(index)
        if bound is None:
            continue
        checks += 1
        if started - world.jobs[index].queued_at < bound - 1e-6:
            broken += 1
    return checks, broken


__all__ = ["BoundWatch", "checked_bounds", "place_in_turn", "room_slots"]
