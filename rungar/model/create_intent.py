"""A create's intent, written to the state store before any call so a crash at any moment is
settled by the next reconcile pass (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CreateIntent:
    """A runner being created: registered (``runner_id``) and maybe being asked of ``provider``."""

    runner: str
    scale_set: str
    request_id: str
    runner_id: int = 0
    provider: str = ""
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class GivenUpCreate:
    """A create the daemon gave up on while a machine of its name may be left on ``provider``
    (its Create or the Delete of its leftover got no answer in time): kept so that machine, if
    it appears, is deleted rather than adopted (rungar.engine.reconcile.given_up).

    ``given_up_at``: when it was given up; ``listed_at``: when ``provider`` first answered a
    listing asked for after that (0: not yet); ``seen``: such a listing showed its machine,
    and it was asked to be deleted; ``registration``: the GitHub runner whose JIT config the
    machine may carry when that is not its own name (a Create answered with another
    machine's name), empty otherwise."""

    runner: str
    scale_set: str
    provider: str
    given_up_at: float
    listed_at: float = 0.0
    seen: bool = False
    registration: str = ""

    @property
    def carries(self) -> str:
        """The GitHub runner whose job its machine may be running."""
        return self.registration or self.runner
