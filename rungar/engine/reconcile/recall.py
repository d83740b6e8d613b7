"""The runner table across a restart: kept in the state database, recalled at start.

The providers' listings are the truth about machines, and a restart adopts every runner its
provider lists. A provider that does not answer the new daemon's first List would hide its
runners, and the daemon would create others in their place, past ``max_runners`` once it
answered again. So the daemon keeps its runner table in the state database (each runner as it
is added or dropped, and once a pass those whose state changed) and recalls it at start: each
recalled runner counts, as it was last known, for its scale set and its provider until that
provider answers a List (GitHub's view of it is synced meanwhile, so a runner that took a job
or lost its registration since is known as such). Then it is adopted if listed and forgotten if
not; a provider that stays silent has them written off after ``unreachable_grace``, as for one
that goes silent while the daemon runs. Creates a stop cut short after their provider was asked
count the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable

import structlog

from rungar.engine.core.context import EngineContext
from rungar.engine.core.records import RunnerRecord
from rungar.model.machine import Machine, Removal
from rungar.model.runner import RemovalReason, RunnerState
from rungar.store.sqlite import KeptRunner, SqliteStore

log = structlog.get_logger("rungar.engine")
# How a listed machine is taken into the table (rungar.engine.reconcile.reconciler's adoption).
Adopt = Callable[[str, Machine, float, str], None]


def kept(record: RunnerRecord) -> KeptRunner:
    return KeptRunner(
        name=record.name,
        scale_set=record.scale_set,
        provider=record.provider,
        revision=record.revision,
        created_at=record.created_at,
        runner_id=record.runner_id,
        state=record.state.value,
        removal_reason=record.removal_reason,
    )


def _recalled(runner: KeptRunner) -> RunnerRecord:
    state = RunnerState(runner.state)
    record = RunnerRecord(
        name=runner.name,
        scale_set=runner.scale_set,
        provider=runner.provider,
        revision=runner.revision,
        created_at=runner.created_at,
        state=state,
        runner_id=runner.runner_id,
        connected=state in (RunnerState.IDLE, RunnerState.BUSY),
        adopted=True,
        recalled=True,
    )
    if state is RunnerState.LEAVING:
        with_reason = runner.removal_reason or RemovalReason.ENDED.value
        record.removal_reason = with_reason
        record.removal = Removal(RemovalReason(with_reason))
    return record


class RunnerKeeper:
    """The state database's copy of the runner table: each runner as it is added or dropped
    (the table's ``on_change``), and once a pass those whose state changed since."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.saved: dict[str, KeptRunner] = {}

    def __call__(self, name: str, record: RunnerRecord | None) -> None:
        if record is None:
            if self.saved.pop(name, None) is not None:
                self.store.forget_runner(name)
            return
        row = kept(record)
        if self.saved.get(name) != row:
            self.store.keep_runners([row])
            self.saved[name] = row

    def remember(self, records: Iterable[RunnerRecord]) -> None:
        changed = [row for row in map(kept, records) if self.saved.get(row.name) != row]
        if changed:
            self.store.keep_runners(changed)
            self.saved.update((row.name, row) for row in changed)


def recall(ctx: EngineContext) -> RunnerKeeper:
    """Put the kept runners, and the creates a stop cut short after their provider was asked,
    back in the table as recalled; from now on the returned keeper keeps the table."""
    table = ctx.runners
    store = ctx.store
    keeper = RunnerKeeper(store)
    for runner in store.kept_runners():
        if runner.provider in ctx.providers:
            table.add(_recalled(runner))
            keeper.saved[runner.name] = runner
        else:  # a provider no longer configured: never listed again, as before a restart
            store.forget_runner(runner.name)
    given_up = {entry.runner for entry in store.given_up()}  # never adopted: not recalled
    for intent in store.intents():
        if intent.runner in given_up:
            continue
        if intent.provider in ctx.providers and intent.runner not in table:
            # Its machine may exist: the provider was asked to create it.
            kept_intent = KeptRunner(
                intent.runner,
                intent.scale_set,
                intent.provider,
                "",
                intent.created_at,
                intent.runner_id,
                RunnerState.STARTING.value,
            )
            table.add(_recalled(kept_intent))
    table.on_change = keeper
    ctx.resync_fleet_counts()
    return keeper


def settle_recalled(
    ctx: EngineContext,
    listings: dict[str, list[Machine] | None],
    machines: dict[str, tuple[str, Machine]],
    now: float,
    adopt: Adopt,
    doubtful: Container[str] = frozenset(),
) -> None:
    """Recalled runners whose provider answered this pass: adopted (``adopt``, as any runner
    found after a restart) if listed, forgotten if not. Synchronous, so no create sees the
    table between the two."""
    interrupted: set[str] | None = None
    for record in ctx.runners:
        if not record.recalled or listings.get(record.provider) is None:
            continue
        if record.name in doubtful:
            continue  # its listing is not believed this pass: it stays as it was recalled
        listed = machines.get(record.name)
        if listed is None or listed[0] != record.provider:
            ctx.runners.pop(record.name)
            log.info(
                "runner.recalled_gone",
                runner=record.name,
                provider=record.provider,
                scale_set=record.scale_set,
            )
            continue
        if record.state is RunnerState.LEAVING:
            record.recalled = False
            record.machine = listed[1].state
            continue  # its machine is deleted with the pass's others
        if interrupted is None:
            interrupted = {intent.runner for intent in ctx.store.intents()}
        ctx.runners.pop(record.name)
        why = "interrupted_create" if record.name in interrupted else "untracked"
        adopt(record.provider, listed[1], now, why)
        adopted = ctx.runners.get(record.name)
        if adopted is not None:
            adopted.runner_id = record.runner_id
