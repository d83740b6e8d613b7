"""The emulator's fault plan (docs/github-emulator.md): what to break, where, and how many times.

Routes are named as in the spec's catalogue (``R1``–``R5``, ``A1``–``A17``, ``MQ_GET``,
``MQ_DELETE``) plus ``RUNNER`` for the fake runner's calls and ``*`` for any route. A fault
answers a status with an optional .NET ``typeName`` body and headers (``Retry-After``, rate-limit
headers), or changes the answer's shape: an empty 200, a BOM before the JSON, a delay, or a
hung request that outlasts the client's timeout, a garbled 200, or a message without its
``statistics`` block. A throttle (GitHub's registration limit) is not used up: it lets a route
through ``rate`` times in any minute and answers 429 with ``Retry-After`` past that, for each
caller apart: GitHub limits registrations per App installation, so each installation's calls
(and a personal access token's) are counted on their own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class FaultKind(StrEnum):
    STATUS = "status"  # answer ``status`` with the exception body
    EMPTY = "empty"  # 200 with an empty body (ARC #4285)
    GARBLED = "garbled"  # 200 whose body is not JSON (ARC #4470)
    NO_STATISTICS = "no_statistics"  # the real message, its "statistics" block removed
    UNKNOWN_TYPE = "unknown_type"  # the real message under a messageType no client knows
    BOM = "bom"  # the real answer, prefixed with EF BB BF
    DELAY = "delay"  # the real answer after ``delay`` real seconds
    HANG = "hang"  # no answer for ``delay`` real seconds (default: an hour), then a 504
    # GitHub's registration limit: at most ``rate`` calls of the route in any minute (on the
    # emulator's clock); past it 429 with Retry-After. Stays until a throttle of rate 0.
    THROTTLE = "throttle"


@dataclass(slots=True)
class Fault:
    route: str
    kind: FaultKind = FaultKind.STATUS
    status: int = 500
    count: int = 1
    type_name: str = ""
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    method: str = ""  # empty: any method
    rate: float = 0.0  # THROTTLE: calls per minute

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Fault:
        return cls(
            route=str(d.get("route", "*")),
            kind=FaultKind(str(d.get("kind", "status"))),
            status=int(d.get("status", 500)),
            count=int(d.get("count", 1)),
            type_name=str(d.get("typeName", d.get("type_name", ""))),
            message=str(d.get("message", "")),
            headers={str(k): str(v) for k, v in dict(d.get("headers", {})).items()},
            delay=float(d.get("delay", 0.0)),
            method=str(d.get("method", "")).upper(),
            rate=float(d.get("rate", 0.0)),
        )


def exception_body(type_name: str, message: str) -> dict[str, str]:
    """The Actions service's error shape."""
    full = (
        type_name
        if "," in type_name or not type_name
        else (f"GitHub.Actions.Runtime.WebApi.{type_name}, GitHub.Actions.Runtime.WebApi")
    )
    return {"typeName": full, "message": message or type_name}


@dataclass(slots=True)
class Throttle:
    """At most ``per_minute`` calls a minute for each caller (an installation, or ""), counted
    over any ``window`` seconds (GitHub's is a minute; a shorter one lets a benchmark see the
    same pushback in less time): the calls it let through of each, oldest first, and the 429s
    it answered, all told and by caller."""

    per_minute: float
    window: float = 60.0
    sent_by: dict[str, deque[float]] = field(default_factory=dict)
    refused: int = 0
    first_refused_at: float = 0.0  # 0: never
    refused_by: dict[str, int] = field(default_factory=dict)
    passed_by: dict[str, int] = field(default_factory=dict)

    def check(self, now: float, caller: str = "") -> float | None:
        """None when ``caller``'s call may go (it is counted), else the seconds until one may."""
        sent = self.sent_by.setdefault(caller, deque())
        while sent and sent[0] <= now - self.window:
            sent.popleft()
        if len(sent) < self.per_minute * self.window / 60.0:
            sent.append(now)
            self.passed_by[caller] = self.passed_by.get(caller, 0) + 1
            return None
        self.refused += 1
        self.refused_by[caller] = self.refused_by.get(caller, 0) + 1
        self.first_refused_at = self.first_refused_at or now
        return sent[0] + self.window - now


class FaultPlan:
    def __init__(self) -> None:
        self.faults: list[Fault] = []
        self.fired: list[tuple[str, str]] = []  # (route, kind) of every fault that fired
        self.throttles: dict[str, Throttle] = {}

    def add(self, fault: Fault) -> None:
        if fault.kind is FaultKind.THROTTLE:
            self.throttle(fault.route, fault.rate)
            return
        self.faults.append(fault)

    def throttle(self, route: str, per_minute: float, window: float = 60.0) -> None:
        """Throttle ``route`` to ``per_minute`` calls a minute, counted over ``window``
        seconds; 0 lifts the throttle."""
        if per_minute > 0:
            self.throttles[route] = Throttle(per_minute, window)
        else:
            self.throttles.pop(route, None)

    def throttle_of(self, route: str) -> Throttle | None:
        return self.throttles.get(route) or self.throttles.get("*")

    def throttled(self, route: str, now: float, caller: str = "") -> float | None:
        """Seconds ``caller`` must wait when it is over ``route``'s throttle, else None."""
        throttle = self.throttle_of(route)
        return throttle.check(now, caller) if throttle is not None else None

    def take(self, route: str, method: str) -> Fault | None:
        """The first fault matching this call, consumed once."""
        for fault in self.faults:
            if fault.route not in (route, "*"):
                continue
            if fault.method and fault.method != method:
                continue
            fault.count -= 1
            if fault.count <= 0:
                self.faults.remove(fault)
            self.fired.append((route, fault.kind.value))
            return fault
        return None

    def give_back(self, fault: Fault, route: str) -> None:
        """Undo :meth:`take` for a fault that could not apply to this answer (it waits for one
        it can apply to: a message, not a 202)."""
        fault.count += 1
        if fault not in self.faults:
            self.faults.insert(0, fault)
        self.fired.remove((route, fault.kind.value))

    def clear(self) -> None:
        self.faults.clear()
