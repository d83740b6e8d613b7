"""Scaling decisions, pure: how many runners, which to remove, and why (rungar-go §1.3)."""

from rungar.scaling.decide import Removal, decide_removal, desired_runners, surplus_to_remove

__all__ = ["Removal", "decide_removal", "desired_runners", "surplus_to_remove"]
