"""Placement: which providers a scale set tries, in which order, and what holds it back.

Pure decisions over :class:`Fleet` state (docs/architecture.md; the ``placement`` key in
docs/configuration.md): :func:`rungar.placement.plan.plan_placement` says what to try for one
runner; the engine carries the plan out (:mod:`rungar.engine.create.placing`).
"""

from rungar.model.sentences import (
    DISABLED,
    FULL,
    UNREACHABLE,
    failing_reason,
    held_reason,
    limit_reason,
)
from rungar.placement.backoff import Backoff, backoff_wait
from rungar.placement.fleet import Candidates, Claim, Fleet, Skip
from rungar.placement.holds import Hold, HoldDecision, HoldRule, RoomOpened
from rungar.placement.order import order_providers

__all__ = [
    "DISABLED",
    "FULL",
    "UNREACHABLE",
    "Backoff",
    "Candidates",
    "Claim",
    "Fleet",
    "Hold",
    "HoldDecision",
    "HoldRule",
    "RoomOpened",
    "Skip",
    "backoff_wait",
    "failing_reason",
    "held_reason",
    "limit_reason",
    "order_providers",
]
