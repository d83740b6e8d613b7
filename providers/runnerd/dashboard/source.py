"""What the dashboard reads from the running daemon and writes through it.

The dashboard's listener runs on a thread of its own (rungar/web/bounded.py), so a flood of
connections there cannot slow runnerd; everything that touches the daemon's state runs on the
daemon's own loop through :meth:`DaemonSource.on_engine`, as the local API's handlers do. Each
read is the local API's (:func:`runnerd.api.status`, the history's job records, the events) or
``runnerctl sizing``'s report: the dashboard keeps no data of its own but the runners' recent
samples (:mod:`runnerd.dashboard.timeline`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rungar.model.machine import MachineState
from runnerd.api import status
from runnerd.config import RunnerdConfig, load_config
from runnerd.dashboard import editor
from runnerd.dashboard.timeline import Timeline
from runnerd.dashboard.views import ProfileCapacity, budget_parts, utilization
from runnerd.sentences import job_sentence
from runnerd.sizing.advise import ProfileAdvice
from runnerd.sizing.changes import Change, ChangeLog, last_undoable
from runnerd.sizing.report import sizing_report

if TYPE_CHECKING:
    from runnerd.running import Daemon

T = TypeVar("T")


class DaemonSource:
    def __init__(
        self,
        daemon: Daemon,
        config_path: str,
        loop: asyncio.AbstractEventLoop,
        timeline: Timeline | None = None,
    ) -> None:
        self.daemon = daemon
        self.config_path = Path(config_path)
        self.loop = loop
        self.timeline = timeline or Timeline()
        # Every runner sample reaches the timeline as the sampler takes it, none skipped: the
        # job page's chart holds the samples its record's peaks come from.
        timeline_ = self.timeline
        daemon.provider.sample_listeners.append(lambda state: timeline_.observe((state,)))

    async def on_engine(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call()`` on the daemon's loop and wait for it from the listener's."""

        async def run() -> T:
            return await call()

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), self.loop))

    @property
    def sample_interval(self) -> float:
        return self.daemon.config.host.sample_interval

    @property
    def stream_for(self) -> float:
        return self.daemon.config.host.dashboard_stream

    def observe(self) -> None:
        """Add the latest samples to the timeline (the daemon's loop, once per sample): each
        runner's, and the slice's memory (as admission reads it, else the runners' sum) and
        CPUs (the slice's cgroup, else the runners' sum)."""
        provider = self.daemon.provider
        self.timeline.observe(provider.runners.values())
        now = provider.clock.now()
        live = [r for r in provider.runners.values() if r.ended_at is None]
        readings = provider.readings
        fresh = provider.limits.fresh_for
        if readings.slice is not None and now - readings.slice.at <= fresh:
            memory = readings.slice.memory
        else:
            memory = sum(r.used for r in live)
        counters = readings.counters
        cpu: float | None = None
        if counters is not None and counters.cpu_utilization is not None and provider.slice_cpus:
            cpu = counters.cpu_utilization * provider.slice_cpus
        else:
            rates = [self.timeline.latest_cpu(r.name) for r in live]
            cpu = sum(r for r in rates if r is not None) if live else 0.0
        reserved = sum(r.reserved for r in live)
        reserved_cpu = sum(r.reserved_cpu for r in live)
        self.timeline.observe_slice(now, memory, cpu, reserved, reserved_cpu)

    # -- reads ---------------------------------------------------------------------------

    async def overview(self) -> dict[str, Any]:
        async def read() -> dict[str, Any]:
            provider = self.daemon.provider
            now = provider.clock.now()
            found = status(provider)
            live = [r for r in found["runners"] if r["state"] != MachineState.STOPPED.value]
            found["parts"] = [
                p.to_json()
                for p in budget_parts(
                    found["memory_max"],
                    found["mirror"],
                    [(r["counted"], r["used"]) for r in live],
                    found["host_room"],
                )
            ]
            for r in found["runners"]:
                r["series"] = self.timeline.recent(
                    r["name"], now - self.daemon.config.host.dashboard_recent
                )
            found["at"] = now
            found["slice_series"] = self.timeline.slice_recent(
                now - self.daemon.config.host.dashboard_recent
            )
            return found

        return await self.on_engine(read)

    async def events_after(self, after: int) -> list[dict[str, Any]]:
        async def read() -> list[dict[str, Any]]:
            events = self.daemon.provider.events
            return [e.to_json() for e in events.after(after, limit=50)] if events else []

        return await self.on_engine(read)

    async def latest_event(self) -> int:
        async def read() -> int:
            events = self.daemon.provider.events
            return events.last_id() if events else 0

        return await self.on_engine(read)

    async def job(self, ident: str) -> dict[str, Any] | None:
        async def read() -> dict[str, Any] | None:
            history = self.daemon.provider.history
            row = await history.run(history.job, ident)
            if row is None:
                return None
            series = self.timeline.series(str(row["runner"]))
            return {
                "record": row,
                "sentence": job_sentence(row),
                "series": series.to_json() if series else None,
                "slice_cpus": self.daemon.provider.slice_cpus,
            }

        return await self.on_engine(read)

    async def jobs(self, within: float) -> list[dict[str, Any]]:
        """The jobs recorded in the last ``within`` seconds, newest first, then those running,
        as ``runnerctl jobs --json`` lists them."""

        async def read() -> list[dict[str, Any]]:
            from runnerd.cli_jobs import job_entry

            history = self.daemon.provider.history
            now = self.daemon.provider.clock.now()
            rows = await history.run(history.recorded_since, now - within)
            running = await history.run(history.open_jobs)
            return [job_entry(r) for r in [*reversed(rows), *running]]

        return await self.on_engine(read)

    async def data_span(self) -> float | None:
        """Seconds since the first job of the history's 30 days started; None with none."""

        async def read() -> float | None:
            history = self.daemon.provider.history
            now = self.daemon.provider.clock.now()
            rows = await history.run(history.recorded_since, now - 30 * 86400.0)
            rows += await history.run(history.open_jobs)
            starts = [float(r["started_at"]) for r in rows if r.get("started_at") is not None]
            return now - min(starts) if starts else None

        return await self.on_engine(read)

    async def utilization(self, window: float, buckets: int = 120) -> list[dict[str, Any]]:
        async def read() -> tuple[list[dict[str, Any]], float, RunnerdConfig, dict[str, int]]:
            provider = self.daemon.provider
            now = provider.clock.now()
            history = provider.history
            rows = await history.run(history.recorded_since, now - window)
            rows += await history.run(history.open_jobs)
            live = {r.name: r.used for r in provider.runners.values()}
            return rows, now, provider.config, live

        rows, now, config, live = await self.on_engine(read)
        profiles = [
            ProfileCapacity(p.name, p.slots, p.memory, p.cpus) for p in config.profiles.values()
        ]
        found = utilization(rows, profiles, now - window, now, buckets, now, live)
        return [u.to_json() for u in found]

    def _limits(self) -> tuple[RunnerdConfig, int | None, float | None]:
        from runnerd.provider import slice_limits

        config = load_config(self.config_path)
        return (config, *slice_limits(config))

    def _db(self) -> Path:
        return Path(self.daemon.config.host.history_path())

    async def sizing(self) -> dict[str, Any]:
        """``runnerctl sizing``'s report, and each profile's change an undo would revert."""

        def read() -> dict[str, Any]:
            config, memory_max, cpus = self._limits()
            now = self.daemon.provider.clock.now()
            found = sizing_report(config, self._db(), memory_max, now, slice_cpus=cpus).to_json()
            undoable = {p: self._undoable(p) for p in config.profiles}
            found["undoable"] = {p: c.to_json() for p, c in undoable.items() if c is not None}
            return found

        return await asyncio.to_thread(read)

    def _undoable(self, profile: str) -> Change | None:
        with ChangeLog(self._db(), read_only=True) as log:
            return last_undoable(log.changes(profile))

    def _advice(self, profile: str) -> ProfileAdvice | None:
        config, memory_max, _ = self._limits()
        report = sizing_report(config, self._db(), memory_max, self.daemon.provider.clock.now())
        return next((a for a in report.advice if a.profile == profile), None)

    # -- the config editor ---------------------------------------------------------------

    async def open_config(self, profile: str = "", undo: bool = False) -> editor.Opened:
        def read() -> editor.Opened:
            from rungar.errors import ConfigError

            if not profile:
                return editor.open_file(self.config_path)
            if undo:
                undone = self._undoable(profile)
                if undone is None:
                    raise ConfigError([f"{profile}: no sizing change to undo"])
                return editor.open_with_undo(self.config_path, undone)
            advice = self._advice(profile)
            if advice is None:
                raise ConfigError([f"{self.config_path}: no [profiles.{profile}]"])
            return editor.open_with_advice(self.config_path, advice)

        return await asyncio.to_thread(read)

    async def save_config(
        self, text: str, version: str, profile: str, undo: bool = False
    ) -> Change | None:
        """Check and write; then the daemon runs with the file, as after a reload."""

        async def on_loop() -> Change | None:
            from runnerd.running import reload

            advice, undone = None, None
            if profile and undo:
                undone = await asyncio.to_thread(self._undoable, profile)
            elif profile:
                advice = await asyncio.to_thread(self._advice, profile)
            now = self.daemon.provider.clock.now()
            change = editor.save(
                self.config_path, text, version, self._db(), now, profile, advice, undone
            )
            if change is not None:
                self.daemon.provider.record_event(
                    "sizing.changed", change.profile, change.describe(), **change.event_data()
                )
            reload(self.daemon, str(self.config_path))
            return change

        return await self.on_engine(on_loop)
