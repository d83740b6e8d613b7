"""The daemon's bounded HTTP listener over real loopback sockets.

Each bound is tried as a hostile client would: a head that never ends, a body that never
comes, a declared body past the cap, connections held open and idle, every slot busy. Each
refusal is answered at once and counted under one outcome; idle connections make room for a
newcomer instead of keeping it out.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from starlette.responses import StreamingResponse
from structlog.testing import capture_logs

from rungar.web.bounded import BoundedHttpServer, Limits, _Burst, bind
from tests.waiting import WAIT, until_sync  # WAIT: a read blocked this long means no answer


async def hello(scope: Any, receive: Any, send: Any) -> None:
    """Reads the whole body, answers 200 with its size."""
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = str(size).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Served:
    def __init__(self, limits: Limits) -> None:
        self.outcomes: Counter[str] = Counter()
        self.server = BoundedHttpServer(
            hello,
            bind("127.0.0.1:0", key="test.listen"),
            limits,
            name="test",
            on_refused=lambda outcome: self.outcomes.update([outcome]),
        )
        host, port = self.server.address.rsplit(":", 1)
        self.peer = (host, int(port))

    def connect(self) -> socket.socket:
        sock = socket.create_connection(self.peer, timeout=WAIT)
        return sock

    def wait_for_connections(self, count: int, busy: int = 0) -> None:
        """Until the server holds ``count`` connections, ``busy`` of them in a request (it
        accepts and reads on its own thread)."""
        until_sync(
            lambda: self.server.connections == count and self.server.requests_in_progress == busy,
            f"held {count} connections, {busy} busy (holds {self.server.connections})",
            every=0.01,
        )


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    # Generous unless the test is about a timeout: a busy machine may hold the test up between
    # connecting and sending, and a short timeout would close the connection in between.
    limits = getattr(request, "param", Limits(header_timeout=WAIT * 2, body_timeout=WAIT * 2))
    s = Served(limits)
    s.server.start()
    yield s
    s.server.stop()


def read_answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (or WAIT passes)."""
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def one_response(sock: socket.socket) -> bytes:
    """One whole response on a kept-alive connection: its head and its content-length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def test_a_complete_request_is_served_and_counted_nowhere_as_refused(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(b"POST /x HTTP/1.1\r\nhost: t\r\ncontent-length: 3\r\n\r\nabc")
        answer = one_response(sock)
    assert status_of(answer) == 200 and answer.endswith(b"3")
    assert served.outcomes == {}


@pytest.mark.parametrize("served", [Limits(header_timeout=0.3)], indirect=True)
def test_a_head_that_never_ends_is_answered_408_and_counted_timeout(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(b"POST /x HTTP/1.1\r\nhost: t\r\n")  # and never the blank line
        assert status_of(read_answer(sock)) == 408
    assert served.outcomes == {"timeout": 1}


@pytest.mark.parametrize(
    "served", [Limits(header_timeout=WAIT * 2, body_timeout=0.3)], indirect=True
)
def test_a_body_that_never_comes_is_answered_408_and_counted_timeout(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(b"POST /x HTTP/1.1\r\nhost: t\r\ncontent-length: 10\r\n\r\nabc")
        assert status_of(read_answer(sock)) == 408
    assert served.outcomes == {"timeout": 1}


def test_a_declared_body_over_the_cap_is_refused_413_before_a_byte_of_it_is_read(
    served: Served,
) -> None:
    with served.connect() as sock:
        # Nothing of the body is sent: the answer can only come from the head.
        sock.sendall(b"POST /x HTTP/1.1\r\nhost: t\r\ncontent-length: 99999999\r\n\r\n")
        assert status_of(read_answer(sock)) == 413
    assert served.outcomes == {"too_large": 1}


def test_a_chunked_body_is_cut_off_at_the_cap(served: Served) -> None:
    chunk = b"x" * 65536
    with served.connect() as sock:
        sock.sendall(b"POST /x HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n")
        with pytest.raises(OSError):  # the server stops reading and closes: writes fail
            for _ in range(1024):  # up to 64 MiB, far past the 1 MiB cap and any socket buffer
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        answer = read_answer(sock)
    assert status_of(answer) in (413, 0)  # 0: reset before the answer could be read
    assert served.outcomes == {"too_large": 1}


def test_garbage_instead_of_http_is_answered_400_and_counted_bad_request(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
        assert status_of(read_answer(sock)) == 400
    assert served.outcomes == {"bad_request": 1}


@pytest.mark.parametrize("served", [Limits(header_timeout=0.3)], indirect=True)
def test_a_connection_that_sends_nothing_is_closed_uncounted(served: Served) -> None:
    with served.connect() as sock:
        assert read_answer(sock) == b""  # closed by the header timeout, without an answer
    assert served.outcomes == {}


@pytest.mark.parametrize(
    "served", [Limits(idle_timeout=0.3, header_timeout=WAIT * 2)], indirect=True
)
def test_a_kept_alive_connection_idle_too_long_is_closed(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(b"GET /x HTTP/1.1\r\nhost: t\r\n\r\n")
        assert status_of(one_response(sock)) == 200
        assert read_answer(sock) == b""  # within WAIT, long before the header timeout
    assert served.outcomes == {}


@pytest.mark.parametrize("served", [Limits(max_connections=3, header_timeout=60)], indirect=True)
def test_at_the_cap_a_newcomer_closes_the_oldest_idle_connection_and_is_served(
    served: Served,
) -> None:
    idle = [served.connect() for _ in range(3)]
    served.wait_for_connections(3)
    with served.connect() as sock:
        sock.sendall(b"GET /x HTTP/1.1\r\nhost: t\r\n\r\n")
        assert status_of(one_response(sock)) == 200
    assert read_answer(idle[0]) == b"", "the oldest idle connection made room"
    for sock in idle:
        sock.close()
    assert served.outcomes == {}


@pytest.mark.parametrize("served", [Limits(max_connections=2, body_timeout=60)], indirect=True)
def test_when_every_connection_is_busy_a_newcomer_is_answered_503_at_once(
    served: Served,
) -> None:
    busy = [served.connect() for _ in range(2)]
    for sock in busy:  # a head, and a body still to come: a request in progress
        sock.sendall(b"POST /x HTTP/1.1\r\nhost: t\r\ncontent-length: 5\r\n\r\n")
    served.wait_for_connections(2, busy=2)
    with served.connect() as sock:
        assert status_of(read_answer(sock)) == 503
    for sock in busy:
        sock.sendall(b"hello")
        assert status_of(one_response(sock)) == 200, "the busy requests were not disturbed"
        sock.close()
    assert served.outcomes == {"busy": 1}


def test_a_run_of_failures_is_logged_once_when_it_starts_and_once_with_its_count() -> None:
    burst = _Burst("http.accept_failed", "webhook")
    with capture_logs() as lines:
        for _ in range(1000):
            burst.hit(error="Too many open files")
        burst.end()
        burst.end()  # nothing more to say
    assert [(x["event"], x.get("count")) for x in lines] == [
        ("http.accept_failed", None),
        ("http.accept_failed_burst", 1000),
    ]


OUT_OF_FILES = """
import contextlib, os, sys, time
from rungar import logs
from rungar.web.bounded import BoundedHttpServer, Limits, bind

async def ok(scope, receive, send):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})

logs.configure("info", "json")
server = BoundedHttpServer(ok, bind("127.0.0.1:0", key="t"), Limits(accept_retry=0.02), name="t")
server.start()
spare = []
with contextlib.suppress(OSError):  # until every free file is taken: accepts fail with EMFILE
    while True:
        spare.append(os.open("/dev/null", os.O_RDONLY))
print(server.address, flush=True)
sys.stdin.readline()  # the flood waits in the backlog, accepts failing, until told
while server._accept_errors.count < 5:  # a burst of several failures, not one
    time.sleep(0.01)
for fd in spare:
    os.close(fd)
sys.stdin.readline()
server.stop()
"""


def test_accept_errors_for_want_of_files_are_logged_once_per_burst_with_a_count() -> None:
    daemon = subprocess.Popen(
        [sys.executable, "-c", OUT_OF_FILES],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert daemon.stdin is not None and daemon.stdout is not None
    try:
        host, port = daemon.stdout.readline().strip().rsplit(":", 1)
        held = [socket.create_connection((host, int(port)), timeout=WAIT) for _ in range(50)]
        with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
            sock.sendall(b"GET /x HTTP/1.1\r\nhost: t\r\n\r\n")
            daemon.stdin.write("free the files\n")
            daemon.stdin.flush()
            assert status_of(one_response(sock)) == 200, "served once files were free again"
        for sock in held:
            sock.close()
        daemon.stdin.write("stop\n")
        daemon.stdin.flush()
        _, err = daemon.communicate(timeout=30)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    lines = [json.loads(line) for line in err.splitlines()]  # JSON only: no traceback
    events = [(x["event"], x.get("count", 0) >= 5) for x in lines]
    assert events == [("http.accept_failed", False), ("http.accept_failed_burst", True)], lines


def test_a_streaming_answer_is_sent_whole_and_not_cut_short_by_a_disconnect_check() -> None:
    # Starlette's StreamingResponse listens for http.disconnect while it streams; a receive()
    # that answered "disconnected" as soon as the body was read cut every stream off at once.
    async def parts() -> AsyncIterator[bytes]:
        for n in range(5):
            await asyncio.sleep(0.01)  # each part on a later turn of the loop than the listen
            yield b"part %d\n" % n

    async def stream(scope: Any, receive: Any, send: Any) -> None:
        await StreamingResponse(parts(), media_type="text/plain")(scope, receive, send)

    server = BoundedHttpServer(stream, bind("127.0.0.1:0", key="test.listen"), name="test")
    server.start()
    try:
        host, port = server.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            answer = read_answer(sock)
    finally:
        server.stop()
    assert status_of(answer) == 200
    assert answer.count(b"part ") == 5, answer
