"""Hostile deliveries against the running receiver (docs/operating.md "Webhook receiver").

The receiver is served as ``rungar serve`` serves it: a bounded listener on loopback, its
refusals counted through the receiver. Whatever arrives, the answer is a clean 4xx or 2xx
(never a 500 or a traceback), and the counter adds up to the requests sent.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rungar.github.webhook import MAX_JSON_DEPTH, OUTCOMES, WebhookReceiver, json_depth_ok
from rungar.web.bounded import BoundedHttpServer, Limits, bind
from tests.waiting import WAIT

SECRET = "hostile-test-secret"
LABELS = {"linux": ["linux"]}


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def payload(labels: list[str] | None = None, job_id: int = 1) -> bytes:
    return json.dumps(
        {
            "action": "queued",
            "workflow_job": {"id": job_id, "labels": labels or ["self-hosted", "linux"]},
            "repository": {"full_name": "o/r"},
        }
    ).encode()


@dataclass
class Running:
    receiver: WebhookReceiver
    url: str
    client: httpx.Client
    woken: list[list[str]] = field(default_factory=list)
    sent: int = 0

    def post(self, body: bytes, headers: dict[str, str], path: str = "/webhook") -> int:
        self.sent += 1
        return self.client.post(self.url + path, content=body, headers=headers).status_code

    def signed(self, body: bytes, delivery: str, event: str = "workflow_job") -> int:
        headers = {
            "X-Hub-Signature-256": sign(body),
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery,
            "Content-Type": "application/json",
        }
        return self.post(body, headers)


@pytest.fixture(scope="module")
def running() -> Iterator[Running]:
    woken: list[list[str]] = []
    receiver = WebhookReceiver(
        SECRET, LABELS, lambda names, job: woken.append(list(names)), max_body=256 * 1024
    )
    server = BoundedHttpServer(
        receiver,
        bind("127.0.0.1:0", key="webhook.listen"),
        Limits(max_body_bytes=256 * 1024),
        name="webhook",
        on_refused=receiver.count,
    )
    server.start()
    with httpx.Client(timeout=WAIT) as client:
        yield Running(receiver, f"http://{server.address}", client, woken)
    server.stop()


def test_a_signed_body_nested_20000_deep_is_a_400_counted_malformed(running: Running) -> None:
    # Broken before the depth check: json.loads raised RecursionError, the sender got a 500
    # and no outcome was counted.
    before = running.receiver.counts.get("malformed", 0)
    deep = b'{"action": "queued", "workflow_job": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    assert len(deep) < 41_000
    assert running.signed(deep, "deep-1") == 400
    assert running.receiver.counts["malformed"] == before + 1


def test_a_signed_body_just_within_the_depth_limit_is_parsed(running: Running) -> None:
    nested = b"[" * (MAX_JSON_DEPTH - 3) + b"1" + b"]" * (MAX_JSON_DEPTH - 3)
    body = payload()[:-1] + b', "extra": ' + nested + b"}"
    assert json_depth_ok(body)
    assert running.signed(body, "nested-ok") == 202


def test_a_wide_signed_body_of_many_labels_and_fields_is_accepted(running: Running) -> None:
    doc = json.loads(payload(["self-hosted", "linux", *(f"l{i}" for i in range(5000))]))
    doc["repository"]["many"] = [{"k": [i, [i]]} for i in range(3000)]
    body = json.dumps(doc).encode()
    assert 100_000 < len(body) < 256 * 1024
    assert running.signed(body, "wide-1") == 202  # no scale set has all those labels: none woken


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (b'{"a": "[[[[[[[[[[[[[[["}', True),  # brackets inside a string do not nest
        (b'{"a": "\\"[[[[[[[[[[[[[[["}', True),  # nor after an escaped quote
        (b"[" * 5 + b"]" * 5, True),
        (b"[" * 6 + b"]" * 6, False),
        (b"", True),
        (b'["\\\n[[[[[[[["]', True),  # an escaped newline does not end the string
        (b'[[["unterminated \\" [[[[[[', True),  # an unterminated string runs to the end
    ],
)
def test_the_depth_check_counts_only_brackets_outside_strings(text: bytes, ok: bool) -> None:
    assert json_depth_ok(text, limit=5) is ok


def test_a_megabyte_of_escaped_quotes_in_an_unterminated_string_is_checked_in_one_pass() -> None:
    # With a pattern that could fail and retry at every quote this took minutes (each of the
    # 500,000 quotes rescanned the rest of the body); it is one linear scan.
    assert json_depth_ok(b'"' + b'\\"' * 500_000)
    assert not json_depth_ok(b"[" * 100 + b'"' + b'\\"' * 500_000)


def test_every_request_is_counted_under_exactly_one_outcome(running: Running) -> None:
    start = sum(running.receiver.counts.values())
    sent = running.sent
    running.signed(payload(job_id=7), "sum-1")  # accepted
    running.signed(payload(job_id=7), "sum-1")  # duplicate
    running.signed(b"{}", "sum-2", event="ping")  # ping
    running.signed(b"{}", "sum-3", event="push")  # ignored
    running.signed(b"not json", "sum-4")  # malformed
    running.post(payload(), {"X-Hub-Signature-256": "sha256=00"})  # bad_signature
    running.post(payload(), {}, path="/other")  # not_found
    running.client.get(running.url + "/webhook")  # bad_method
    running.sent += 1
    running.post(b"x" * (300 * 1024), {})  # too_large, refused by the listener unread
    counted = sum(running.receiver.counts.values()) - start
    assert counted == running.sent - sent == 9
    assert set(running.receiver.counts) <= set(OUTCOMES)


MUTATIONS = st.sampled_from(
    ["flip_byte", "truncate", "append", "resign", "drop_signature", "sha1", "event", "path"]
)


@settings(
    max_examples=int(os.environ.get("RUNGAR_FUZZ_EXAMPLES", "50")),  # make test-long: 300
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,  # a failure names its example; the same examples run every time
)
@given(
    mutation=MUTATIONS,
    where=st.integers(min_value=0, max_value=10_000),
    junk=st.binary(min_size=1, max_size=64),
    event=st.sampled_from(["workflow_job", "ping", "push", "", "WORKFLOW_JOB"]),
)
def test_mutated_deliveries_get_clean_answers_and_are_all_counted(
    running: Running, mutation: str, where: int, junk: bytes, event: str
) -> None:
    body = payload(job_id=where)
    signature = sign(body)
    path = "/webhook"
    at = where % len(body)
    if mutation == "flip_byte":
        body = body[:at] + bytes([body[at] ^ 0x20]) + body[at + 1 :]
    elif mutation == "truncate":
        body = body[:at]
    elif mutation == "append":
        body += junk
    elif mutation == "resign":  # a body signed with the right secret but mangled inside
        body = body[:at] + junk + body[at:]
        signature = sign(body)
    elif mutation == "drop_signature":
        signature = ""
    elif mutation == "sha1":
        signature = "sha1=" + hmac.new(SECRET.encode(), body, hashlib.sha1).hexdigest()
    elif mutation == "path":
        path = "/webhook/" + junk.hex()
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": f"fuzz-{mutation}-{where}"}
    if signature:
        headers["X-Hub-Signature-256"] = signature
    before = sum(running.receiver.counts.values())
    status = running.post(body, headers, path=path)
    assert status in (200, 202, 400, 401, 404), status
    assert sum(running.receiver.counts.values()) == before + 1
