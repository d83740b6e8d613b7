"""The provider conformance kit: what every provider must do, as checks any test suite can run.

Shipped in ``rungar.testing`` so runnerd, the cloud providers and third-party plugins all run the
same checks (after trio's ``check_*_stream``). Each ``check_*`` coroutine takes a
:class:`~rungar.model.provider.Provider` (usually a ``GrpcProvider`` connected to the provider under
test, so the wire is checked too) and raises :class:`ConformanceFailure` with a sentence saying what
the protocol (proto/rungar/provider/v1/provider.proto) expects and what the provider did. Each check
cleans up what it created, and labels its machines with a fresh installation id so it only ever
sees, and deletes, its own. :func:`check_provider` runs them all and reports every failure at once.

The capacity checks fill the provider with ``capacity_runner`` until it refuses FULL (at most
``max_fill`` machines), so use a small provider, or skip them for a cloud with ``skip=``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from rungar.model import bounded
from rungar.model import labels as label_keys
from rungar.model.machine import (
    Conclusion,
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    Refusal,
    RefusalKind,
    Removal,
)
from rungar.model.provider import Provider
from rungar.model.runner import RemovalReason
from rungar.model.runner_block import RunnerBlock


class ConformanceFailure(AssertionError):
    """The provider does not do what the protocol says."""


@dataclass(slots=True)
class Run:
    """One run of the kit: the runner sizes to use, and every refusal seen along the way."""

    capacity_runner: RunnerBlock
    impossible_runner: RunnerBlock
    installation: str = field(default_factory=lambda: f"conformance-{uuid.uuid4().hex[:8]}")
    refusals: list[Refusal] = field(default_factory=list)
    max_fill: int = 64

    def request(self, runner: RunnerBlock | None = None, key: str = "") -> CreateRequest:
        name = f"conf-{uuid.uuid4().hex[:8]}"
        return CreateRequest(
            runner_name=name,
            request_id=key or uuid.uuid4().hex,
            scale_set="conformance",
            labels=label_keys.machine_labels(self.installation, "conformance", name, "r1"),
            runner=runner or self.capacity_runner,
            jit_config="conformance-jit-config",
        )

    @property
    def selector(self) -> dict[str, str]:
        return label_keys.installation_selector(self.installation)

    def saw(self, outcome: Created | Refusal) -> Created | Refusal:
        if isinstance(outcome, Refusal):
            self.refusals.append(outcome)
        return outcome


def _fail(what: str) -> ConformanceFailure:
    return ConformanceFailure(what)


async def _ours(provider: Provider, run: Run) -> list[Machine]:
    return [m for m in await provider.list(run.selector) if m.state is not MachineState.STOPPED]


async def _delete_all(provider: Provider, names: Iterable[str]) -> None:
    for name in names:
        await provider.delete(name)


async def check_repeated_create_returns_the_same_machine(provider: Provider, run: Run) -> None:
    request = run.request()
    first = run.saw(await provider.create(request))
    if not isinstance(first, Created):
        raise _fail(f"create of a runner that fits was refused: {first.kind}: {first.message}")
    try:
        again = run.saw(await provider.create(request))
        if not isinstance(again, Created) or again.machine.name != first.machine.name:
            raise _fail(f"a repeated create with the same request_id answered {again!r}")
        listed = [m for m in await _ours(provider, run) if m.name == request.runner_name]
        if len(listed) != 1:
            raise _fail(f"a repeated create left {len(listed)} machines named the runner, not 1")
    finally:
        await provider.delete(request.runner_name)


async def check_delete_of_an_unknown_name_succeeds(provider: Provider, run: Run) -> None:
    try:
        await provider.delete(f"conf-never-created-{uuid.uuid4().hex[:8]}")
    except Exception as e:
        raise _fail(f"delete of an unknown name failed: {type(e).__name__}: {e}") from e


async def check_delete_with_a_removal_deletes_the_machine(provider: Provider, run: Run) -> None:
    """Delete says why (a job's conclusion, or a reason without a job); whatever a provider
    makes of it, the machine is gone and the call succeeds, also for an unknown name."""
    removals = [
        Removal(
            RemovalReason.JOB_COMPLETED,
            Conclusion.FAILED,
            JobHint("conf/repo", ".github/workflows/ci.yml", "build", "1", "main", "7"),
        ),
        Removal(RemovalReason.SCALED_DOWN),
    ]
    for removal in removals:
        request = run.request()
        outcome = run.saw(await provider.create(request))
        if not isinstance(outcome, Created):
            raise _fail(f"create of a runner that fits was refused: {outcome.message}")
        try:
            await provider.delete(request.runner_name, removal)
        except Exception as e:
            await provider.delete(request.runner_name)
            raise _fail(
                f"delete with a removal ({removal.describe()}) failed: {type(e).__name__}: {e}"
            ) from e
        if request.runner_name in {m.name for m in await _ours(provider, run)}:
            raise _fail(f"list still shows {request.runner_name} after its delete with a removal")
    try:
        await provider.delete(f"conf-never-created-{uuid.uuid4().hex[:8]}", removals[0])
    except Exception as e:
        raise _fail(f"delete of an unknown name with a removal failed: {e}") from e


async def check_list_shows_our_machines_with_their_labels(provider: Provider, run: Run) -> None:
    requests = [run.request(), run.request()]
    made: list[str] = []
    try:
        for request in requests:
            outcome = run.saw(await provider.create(request))
            if not isinstance(outcome, Created):
                raise _fail(f"create of a runner that fits was refused: {outcome.message}")
            made.append(request.runner_name)
        listed = {m.name: m for m in await provider.list(run.selector)}
        for request in requests:
            machine = listed.get(request.runner_name)
            if machine is None:
                raise _fail(f"list does not show created machine {request.runner_name}")
            missing = {k: v for k, v in request.labels.items() if machine.labels.get(k) != v}
            if missing:
                raise _fail(f"list shows {machine.name} without the labels {missing}")
        await provider.delete(requests[0].runner_name)
        made.remove(requests[0].runner_name)
        names = {m.name for m in await provider.list(run.selector)}
        if requests[0].runner_name in names:
            raise _fail(f"list still shows {requests[0].runner_name} after its delete")
        if requests[1].runner_name not in names:
            raise _fail(f"list lost {requests[1].runner_name} when another machine was deleted")
    finally:
        await _delete_all(provider, made)


async def _fill(provider: Provider, run: Run) -> tuple[list[str], Refusal]:
    """Create capacity runners until refused; the names made and the refusal."""
    made: list[str] = []
    for _ in range(run.max_fill):
        request = run.request()
        outcome = run.saw(await provider.create(request))
        if isinstance(outcome, Refusal):
            return made, outcome
        made.append(request.runner_name)
    await _delete_all(provider, made)
    raise _fail(f"{run.max_fill} capacity runners were created without a refusal")


async def check_a_full_provider_refuses_full_with_a_resource(provider: Provider, run: Run) -> None:
    made, refusal = await _fill(provider, run)
    try:
        if refusal.kind is not RefusalKind.FULL:
            raise _fail(f"a provider at its capacity refused {refusal.kind}, not full")
        if not refusal.resource.strip():
            raise _fail(f"a full refusal names no resource: {refusal.message!r}")
    finally:
        await _delete_all(provider, made)


async def check_an_impossible_runner_is_refused_invalid(provider: Provider, run: Run) -> None:
    request = run.request(run.impossible_runner)
    outcome = run.saw(await provider.create(request))
    if isinstance(outcome, Created):
        await provider.delete(request.runner_name)
        raise _fail("a runner larger than the provider was created")
    if outcome.kind is not RefusalKind.INVALID:
        raise _fail(f"a runner larger than the provider was refused {outcome.kind}, not invalid")


async def check_concurrent_creates_never_exceed_capacity(
    provider: Provider, run: Run, *, extra: int = 4
) -> None:
    made, _ = await _fill(provider, run)
    capacity = len(made)
    await _delete_all(provider, made)
    requests = [run.request() for _ in range(capacity * 2 + extra)]
    outcomes = await asyncio.gather(*(provider.create(r) for r in requests), return_exceptions=True)
    created = [
        r.runner_name for r, o in zip(requests, outcomes, strict=True) if isinstance(o, Created)
    ]
    try:
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:
            raise _fail(f"{len(errors)} concurrent creates raised, first: {errors[0]!r}")
        for outcome in outcomes:
            if isinstance(outcome, Refusal):
                run.saw(outcome)
        if len(created) > capacity:
            raise _fail(
                f"{len(requests)} concurrent creates made {len(created)} machines; "
                f"the provider holds {capacity}"
            )
        listed = {m.name for m in await _ours(provider, run)}
        if listed != set(created):
            raise _fail(
                f"after concurrent creates list shows {len(listed)} machines, "
                f"created answered {len(created)}"
            )
    finally:
        await _delete_all(provider, created)


async def check_last_output_is_lines_and_none_for_an_unknown_name(
    provider: Provider, run: Run
) -> None:
    unknown = await provider.last_output(f"conf-never-created-{uuid.uuid4().hex[:8]}", 5)
    if list(unknown):
        raise _fail(f"last output of an unknown name answered lines: {list(unknown)!r}")
    request = run.request()
    created = run.saw(await provider.create(request))
    if not isinstance(created, Created):
        raise _fail(f"create of a runner that fits was refused: {created.kind}: {created.message}")
    try:
        lines = list(await provider.last_output(request.runner_name, 3))
        if len(lines) > 3 or not all(isinstance(x, str) and "\n" not in x for x in lines):
            raise _fail(f"last output asked for 3 lines answered {lines!r}")
    finally:
        await provider.delete(request.runner_name)


def check_every_refusal_has_a_human_message(run: Run) -> None:
    if not run.refusals:
        raise _fail("no refusal was seen, so none could be checked")
    for refusal in run.refusals:
        if len(refusal.message.strip()) < 3:
            raise _fail(f"a {refusal.kind} refusal has no human message: {refusal.message!r}")


def check_every_expected_room_is_absent_or_sane(run: Run) -> None:
    """A refusal's expected room (proto: ``Refused.room_expected``) is optional; when sent it
    is on a FULL refusal only, 0 to 86400 seconds, with a confidence of 0 to 1. Through
    ``GrpcProvider`` an insane one arrives dropped, ``room_ignored`` saying why."""
    for refusal in run.refusals:
        if refusal.room_ignored:
            raise _fail(f"a {refusal.kind} refusal's expected room {refusal.room_ignored}")
        room = refusal.room
        if room is None:
            continue
        if refusal.kind is not RefusalKind.FULL:
            raise _fail(f"a {refusal.kind} refusal says when room is expected; only full may")
        why = bounded.room_expected(room.seconds, room.confidence)
        if why:
            raise _fail(f"a full refusal's expected {why}")


CHECKS: dict[str, Callable[[Provider, Run], Awaitable[None]]] = {
    "repeated_create": check_repeated_create_returns_the_same_machine,
    "delete_unknown": check_delete_of_an_unknown_name_succeeds,
    "delete_with_removal": check_delete_with_a_removal_deletes_the_machine,
    "list_labels": check_list_shows_our_machines_with_their_labels,
    "full_refusal": check_a_full_provider_refuses_full_with_a_resource,
    "invalid_refusal": check_an_impossible_runner_is_refused_invalid,
    "concurrent_creates": check_concurrent_creates_never_exceed_capacity,
    "last_output": check_last_output_is_lines_and_none_for_an_unknown_name,
}


async def check_provider(
    make_client: Callable[[], Awaitable[Provider]],
    *,
    capacity_runner: RunnerBlock,
    impossible_runner: RunnerBlock,
    skip: Iterable[str] = (),
    max_fill: int = 64,
) -> list[str]:
    """Run every check (but ``skip``, names from :data:`CHECKS`); the names that passed.

    Raises one :class:`ConformanceFailure` listing every failed check. ``make_client`` is
    called once per check, so each starts on a fresh connection.
    """
    run = Run(capacity_runner, impossible_runner, max_fill=max_fill)
    skipped = set(skip)
    unknown = skipped - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown checks to skip: {sorted(unknown)}")
    passed: list[str] = []
    failures: list[str] = []
    for name, check in CHECKS.items():
        if name in skipped:
            continue
        client = await make_client()
        try:
            await check(client, run)
            passed.append(name)
        except ConformanceFailure as e:
            failures.append(f"{name}: {e}")
        except Exception as e:
            failures.append(f"{name}: raised {type(e).__name__}: {e}")
        finally:
            close = getattr(client, "close", None)
            if close is not None:
                await close()
    try:
        check_every_refusal_has_a_human_message(run)
        passed.append("refusal_messages")
    except ConformanceFailure as e:
        failures.append(f"refusal_messages: {e}")
    try:
        check_every_expected_room_is_absent_or_sane(run)
        passed.append("expected_room")
    except ConformanceFailure as e:
        failures.append(f"expected_room: {e}")
    if failures:
        raise ConformanceFailure("provider is not conformant:\n  " + "\n  ".join(failures))
    return passed
