"""The workflow_job receiver: signature first, size cap, de-duplication, waking scale sets."""

from __future__ import annotations

import hashlib
import hmac
import json
import random

import httpx
import pytest

from rungar.errors import ConfigError
from rungar.github.webhook import WebhookReceiver, WorkflowJob, matching_scale_sets, signature_ok

SECRET = "It's a Secret to Everybody"
SCALE_SETS = {"linux": ["linux", "x64"], "gpu": ["gpu", "linux", "cuda"]}


def _sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _payload(action: str = "queued", labels: tuple[str, ...] = ("self-hosted", "linux")) -> bytes:
    return json.dumps(
        {
            "action": action,
            "workflow_job": {"id": 1, "labels": list(labels), "run_id": 2},
            "repository": {},
        }
    ).encode()


def _receiver(woken: list[list[str]], max_body: int = 64 * 1024) -> WebhookReceiver:
    return WebhookReceiver(
        SECRET, SCALE_SETS, lambda names, job: woken.append(list(names)), max_body=max_body
    )


def _client(receiver: WebhookReceiver) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=receiver), base_url="http://hook")


def test_githubs_published_test_vector_verifies() -> None:
    header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert signature_ok(SECRET.encode(), b"Hello, World!", header)
    assert not signature_ok(SECRET.encode(), b"Hello, World?", header)


def test_the_receiver_refuses_to_start_without_a_secret() -> None:
    with pytest.raises(ConfigError, match="secret is required"):
        WebhookReceiver("", SCALE_SETS, lambda names, job: None)


def test_scale_sets_match_by_label_inclusion_ignoring_self_hosted_and_case() -> None:
    assert matching_scale_sets(["self-hosted", "Linux"], SCALE_SETS) == ["linux", "gpu"]
    assert matching_scale_sets(["cuda", "LINUX"], SCALE_SETS) == ["gpu"]
    assert matching_scale_sets(["windows"], SCALE_SETS) == []


async def test_a_valid_queued_job_is_accepted_once_and_wakes_matching_scale_sets() -> None:
    woken: list[list[str]] = []
    receiver = _receiver(woken)
    body = _payload(labels=("self-hosted", "gpu"))
    headers = {
        "X-Hub-Signature-256": _sign(body),
        "X-GitHub-Event": "workflow_job",
        "X-GitHub-Delivery": "d-1",
    }
    async with _client(receiver) as client:
        first = await client.post("/webhook", content=body, headers=headers)
        again = await client.post("/webhook", content=body, headers=headers)
    assert first.status_code == 202 and again.status_code == 200
    assert woken == [["gpu"]]
    assert receiver.counts == {"accepted": 1, "duplicate": 1}


@pytest.mark.parametrize("action", ["waiting", "in_progress", "completed"])
async def test_only_queued_jobs_wake_anything(action: str) -> None:
    woken: list[list[str]] = []
    body = _payload(action)
    headers = {"X-Hub-Signature-256": _sign(body), "X-GitHub-Event": "workflow_job"}
    async with _client(_receiver(woken)) as client:
        r = await client.post("/webhook", content=body, headers=headers)
    assert r.status_code == 202 and woken == []


async def test_ping_gets_pong_and_a_body_over_the_limit_gets_413_unread() -> None:
    receiver = _receiver([], max_body=1000)
    async with _client(receiver) as client:
        ping = b'{"zen": "Keep it logically awesome."}'
        r = await client.post(
            "/webhook",
            content=ping,
            headers={"X-Hub-Signature-256": _sign(ping), "X-GitHub-Event": "ping"},
        )
        assert r.status_code == 200 and r.json() == {"status": "pong"}
        big = b"x" * 1001
        r = await client.post("/webhook", content=big, headers={"X-Hub-Signature-256": _sign(big)})
        assert r.status_code == 413


async def test_ten_thousand_mutated_deliveries_are_all_rejected() -> None:
    woken: list[list[str]] = []
    receiver = _receiver(woken)
    rng = random.Random(5)
    body = _payload()
    good = _sign(body)
    accepted = 0
    async with _client(receiver) as client:
        for i in range(10_000):
            kind = i % 6
            payload, headers = (
                body,
                {"X-GitHub-Event": "workflow_job", "X-GitHub-Delivery": f"m-{i}"},
            )
            if kind == 0:  # one flipped bit in the body
                mutable = bytearray(body)
                mutable[rng.randrange(len(mutable))] ^= 1 << rng.randrange(8)
                payload, headers["X-Hub-Signature-256"] = bytes(mutable), good
            elif kind == 1:  # one flipped bit in the signature's hex
                sig = list(good)
                pos = rng.randrange(7, len(sig))
                sig[pos] = "0" if sig[pos] != "0" else "1"
                headers["X-Hub-Signature-256"] = "".join(sig)
            elif kind == 2:  # a wrong or legacy prefix
                headers["X-Hub-Signature-256"] = (
                    rng.choice(["sha1=", "SHA256=", "sha256:", "", "sha512="]) + good[7:]
                )
            elif kind == 3:  # no signature at all
                pass
            elif kind == 4:  # signed with another secret
                headers["X-Hub-Signature-256"] = _sign(body, secret=f"other-{i}")
            else:  # truncated body, original signature
                payload, headers["X-Hub-Signature-256"] = body[: rng.randrange(len(body))], good
            r = await client.post("/webhook", content=payload, headers=headers)
            accepted += r.status_code < 300
    assert accepted == 0
    assert woken == []
    assert receiver.counts == {"bad_signature": 10_000}


def test_the_payload_model_ignores_fields_it_does_not_need() -> None:
    job = WorkflowJob.model_validate(
        {"action": "queued", "workflow_job": {"id": 3, "labels": ["a"], "extra": 1}}
    )
    assert job.workflow_job.labels == ["a"]
