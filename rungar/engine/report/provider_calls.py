"""Every call the engine makes to a provider, counted and timed on the engine's clock."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from rungar.clock import Clock
from rungar.engine.report.metrics import Metrics
from rungar.model.machine import Refusal

T = TypeVar("T")


async def timed(
    metrics: Metrics, clock: Clock, provider: str, call: str, awaitable: Awaitable[T]
) -> T:
    """``awaitable``'s answer; its result (ok, no_capacity, error) and duration are exported."""
    started = clock.now()
    result = "error"
    try:
        value = await awaitable
        result = "no_capacity" if isinstance(value, Refusal) else "ok"
        return value
    finally:
        metrics.provider_calls.labels(provider, call, result).inc()
        metrics.provider_call_duration.labels(provider, call).observe(
            max(0.0, clock.now() - started)
        )
