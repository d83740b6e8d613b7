"""Benchmark: a provider's create-or-refuse round trip over mTLS on loopback.

A server process serves a no-op provider (it answers Created and Refused in turn) through the
server kit, logging every call as JSON to /dev/null with the production log configuration
(``rungar.logs.configure``), and beside it a bare gRPC echo (a generic unary handler on raw
bytes, no protobuf) with the same certificates. This process drives both through the same kind
of mTLS channel: ``GrpcProvider.create`` for the provider (naming its caller in metadata, as
the daemon does), a raw unary call with the same metadata for the echo. The echo moves the same
bytes as the provider exchange: it takes the serialized CreateRequest and
answers with the serialized answers the provider gives (Created and Refused in turn), so both
sides pay the same transport, TLS and framing costs and the ratio is the protocol's own
overhead. It measures p50/p99 latency with one call in flight and calls per second with 16 in
flight, and prints each figure and its ratio to the echo's as JSON lines (``*_ratio``: provider
over echo for latency, echo over provider for throughput, so 1.0 means no overhead and larger
means slower).

Usage: ``python benchmarks/rpc.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

IN_FLIGHT = 16
ROUNDS = 6  # throughput rounds, provider and echo interleaved
SERVER_NAME = "provider.bench"


def emit(metric: str, value: float, unit: str, params: dict[str, Any]) -> None:
    record = {"bench": "rpc", "metric": metric, "value": round(value, 4), "unit": unit}
    print(json.dumps({**record, "params": params}), flush=True)


# --- the server process ----------------------------------------------------------------------


async def run_server(cert_dir: Path) -> None:
    from rungar import logs
    from rungar.model.machine import (
        Created,
        CreateRequest,
        JobHint,
        Machine,
        MachineState,
        ProviderInfo,
        Refusal,
        RefusalKind,
    )
    from rungar.rpc import convert
    from rungar.rpc.server import SERVER_OPTIONS, serve
    from rungar.rpc.tls import ServerTls, server_credentials

    # The production configuration (JSON, redaction, timestamps) writes to the stderr it finds
    # when configured: give it /dev/null, and keep the real stderr for tracebacks.
    devnull = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    stderr, sys.stderr = sys.stderr, devnull
    try:
        logs.configure("info", "json")
    finally:
        sys.stderr = stderr

    machine = Machine("bench-runner", MachineState.STARTING, {"k": "v"}, "2 vCPU")

    def answer(n: int) -> Created | Refusal:
        if n % 2:
            return Created(machine)
        return Refusal(RefusalKind.FULL, "needs 4G of memory, 1G free", "memory")

    class NoopProvider:
        def __init__(self) -> None:
            self.n = 0

        async def info(self) -> ProviderInfo:
            return ProviderInfo("noop", "bench", "0")

        async def validate_runner(self, runner: Any) -> list[str]:
            return []

        async def create(self, request: CreateRequest) -> Created | Refusal:
            self.n += 1
            return answer(self.n)

        async def delete(self, name: str, removal: Any = None) -> None:
            return None

        async def list(self, selector: Any) -> list[Machine]:
            return []

        async def update_runner(self, name: str, job: JobHint) -> None:
            return None

        async def last_output(self, name: str, lines: int = 20) -> Sequence[str]:
            return []

    tls = ServerTls(
        str(cert_dir / "server.pem"), str(cert_dir / "server.key"), str(cert_dir / "ca.pem")
    )
    provider_server = await serve(NoopProvider(), "127.0.0.1:0", tls=tls)

    # The echo answers with the provider's answers as bytes, so both move the same bytes.
    echo_answers: tuple[bytes, ...] = tuple(
        convert.create_response_to_pb(answer(n)).SerializeToString() for n in (0, 1)
    )
    echo_count = 0

    async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        nonlocal echo_count
        echo_count += 1
        return echo_answers[echo_count % 2]

    echo_server = grpc.aio.server(options=list(SERVER_OPTIONS))  # the provider server's
    echo_server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
            ),
        )
    )
    echo_port = echo_server.add_secure_port("127.0.0.1:0", server_credentials(tls))
    await echo_server.start()
    provider_port = provider_server.address.rsplit(":", 1)[1]
    sys.stdout.write(f"PORTS {provider_port} {echo_port}\n")
    sys.stdout.flush()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until EOF
    await provider_server.stop(None)
    await echo_server.stop(None)


# --- the driving process ---------------------------------------------------------------------


def make_certs(cert_dir: Path) -> None:
    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(cert_dir / "ca.pem"))
    for name, identity in (("server", SERVER_NAME), ("client", "rungar.bench")):
        cert = ca.issue_cert(identity)
        cert.cert_chain_pems[0].write_to_path(str(cert_dir / f"{name}.pem"))
        cert.private_key_pem.write_to_path(str(cert_dir / f"{name}.key"))


async def latencies(call: Callable[[], Awaitable[object]], n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        out.append(time.perf_counter() - started)
    return out


async def throughput(call: Callable[[], Awaitable[object]], seconds: float) -> float:
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await call()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return done / (time.perf_counter() - started)


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000


async def drive(cert_dir: Path, ports: tuple[str, str], quick: bool) -> None:
    from rungar.model.caller import Caller
    from rungar.model.machine import CreateRequest
    from rungar.model.runner_block import RunnerBlock
    from rungar.rpc import convert
    from rungar.rpc.client import CHANNEL_OPTIONS, GrpcProvider
    from rungar.rpc.tls import ClientTls, channel_credentials

    tls = ClientTls(
        str(cert_dir / "ca.pem"),
        str(cert_dir / "client.pem"),
        str(cert_dir / "client.key"),
        SERVER_NAME,
    )
    request = CreateRequest(
        runner_name="linux-0123abcd",
        request_id="3f1c9a6e-0d7b-4c1e-9a57-1b2c3d4e5f60",
        scale_set="linux",
        labels={
            "rungar.sh/managed": "true",
            "rungar.sh/installation": "12345",
            "rungar.sh/scale-set": "linux",
            "rungar.sh/runner": "linux-0123abcd",
            "rungar.sh/revision": "r7",
        },
        runner=RunnerBlock(2, 4 * 1024**3, 20 * 1024**3, "ubuntu-24.04", {"profile": "std"}),
        jit_config="x" * 2000,  # about the size of a real JIT config
    )
    payload = convert.create_request_to_pb(request).SerializeToString()
    # Named as the daemon names itself on every call (the metadata of provider.proto).
    caller = Caller("gh-bench", "bench-host", time.time())
    provider = GrpcProvider("bench", f"127.0.0.1:{ports[0]}", tls=tls, timeout=10, caller=caller)
    options = [*CHANNEL_OPTIONS, ("grpc.ssl_target_name_override", SERVER_NAME)]
    echo_channel = grpc.aio.secure_channel(
        f"127.0.0.1:{ports[1]}", channel_credentials(tls), options=options
    )
    echo_call = echo_channel.unary_unary("/bench.Echo/Echo", None, None)  # raw bytes both ways

    async def create() -> object:
        return await provider.create(request)

    async def echo() -> object:
        return await echo_call(payload, timeout=10, metadata=caller.metadata())  # same bytes

    n = 500 if quick else 3000
    seconds = 1.5 if quick else 6.0
    params: dict[str, Any] = {"calls": n, "in_flight": 1, "transport": "mTLS loopback"}
    for call in (create, echo):
        await latencies(call, 200)  # warm up connections and code paths
    # Interleave the two in rounds so drift on a shared machine hits both alike.
    create_lat: list[float] = []
    echo_lat: list[float] = []
    for _ in range(5):
        create_lat += await latencies(create, n // 5)
        echo_lat += await latencies(echo, n // 5)
    create_rates = []
    echo_rates = []
    for _ in range(ROUNDS):
        create_rates.append(await throughput(create, seconds / ROUNDS))
        echo_rates.append(await throughput(echo, seconds / ROUNDS))
    create_rate, echo_rate = statistics.median(create_rates), statistics.median(echo_rates)
    # Paired rounds share the machine's momentary load, so their ratio is the steadier figure.
    rate_ratio = statistics.median(e / c for e, c in zip(echo_rates, create_rates, strict=True))

    emit("create_p50_ms", p(create_lat, 50), "ms", params)
    emit("create_p99_ms", p(create_lat, 99), "ms", params)
    emit("echo_p50_ms", p(echo_lat, 50), "ms", params)
    emit("echo_p99_ms", p(echo_lat, 99), "ms", params)
    emit("create_p50_ratio", p(create_lat, 50) / p(echo_lat, 50), "x", params)
    emit("create_p99_ratio", p(create_lat, 99) / p(echo_lat, 99), "x", params)
    rate_params = {
        "seconds": seconds,
        "rounds": ROUNDS,
        "in_flight": IN_FLIGHT,
        "transport": "mTLS loopback",
    }
    emit("create_calls_per_s", create_rate, "1/s", rate_params)
    emit("echo_calls_per_s", echo_rate, "1/s", rate_params)
    emit("create_throughput_ratio", rate_ratio, "x", rate_params)
    await provider.close()
    await echo_channel.close(None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, shorter runs")
    parser.add_argument("--serve", metavar="CERT_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(run_server(Path(args.serve)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        cert_dir = Path(tmp)
        make_certs(cert_dir)
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(cert_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline().split()
            if len(line) != 3 or line[0] != "PORTS":
                raise SystemExit(f"benchmark server did not start: {line!r}")
            asyncio.run(drive(cert_dir, (line[1], line[2]), args.quick))
        finally:
            assert server.stdin is not None
            server.stdin.close()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
