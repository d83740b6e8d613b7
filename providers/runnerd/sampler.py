"""The sampler: every 2 s each running runner, the slice and the host.

docs/admission.md, "What a job's memory is" and "The host's memory": runners and the slice every
``sample_interval``; MemAvailable and /proc/pressure/memory on the same tick; the programs
outside the slice holding 512M or more every ``holders_interval``. A runner whose process or
container ended stops counting against the budget; its peak, average CPU, exit status and
whether it met its cap wait in the history for Rungar's Delete to say how its job ended.
"""

from __future__ import annotations

import asyncio

import structlog

from rungar.clock import Clock
from runnerd import readers
from runnerd.admission import HostReading, SliceReading
from runnerd.admission.model import Holder
from runnerd.metrics import read_slice_counters
from runnerd.provider import RunnerdProvider, slice_limits

log = structlog.get_logger("runnerd.sampler")


class Sampler:
    def __init__(self, provider: RunnerdProvider, clock: Clock) -> None:
        self.provider = provider
        self.clock = clock
        host = provider.config.host
        self.proc_root = host.proc_root
        self.interval = host.sample_interval
        self.holders_interval = host.holders_interval
        self.holders: tuple[Holder, ...] = ()
        self.holders_at = float("-inf")

    async def tick(self) -> None:
        provider = self.provider
        now = self.clock.now()
        for state in list(provider.runners.values()):
            if state.ended_at is None:
                await provider.sample_runner(state)
        await self._read_host(now)

    async def _read_host(self, now: float) -> None:
        provider = self.provider
        host = provider.config.host
        # A MemoryMax or CPUQuota changed by systemctl daemon-reload counts from this tick.
        provider.set_slice(*slice_limits(provider.config))
        slice_usage = await provider.runtime.slice_usage()
        provider.readings.counters = read_slice_counters(
            host.cgroup_root, host.slice, now, provider.readings.counters, provider.slice_cpus
        )
        if slice_usage is not None:
            provider.readings.slice = SliceReading(now, slice_usage.memory)
        if now - self.holders_at >= self.holders_interval:
            processes = await asyncio.to_thread(readers.read_processes, self.proc_root)
            found = readers.biggest_holders(processes, host.slice, host.holder_min)
            self.holders, self.holders_at = tuple(found), now
        meminfo = readers.read_meminfo(self.proc_root)
        pressure = readers.read_pressure(self.proc_root)
        if meminfo is not None:
            held = (
                slice_usage.held
                if slice_usage is not None
                else sum(r.held for r in provider.runners.values())
            )
            provider.readings.host = HostReading(
                now,
                meminfo.total,
                meminfo.available,
                pressure.full_avg10 if pressure else 0.0,
                held,
                self.holders,
            )
        free = readers.disk_free(host.disk_path_or_state())
        if free is not None:
            provider.readings.disk_free, provider.readings.disk_at = free, now

    async def run(self) -> None:
        """Sample until cancelled; a failed tick is logged and the next one runs."""
        while True:
            try:
                await self.tick()
            except Exception as e:  # the sampler must outlive one bad read
                log.warning("sampler.tick_failed", error=f"{type(e).__name__}: {e}")
            await self.clock.sleep(self.interval)
