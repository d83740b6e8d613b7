"""A scale-set client that keeps its tokens the way GitHub's own client (actions/scaleset) does,
for checking the emulator against it over HTTP, and the emulator as a process to point it at.

What it copies is the client's behaviour, not its code: the admin token is read for its ``exp``
and renewed (registration token, then runner-registration) once the wall clock is within
``margin`` (60 s) of it; a message-queue call answered 401 refreshes the session (``PATCH``) and
is tried once more; a poll is one long GET with ``X-ScaleSetMaxCapacity``. Every answer's status
is recorded, so a test can say that no call was refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt

from rungar.clock import Clock, SystemClock

API = {"api-version": "6.0-preview"}
SCALE_SETS = "_apis/runtime/runnerscalesets"


@dataclass
class WallClockClient:
    base: str  # the emulator's URL
    owner: str = "octo-org"
    pat: str = "emulator-pat"
    margin: float = 60.0  # the admin token is renewed this long before its exp, by the wall clock
    clock: Clock = field(default_factory=SystemClock)
    http: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=60))
    admin_url: str = ""
    admin_token: str = ""
    admin_exp: float = 0.0
    renewals: int = 0  # admin tokens obtained
    session: dict[str, Any] = field(default_factory=dict)
    scale_set_id: int = 0
    answers: list[tuple[str, int]] = field(default_factory=list)  # (call, status), in order

    async def aclose(self) -> None:
        await self.http.aclose()

    def refused(self) -> list[tuple[str, int]]:
        """Every call answered 401 or 403."""
        return [(call, status) for call, status in self.answers if status in (401, 403)]

    def _note(self, call: str, answer: httpx.Response) -> httpx.Response:
        self.answers.append((call, answer.status_code))
        return answer

    # ---- the admin token, renewed by the wall clock ------------------------------------------

    async def _admin_token(self) -> str:
        if self.admin_exp and self.clock.now() + self.margin < self.admin_exp:
            return self.admin_token
        registration = self._note(
            "registration-token",
            await self.http.post(
                f"{self.base}/api/v3/orgs/{self.owner}/actions/runners/registration-token",
                headers={"Authorization": f"Bearer {self.pat}"},
            ),
        )
        registration.raise_for_status()
        connection = self._note(
            "runner-registration",
            await self.http.post(
                f"{self.base}/api/v3/actions/runner-registration",
                headers={"Authorization": f"RemoteAuth {registration.json()['token']}"},
                json={"url": f"{self.base}/{self.owner}", "runner_event": "register"},
            ),
        )
        connection.raise_for_status()
        self.admin_url = connection.json()["url"]
        self.admin_token = connection.json()["token"]
        claims = jwt.decode(self.admin_token, options={"verify_signature": False})
        self.admin_exp = float(claims["exp"])
        self.renewals += 1
        return self.admin_token

    async def admin(self, method: str, path: str, body: object = None) -> httpx.Response:
        token = await self._admin_token()
        answer = await self.http.request(
            method,
            self.admin_url + path,
            params=API,
            headers={"Authorization": f"Bearer {token}"},
            content=None if body is None else json.dumps(body),
        )
        return self._note(f"{method} {path}", answer)

    # ---- scale sets and the session ---------------------------------------------------------

    async def create_scale_set(
        self, name: str = "linux", labels: tuple[str, ...] = ("rungar",)
    ) -> int:
        body = {
            "name": name,
            "runnerGroupId": 1,
            "labels": [{"name": x, "type": "System"} for x in labels],
            "RunnerSetting": {"ephemeral": True, "isElastic": False, "disableUpdate": True},
        }
        answer = await self.admin("POST", SCALE_SETS, body)
        answer.raise_for_status()
        self.scale_set_id = int(answer.json()["id"])
        return self.scale_set_id

    async def open_session(self) -> dict[str, Any]:
        answer = await self.admin(
            "POST", f"{SCALE_SETS}/{self.scale_set_id}/sessions", {"ownerName": "wall-clock"}
        )
        answer.raise_for_status()
        self.session = answer.json()
        return self.session

    async def refresh_session(self) -> None:
        sid = self.session["sessionId"]
        answer = await self.admin("PATCH", f"{SCALE_SETS}/{self.scale_set_id}/sessions/{sid}")
        answer.raise_for_status()
        self.session = answer.json()

    async def close(self) -> tuple[int, int]:
        """Delete the session, then the scale set: their two statuses."""
        sid = self.session["sessionId"]
        closed = await self.admin("DELETE", f"{SCALE_SETS}/{self.scale_set_id}/sessions/{sid}")
        deleted = await self.admin("DELETE", f"{SCALE_SETS}/{self.scale_set_id}")
        return closed.status_code, deleted.status_code

    # ---- the message queue: a 401 refreshes the session and the call is tried once more -----

    async def poll(self, last: int, capacity: int) -> httpx.Response:
        params = {"lastMessageId": str(last)} if last else {}
        answer = await self.http.get(
            self.session["messageQueueUrl"],
            params=params,
            headers={
                "Authorization": f"Bearer {self.session['messageQueueAccessToken']}",
                "X-ScaleSetMaxCapacity": str(capacity),
            },
        )
        return self._note("GET message", answer)

    async def get_message(self, last: int = 0, capacity: int = 10) -> dict[str, Any] | None:
        """The next message, or None when the long poll ended empty (202)."""
        answer = await self.poll(last, capacity)
        if answer.status_code == 401:
            await self.refresh_session()
            answer = await self.poll(last, capacity)
        if answer.status_code == 202:
            return None
        answer.raise_for_status()
        message: dict[str, Any] = answer.json()
        message["events"] = json.loads(message.get("body") or "[]")
        return message

    async def delete_message(self, message_id: int) -> None:
        url = self.session["messageQueueUrl"]
        path, _, query = url.partition("?")

        async def delete() -> httpx.Response:
            answer = await self.http.delete(
                f"{path}/{message_id}?{query}",
                headers={"Authorization": f"Bearer {self.session['messageQueueAccessToken']}"},
            )
            return self._note("DELETE message", answer)

        answer = await delete()
        if answer.status_code == 401:
            await self.refresh_session()
            answer = await delete()
        answer.raise_for_status()

    async def acquire(self, request_ids: list[int]) -> list[int]:
        async def acquire() -> httpx.Response:
            await self._admin_token()  # for the URL, as the official client builds it
            answer = await self.http.post(
                f"{self.admin_url}{SCALE_SETS}/{self.scale_set_id}/acquirejobs",
                params=API,
                headers={"Authorization": f"Bearer {self.session['messageQueueAccessToken']}"},
                json=request_ids,
            )
            return self._note("POST acquirejobs", answer)

        answer = await acquire()
        if answer.status_code == 401:
            await self.refresh_session()
            answer = await acquire()
        answer.raise_for_status()
        return [int(x) for x in answer.json()["value"]]


@contextlib.asynccontextmanager
async def emulator_process(*args: str) -> AsyncIterator[str]:
    """``rungar github-emulator ARGS`` as a child process; yields its URL; stopped by SIGINT."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rungar.cli.github_emulator",
        *args,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), timeout=30)
        base = line.decode().strip()
        assert base.startswith("http://"), f"the emulator printed {base!r}"
        yield base
    finally:
        if child.returncode is None:
            os.kill(child.pid, signal.SIGINT)
            await asyncio.wait_for(child.wait(), timeout=15)


async def control(base: str, method: str, path: str, body: object = None) -> Any:
    """A call to the emulator's control API (``/_fake/...``); its JSON answer, or None."""
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.request(
            method, f"{base}/_fake/{path}", content=None if body is None else json.dumps(body)
        )
    answer.raise_for_status()
    return answer.json() if answer.content else None


async def wait_for(check: Any, what: str, timeout: float = 30.0) -> Any:
    """Await ``check()`` (a coroutine function) until it answers something true; that answer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await check()
        if found:
            return found
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
