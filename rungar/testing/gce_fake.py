"""A local Compute Engine REST fake for the real google-cloud-compute client.

docs/providers/gcp.md, "Testing offline".

It answers the handful of routes the gcp provider uses, in GCE's proto-JSON shapes, on
``127.0.0.1`` (stdlib ``http.server`` in a thread, so the synchronous SDK can call it):

=======  ===================================================================  ==============
POST     /compute/v1/projects/P/zones/Z/instances?requestId=R                  insert
GET      /compute/v1/projects/P/zones/Z/instances/N                           get
GET      /compute/v1/projects/P/zones/Z/instances?filter=F                    list
DELETE   /compute/v1/projects/P/zones/Z/instances/N                           delete
GET      /compute/v1/projects/P/zones/Z/instances/N/serialPort                serial port output
GET      /compute/v1/projects/P/aggregated/instances?filter=F                 aggregated list
GET      /compute/v1/projects/P/zones/Z/operations/O                          operation
POST     /compute/v1/projects/P/zones/Z/operations/O/wait                     wait
GET      /compute/v1/projects/P/zones/Z/machineTypes/T                        machine type
=======  ===================================================================  ==============

It follows GCE's documented contract, not measurements of GCE: the same ``requestId`` returns
the same operation and makes one instance; the same name under a new request id is a 409
``alreadyExists``. Refusals are injected with :class:`GceFault`, in the HTTP answer, in the
operation (``DONE`` with ``error.errors``), or as a lost answer (the instance is made but the
client sees a 503).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rungar.testing.loopback import LoopbackHttpServer

_ROUTE = re.compile(
    r"^/compute/v1/projects/(?P<project>[^/]+)/"
    r"(?:aggregated/instances|zones/(?P<zone>[^/]+)/(?P<kind>instances|operations|machineTypes)"
    r"(?:/(?P<name>[^/]+))?(?P<wait>/wait)?(?P<serial>/serialPort)?)$"
)
_TERM = re.compile(r'([\w.\-]+)\s*=\s*"([^"]*)"')
_HTTP_TEXT = {400: "BAD REQUEST", 403: "FORBIDDEN", 404: "NOT FOUND", 503: "SERVICE UNAVAILABLE"}


@dataclass(slots=True)
class GceFault:
    """A refusal for the next ``times`` inserts that match ``zone``/``machine_type``.

    ``plane``: ``operation`` (insert accepted, operation ends DONE with the code),
    ``http`` (the insert itself answered ``status`` with the code as reason), ``lost``
    (the instance is created, the client is answered ``status`` anyway) or ``unavailable``
    (answered ``status`` before anything else, even for a request id seen before).
    ``http_status_in_operation=False`` leaves ``httpErrorStatusCode`` out of a failed
    operation, which makes the SDK's ``result()`` report success (see rungar_gcp.compute).
    """

    code: str
    status: int = 503
    plane: str = "operation"
    message: str = ""
    zone: str | None = None
    machine_type: str | None = None
    times: int = 1
    http_status_in_operation: bool = True

    def matches(self, zone: str, machine_type: str) -> bool:
        return (self.zone is None or self.zone == zone) and (
            self.machine_type is None or self.machine_type == machine_type
        )


@dataclass(frozen=True, slots=True)
class InsertCall:
    """One ``instances.insert`` the fake received, answered or not."""

    zone: str
    name: str
    request_id: str
    machine_type: str


def _error_body(status: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "error": {
            "code": status,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": reason}],
        }
    }


def _last(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def filter_matches(instance: Mapping[str, Any], filter_text: str) -> bool:
    """The subset of GCE's filter syntax the provider writes: ``(a.b = "v") AND …``."""
    for field, value in _TERM.findall(filter_text or ""):
        if field.startswith("labels."):
            if instance.get("labels", {}).get(field[len("labels.") :]) != value:
                return False
        elif str(instance.get(field, "")) != value:
            return False
    return True


class GceFake:
    """In-memory instances, operations and injected faults behind a loopback HTTP server."""

    def __init__(
        self,
        project: str = "rungar-test",
        offered: Mapping[str, Iterable[str]] | None = None,
        running_polls: int = 0,
        capacity: int | None = None,
    ) -> None:
        self.project = project
        self.offered = {z: set(types) for z, types in (offered or {}).items()}
        self.running_polls = running_polls  # operation GETs/waits that still answer RUNNING
        self.capacity = capacity  # instances the project holds before every zone is stocked out
        self.instances: dict[tuple[str, str], dict[str, Any]] = {}
        self.serial: dict[str, str] = {}  # serial port output, by instance name
        self.operations: dict[str, dict[str, Any]] = {}
        self.insert_requests: list[InsertCall] = []
        self._by_request: dict[str, str] = {}
        self._polls: dict[str, int] = {}
        self._faults: list[GceFault] = []
        self._ids = itertools.count(1000)
        self._lock = threading.Lock()
        self._http: LoopbackHttpServer | None = None

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        assert self._http is not None, "start() the fake first"
        return self._http.endpoint

    def start(self) -> GceFake:
        self._http = LoopbackHttpServer(type("Handler", (_Handler,), {"fake": self}), 0.02)
        self._http.start()
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.stop()
            self._http = None

    def __enter__(self) -> GceFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test controls ----------------------------------------------------------------------

    def inject(self, fault: GceFault) -> None:
        with self._lock:
            self._faults.append(fault)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(name for _, name in self.instances)

    def _take_fault(self, zone: str, machine_type: str, planes: set[str]) -> GceFault | None:
        for fault in self._faults:
            if fault.times > 0 and fault.plane in planes and fault.matches(zone, machine_type):
                fault.times -= 1
                return fault
        return None

    # -- behaviour --------------------------------------------------------------------------

    def _zone_url(self, zone: str) -> str:
        return f"https://www.googleapis.com/compute/v1/projects/{self.project}/zones/{zone}"

    def _operation(self, zone: str, kind: str, target: str, request_id: str) -> dict[str, Any]:
        op_id = next(self._ids)
        name = f"operation-{op_id}"
        op = {
            "kind": "compute#operation",
            "id": str(op_id),
            "name": name,
            "zone": self._zone_url(zone),
            "operationType": kind,
            "targetLink": f"{self._zone_url(zone)}/instances/{target}",
            "status": "RUNNING" if self.running_polls else "DONE",
            "progress": 0 if self.running_polls else 100,
            "clientOperationId": request_id,
            "insertTime": datetime.now(UTC).isoformat(),
            "selfLink": f"{self._zone_url(zone)}/operations/{name}",
        }
        self.operations[name] = op
        self._polls[name] = self.running_polls
        return op

    def _poll(self, name: str, wait: bool) -> dict[str, Any] | None:
        op = self.operations.get(name)
        if op is None:
            return None
        left = self._polls.get(name, 0)
        if left > 0 and not wait:
            self._polls[name] = left - 1
        else:
            op["status"], op["progress"] = "DONE", 100
        return op

    def insert(self, zone: str, body: dict[str, Any], request_id: str) -> tuple[int, Any]:
        name = str(body.get("name", ""))
        machine_type = _last(str(body.get("machineType", "")))
        self.insert_requests.append(InsertCall(zone, name, request_id, machine_type))
        down = self._take_fault(zone, machine_type, {"unavailable"})
        if down is not None:
            return down.status, _error_body(down.status, down.code, down.message or down.code)
        if request_id and request_id in self._by_request:
            return 200, self.operations[self._by_request[request_id]]
        if (zone, name) in self.instances:
            return 409, _error_body(
                409,
                "alreadyExists",
                f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' "
                "already exists",
            )
        if zone in self.offered and machine_type and machine_type not in self.offered[zone]:
            return 400, _error_body(
                400,
                "invalid",
                f"Invalid value for field 'resource.machineType': Machine type with name "
                f"'{machine_type}' does not exist in zone '{zone}'.",
            )
        fault = self._take_fault(zone, machine_type, {"http", "operation", "lost"})
        if fault is None and self.capacity is not None and len(self.instances) >= self.capacity:
            fault = GceFault(
                "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                503,
                message=f"The zone '{zone}' does not have enough resources available to fulfill "
                "the request. Try a different zone, or try again later.",
            )
        if fault is not None and fault.plane == "http":
            return fault.status, _error_body(fault.status, fault.code, fault.message or fault.code)
        op = self._operation(zone, "insert", name, request_id)
        if request_id:
            self._by_request[request_id] = op["name"]
        if fault is not None and fault.plane == "operation":
            op["error"] = {"errors": [{"code": fault.code, "message": fault.message or fault.code}]}
            if fault.http_status_in_operation:
                op["httpErrorStatusCode"] = fault.status
                op["httpErrorMessage"] = _HTTP_TEXT.get(fault.status, "ERROR")
            return 200, op
        self.instances[(zone, name)] = {
            **body,
            "kind": "compute#instance",
            "id": str(next(self._ids)),
            "zone": self._zone_url(zone),
            "status": "RUNNING",
            "creationTimestamp": datetime.now(UTC).isoformat(),
            "selfLink": f"{self._zone_url(zone)}/instances/{name}",
        }
        if fault is not None and fault.plane == "lost":
            return fault.status, _error_body(fault.status, "backendError", "Backend Error")
        return 200, op

    def delete(self, zone: str, name: str, request_id: str) -> tuple[int, Any]:
        if self.instances.pop((zone, name), None) is None:
            return 404, _error_body(
                404,
                "notFound",
                f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' "
                "was not found",
            )
        return 200, self._operation(zone, "delete", name, request_id)

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        match = _ROUTE.match(path)
        if match is None or match["project"] != self.project:
            return 404, _error_body(404, "notFound", f"no route {method} {path}")
        zone, kind, name = match["zone"], match["kind"], match["name"]
        filt = query.get("filter", "")
        with self._lock:
            if zone is None:  # aggregated list
                items: dict[str, dict[str, Any]] = {}
                for (z, _), inst in sorted(self.instances.items()):
                    if filter_matches(inst, filt):
                        items.setdefault(f"zones/{z}", {"instances": []})["instances"].append(inst)
                return 200, {"kind": "compute#instanceAggregatedList", "items": items}
            if kind == "machineTypes" and method == "GET" and name:
                if zone in self.offered and name not in self.offered[zone]:
                    return 404, _error_body(404, "notFound", f"machine type {name} not found")
                return 200, {"kind": "compute#machineType", "name": name, "zone": zone}
            if kind == "operations" and name:
                op = self._poll(name, wait=bool(match["wait"]))
                if op is None:
                    return 404, _error_body(404, "notFound", f"operation {name} not found")
                return 200, op
            if kind == "instances" and method == "POST" and not name:
                return self.insert(zone, body or {}, query.get("requestId", ""))
            if kind == "instances" and method == "GET" and name and match["serial"]:
                if (zone, name) not in self.instances:
                    return 404, _error_body(404, "notFound", f"instance {name} not found")
                text = self.serial.get(name, "")
                return 200, {"kind": "compute#serialPortOutput", "contents": text, "next": "0"}
            if kind == "instances" and method == "GET" and name:
                one = self.instances.get((zone, name))
                if one is None:
                    return 404, _error_body(404, "notFound", f"instance {name} not found")
                return 200, one
            if kind == "instances" and method == "GET":
                found = [
                    i
                    for (z, _), i in sorted(self.instances.items())
                    if z == zone and filter_matches(i, filt)
                ]
                return 200, {"kind": "compute#instanceList", "items": found}
            if kind == "instances" and method == "DELETE" and name:
                return self.delete(zone, name, query.get("requestId", ""))
        return 404, _error_body(404, "notFound", f"no route {method} {path}")


class _Handler(BaseHTTPRequestHandler):
    fake: GceFake
    protocol_version = "HTTP/1.1"

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        status, answer = self.fake.handle(method, url.path, query, body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read the fake's state, not its access log."""
