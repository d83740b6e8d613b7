"""Settling a create that got no answer (so no machine leaks).

When ``Create`` raises :class:`ProviderUnavailable`, the machine may or may not exist. Before
anything else happens to the runner (trying another provider, removing its registration),
Rungar asks the same provider again with the **same** ``request_id``: an idempotent provider
answers ``Created`` with the machine it made, or creates it now, or refuses. Only when it still
does not answer after a few tries is the outcome reported :class:`Unsettled`; the caller then
keeps the runner's name reserved on that provider and lists and deletes the leftover once the
provider answers again (the reconciler's job).

Works on any :class:`~rungar.model.provider.Provider`, so the simulation drives it with the
fake provider on a fake clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from rungar.clock import Clock
from rungar.errors import ProviderUnavailable
from rungar.model.machine import Created, CreateRequest, Refusal
from rungar.model.provider import Provider

DEFAULT_TRIES = 3
DEFAULT_FIRST_DELAY = 1.0


@dataclass(frozen=True, slots=True)
class Unsettled:
    """The provider never answered: a machine named ``runner_name`` may exist there."""

    runner_name: str
    tries: int
    message: str


async def settle_unanswered_create(
    provider: Provider,
    request: CreateRequest,
    clock: Clock,
    *,
    tries: int = DEFAULT_TRIES,
    first_delay: float = DEFAULT_FIRST_DELAY,
) -> Created | Refusal | Unsettled:
    """Ask again with the same idempotency key, waiting ``first_delay``, doubling, between tries.

    A refusal on a retry is a real answer: under the same key, a provider that had created the
    machine would have answered ``Created``. Other provider errors propagate; the caller treats
    them as a failed create whose leftover it deletes.
    """
    delay = first_delay
    last = "no answer"
    for attempt in range(1, tries + 1):
        await clock.sleep(delay)
        delay *= 2
        try:
            return await provider.create(request)
        except ProviderUnavailable as e:
            last = str(e)
            if attempt == tries:
                break
    return Unsettled(
        runner_name=request.runner_name,
        tries=tries,
        message=f"create of {request.runner_name} still unanswered after {tries} retries: {last}",
    )
