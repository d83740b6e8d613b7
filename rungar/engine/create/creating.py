"""Creating runners: the placement attempt, the Create calls and the create's intent.

Nothing is registered when no provider can be tried; the runner is registered with GitHub
once; its plan (:func:`rungar.placement.plan.plan_placement`) is carried out in order
(:func:`rungar.engine.create.placing.try_plan`); a refused
create's leftover is deleted; when no provider takes it its registration is removed; the whole
attempt is bounded by the scale set's ``start_timeout``, on the engine's clock (the one create
timeout), counted from the registration: the wait for GitHub's pace before it is the queue's, not
a provider's. A create whose turn comes when its scale set no longer wants it is dropped before
it registers (:meth:`Creations.needed`). Each create's intent is written to the store before
any call, so a crash at any moment is settled by the next reconcile pass. Creates for different
runners run in parallel, bounded by a semaphore this module owns, so a slow provider slows only
its own runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, replace

import structlog

from rungar.clock import within
from rungar.engine.core.context import EngineContext, ProviderBlock
from rungar.engine.core.naming import runner_name
from rungar.engine.core.notices import note_unanswered
from rungar.engine.core.records import RunnerRecord
from rungar.engine.core.scale_set_state import ScaleSetState
from rungar.engine.create.placing import Untrusted, try_plan
from rungar.engine.create.rooms import Rooms
from rungar.errors import GitHubError, ProviderError, ProviderUnavailable
from rungar.github.exceptions import RegistrationThrottled
from rungar.github.interface import RemoveOutcome
from rungar.github.registrations import Ticket
from rungar.model import bounded, sentences
from rungar.model.create_intent import CreateIntent, GivenUpCreate
from rungar.model.labels import machine_labels
from rungar.model.machine import (
    Created,
    CreateRequest,
    JobHint,
    Refusal,
    RefusalKind,
    Removal,
)
from rungar.model.runner import RemovalReason, RunnerState
from rungar.model.runner_block import RunnerBlock
from rungar.placement.holds import Hold
from rungar.placement.plan import CreateBudget, NotPlaced, Outcome, Placed, Try, plan_placement

log = structlog.get_logger("rungar.engine")


class Creations:
    def __init__(self, ctx: EngineContext, max_parallel: int, rooms: Rooms) -> None:
        self.ctx = ctx
        self.rooms = rooms  # told of room a create gives back, and of held room taken
        self._slots = asyncio.Semaphore(max_parallel)

    async def create_one(self, state: ScaleSetState, *, reserve: bool = False) -> None:
        """One runner: its turn in the installation's registration queue (assigned jobs before
        reserve refills, higher-priority scale sets first), then a parallel-create slot."""
        ctx = self.ctx
        try:
            turn = ctx.registrations.turn(refill=reserve, priority=state.config.priority)
            async with turn as ticket, self._slots:
                if self.needed(state):  # else its turn goes back to the queue, unused
                    await self.create_runner(state, reserve=reserve, ticket=ticket)
        except Exception:
            log.exception("runner.create_crashed", scale_set=state.config.name)
        finally:
            ctx.runners.creating.done_asking(state.config.name)

    def needed(self, state: ScaleSetState) -> bool:
        """Whether a queued create is still wanted when its turn comes, before it registers: its
        scale set is still configured and its last decision still wants more runners than it
        has live, counting the creates asked and not done (this one among them). One that is
        not is dropped, so a registration of GitHub's limit is not spent on a runner that would
        be removed as surplus once created."""
        ctx = self.ctx
        name = state.config.name
        if state.removed or ctx.sets.get(name) is not state:
            log.debug("runner.create_dropped", scale_set=name, reason="scale set removed")
            return False
        if state.desired is None:
            return True  # no decision yet: the one that asked for it stands
        have = len(ctx.runners.live(name)) + ctx.runners.creating.count(name)
        if have <= state.desired:
            return True
        log.info("runner.create_dropped", scale_set=name, desired=state.desired, have=have)
        return False

    async def create_cheaper(self, scale_set: str, price: float) -> RunnerRecord | None:
        """A reserve runner of ``scale_set`` on a provider priced below ``price``: room that
        opened on a cheaper provider, taken by an idle runner of a dearer one
        (:mod:`rungar.engine.create.rooms`)."""
        state = self.ctx.sets.get(scale_set)
        if state is None:
            return None
        return await self.create_runner(state, reserve=True, cheaper_than=price)

    async def create_runner(
        self,
        state: ScaleSetState,
        *,
        reserve: bool = False,
        cheaper_than: float | None = None,
        ticket: Ticket | None = None,
    ) -> RunnerRecord | None:
        """Create one runner of the scale set; ``cheaper_than``: only on providers priced
        below it (a replacement for an idle runner on a dearer one)."""
        ctx = self.ctx
        config = state.config
        now = ctx.clock.now()
        if not ctx.may_create():
            return None
        # Whether any provider can be tried (its order is worked out once, when one is tried).
        why_not = ctx.fleet.cannot_place(config.name, now, reserve=reserve)
        if why_not and not reserve and cheaper_than is None:
            self.report_holds(ctx.fleet.apply_holds(ctx.fleet.plan_holds(config.name, now)))
        if why_not:
            ctx.metrics.scale_up_failures.labels(config.name, "no_capacity").inc()
            log.info("runner.cannot_scale_up", scale_set=config.name, reason=why_not)
            if not reserve:
                self.rooms.wake_later(config.name)
            return None
        name = runner_name(config.name)
        ctx.runners.creating.name(config.name, name)
        intent = CreateIntent(name, config.name, str(uuid.uuid4()), created_at=now)
        ctx.store.write_intent(intent)
        try:
            try:
                registered = await self._register(state, name, ticket)
            except GitHubError as e:
                log.warning("runner.register_failed", scale_set=config.name, error=str(e))
                ctx.metrics.scale_up_failures.labels(config.name, "error").inc()
                ctx.store.clear_intent(name)
                return None
            if registered is None:  # no longer needed while it waited for GitHub's pace
                ctx.store.clear_intent(name)
                return None
            runner_id, jit_config = registered
            # start_timeout counts from the registration: the wait for GitHub's pace before it
            # is the queue's, and no provider's to be blamed for.
            budget = CreateBudget(ctx.clock.now(), config.start_timeout)
            if state.removed:  # removed while it registered: the registration goes, quietly
                with contextlib.suppress(GitHubError):
                    await ctx.github.remove_runner(runner_id)
                ctx.store.clear_intent(name)
                return None
            # The registration's id is written with the first Create's provider, in the same
            # transaction, before that call (or before the registration is removed, below):
            # nothing is awaited in between, so the store is never behind at a crash.
            intent = replace(intent, runner_id=runner_id)
            blocks = ctx.runner_blocks(config.name)
            result = await self._place(
                state,
                name,
                intent,
                jit_config,
                blocks,
                budget,
                reserve=reserve,
                cheaper_than=cheaper_than,
            )
            if isinstance(result, NotPlaced):
                self.report_holds(result.held)
                if not reserve:
                    self.rooms.wake_later(config.name)
            if isinstance(result, Placed):
                revision = blocks[result.provider].revision  # as the Create's labels say
                return self._record(config.name, name, runner_id, revision, result, budget)
            await self._give_up(config.name, intent, result)
            return None
        finally:
            ctx.runners.creating.done(name)

    def _record(
        self,
        scale_set: str,
        name: str,
        runner_id: int,
        revision: str,
        placed: Placed,
        budget: CreateBudget,
    ) -> RunnerRecord:
        """The runner is created: it joins the runner table and its intent is cleared."""
        ctx = self.ctx
        record = RunnerRecord(
            name=name,
            scale_set=scale_set,
            provider=placed.provider,
            revision=revision,
            created_at=ctx.clock.now(),
            state=RunnerState.STARTING,
            runner_id=runner_id,
            machine=placed.machine.state,
        )
        with ctx.store.batch():  # kept as a runner and its intent cleared: one transaction
            ctx.runners.add(record)
            ctx.store.clear_intent(name)
        elapsed = budget.elapsed(ctx.clock.now())
        ctx.metrics.created.labels(scale_set, placed.provider).inc()
        ctx.metrics.create_duration.labels(scale_set, placed.provider).observe(elapsed)
        idle = self.rooms.taken(scale_set, placed.provider, ctx.clock.now())
        ctx.events.record(
            "runner",
            name,
            "created",
            scale_set=scale_set,
            provider=placed.provider,
            message=f"created on {placed.provider}",
            create_duration=round(elapsed, 3),
            **({"held_room_idle": round(idle, 3)} if idle is not None else {}),
        )
        log.info("runner.created", scale_set=scale_set, provider=placed.provider, runner=name)
        return record

    async def _give_up(self, scale_set: str, intent: CreateIntent, result: NotPlaced) -> None:
        """No provider took the runner: its registration goes, then its intent. When a machine
        may be left behind (``stranded_on``: its Create, or the Delete of its leftover, got no
        answer; a Create held up in a partition may still reach the provider), the runner is
        first kept as given up on that provider: that machine, if it appears, is deleted and
        never adopted (rungar.engine.reconcile.given_up_plan)."""
        ctx = self.ctx
        name = intent.runner
        ctx.metrics.scale_up_failures.labels(scale_set, "no_capacity").inc()
        log.warning(
            "runner.not_placed",
            scale_set=scale_set,
            runner=name,
            reason=result.reason,
            plan=str(result.plan),
            stranded_on=result.stranded_on,
        )
        if result.stranded_on:
            self._given_up(name, scale_set, result.stranded_on)
        if all(t.outcome is Outcome.SKIPPED for t in result.tries):
            ctx.store.write_intent(intent)  # no Create was asked: its id is not written
        with contextlib.suppress(GitHubError):
            await ctx.github.remove_runner(intent.runner_id)
        ctx.store.clear_intent(name)

    def _given_up(
        self, name: str, scale_set: str, provider: str, *, registration: str = ""
    ) -> None:
        """Keep ``name`` as a create given up on while ``provider`` may still make its machine
        (``registration``: the GitHub runner it may carry, when not its own name)."""
        ctx = self.ctx
        ctx.store.keep_given_up(
            GivenUpCreate(name, scale_set, provider, ctx.clock.now(), registration=registration)
        )

    async def _place(
        self,
        state: ScaleSetState,
        name: str,
        intent: CreateIntent,
        jit_config: str,
        blocks: dict[str, ProviderBlock],
        budget: CreateBudget,
        *,
        reserve: bool = False,
        cheaper_than: float | None = None,
    ) -> Placed | NotPlaced:
        ctx = self.ctx
        config = state.config
        ask = _Ask(
            ctx.installation,
            config.name,
            intent,
            jit_config,
            blocks,
            hints=state.queue_front(),
            deadline=_deadline(ctx, state, ctx.clock.now()),
            budget=budget,
        )

        def request(provider: str) -> CreateRequest:
            block = blocks.get(provider) or ctx.runner_block(config.name, provider)
            return ask.request(provider, block, ctx.clock.now())

        async def create(provider: str) -> Created | Refusal:
            ctx.store.write_intent(replace(intent, provider=provider))
            asked = request(provider)
            if not asked.budget:
                raise TimeoutError  # nothing is asked, so nothing is left behind
            # The one place the create timeout is enforced: on the engine's clock, which a
            # simulation winds by hand; a gRPC provider's own deadline comes later (rpc.client).
            answer = await ctx.call(
                provider,
                "create",
                within(ctx.clock, asked.budget, ctx.providers[provider].create(asked)),
            )
            if isinstance(answer, Created) and answer.machine.name != name:
                raise await self._misnamed(
                    config.name, provider, name, answer.machine.name, intent.runner_id
                )
            if isinstance(answer, Refusal):
                answer = bounded.believed_room(answer)  # in process too: untrusted
                if answer.room_ignored:
                    log.warning(
                        "provider.room_ignored",
                        provider=provider,
                        runner=name,
                        reason=answer.room_ignored,
                    )
            if isinstance(answer, Refusal) and answer.kind is RefusalKind.FULL:
                listed = {h.job_id for h in ask.hints if h.job_id}
                state.refused_by[provider] = (name, listed)  # told as they leave the queue
            return answer

        async def delete(provider: str) -> None:
            await self._delete_leftover(provider, name)

        async def settle(provider: str) -> Created | None:
            from rungar.rpc.settle import Unsettled, settle_unanswered_create

            answer = await settle_unanswered_create(
                ctx.providers[provider],
                request(provider),
                ctx.clock,
                tries=2,
                first_delay=0.5,
            )
            if isinstance(answer, Created):
                if answer.machine.name == name:
                    return answer
                # Not believed: not settled, and the runner's own machine is deleted below,
                # unless its registration runs a job (then it is kept as given up on).
                untrusted = await self._misnamed(
                    config.name, provider, name, answer.machine.name, intent.runner_id
                )
                if untrusted.keep_leftover:
                    return None
            elif isinstance(answer, Unsettled):
                return None
            with contextlib.suppress(ProviderError, TimeoutError):
                await delete(provider)
            return None

        # Decided now, after the registration's await, from the fleet as it stands; then carried
        # out. Each provider's place is still claimed when it is tried.
        plan = plan_placement(
            ctx.fleet, config.name, ctx.clock.now(), reserve=reserve, cheaper_than=cheaper_than
        )
        return await try_plan(
            ctx.fleet,
            plan,
            now=ctx.clock.now,
            create=create,
            delete=delete,
            settle=settle,
            observe=self._observe,
            on_room=self.rooms.opened,
        )

    async def _register(
        self, state: ScaleSetState, name: str, ticket: Ticket | None
    ) -> tuple[int, str] | None:
        """Register with GitHub on this create's turn; throttled (429), the queue learns the
        pace and the create waits for its next turn, ahead of those that came after it. None:
        by that next turn the runner was no longer needed (:meth:`needed`), and the turn went
        back unused."""
        github = self.ctx.github
        scale_set_id = state.id
        if ticket is None:
            return await github.generate_jit_config(scale_set_id, name)
        first = True
        while True:
            if not first and not self.needed(state):
                ticket.give_back()
                return None
            first = False
            ticket.sent()
            try:
                answer = await github.generate_jit_config(scale_set_id, name, app=ticket.app)
            except RegistrationThrottled as e:
                self.ctx.metrics.registrations_throttled.inc()
                await ticket.throttled(e.retry_after)  # answered; waits for its next turn
                continue
            except GitHubError as e:
                if e.status not in (401, 403) or not ticket.elsewhere():
                    ticket.answered()
                    raise
                self._app_refused(ticket, str(e))
                await ticket.again()  # another App's turn, ahead of those that came later
                continue
            except BaseException:
                ticket.answered()
                raise
            working = ticket.accepted()
            if working:
                self.ctx.events.record(
                    "github_app",
                    working,
                    "working",
                    message=f"GitHub App {working} registers runners again",
                )
            return answer

    def _app_refused(self, ticket: Ticket, error: str) -> None:
        """GitHub refused the App of this turn (revoked, suspended): it is skipped, said once,
        and the registration goes to another App."""
        app = self.ctx.registrations.lanes[ticket.app].app
        if ticket.refused(error):
            retry = self.ctx.registrations.app_retry_after
            sentence = (
                f"GitHub App {app} refused: {error}; its registrations go to the other Apps, "
                f"and it is tried again in {retry:.0f} s"
            )
            self.ctx.events.record("github_app", app, "failing", message=sentence, error=error)
            log.warning("github.app_failing", app=app, error=error, sentence=sentence)

    async def _misnamed(
        self, scale_set: str, provider: str, name: str, answered: str, runner_id: int
    ) -> Untrusted:
        """A Create for ``name`` answered with another machine, ``answered``: not believed. It
        is the provider's FAILED refusal, and the runner is tried on no other provider: a
        machine made there with its registration could take a job (placing.Untrusted).

        The registration is removed first, so that no machine can take a job with it from then
        on; then the machine named is deleted there (unless a runner of ours holds that name),
        and the caller deletes ``name``'s as any refused create's leftover. When GitHub says the
        registration runs a job already, or cannot be asked, neither machine is deleted now: a
        job may be running on either. Both are kept as creates given up on, carrying that
        registration, and deleted once GitHub no longer lists it busy; neither is ever adopted
        (rungar.engine.reconcile.given_up_plan)."""
        ctx = self.ctx
        try:
            removed = await ctx.github.remove_runner(runner_id) is RemoveOutcome.REMOVED
        except GitHubError:
            removed = False
        if answered not in ctx.runners and answered not in ctx.runners.creating:
            self._given_up(answered, scale_set, provider, registration=name)
            if removed:
                with contextlib.suppress(ProviderError, TimeoutError):
                    await self._delete_leftover(provider, answered)
        log.warning(
            "provider.misnamed_create",
            provider=provider,
            runner=name,
            answered=answered,
            registration_removed=removed,
        )
        refusal = Refusal(RefusalKind.FAILED, f"answered with machine {answered} for {name}")
        return Untrusted(refusal, keep_leftover=not removed)

    async def _delete_leftover(self, provider: str, name: str) -> None:
        """Delete what a create given up on may have left on ``provider``; a Delete that gets
        no answer marks the provider unreachable."""
        ctx = self.ctx
        try:
            await ctx.delete_machine(provider, name, Removal(RemovalReason.NOT_PLACED))
        except (ProviderUnavailable, TimeoutError) as e:
            if ctx.fleet.record_unanswered(provider):
                note_unanswered(ctx, provider, str(e) or "Delete got no answer")
            raise

    def report_holds(self, holds: tuple[Hold, ...]) -> None:
        """Record an event and a log line for each hold newly placed (not renewals)."""
        ctx = self.ctx
        for hold in holds:
            ctx.events.record(
                "provider",
                hold.provider,
                "held",
                scale_set=hold.holder,
                provider=hold.provider,
                message=sentences.hold_placed(hold.holder, hold.priority),
                priority=hold.priority,
            )
            log.info(
                "provider.held",
                sentence=sentences.hold_placed(hold.holder, hold.priority),
                provider=hold.provider,
                scale_set=hold.holder,
                priority=hold.priority,
            )

    def _observe(self, scale_set: str, attempt: Try) -> None:
        ctx = self.ctx
        if attempt.outcome in (Outcome.REFUSED, Outcome.TIMED_OUT) and attempt.refusal:
            backoff = ctx.fleet.backoff(scale_set, attempt.provider)
            left = backoff.remaining(ctx.clock.now()) if backoff else 0.0
            refusals = backoff.refusals if backoff else 1
            full = attempt.refusal.kind is RefusalKind.FULL
            action = "full" if full else "failing"
            sentence = sentences.refused(
                scale_set, attempt.provider, full, refusals, left, attempt.message
            )
            ctx.events.record(
                "provider",
                attempt.provider,
                action,
                scale_set=scale_set,
                provider=attempt.provider,
                message=sentence,
                resource=attempt.refusal.resource,
                refusal=attempt.refusal.kind.value,
                refusals=refusals,
                **_room_fields(attempt.refusal),
            )
            log.info(
                f"provider.{action}",
                sentence=sentence,
                scale_set=scale_set,
                provider=attempt.provider,
                error=attempt.message,
            )
        elif attempt.outcome is Outcome.UNANSWERED:
            ctx.findings.list_errors[attempt.provider] = attempt.message  # status says why
            ctx.events.record(
                "provider",
                attempt.provider,
                "unreachable",
                scale_set=scale_set,
                provider=attempt.provider,
                message=attempt.message,
            )
            log.warning(
                "provider.unreachable",
                sentence=sentences.UNREACHABLE_SINCE,
                provider=attempt.provider,
            )


def _room_fields(refusal: Refusal) -> dict[str, object]:
    """A refusal's expected room for its event: when and how sure, or why it was ignored."""
    if refusal.room is not None:
        return {
            "room_in": round(refusal.room.seconds, 1),
            "room_confidence": round(refusal.room.confidence, 3),
        }
    if refusal.room_ignored:
        return {"room_ignored": refusal.room_ignored}
    return {}


def _deadline(ctx: EngineContext, state: ScaleSetState, now: float) -> float:
    """When the provider may end the runner's machine by itself (0: never): ``max_age`` past
    now, with a pass and the grace to spare."""
    config = state.config
    if config.max_age is None:
        return 0.0
    timing = ctx.config.timing
    return now + config.max_age + timing.reconcile_interval + timing.deadline_grace


@dataclass(frozen=True, slots=True)
class _Ask:
    """What every Create of one runner asks: the same name, request id, JIT config, hints and
    deadline; each provider's own runner block, and what is left of the budget."""

    installation: str
    scale_set: str
    intent: CreateIntent
    jit_config: str
    blocks: dict[str, ProviderBlock]
    hints: tuple[JobHint, ...]
    deadline: float
    budget: CreateBudget

    def request(self, provider: str, block: ProviderBlock, now: float) -> CreateRequest:
        name = self.intent.runner
        return CreateRequest(
            runner_name=name,
            request_id=self.intent.request_id,
            scale_set=self.scale_set,
            labels=machine_labels(
                self.installation, self.scale_set, name, block.revision, provider
            ),
            runner=RunnerBlock.from_mapping(block.block),
            jit_config=self.jit_config,
            job_hints=self.hints,
            deadline=self.deadline,
            # whatever the provider's own timeout (which bounds its other calls)
            budget=self.budget.left(now),
        )
