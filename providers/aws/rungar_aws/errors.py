"""How an EC2 refusal is read: RunInstances error codes to attempt outcomes (pure).

EC2 refuses synchronously with ``ClientError`` whose ``Error.Code`` is the cause
(docs/providers/aws.md, "Refusals"):

=========== ======================================================================
STOCK       the AZ or subnet is out of the type or of addresses: try on (FULL)
QUOTA       an account limit: skip the type in every other subnet (FULL)
UNOFFERED   ``Unsupported``: this subnet's AZ does not offer it; INVALID if none does
INVALID     never creatable: a bad AMI, type, parameter (INVALID, stop)
DENIED      permission or account state refused (INVALID, stop)
REFUSED     anything else, throttling included (FAILED, stop)
UNCERTAIN   5xx or no answer: the instance may exist; resend with the same ClientToken
=========== ======================================================================

The outcomes are :class:`rungar.cloudkit.search.PlaceAnswer`, shared with the gcp provider.
"""

from __future__ import annotations

from rungar.cloudkit.search import PlaceAnswer

NO_ANSWER = "NoAnswer"  # the code used when no answer came back (connection, timeout)

STOCK_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientAddressCapacity",
        "InsufficientVolumeCapacity",
        "InsufficientFreeAddressesInSubnet",
        "SpotMaxPriceTooLow",
        "UnfulfillableCapacity",
        "ReservationCapacityExceeded",
    }
)
QUOTA_CODES = frozenset(
    {
        "InstanceLimitExceeded",
        "VcpuLimitExceeded",
        "MaxSpotInstanceCountExceeded",
        "MaxFleetCountExceeded",
    }
)
INVALID_CODES = frozenset(
    {
        "MissingParameter",
        "UnknownParameter",
        "IdempotentParameterMismatch",
        "NoCredentialsError",
        "PartialCredentialsError",
    }
)
DENIED_CODES = frozenset(
    {"UnauthorizedOperation", "AuthFailure", "Blocked", "OptInRequired", "SignatureDoesNotMatch"}
)
# Throttling launched nothing; it is REFUSED like any other code, whatever its HTTP status.
THROTTLING_CODES = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException"})
UNCERTAIN_CODES = frozenset(
    {"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", NO_ANSWER}
)
# What the FULL refusal names as the resource that ran out.
_RESOURCES = {
    "InsufficientFreeAddressesInSubnet": "subnet addresses",
    "SpotMaxPriceTooLow": "spot price",
    **{code: "quota" for code in QUOTA_CODES},
}


def classify(code: str, status: int | None) -> PlaceAnswer:
    """The outcome of one failed RunInstances, from its code first and its status last."""
    if code in STOCK_CODES:
        return PlaceAnswer.STOCK
    if code in QUOTA_CODES:
        return PlaceAnswer.QUOTA
    if code == "Unsupported":
        return PlaceAnswer.UNOFFERED
    if code in INVALID_CODES or code.startswith("Invalid"):
        return PlaceAnswer.INVALID
    if code in DENIED_CODES:
        return PlaceAnswer.DENIED
    if code in THROTTLING_CODES:
        return PlaceAnswer.REFUSED
    if code in UNCERTAIN_CODES or (status is not None and status >= 500):
        return PlaceAnswer.UNCERTAIN
    return PlaceAnswer.REFUSED


def resource_of(code: str) -> str:
    """The resource a FULL refusal names for ``code``."""
    return _RESOURCES.get(code, "zone stock")
