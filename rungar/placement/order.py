"""The order a scale set tries its providers in (docs/configuration.md, ``placement``).

spread (default): fewest of this scale set's own runners ÷ weight first.
pack: highest weight first. Ties keep the scale set's listed order in both (a stable sort).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rungar.config.model import Placement


def order_providers(
    listed: Sequence[str],
    placement: Placement,
    weights: Mapping[str, float],
    own_runners: Mapping[str, int],
) -> list[str]:
    if placement is Placement.PACK:
        return sorted(listed, key=lambda name: -weights.get(name, 1.0))
    return sorted(listed, key=lambda name: own_runners.get(name, 0) / weights.get(name, 1.0))
