"""Every GCE code of docs/providers/gcp.md, "Refusals", lands in its outcome."""

from __future__ import annotations

import pytest
from rungar_gcp.errors import Plane, classify, error_codes, is_already_exists
from rungar_gcp.search import Attempt, Tried, settle

from rungar.cloudkit.search import PlaceAnswer
from rungar.model.machine import RefusalKind

OP = Plane.OPERATION
HTTP = Plane.HTTP

CASES = [
    # code, HTTP status, plane, expected
    ("ZONE_RESOURCE_POOL_EXHAUSTED", 503, OP, PlaceAnswer.STOCK),
    ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", 503, OP, PlaceAnswer.STOCK),
    ("REGION_RESOURCE_POOL_EXHAUSTED", 503, OP, PlaceAnswer.STOCK),
    ("RESOURCE_POOL_EXHAUSTED", 503, OP, PlaceAnswer.STOCK),
    ("GPU_STOCKOUT", None, OP, PlaceAnswer.STOCK),
    ("insufficientCapacity", 503, HTTP, PlaceAnswer.STOCK),
    ("QUOTA_EXCEEDED", 403, OP, PlaceAnswer.QUOTA),
    ("quotaExceeded", 403, HTTP, PlaceAnswer.QUOTA),
    ("rateLimitExceeded", 403, HTTP, PlaceAnswer.REFUSED),
    ("userRateLimitExceeded", 429, HTTP, PlaceAnswer.REFUSED),
    ("RESOURCE_OPERATION_RATE_EXCEEDED", None, OP, PlaceAnswer.REFUSED),
    ("backendError", 503, HTTP, PlaceAnswer.UNCERTAIN),
    ("internalError", 500, HTTP, PlaceAnswer.UNCERTAIN),
    ("INTERNAL_ERROR", 500, OP, PlaceAnswer.FAILED),
    ("invalid", 400, HTTP, PlaceAnswer.INVALID),
    ("INVALID_FIELD_VALUE", 400, OP, PlaceAnswer.INVALID),
    ("INVALID_USAGE", 400, OP, PlaceAnswer.INVALID),
    ("notFound", 404, HTTP, PlaceAnswer.INVALID),
    ("RESOURCE_NOT_FOUND", 404, OP, PlaceAnswer.INVALID),
    ("NOT_FOUND", 404, OP, PlaceAnswer.INVALID),
    ("forbidden", 403, HTTP, PlaceAnswer.DENIED),
    ("IAM_PERMISSION_DENIED", 403, OP, PlaceAnswer.DENIED),
    ("UNSUPPORTED_OPERATION", None, OP, PlaceAnswer.FAILED),
    ("SOMETHING_NEW", None, OP, PlaceAnswer.FAILED),
    ("somethingNew", 400, HTTP, PlaceAnswer.INVALID),
    ("somethingNew", 403, HTTP, PlaceAnswer.DENIED),
    ("somethingNew", 409, HTTP, PlaceAnswer.REFUSED),
    ("somethingNew", 502, HTTP, PlaceAnswer.UNCERTAIN),
]


@pytest.mark.parametrize(("code", "status", "plane", "expected"), CASES)
def test_each_gcp_error_code_is_classified_by_code_not_by_status(
    code: str, status: int | None, plane: Plane, expected: PlaceAnswer
) -> None:
    assert classify([code], status, plane, spot=False) is expected


def test_a_stockout_wins_over_the_503_status_the_sdk_raises_for_it() -> None:
    assert classify(["ZONE_RESOURCE_POOL_EXHAUSTED"], 503, HTTP, spot=False) is PlaceAnswer.STOCK


def test_unsupported_operation_is_stock_only_for_spot() -> None:
    assert classify(["UNSUPPORTED_OPERATION"], None, OP, spot=True) is PlaceAnswer.STOCK


def test_no_answer_is_uncertain_whatever_else_is_known() -> None:
    assert classify([], None, Plane.NO_ANSWER, spot=False) is PlaceAnswer.UNCERTAIN


def test_codes_are_read_from_http_dicts_and_operation_protos() -> None:
    class Proto:
        code = "QUOTA_EXCEEDED"

    assert error_codes([{"reason": "quotaExceeded", "domain": "usageLimits"}, Proto()]) == [
        "quotaExceeded",
        "QUOTA_EXCEEDED",
    ]


def test_409_already_exists_is_not_a_refusal_but_an_adoption_candidate() -> None:
    assert is_already_exists(["alreadyExists"], 409)
    assert not is_already_exists(["invalid"], 400)


def _tried(*outcomes: PlaceAnswer) -> list[Tried]:
    return [Tried(Attempt(f"z-{i}", "e2-small"), o, o.value) for i, o in enumerate(outcomes)]


@pytest.mark.parametrize(
    ("outcomes", "kind", "resource"),
    [
        ((PlaceAnswer.STOCK, PlaceAnswer.STOCK), RefusalKind.FULL, "zone stock"),
        ((PlaceAnswer.QUOTA,), RefusalKind.FULL, "quota"),
        ((PlaceAnswer.STOCK, PlaceAnswer.QUOTA), RefusalKind.FULL, "zone stock and quota"),
        ((PlaceAnswer.STOCK, PlaceAnswer.INVALID), RefusalKind.INVALID, "runner"),
        ((PlaceAnswer.DENIED,), RefusalKind.INVALID, "permission"),
        ((PlaceAnswer.REFUSED,), RefusalKind.FAILED, "api"),
        ((PlaceAnswer.UNCERTAIN,), RefusalKind.FAILED, "api"),
        ((PlaceAnswer.STOCK, PlaceAnswer.FAILED), RefusalKind.FAILED, "zone"),
    ],
)
def test_a_search_that_made_nothing_settles_into_one_refusal_kind(
    outcomes: tuple[PlaceAnswer, ...], kind: RefusalKind, resource: str
) -> None:
    refusal = settle(_tried(*outcomes), [], "us-central1")
    assert (refusal.kind, refusal.resource) == (kind, resource)


def test_no_zone_offering_the_type_is_invalid() -> None:
    refusal = settle([], [Attempt("us-central1-a", "a2-mega")], "us-central1")
    assert refusal.kind is RefusalKind.INVALID
    assert "no zone of us-central1 offers machine type a2-mega" in refusal.message
