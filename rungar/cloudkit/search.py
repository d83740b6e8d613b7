"""Creating a cloud machine by searching places × machine types.

docs/providers/gcp.md and docs/providers/aws.md, "What a create does".

Both clouds walk places (zones, subnets) × machine types. Each failed request is read by the
cloud's own error table (``rungar_gcp.errors``, ``rungar_aws.errors``) into one
:class:`PlaceAnswer`; what the search does next and which refusal it ends with depend only on
that outcome, so they live here:

=========== ==================================================================================
STOCK       this place is out of the type (FULL if everything is): try on
QUOTA       an account or project limit: skip the type in every other place (FULL)
UNOFFERED   this place does not offer the type: try on; INVALID if no place does
INVALID     never creatable: a bad image, type or field (INVALID, stop)
DENIED      permission refused; no place would differ (INVALID, stop)
REFUSED     a refusal every place shares, throttling included (FAILED, stop)
FAILED      the request failed for another reason: try on, FAILED if nothing works
UNCERTAIN   5xx or no answer: the machine may exist; resend with the same token, then look
=========== ==================================================================================

A retried create must never make a second machine, so a create is, in order:

1. the runner's labels are checked against the provider's installation (:func:`own_labels`);
2. the provider looks for the runner's machine by name in every place and adopts it;
3. :func:`search` walks the plan: a type refused for quota is skipped in the other places, an
   outcome of :data:`STOPS_SEARCH` ends it;
4. each attempt goes through :func:`send_until_certain`: an uncertain request is sent again
   with the same idempotency token, then settled by looking the machine up before anything
   is reported; a search that made nothing ends in the provider's ``settle``, built from
   :func:`stop_refusal`, :func:`unoffered_refusal` and :func:`details`.

The requests, the lookups and the logging stay in each provider; this module only orders them
and names the outcome, so it imports no SDK and no I/O library.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from rungar.clock import Clock
from rungar.model.labels import INSTALLATION, MANAGED
from rungar.model.machine import Created, Refusal, RefusalKind
from rungar.model.runner_block import RunnerBlock


class PlaceAnswer(StrEnum):
    """How a cloud answered one place (zone or region, machine type) of the search."""

    STOCK = "stock"
    QUOTA = "quota"
    UNOFFERED = "unoffered"
    INVALID = "invalid"
    DENIED = "denied"
    REFUSED = "refused"
    FAILED = "failed"
    UNCERTAIN = "uncertain"


# A refusal no other place would answer differently ends the search at once.
STOPS_SEARCH = frozenset(
    {PlaceAnswer.INVALID, PlaceAnswer.DENIED, PlaceAnswer.REFUSED, PlaceAnswer.UNCERTAIN}
)
UNCERTAIN_RETRIES = 3  # an uncertain request is sent again up to this many times, same token
RETRY_DELAYS = (1.0, 2.0, 4.0)  # between uncertain resends; the cloud is given time to settle


class Tried(Protocol):
    """One attempt that made nothing: where it was tried, how it ended, what the cloud said."""

    @property
    def attempt(self) -> object: ...  # printed as ``place/type`` in messages

    @property
    def outcome(self) -> PlaceAnswer: ...

    @property
    def detail(self) -> str: ...


AttemptT = TypeVar("AttemptT")
TriedT = TypeVar("TriedT", bound=Tried)


def details(tried: Iterable[Tried]) -> str:
    """``place/type: detail`` of every attempt, for a FULL or FAILED message."""
    return "; ".join(f"{t.attempt}: {t.detail}" for t in tried)


def unoffered_refusal(place: str, region: str, type_noun: str, types: Iterable[str]) -> Refusal:
    """INVALID: no place of the region offers any of the runner's machine types."""
    named = " or ".join(sorted({t for t in types if t})) or "(none)"
    return Refusal(
        RefusalKind.INVALID, f"no {place} of {region} offers {type_noun} {named}", type_noun
    )


def stop_refusal(tried: Sequence[Tried], machine_noun: str) -> Refusal | None:
    """The refusal when the last attempt stopped the search; ``None`` when it did not."""
    last = tried[-1]
    where = f"{last.attempt}: {last.detail}"
    if last.outcome is PlaceAnswer.INVALID:
        return Refusal(RefusalKind.INVALID, where, "runner")
    if last.outcome is PlaceAnswer.DENIED:
        return Refusal(RefusalKind.INVALID, where, "permission")
    if last.outcome is PlaceAnswer.REFUSED:
        return Refusal(RefusalKind.FAILED, where, "api")
    if last.outcome is PlaceAnswer.UNCERTAIN:
        return Refusal(
            RefusalKind.FAILED,
            f"{last.attempt}: no certain answer after {UNCERTAIN_RETRIES + 1} tries and no "
            f"{machine_noun} found: {last.detail}",
            "api",
        )
    return None


def capabilities(runner_keys: Iterable[str]) -> tuple[str, ...]:
    """What ``info`` announces: the provider's runner keys and the typed ones it reads."""
    return tuple(sorted({*runner_keys, "image", "disk"}))


def runner_problems(
    runner: Mapping[str, Any], parse: Callable[[RunnerBlock], tuple[object, list[str]]]
) -> list[str]:
    """Every problem of a runner block as the provider's ``parse`` reads it."""
    try:
        block = RunnerBlock.from_mapping(runner)
    except ValueError as e:
        return [f"runner.{e}"]
    return parse(block)[1]


def own_labels(labels: Mapping[str, str], installation: str) -> dict[str, str] | Refusal:
    """The labels a machine is made with, or INVALID for a runner of another installation."""
    own = dict(labels)
    if own.setdefault(INSTALLATION, installation) != installation:
        return Refusal(
            RefusalKind.INVALID,
            f"the runner belongs to installation {own[INSTALLATION]!r}; this provider "
            f"serves {installation!r}",
            "installation",
        )
    own.setdefault(MANAGED, "true")
    return own


async def search(
    plan: Iterable[AttemptT],
    machine_type: Callable[[AttemptT], str],
    attempt: Callable[[AttemptT], Awaitable[Created | TriedT | None]],
) -> Created | list[TriedT]:
    """The first machine the plan makes, or every attempt that made none, in order.

    ``attempt`` answers ``None`` for an attempt it skipped without asking the cloud.
    """
    tried: list[TriedT] = []
    out_of_quota: set[str] = set()
    for each in plan:
        if machine_type(each) in out_of_quota:
            continue
        result = await attempt(each)
        if result is None:
            continue
        if isinstance(result, Created):
            return result
        tried.append(result)
        if result.outcome is PlaceAnswer.QUOTA:
            out_of_quota.add(machine_type(each))
        if result.outcome in STOPS_SEARCH:
            break
    return tried


async def send_until_certain(
    send: Callable[[], Awaitable[Created | TriedT]],
    find: Callable[[], Awaitable[Created | None]],
    clock: Clock,
    on_uncertain: Callable[[int, TriedT], None],
) -> Created | TriedT:
    """One attempt: ``send`` (the same token every time) until the answer is certain.

    After the last uncertain answer ``find`` settles it, since the machine may exist although
    no answer said so; ``on_uncertain`` hears each uncertain answer with how many were sent.
    """
    for sent in range(UNCERTAIN_RETRIES + 1):
        result = await send()
        if isinstance(result, Created) or result.outcome is not PlaceAnswer.UNCERTAIN:
            return result
        on_uncertain(sent + 1, result)
        if sent < UNCERTAIN_RETRIES:
            await clock.sleep(RETRY_DELAYS[sent])
    return await find() or result  # the last uncertain answer, when nothing was found
