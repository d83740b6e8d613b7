"""Benchmark: the bounded HTTP listener's answer time while thousands of connections are held.

A server process serves a one-line app through :mod:`rungar.web.bounded` with the daemon's
default limits and ``RLIMIT_NOFILE`` at 1,024 (systemd's default). This process opens ``idle``
connections that send nothing, as a flood would, and then times one request at a time on a
fresh connection: the first right after the flood was opened (the server still works through
its backlog, evicting idle connections for newer ones), then ``samples`` more while the flood
is held. The same requests without a flood give the baseline, and ``flood_p50_ratio`` is the
one over the other.

Usage: ``python benchmarks/listener.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

SERVER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
from rungar import logs
from rungar.web.bounded import BoundedHttpServer, bind

async def app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})

logs.configure("warning", "json")
server = BoundedHttpServer(app, bind("127.0.0.1:0", key="bench"), name="bench")
server.start()
print(server.address, flush=True)
sys.stdin.read()
server.stop()
"""


def emit(metric: str, value: float, unit: str, params: dict[str, Any]) -> None:
    record = {"bench": "listener", "metric": metric, "value": round(value, 5), "unit": unit}
    print(json.dumps({**record, "params": params}), flush=True)


def one_request(peer: tuple[str, int]) -> float:
    started = time.perf_counter()
    with socket.create_connection(peer, timeout=30) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nhost: bench\r\n\r\n")
        answer = b""
        while not answer.endswith(b"ok"):
            chunk = sock.recv(4096)
            if not chunk:
                raise RuntimeError(f"closed without an answer: {answer!r}")
            answer += chunk
    return time.perf_counter() - started


def hold(peer: tuple[str, int], count: int) -> list[socket.socket]:
    held = []
    for _ in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(peer)
        held.append(sock)
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    idle, samples = (1000, 50) if args.quick else (2000, 200)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, idle + 1024)), hard))
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        host, port = server.stdout.readline().strip().rsplit(":", 1)
        peer = (host, int(port))
        params = {"idle": idle, "samples": samples, "open_files": 1024}
        calm = [one_request(peer) for _ in range(samples)]
        held = hold(peer, idle)
        first = one_request(peer)
        flooded = [one_request(peer) for _ in range(samples)]
        for sock in held:
            sock.close()
    finally:
        server.stdin.close()
        server.wait(30)
    emit("answer_p50_s", statistics.median(calm), "s", params)
    emit("first_answer_after_flood_s", first, "s", params)
    emit("answer_under_flood_p50_s", statistics.median(flooded), "s", params)
    emit("answer_under_flood_max_s", max(flooded), "s", params)
    emit("flood_p50_ratio", statistics.median(flooded) / statistics.median(calm), "x", params)


if __name__ == "__main__":
    main()
