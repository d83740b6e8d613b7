"""Scaling decisions, pure: how many runners, which to remove, and why (docs/architecture.md)."""

from rungar.scaling.decide import (
    Desired,
    RemovalDecision,
    decide_removal,
    desired,
    desired_runners,
    surplus_to_remove,
)
from rungar.scaling.schedule import InForce, in_force
from rungar.scaling.warm_pool import Warm, predict

__all__ = [
    "Desired",
    "InForce",
    "RemovalDecision",
    "Warm",
    "decide_removal",
    "desired",
    "desired_runners",
    "in_force",
    "predict",
    "surplus_to_remove",
]
