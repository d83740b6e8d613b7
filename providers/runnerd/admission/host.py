"""The host guard: what the rest of the host leaves the slice.

docs/admission.md, "The host's memory".

Pure arithmetic and sentences. The slice may hold what its runners hold now plus MemAvailable,
less a margin kept for the host's page cache: the larger of 2G and a sixteenth of the host's
memory. Nothing starts while the host has under twice the margin available and full memory
pressure over the last 10 s is 5% or more, until it falls under 1%. After a job waited for the
host while runners ran, the margin grows by half until the host has room again; the first
runner into an empty slice needs only the margin.
"""

from __future__ import annotations

from collections.abc import Sequence

from rungar.model.units import format_bytes
from runnerd.admission.model import Holder, HostReading, Limits

MOST_NAMED = 3


def margin(total: int, limits: Limits) -> int:
    return max(limits.margin_min, total // limits.margin_share)


def effective_margin(total: int, limits: Limits, widened: bool, running: int) -> int:
    base = margin(total, limits)
    return base + base // 2 if widened and running else base


def room(host: HostReading, limits: Limits, widened: bool = False, running: int = 0) -> int:
    """What the host leaves the slice: held now + MemAvailable − the margin."""
    return max(
        0, host.held + host.available - effective_margin(host.total, limits, widened, running)
    )


def stalled(host: HostReading, limits: Limits, was_stalled: bool) -> bool:
    """The PSI hysteresis: enters at ≥ 5% full pressure, leaves under 1%."""
    if was_stalled:
        return host.full_avg10 >= limits.stall_leave
    return host.full_avg10 >= limits.stall_enter


def blocks(host: HostReading, limits: Limits, is_stalled: bool) -> bool:
    """A stall blocks starts only while the host has under twice the margin available."""
    return is_stalled and host.available < 2 * margin(host.total, limits)


def outside(host: HostReading) -> int:
    """What programs outside the slice hold: used memory less what the runners hold."""
    return max(0, host.total - host.available - host.held)


def programs(host: HostReading) -> str:
    """``programs outside CI hold 30G, most java 9.3G and qemu-system-x86 5.8G``; empty when
    nothing outside the slice holds memory."""
    held = outside(host)
    if not held:
        return ""
    text = f"programs outside CI hold {format_bytes(held)}"
    named = _names(host.holders[:MOST_NAMED])
    return f"{text}, most {named}" if named else text


def _names(holders: Sequence[Holder]) -> str:
    parts = [f"{h.name} {format_bytes(h.bytes)}" for h in holders]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def short_message(needs: int, spare: int, host: HostReading) -> str:
    text = (
        f"The host is short of memory: needs {format_bytes(needs)}; "
        f"the host has {format_bytes(max(0, spare))} to spare"
    )
    others = programs(host)
    return f"{text}; {others}" if others else text


def stall_message(host: HostReading, limits: Limits) -> str:
    return (
        f"The host is stalling for memory: every task waited for memory {host.full_avg10:g}% of "
        f"the last 10s with {format_bytes(host.available)} available; nothing starts until that "
        f"falls under {limits.stall_leave:g}%"
    ) + (f"; {programs(host)}" if outside(host) else "")


def host_line(
    host: HostReading,
    limits: Limits,
    reserved: int,
    widened: bool = False,
    running: int = 0,
) -> str:
    """``host: 31G of 64G available; leaves the slice 40G`` and what that leaves free."""
    leaves = room(host, limits, widened, running)
    text = (
        f"host: {format_bytes(host.available)} of {format_bytes(host.total)} available; "
        f"leaves the slice {format_bytes(leaves)}"
    )
    budget = limits.memory_max
    if budget is None:
        text += f", so {format_bytes(max(0, leaves - reserved))} is free"
    elif leaves < budget:
        text += (
            f" of its {format_bytes(budget)}, so {format_bytes(max(0, leaves - reserved))} is free"
        )
    if host.holders:
        text += f"; {programs(host)}"  # holders exist only with memory held outside
    return text
