"""The daemon's in-memory record of each runner; the providers' listings correct it each pass."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rungar.model.machine import JobHint, MachineState, Removal
from rungar.model.runner import GitHubState, RunnerState, RunnerView


@dataclass(slots=True)
class RunnerRecord:
    name: str
    scale_set: str
    provider: str
    revision: str
    created_at: float
    state: RunnerState
    runner_id: int = 0
    github: GitHubState = GitHubState.UNKNOWN
    connected: bool = False
    offline_since: float | None = None
    job: str = ""
    job_id: str = ""
    machine: MachineState = MachineState.STARTING
    unreachable_since: float | None = None  # its provider could not be listed since then
    stopped_at: float | None = None  # first listed stopped, its job's completion not yet heard
    left_at: float = 0.0  # when it started leaving
    removal_reason: str = ""
    removal: Removal | None = None  # what its provider is told when its machine is deleted
    hint: JobHint | None = None  # the job it took, as GitHub reported it
    adopted: bool = False
    # Known from the state database, its provider not yet listed since the daemon started: it
    # counts as it was until that provider answers (rungar.engine.reconcile.recall).
    recalled: bool = False

    def view(self) -> RunnerView:
        return RunnerView(
            name=self.name,
            scale_set=self.scale_set,
            provider=self.provider,
            revision=self.revision,
            created_at=self.created_at,
            state=self.state,
            github=self.github,
            connected=self.connected,
            offline_since=self.offline_since,
            runner_id=self.runner_id,
            job=self.job,
        )


class CreatesInFlight:
    """Creates in flight: the one tracker of them (docs/concepts.md, "Create in flight").

    A create is *asked* when a scale pass wants one more runner (it may still wait for a create
    slot), then *named* once it has its runner name, and *done* when it became a record or was
    given up. The scale pass counts the asked ones towards its target; adoption never takes a
    named one (its machine may appear in a listing before its Create answers); placement's
    claims and the store's create intents are what this tracker is not: a place held at a
    provider during the call, and what a crash must settle."""

    def __init__(self) -> None:
        self._asked: dict[str, int] = {}  # by scale set
        self._names: dict[str, str] = {}  # runner name -> scale set

    def ask(self, scale_set: str) -> None:
        self._asked[scale_set] = self._asked.get(scale_set, 0) + 1

    def done_asking(self, scale_set: str) -> None:
        left = self._asked.get(scale_set, 0) - 1
        if left > 0:
            self._asked[scale_set] = left
        else:
            self._asked.pop(scale_set, None)

    def name(self, scale_set: str, runner: str) -> None:
        self._names[runner] = scale_set

    def done(self, runner: str) -> None:
        self._names.pop(runner, None)

    def count(self, scale_set: str) -> int:
        """Creates asked for this scale set and not yet done."""
        return self._asked.get(scale_set, 0)

    def __contains__(self, runner: object) -> bool:
        return runner in self._names

    def names(self) -> set[str]:
        """The runner names of the creates named and not yet done."""
        return set(self._names)


GONE_REMEMBERED = 1000  # runners dropped whose late job completions are still booked


class RunnerTable:
    """Every runner the daemon knows, by name, and indexed by scale set and by provider (a
    reconcile pass asks per scale set, and a fleet of thousands of runners must not be walked
    once per scale set); ``creating`` names are never adopted.

    A record's scale set and provider never change once it is added; its state does, so
    :meth:`live` filters the scale set's runners as it is asked. ``on_change`` hears of every
    runner added (the record) or dropped (None), so the state database keeps the table."""

    def __init__(self) -> None:
        self.on_change: Callable[[str, RunnerRecord | None], None] | None = None
        self._runners: dict[str, RunnerRecord] = {}
        self._by_set: dict[str, dict[str, RunnerRecord]] = {}
        self._by_provider: dict[str, dict[str, RunnerRecord]] = {}
        self._providers_of: dict[str, dict[str, int]] = {}  # scale set -> provider -> runners
        self.creating = CreatesInFlight()
        # The last runners dropped, newest last: a job lost with its machine completes after
        # its runner is gone, and is still booked to the provider that held it.
        self._gone: OrderedDict[str, RunnerRecord] = OrderedDict()

    def __contains__(self, name: str) -> bool:
        return name in self._runners

    def __iter__(self) -> Iterator[RunnerRecord]:
        return iter(list(self._runners.values()))

    def __len__(self) -> int:
        return len(self._runners)

    def names(self) -> set[str]:
        return set(self._runners)

    def get(self, name: str) -> RunnerRecord | None:
        return self._runners.get(name)

    def add(self, record: RunnerRecord) -> None:
        self._unindex(self._runners.get(record.name))
        self._runners[record.name] = record
        self._by_set.setdefault(record.scale_set, {})[record.name] = record
        self._by_provider.setdefault(record.provider, {})[record.name] = record
        on = self._providers_of.setdefault(record.scale_set, {})
        on[record.provider] = on.get(record.provider, 0) + 1
        if self.on_change is not None:
            self.on_change(record.name, record)

    def pop(self, name: str) -> RunnerRecord | None:
        record = self._runners.pop(name, None)
        self._unindex(record)
        if record is not None:
            self._gone[name] = record
            self._gone.move_to_end(name)
            while len(self._gone) > GONE_REMEMBERED:
                self._gone.popitem(last=False)
            if self.on_change is not None:
                self.on_change(name, None)
        return record

    def gone(self, name: str) -> RunnerRecord | None:
        """A runner dropped since this daemon started, among the last ``GONE_REMEMBERED``."""
        return self._gone.get(name)

    def _unindex(self, record: RunnerRecord | None) -> None:
        if record is None:
            return
        on = self._providers_of.get(record.scale_set)
        if on is not None and record.provider in on:
            on[record.provider] -= 1
            if not on[record.provider]:
                del on[record.provider]
                if not on:
                    del self._providers_of[record.scale_set]
        for index, key in ((self._by_set, record.scale_set), (self._by_provider, record.provider)):
            bucket = index.get(key)
            if bucket is not None:
                bucket.pop(record.name, None)
                if not bucket:
                    del index[key]

    def of(self, scale_set: str) -> list[RunnerRecord]:
        return list(self._by_set.get(scale_set, {}).values())

    def first_on_each_provider(
        self, scale_set: str, wanted: Callable[[RunnerRecord], bool]
    ) -> dict[str, str]:
        """Provider -> the name of the scale set's first ``wanted`` runner on it, in the order
        :meth:`of` gives them. The walk stops once every provider holding one of the scale
        set's runners has its answer: a burst asks this for every job assigned, and its
        runners nearly all wait for a job still, so it does not walk thousands each time."""
        found: dict[str, str] = {}
        holding = len(self._providers_of.get(scale_set, ()))
        for record in self._by_set.get(scale_set, {}).values():
            if wanted(record) and record.provider not in found:
                found[record.provider] = record.name
                if len(found) == holding:
                    break
        return found

    def on(self, provider: str) -> list[RunnerRecord]:
        """Every runner whose machine is on ``provider``, leaving ones included."""
        return list(self._by_provider.get(provider, {}).values())

    def live(self, scale_set: str) -> list[RunnerRecord]:
        return [
            r
            for r in self._by_set.get(scale_set, {}).values()
            if r.state is not RunnerState.LEAVING
        ]

    def counts(self) -> list[tuple[str, str, int]]:
        """(scale set, provider, n) of live runners: what placement counts."""
        found: dict[tuple[str, str], int] = {}
        for r in self._runners.values():
            if r.state is not RunnerState.LEAVING:
                found[(r.scale_set, r.provider)] = found.get((r.scale_set, r.provider), 0) + 1
        return [(s, p, n) for (s, p), n in found.items()]

    def leaving_by_provider(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for r in self._runners.values():
            if r.state is RunnerState.LEAVING:
                found[r.provider] = found.get(r.provider, 0) + 1
        return found
