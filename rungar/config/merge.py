"""Laying a scale set's runner block over its provider's (docs/configuration.md).

Mappings merge key by key at every depth; lists and scalars replace whole; ``null`` clears a key.
A ``null`` left in the provider's own block (nothing under it to clear) is dropped too, so the
merged block never holds ``None``. Pure: the inputs are not changed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def merge_runner(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` laid over ``base``, as a new mapping with no ``None`` values."""
    merged: dict[str, Any] = {k: copy.deepcopy(v) for k, v in base.items()}
    for key, value in over.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_runner(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return _without_nulls(merged)


def _without_nulls(block: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: _without_nulls(v) if isinstance(v, Mapping) else v
        for k, v in block.items()
        if v is not None
    }
