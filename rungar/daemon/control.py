"""What an operator can ask of a running daemon; the admin API serves exactly these calls.

Every answer is a JSON-able value. Changes made here (pause, disable, drain) last until the
daemon restarts, and the answers say so; ``apply`` changes the configuration live: new scale
sets start, removed ones drain, changed limits take effect at once.

:class:`Control` reads and changes the engine's context and calls the concerns the engine
composes (the scaler, the removals, the reconciler, the job history), handed to it
(:meth:`Control.of` an engine does), never the engine itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import structlog

from rungar.config.loader import parse_scale_sets
from rungar.config.model import ProviderConfig, ScaleSetConfig, ScaleSetsFile
from rungar.config.schema import RUNNER_KEYS
from rungar.daemon.deadlines import call_timeouts, retime
from rungar.daemon.lease import lead_change_refused
from rungar.daemon.reconnect import (
    connection_changes,
    connection_file_problems,
    reconnect_line,
    retire,
    runner_problem,
    undeclared_runner_keys,
)
from rungar.daemon.status import snapshot
from rungar.engine.core.context import EngineContext
from rungar.engine.core.scale_set_state import ScaleSetState
from rungar.engine.jobs.accounting import usage_document
from rungar.engine.jobs.job_history import JobHistory
from rungar.engine.jobs.scaler import Scaler
from rungar.engine.reconcile.reconciler import Reconciler
from rungar.engine.remove.removing import Removals
from rungar.errors import Busy, ConfigError, NotFound, ProviderError, RungarError
from rungar.github.interface import GitHub
from rungar.model.machine import ProviderInfo
from rungar.model.provider import Provider
from rungar.model.runner import RemovalReason, RunnerState
from rungar.model.sentences import no_such_name
from rungar.stopping import within

if TYPE_CHECKING:
    from rungar.daemon.runloop import RunLoop
    from rungar.engine.engine import Engine

log = structlog.get_logger("rungar.control")

# A provider ready to call: a plugin's process started and answering.
ProviderFactory = Callable[[ProviderConfig], Awaitable[Provider]]


@runtime_checkable
class _Closable(Protocol):
    async def close(self) -> None: ...


def diff_configs(old: ScaleSetsFile, new: ScaleSetsFile) -> list[str]:
    """Human lines describing what applying ``new`` over ``old`` changes: one per key that
    changes, by its path in scale_sets.yaml, with its old and new values in full
    (``~ scale_sets[small].providers[host2].runner.memory: (unset) -> 200M``)."""
    lines: list[str] = []
    old_p = {p.name: p for p in old.providers}
    new_p = {p.name: p for p in new.providers}
    for name in new_p.keys() - old_p.keys():
        lines.append(f"+ provider {name} ({new_p[name].type})")
    for name in old_p.keys() - new_p.keys():
        lines.append(f"- provider {name}")
    for name in sorted(new_p.keys() & old_p.keys()):
        lines += _key_lines(f"providers[{name}]", asdict(old_p[name]), asdict(new_p[name]))
    old_s = {s.name: s for s in old.scale_sets}
    new_s = {s.name: s for s in new.scale_sets}
    for name in new_s.keys() - old_s.keys():
        lines.append(f"+ scale set {name} (max {new_s[name].max_runners})")
    for name in old_s.keys() - new_s.keys():
        lines.append(f"- scale set {name} (its runners drain)")
    for name in sorted(new_s.keys() & old_s.keys()):
        a, b = asdict(old_s[name]), asdict(new_s[name])
        for key in sorted(k for k in b if a.get(k) != b.get(k)):
            found = _key_lines(f"scale_sets[{name}].{key}", a.get(key), b.get(key))
            if key in GITHUB_KEYS:
                found = [f"{line} (updates the scale set on GitHub in place)" for line in found]
            lines += found
    lines += _key_lines("timing", asdict(old.timing), asdict(new.timing))
    if old.dashboard != new.dashboard:  # its listener is bound once, at start
        lines.append("~ dashboard (takes effect when the daemon restarts)")
    if old.usage_retention != new.usage_retention:
        lines.append("~ usage retention")
    return sorted(lines, key=lambda line: line[2:])


def with_runners_drained(diff: list[str], ctx: EngineContext, new: ScaleSetsFile) -> list[str]:
    """Each ``- scale_sets[S].providers[P]`` line of ``diff`` says what becomes of the scale
    set's runners on P: its idle ones are drained there and replaced on a provider it still
    lists (one a reconcile pass), its busy ones finish their jobs first."""
    listed = {s.name: {p.name for p in s.providers} for s in new.scale_sets}
    lines = []
    for line in diff:
        for name, providers in listed.items():
            prefix = f"- scale_sets[{name}].providers["
            if not line.startswith(prefix) or not line.endswith("]"):
                continue
            provider = line[len(prefix) : -1]
            if provider in providers:
                continue
            there = [r.view() for r in ctx.runners.live(name) if r.provider == provider]
            busy = sum(1 for view in there if view.busy)
            said = [f"{len(there) - busy} idle drained and replaced"] if len(there) > busy else []
            said += [f"{busy} busy finish their jobs first"] if busy else []
            if said:
                line += f" (its runners there: {'; '.join(said)})"
        lines.append(line)
    return lines


# What GitHub holds of a scale set besides its name: a change PATCHes it, keeping its id.
GITHUB_KEYS = ("runner_group", "labels")
UNSET = object()


def _key_lines(path: str, old: object, new: object) -> list[str]:
    """``~ PATH: OLD -> NEW`` for each leaf that differs; mappings are walked key by key and
    lists of named entries (a scale set's providers) entry by entry, by name."""
    if old == new:
        return []
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        lines = []
        for key in sorted(set(old) | set(new), key=str):
            lines += _key_lines(f"{path}.{key}", old.get(key, UNSET), new.get(key, UNSET))
        return lines
    if _named(old) and _named(new):
        assert isinstance(old, list | tuple) and isinstance(new, list | tuple)
        before = {e["name"]: e for e in old}
        after = {e["name"]: e for e in new}
        lines = []
        for name in after.keys() - before.keys():
            lines.append(f"+ {path}[{name}]: {_value(after[name])}")
        for name in before.keys() - after.keys():
            lines.append(f"- {path}[{name}]")
        for name in sorted(before.keys() & after.keys()):
            lines += _key_lines(f"{path}[{name}]", before[name], after[name])
        if not lines:  # the same entries in another order: the order is what changed
            lines.append(
                f"~ {path}: order {[e['name'] for e in old]} -> {[e['name'] for e in new]}"
            )
        return lines
    return [f"~ {path}: {_value(old)} -> {_value(new)}"]


def _named(value: object) -> bool:
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(e, Mapping) and isinstance(e.get("name"), str) for e in value)
    )


def _value(value: object) -> str:
    """A value as it is written in YAML: ``200M``, ``4``, ``[a, b]``; ``(unset)`` when absent."""
    if value is UNSET or value is None:
        return "(unset)"
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, separators=(", ", ": "))


class Control:
    def __init__(
        self,
        ctx: EngineContext,
        *,
        scaler: Scaler,
        removals: Removals,
        reconciler: Reconciler,
        job_history: JobHistory,
        runloop: RunLoop | None = None,
        provider_factory: ProviderFactory | None = None,
    ) -> None:
        self.ctx = ctx
        self.scaler = scaler
        self.removals = removals
        self.reconciler = reconciler
        self.job_history = job_history
        self.runloop = runloop
        self.provider_factory = provider_factory
        # The file a restart reads again: rungar apply takes only it, so what runs never
        # differs from what a restart would run.
        self.home = ctx.config.path

    @classmethod
    def of(
        cls,
        engine: Engine,
        runloop: RunLoop | None = None,
        provider_factory: ProviderFactory | None = None,
    ) -> Control:
        """What an operator can ask of ``engine``, its scale sets started and stopped through
        ``runloop`` and new providers connected by ``provider_factory``."""
        return cls(
            engine.ctx,
            scaler=engine.scaler,
            removals=engine.removals,
            reconciler=engine.reconciler,
            job_history=engine.job_history,
            runloop=runloop,
            provider_factory=provider_factory,
        )

    def _wake(self) -> None:
        if self.runloop is not None:
            self.runloop.wake()

    # ------------------------------------------------------------------ reading

    def status(self) -> dict[str, Any]:
        return snapshot(self.ctx)

    def usage(self, by: str, since: float) -> dict[str, Any]:
        """``rungar usage``: the jobs served in the last ``since`` seconds, summed ``by`` one key.
        Reads the state database on a connection of its own, so it may run on any thread (months
        of jobs are read off the engine's loop)."""
        return usage_document(self.ctx.store.path, by, since, self.ctx.clock.now())

    def events(
        self, *, scale_set: str = "", provider: str = "", since: float = 0.0, limit: int = 0
    ) -> list[dict[str, Any]]:
        found = self.ctx.events.recent(
            scale_set=scale_set, provider=provider, since=since, limit=limit
        )
        return [asdict(e) for e in found]

    def check_event_names(self, *, scale_set: str = "", provider: str = "") -> None:
        """An events filter names a scale set or provider that is configured, or that kept
        events name (one removed since); else NotFound, with the closest name."""
        for kind, name, configured, key in (
            ("scale set", scale_set, self.ctx.sets, "scale_set"),
            ("provider", provider, self.ctx.fleet.providers, "provider"),
        ):
            if not name or name in configured:
                continue
            kept = {str(getattr(e, key)) for e in self.ctx.events.recent()} - {""}
            if name not in kept:
                raise NotFound(no_such_name(kind, name, set(configured) | kept))

    async def follow_events(self) -> AsyncIterator[dict[str, Any]]:
        async for event in self.ctx.events.follow():
            yield asdict(event)

    def inspect_scale_set(self, name: str) -> dict[str, Any]:
        state = self._scale_set(name)
        status = self.status()
        found = next(s for s in status["scale_sets"] if s["name"] == name)
        found["id"] = state.id
        found["runner_group"] = state.config.runner_group
        found["start_timeout"] = state.config.start_timeout
        found["now"] = status["daemon"]["now"]
        found["skips"] = [s for s in status["skips"] if s["scale_set"] == name]
        found["runner_list"] = [r for r in status["runners"] if r["scale_set"] == name]
        return dict(found)

    def inspect_provider(self, name: str) -> dict[str, Any]:
        self._provider(name)
        status = self.status()
        found = next(p for p in status["providers"] if p["name"] == name)
        found["skips"] = [s for s in status["skips"] if s["provider"] == name]
        found["runner_list"] = [r for r in status["runners"] if r["provider"] == name]
        found["scale_sets"] = [
            s.name for s in self.ctx.config.scale_sets if name in s.provider_names
        ]
        return dict(found)

    # ------------------------------------------------------------------ scale sets

    def _scale_set(self, name: str) -> ScaleSetState:
        state = self.ctx.sets.get(name)
        if state is None:
            raise NotFound(no_such_name("scale set", name, self.ctx.sets))
        return state

    async def pause(self, name: str) -> str:
        state = self._scale_set(name)
        state.paused_at_runtime = True
        self.ctx.github.set_max_capacity(name, 0)
        self.ctx.events.record("scale_set", name, "paused", scale_set=name)
        await self.scaler.scale(name)
        return f"{name} is paused until resumed or the daemon restarts"

    async def resume(self, name: str) -> str:
        state = self._scale_set(name)
        state.paused_at_runtime = False
        self.ctx.github.set_max_capacity(name, state.config.max_runners)
        self.ctx.events.record("scale_set", name, "resumed", scale_set=name)
        await self.scaler.scale(name)
        self._wake()
        note = "; the configuration has it paused" if state.config.paused else ""
        return f"{name} is resumed until the daemon restarts{note}"

    async def remove_scale_set(self, name: str, *, wait: bool = False) -> list[str]:
        self._scale_set(name)
        kept = [n for n in self.ctx.sets if n != name]
        if refused := lead_change_refused(self.ctx.lease, kept):
            raise Busy(refused)
        busy = [r for r in self.ctx.runners.live(name) if r.view().busy]
        if busy and not wait:
            raise Busy(
                f"{name} has {len(busy)} busy runners; run again when they finish, or use --wait"
            )
        lines = []
        state = self.ctx.sets[name]
        state.removed = True
        state.paused_at_runtime = True
        self.ctx.github.set_max_capacity(name, 0)
        while True:
            for record in self.ctx.runners.live(name):
                provider = record.provider
                if await self.removals.remove(record, RemovalReason.SCALE_SET_REMOVED):
                    lines.append(f"Removed runner {record.name} from {provider}")
            if not self.ctx.runners.live(name) or not wait:
                break
            await self.ctx.clock.sleep(self.ctx.config.timing.reconcile_interval / 6)
        if self.runloop is not None:
            self.runloop.stop_scale_set(name)
        del self.ctx.sets[name]
        lines.append(f'Removed scale set "{name}" ({state.id}) from this daemon')
        return lines

    # ------------------------------------------------------------------ providers

    def _provider(self, name: str) -> None:
        if name not in self.ctx.fleet.providers:
            raise NotFound(no_such_name("provider", name, self.ctx.fleet.providers))

    def disable(self, name: str) -> str:
        self._provider(name)
        self.ctx.fleet.set_disabled(name, True)
        return f"Provider {name} is disabled until the daemon restarts."

    def enable(self, name: str) -> str:
        self._provider(name)
        self.ctx.fleet.set_disabled(name, False)
        self.ctx.findings.draining_providers.discard(name)
        self._wake()
        return f"Provider {name} is enabled until the daemon restarts."

    async def drain(self, name: str, *, wait: bool = True) -> list[str]:
        lines = [self.disable(name)]
        self.ctx.findings.draining_providers.add(name)
        for record in list(self.ctx.runners):
            if record.provider == name and not record.view().busy:
                await self.removals.remove(record, RemovalReason.DRAINED)
        while wait:
            left = self.ctx.runners.on(name)
            if not left:
                break
            lines.append(f"Waiting for {len(left)} runners on {name} to finish")
            await self.ctx.clock.sleep(self.ctx.config.timing.reconcile_interval / 6)
            for record in left:
                if record.state is RunnerState.LEAVING:
                    await self.removals.settle_leaving(record)
                elif not record.view().busy:
                    await self.removals.remove(record, RemovalReason.DRAINED)
        if not self.ctx.runners.on(name):
            lines.append(f"{name} is drained: no runner is left on it")
        return lines

    # ------------------------------------------------------------------ runners

    async def remove_runners(self, names: list[str]) -> list[dict[str, Any]]:
        results = []
        for name in names:
            record = self.ctx.runners.get(name)
            if record is None:
                said = no_such_name("runner", name, self.ctx.runners.names())
                results.append({"name": name, "ok": False, "message": said})
                continue
            provider = record.provider
            if await self.removals.remove(record, RemovalReason.REQUESTED):
                message = f"{name}: removed from {provider}"
                if not self.ctx.fleet.is_reachable(provider):
                    message = f"{name}: removed; its machine is deleted once {provider} lists again"
                results.append({"name": name, "ok": True, "message": message})
            else:
                results.append(
                    {"name": name, "ok": False, "message": f"{name}: busy with a job; not removed"}
                )
        return results

    async def reconcile(self, names: list[str]) -> list[str]:
        for name in names:
            self._scale_set(name)
        await self.reconciler.reconcile()
        lines = []
        for name, state in self.ctx.sets.items():
            if names and name not in names:
                continue
            runners = len(self.ctx.runners.live(name))
            lines.append(f"{name}: {runners} runners, {state.desired or 0} desired")
        return lines

    # ------------------------------------------------------------------ apply

    async def apply(self, text: str, filename: str, *, dry_run: bool) -> dict[str, Any]:
        """Check ``text`` and, unless ``dry_run``, make it the configuration. A new provider is
        connected (its plugin started), and so is a provider whose connection settings changed
        (:mod:`rungar.daemon.reconnect`), and their runner blocks checked, before anything
        changes; a dry run checks the runner blocks of the providers already connected and
        kept."""
        if elsewhere := self._not_home(filename):
            return {"applied": False, "problems": [elsewhere], "diff": []}
        try:
            new = parse_scale_sets(text, filename)
        except ConfigError as e:
            return {"applied": False, "problems": e.problems, "diff": []}
        changed = self._connection_changes(new)
        kept = {n: p for n, p in self.ctx.providers.items() if n not in changed}
        problems = await self._validate_runners(new, kept, text, filename)
        for config in new.providers:
            if config.name in changed or config.name not in self.ctx.providers:
                problems += connection_file_problems(config, text, filename)
        if refused := lead_change_refused(self.ctx.lease, [s.name for s in new.scale_sets]):
            problems.append(refused)
        diff = with_runners_drained(diff_configs(self.ctx.config, new), self.ctx, new)
        diff = sorted(
            diff + [reconnect_line(n, keys) for n, keys in changed.items()],
            key=lambda line: line[2:],
        )
        if problems or dry_run:
            return {"applied": False, "problems": problems, "diff": diff}
        added, problems = await self._connect(new, changed)
        if not problems:
            problems = await self._validate_runners(new, added, text, filename)
        if problems:
            await _close_all(added)
            return {"applied": False, "problems": problems, "diff": diff}
        for name, provider in added.items():
            old = self.ctx.providers.get(name)
            self.ctx.providers[name] = provider  # new calls go to the new connection
            if old is not None:
                self.ctx.events.record(
                    "provider",
                    name,
                    "reconnected",
                    provider=name,
                    message=f"{', '.join(changed[name])} changed",
                    changed=changed[name],
                )
                self.ctx.spawn(retire(name, old))
        self._apply(new)
        self._wake()
        return {"applied": True, "problems": [], "diff": diff}

    def _not_home(self, filename: str) -> str:
        """Why ``filename`` cannot be applied: it is not the file this daemon runs from, which
        a restart would read again and so undo it; empty when it is that file."""
        home = self.home
        if not os.path.isabs(home) or not filename:
            return ""  # an engine embedded without a file of its own (tools, tests)
        if os.path.realpath(filename) == os.path.realpath(home):
            return ""
        return (
            f"{filename}: this daemon runs from {home}, which its rungar.yaml names and a "
            f"restart reads again, so applying {filename} would last only until then: edit "
            f"{home} and apply it, or point rungar.yaml's scale_sets at {filename} and restart"
        )

    def _connection_changes(self, new: ScaleSetsFile) -> dict[str, list[str]]:
        """The providers kept by ``new`` whose connection must be renewed, with the keys that
        changed. None without a way to connect (an engine embedded without one)."""
        if self.provider_factory is None:
            return {}
        old = {p.name: p for p in self.ctx.config.providers}
        found = {}
        for config in new.providers:
            if config.name not in old or config.name not in self.ctx.providers:
                continue
            if keys := connection_changes(old[config.name], config):
                found[config.name] = keys
        return found

    async def _connect(
        self, new: ScaleSetsFile, changed: Mapping[str, list[str]]
    ) -> tuple[dict[str, Provider], list[str]]:
        """Connect the new providers and those whose connection changed."""
        added: dict[str, Provider] = {}
        problems: list[str] = []
        if self.provider_factory is None:
            return added, problems
        for config in new.providers:
            if config.name in self.ctx.providers and config.name not in changed:
                continue
            try:
                added[config.name] = await self.provider_factory(config)
            except (RungarError, OSError) as e:
                problems.append(f"provider {config.name}: cannot be connected: {e}")
        return added, problems

    async def _validate_runners(
        self, new: ScaleSetsFile, providers: Mapping[str, Provider], text: str, filename: str
    ) -> list[str]:
        """Each provider's ValidateRunner of each runner block it would run, and for a plugin's
        own type the keys its Info declares (built-in types' keys are checked offline), its
        refusals told as ``file:line:col: path: what`` at the key they name."""
        problems = []
        infos: dict[str, ProviderInfo] = {}
        for scale_set in new.scale_sets:
            for entry in scale_set.providers:
                provider = providers.get(entry.name)
                if provider is None:
                    continue  # a new provider is checked once it is connected
                config = new.provider(entry.name)
                timeout = call_timeouts(config, new.timing).timeout
                try:
                    found = await within(
                        provider.validate_runner(entry.runner), timeout, "ValidateRunner"
                    )
                    if config.type not in RUNNER_KEYS:  # a plugin's: the keys its Info declares
                        if entry.name not in infos:
                            infos[entry.name] = await within(provider.info(), timeout, "Info")
                        found = [
                            *found,
                            *undeclared_runner_keys(
                                entry.runner, infos[entry.name], entry.name, found
                            ),
                        ]
                except (ProviderError, TimeoutError) as e:
                    problems.append(
                        f"scale set {scale_set.name}: provider {entry.name} cannot check its "
                        f"runner block: {e}"
                    )
                    continue
                problems += [
                    runner_problem(text, filename, scale_set.name, entry.name, p) for p in found
                ]
        return problems

    async def _update_on_github(self, scale_set: ScaleSetConfig) -> None:
        await _update_github_scale_set(self.ctx.github, scale_set)

    def _apply(self, new: ScaleSetsFile) -> None:
        ctx = self.ctx
        old_names = set(ctx.sets)
        ctx.config = new
        ctx.fleet.configure(new.providers, new.scale_sets, new.timing)
        self.job_history.configure(new.scale_sets)
        for provider_config in new.providers:
            if provider_config.name in ctx.providers:
                retime(ctx.providers[provider_config.name], provider_config, new.timing)
        for scale_set in new.scale_sets:
            state = ctx.sets.get(scale_set.name)
            if state is None:
                ctx.sets[scale_set.name] = ScaleSetState(scale_set, watchers=ctx.phase_watchers)
                if self.runloop is not None:
                    self.runloop.start_scale_set(scale_set.name)
            else:
                if any(getattr(state.config, k) != getattr(scale_set, k) for k in GITHUB_KEYS):
                    ctx.spawn(self._update_on_github(scale_set))
                state.config = scale_set
                if not state.paused:
                    ctx.github.set_max_capacity(scale_set.name, scale_set.max_runners)
        for name in old_names - {s.name for s in new.scale_sets}:
            state = ctx.sets.pop(name)
            state.removed = True
            if self.runloop is not None:
                self.runloop.stop_scale_set(name)
        ctx.resync_fleet_counts()
        for name in list(ctx.sets):
            ctx.spawn(self.scaler.scale(name))
        for watcher in ctx.phase_watchers:
            watcher()  # scale sets came or went: readiness is what they now make it


async def _update_github_scale_set(github: GitHub, scale_set: ScaleSetConfig) -> None:
    """PATCH the scale set's runner group and labels; the listener keeps its id and session."""
    try:
        await github.ensure_scale_set(scale_set)
    except RungarError as e:  # the listener's next ensure tries again
        log.warning("apply.scale_set_not_updated", scale_set=scale_set.name, error=str(e))


async def _close_all(providers: Mapping[str, Provider]) -> None:
    """Let go of providers connected for an apply that did not happen."""
    for provider in providers.values():
        if isinstance(provider, _Closable):
            try:
                await provider.close()
            except (RungarError, OSError) as e:
                log.warning("apply.provider_not_closed", error=str(e))
