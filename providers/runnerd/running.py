"""The daemon as it runs: its parts, taken up live by a reload (SIGHUP, the dashboard's
editor) and by auto sizing. :mod:`runnerd.daemon` wires and serves it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import structlog

from rungar.errors import ConfigError
from rungar.model.machine import MachineState
from runnerd.config import RunnerdConfig, check_budget, load_config
from runnerd.history import History
from runnerd.provider import RunnerdProvider, slice_limits
from runnerd.sampler import Sampler
from runnerd.sizing.autorun import AutoSizer
from runnerd.sizing.changes import Change

log = structlog.get_logger("runnerd.daemon")


@dataclass
class Daemon:
    config: RunnerdConfig
    provider: RunnerdProvider
    sampler: Sampler
    history: History
    sizer: AutoSizer | None = None

    async def close(self) -> None:
        provider = self.provider
        now = provider.clock.now()
        if provider.runtime.kind == "process":  # its runners stop with it: close their jobs
            for state in list(provider.runners.values()):
                if state.ended_at is None:
                    state.state, state.ended_at = MachineState.STOPPED, now
                # Rungar has not said how their jobs ended: a running job was stopped, an
                # ended one has only its exit status to tell.
                await provider.record(state, None)
        closing = getattr(self.provider.runtime, "close", None)
        if closing is not None:
            await closing()
        if self.provider.events is not None:
            self.provider.events.close()
        self.history.close()

    def reconfigure(self, config: RunnerdConfig) -> None:
        """Run with ``config`` from now on: new admissions use its profiles."""
        self.config = config
        self.provider.reconfigure(config, *slice_limits(config))


def start_auto_sizing(
    daemon: Daemon, config_path: str, config_text: str
) -> asyncio.Task[None] | None:
    """Settle what a crash left of auto sizing (always), then look every 5 minutes while
    ``[sizing] auto = true`` (docs/admission.md, "Auto sizing"). Each change written is run with at
    once."""
    provider = daemon.provider
    clock = provider.clock

    def written(config: RunnerdConfig, change: Change) -> None:
        daemon.reconfigure(config)
        provider.record_event(
            "sizing.changed", change.profile, change.describe(), **change.event_data()
        )

    def refused(change: Change, why: str) -> None:
        provider.record_event(
            "sizing.refused",
            change.profile,
            f"{change.profile}: {change.kind} to {change.new.describe()} not written: {why}",
            change=change.kind,
            new=change.event_data()["new"],
        )

    sizer = AutoSizer(
        Path(config_path),
        Path(daemon.config.host.history_path()),
        clock,
        running_text=config_text,
        limits=lambda: slice_limits(daemon.config),
        running=provider.running_per_profile,
        on_written=written,
        on_refused=refused,
        started_at=clock.now(),
    )
    sizer.start()
    daemon.sizer = sizer
    if not daemon.config.sizing.auto:
        return None
    return asyncio.create_task(sizer.run_forever())


def reload(daemon: Daemon, config_path: str) -> list[str]:
    """SIGHUP (``systemctl kill -s HUP runnerd``): run with the config file as it is now, checked
    against the slice read again; problems leave the daemon on the config it runs with."""
    try:
        text = Path(config_path).read_text()
        config = load_config(config_path)
        memory_max, cpus = slice_limits(config)
        check_budget(config, memory_max, cpus, text)
    except ConfigError as e:
        log.warning("runnerd.reload_refused", problems=e.problems)
        return e.problems
    except OSError as e:
        log.warning("runnerd.reload_refused", problems=[str(e)])
        return [str(e)]
    daemon.reconfigure(config)
    if daemon.sizer is not None:
        daemon.sizer.running_text = text  # runnerd runs with the edit: auto sizing may go on
    log.info("runnerd.reloaded", config=config_path)
    return []
