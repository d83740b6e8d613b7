"""A Spot market with a ceiling, in front of moto's server, for the examples' AWS on loopback.

moto launches every Spot request it is given: it has no capacity to run out of. AWS answers a
Spot launch it cannot fill with ``InsufficientInstanceCapacity``, which the aws provider turns
into a FULL refusal (docs/providers/aws.md, "Refusals"). This proxy forwards every EC2 call to moto
unchanged, except a ``RunInstances`` for the Spot market while ``capacity`` Spot instances of
ours already live: that one is answered as AWS would, so the refusal and the fallback it
causes can be seen. The count is read from moto itself, so a terminated Spot instance frees
its place.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs

import httpx

from rungar.testing.loopback import LoopbackHttpServer

SPOT_REFUSAL = (
    b"<?xml version='1.0' encoding='UTF-8'?><Response><Errors><Error>"
    b"<Code>InsufficientInstanceCapacity</Code><Message>There is no Spot capacity available "
    b"that matches your request.</Message></Error></Errors><RequestID>spot-market</RequestID>"
    b"</Response>"
)
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def is_spot_launch(body: bytes) -> bool:
    """Whether an EC2 query-protocol body asks ``RunInstances`` on the Spot market."""
    form = parse_qs(body.decode(errors="replace"))
    return form.get("Action") == ["RunInstances"] and form.get(
        "InstanceMarketOptions.MarketType"
    ) == ["spot"]


class SpotMarket:
    """A loopback proxy to ``upstream`` (moto) refusing Spot launches past ``capacity``."""

    def __init__(self, upstream: str, capacity: int) -> None:
        self.upstream = upstream
        self.capacity = capacity
        self.refused = 0  # Spot launches answered InsufficientInstanceCapacity
        self._launch = threading.Lock()  # one Spot launch at a time: count, then launch
        self._http: LoopbackHttpServer | None = None

    @property
    def endpoint(self) -> str:
        assert self._http is not None, "start() the market first"
        return self._http.endpoint

    def start(self) -> SpotMarket:
        self._http = LoopbackHttpServer(type("Handler", (_Handler,), {"market": self}), 0.05)
        self._http.start()
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.stop()
            self._http = None

    def live_spot(self) -> int:
        import boto3

        ec2: Any = boto3.client("ec2", region_name="us-east-1", endpoint_url=self.upstream)
        found = ec2.describe_instances(
            Filters=[
                {"Name": "tag:rungar.sh/managed", "Values": ["true"]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        return sum(
            1
            for reservation in found["Reservations"]
            for instance in reservation["Instances"]
            if instance.get("InstanceLifecycle") == "spot"
        )

    def answer(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> httpx.Response:
        if method == "POST" and is_spot_launch(body):
            with self._launch:
                if self.live_spot() >= self.capacity:
                    self.refused += 1
                    return httpx.Response(500, content=SPOT_REFUSAL)
                return self._forward(method, path, headers, body)
        return self._forward(method, path, headers, body)

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> httpx.Response:
        kept = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
        return httpx.request(method, self.upstream + path, headers=kept, content=body, timeout=30)


class _Handler(BaseHTTPRequestHandler):
    market: SpotMarket
    protocol_version = "HTTP/1.1"

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        answer = self.market.answer(method, self.path, dict(self.headers.items()), body)
        self.send_response(answer.status_code)
        for key, value in answer.headers.items():
            if key.lower() not in _HOP_BY_HOP and key.lower() != "content-encoding":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the examples read the market's count, not its access log."""
