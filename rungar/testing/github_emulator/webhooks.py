"""The emulator's webhook sender (docs/github-emulator.md).

Deliveries are signed with ``X-Hub-Signature-256`` over the exact bytes sent and carry GitHub's
headers. Nothing is retried automatically, as on GitHub; a redelivery (control API) reuses the
delivery id. Options reproduce what receivers must survive: duplicated deliveries and wrong
signatures.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(slots=True)
class Delivery:
    delivery_id: str
    event: str
    body: bytes
    statuses: list[int] = field(default_factory=list)  # one per attempt; 0 = no answer


class WebhookSender:
    def __init__(self, url: str, secret: str, *, timeout: float = 10.0) -> None:
        self.url = url
        self.secret = secret
        self.timeout = timeout
        self.duplicate = False  # send every delivery twice
        self.wrong_signature = False
        self.deliveries: dict[str, Delivery] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._http: httpx.AsyncClient | None = None

    def send(self, event: str, payload: dict[str, Any]) -> Delivery:
        body = json.dumps(payload, separators=(",", ":")).encode()
        delivery = Delivery(str(uuid.uuid4()), event, body)
        self.deliveries[delivery.delivery_id] = delivery
        self._spawn(delivery)
        if self.duplicate:
            self._spawn(delivery)
        return delivery

    def redeliver(self, delivery_id: str) -> bool:
        delivery = self.deliveries.get(delivery_id)
        if delivery is None:
            return False
        self._spawn(delivery)
        return True

    def _spawn(self, delivery: Delivery) -> None:
        if not self.url:
            return
        task = asyncio.get_running_loop().create_task(self._post(delivery))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def headers(self, delivery: Delivery) -> dict[str, str]:
        secret = self.secret + ("-wrong" if self.wrong_signature else "")
        return {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/emulator",
            "X-GitHub-Event": delivery.event,
            "X-GitHub-Delivery": delivery.delivery_id,
            "X-GitHub-Hook-ID": "1",
            "X-GitHub-Hook-Installation-Target-Type": "organization",
            "X-GitHub-Hook-Installation-Target-ID": "1",
            "X-Hub-Signature-256": sign(secret, delivery.body),
        }

    async def _post(self, delivery: Delivery) -> None:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self.timeout)
        try:
            r = await self._http.post(
                self.url, content=delivery.body, headers=self.headers(delivery)
            )
            delivery.statuses.append(r.status_code)
        except httpx.HTTPError:
            delivery.statuses.append(0)

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        await self.drain()
        if self._http is not None:
            await self._http.aclose()
