"""How a GCE refusal is read: error codes to outcomes of one insert attempt (pure).

GCE refuses in two planes: the HTTP answer to
``instances.insert`` (``error.errors[].reason``, e.g. ``quotaExceeded``) and the operation,
which ends ``DONE`` with ``error.errors[].code`` (e.g. ``ZONE_RESOURCE_POOL_EXHAUSTED``). The
Python exception class is chosen from ``httpErrorStatusCode`` and lies about the cause (a
stockout is a 503 ``ServiceUnavailable``), so only codes and the plane decide here. The
mapping (docs/providers/gcp.md, "Refusals"):

=========== =====================================================================
STOCK       the zone is out of the type: try the next type or zone (FULL)
QUOTA       the project is out of quota: skip the type in every other zone (FULL)
INVALID     never creatable: bad image, unknown type, bad field (INVALID, stop)
DENIED      permission refused: no zone would differ (INVALID, stop)
REFUSED     a refusal every zone shares: rate limits, unknown 4xx (FAILED, stop)
FAILED      the operation failed for another reason: try on, FAILED if nothing works
UNCERTAIN   5xx or no answer to an insert: the machine may exist; retry the same id
=========== =====================================================================

The outcomes are :class:`rungar.cloudkit.search.PlaceAnswer`, shared with the aws provider.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from rungar.cloudkit.search import PlaceAnswer


class Plane(StrEnum):
    HTTP = "http"  # the insert request itself was answered with an error
    OPERATION = "operation"  # the insert was accepted and its operation ended in error
    NO_ANSWER = "no-answer"  # connection refused or reset, timeout, operation still running


STOCK_CODES = frozenset(
    {
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "REGION_RESOURCE_POOL_EXHAUSTED",
        "RESOURCE_POOL_EXHAUSTED",
        "insufficientCapacity",
    }
)
QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "quotaExceeded"})
RATE_CODES = frozenset(
    {"rateLimitExceeded", "userRateLimitExceeded", "RESOURCE_OPERATION_RATE_EXCEEDED"}
)
DENIED_CODES = frozenset({"forbidden", "IAM_PERMISSION_DENIED", "PERMISSION_DENIED"})
INVALID_CODES = frozenset(
    {"RESOURCE_NOT_FOUND", "NOT_FOUND", "invalid", "notFound", "badRequest", "required"}
)
TRANSIENT_CODES = frozenset({"backendError", "internalError", "INTERNAL_ERROR"})
ALREADY_EXISTS_CODES = frozenset({"alreadyExists", "RESOURCE_ALREADY_EXISTS"})
# Seen when a Spot VM is reclaimed while it is being created (as SkyPilot reports it).
SPOT_STOCK_CODES = frozenset({"UNSUPPORTED_OPERATION"})


def error_codes(items: Iterable[Any] | None) -> list[str]:
    """Codes of GCE error items: operation errors are protos with ``.code``, HTTP errors are
    dicts with ``reason`` (google-api-core puts both in ``exc.errors``)."""
    codes = []
    for item in items or ():
        if isinstance(item, dict):
            code = item.get("reason") or item.get("code")
        else:
            code = getattr(item, "code", None) or getattr(item, "reason", None)
        if code:
            codes.append(str(code))
    return codes


def is_already_exists(codes: Iterable[str], status: int | None) -> bool:
    """A 409 on insert: the name is taken, most likely by our own earlier attempt."""
    return status == 409 or any(c in ALREADY_EXISTS_CODES for c in codes)


def classify(codes: Iterable[str], status: int | None, plane: Plane, *, spot: bool) -> PlaceAnswer:
    """The outcome of one failed insert attempt, from its codes first and its status last."""
    if plane is Plane.NO_ANSWER:
        return PlaceAnswer.UNCERTAIN
    found = list(codes)
    if any(c in STOCK_CODES or c.endswith("STOCKOUT") for c in found):
        return PlaceAnswer.STOCK
    if spot and any(c in SPOT_STOCK_CODES for c in found):
        return PlaceAnswer.STOCK
    if any(c in QUOTA_CODES for c in found):
        return PlaceAnswer.QUOTA
    if any(c in RATE_CODES for c in found):
        return PlaceAnswer.REFUSED
    if any(c in DENIED_CODES for c in found):
        return PlaceAnswer.DENIED
    if any(c in INVALID_CODES or c.startswith("INVALID_") for c in found):
        return PlaceAnswer.INVALID
    if plane is Plane.OPERATION:
        # The operation is DONE: whatever it says, no machine came of it. Another zone may work.
        return PlaceAnswer.FAILED
    if any(c in TRANSIENT_CODES for c in found) or (status is not None and status >= 500):
        return PlaceAnswer.UNCERTAIN
    if status in (400, 404):
        return PlaceAnswer.INVALID
    if status in (401, 403):
        return PlaceAnswer.DENIED
    return PlaceAnswer.REFUSED
