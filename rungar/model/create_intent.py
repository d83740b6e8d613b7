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
