"""Scaling decisions, pure: how many runners, which to remove, and why (README, "Architecture")."""

from rungar.scaling.decide import (
    Desired,
    Removal,
    decide_removal,
    desired,
    desired_runners,
    surplus_to_remove,
)
from rungar.scaling.schedule import InForce, in_force

__all__ = [
    "Desired",
    "InForce",
    "Removal",
    "decide_removal",
    "desired",
    "desired_runners",
    "in_force",
    "surplus_to_remove",
]
