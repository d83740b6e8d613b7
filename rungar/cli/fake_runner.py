"""``rungar fake-runner``: what a real runner does with a JIT config, reduced to the protocol.

It decodes the JIT config (``ACTIONS_RUNNER_INPUT_JITCONFIG`` as ARC passes it, or stdin), connects
to the emulator named inside it (once: the config is single-use), waits for one job of its scale
set, runs that job's workload for real (allocates and touches the memory, keeps the CPU cores busy,
for the duration divided by the emulator's clock factor), reports the job's result, and exits 0.
runnerd and ``make demo`` start it as a runner's command.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

ENV_JITCONFIG = "ACTIONS_RUNNER_INPUT_JITCONFIG"
ENV_VERSION = "RUNGAR_FAKE_RUNNER_VERSION"  # the runner version it claims to be
DEFAULT_VERSION = "2.330.0"
OUTDATED_EXIT = 7  # the runner's exit when GitHub refuses its version: no retry needed
PAGE = 4096


@dataclass(frozen=True, slots=True)
class RunnerIdentity:
    runner_id: int
    name: str
    server: str  # the runner API base, ending in "/"
    credential: str = field(repr=False)


def decode_jit_config(encoded: str) -> RunnerIdentity:
    """The runner's identity from a JIT config; ValueError when it is not one."""
    try:
        files = json.loads(base64.b64decode(encoded, validate=True))
        runner = json.loads(base64.b64decode(files[".runner"]))
        credentials = json.loads(base64.b64decode(files[".credentials"]))
        return RunnerIdentity(
            runner_id=int(runner["AgentId"]),
            name=str(runner["AgentName"]),
            server=str(runner.get("ServerUrlV2") or runner["ServerUrl"]),
            credential=str(credentials["data"]["token"]),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError("not a JIT config this runner understands") from e


def _spin(until: float, duty: float) -> None:
    """Keep one core ``duty`` busy until ``until`` (wall clock; this is the workload itself)."""
    while time.time() < until:
        start = time.time()
        while time.time() - start < 0.01 * duty:
            pass
        if duty < 1:
            time.sleep(0.01 * (1 - duty))


def run_workload(seconds: float, memory_bytes: int, cpu: float) -> None:
    """Hold ``memory_bytes`` resident and ``cpu`` cores busy for ``seconds``."""
    ballast = bytearray(memory_bytes) if memory_bytes > 0 else bytearray()
    for i in range(0, len(ballast), PAGE):  # touch every page so it is resident, not just mapped
        ballast[i] = 1
    until = time.time() + seconds
    workers: list[multiprocessing.process.BaseProcess] = []
    if cpu > 0:
        whole, part = math.floor(cpu), cpu - math.floor(cpu)
        duties = [1.0] * whole + ([part] if part > 0.01 else [])
        ctx = multiprocessing.get_context("fork")
        workers = [ctx.Process(target=_spin, args=(until, d), daemon=True) for d in duties]
        for w in workers:
            w.start()
    time.sleep(max(0.0, until - time.time()))
    for w in workers:
        w.join(timeout=5)
    del ballast


def serve_one_job(
    identity: RunnerIdentity, *, max_wait: float, log: Any, version: str = DEFAULT_VERSION
) -> int:
    headers = {
        "Authorization": f"Bearer {identity.credential}",
        # As the runner names itself to GitHub, its version included.
        "User-Agent": f"GitHubActionsRunner-linux-x64/{version}",
    }
    with httpx.Client(base_url=identity.server, headers=headers, timeout=70.0) as http:
        r = http.post("connect")
        refused = _refusal_message(r) if r.status_code == 403 else ""
        if "is deprecated" in refused:
            # The runner's own lines when GitHub refuses its version, then its exit for good.
            log(f"Current runner version: '{version}'")
            log(f"An error occurred: {refused}")
            log("Runner listener exit with terminated error, stop the service, no retry needed.")
            return OUTDATED_EXIT
        if r.status_code != 200:
            log(f"runner {identity.name}: registration refused (HTTP {r.status_code})")
            return 1
        log(f"runner {identity.name}: online, waiting for a job")
        deadline = time.time() + max_wait
        while time.time() < deadline:
            r = http.get("job", params={"wait": "10"})
            if r.status_code == 204:
                continue
            if r.status_code != 200:
                log(f"runner {identity.name}: job request failed (HTTP {r.status_code})")
                return 1
            job = r.json()
            factor = float(job.get("clockFactor") or 1.0)
            seconds = float(job.get("duration") or 0.0) / factor
            log(
                f"runner {identity.name}: running {job.get('displayName')} for {seconds:.2f}s "
                f"({int(job.get('memoryBytes') or 0)} bytes, {float(job.get('cpu') or 0):g} cpu)"
            )
            run_workload(seconds, int(job.get("memoryBytes") or 0), float(job.get("cpu") or 0.0))
            result = str(job.get("result") or "succeeded")
            done = http.post(f"jobs/{job['jobId']}/complete", json={"result": result})
            log(f"runner {identity.name}: job {result}, reported (HTTP {done.status_code})")
            return 0 if done.status_code == 204 else 1
        log(f"runner {identity.name}: no job came within {max_wait:g}s")
        return 1


def _refusal_message(answer: httpx.Response) -> str:
    try:
        body = answer.json()
    except ValueError:
        return ""
    return str(body.get("message", ""))[:300] if isinstance(body, dict) else ""


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=__doc__
    )
    parser.add_argument(
        "--jitconfig-stdin",
        action="store_true",
        help=f"read the encoded JIT config from stdin (default: ${ENV_JITCONFIG})",
    )
    parser.add_argument("--max-wait", type=float, default=3600.0, help="seconds to wait for a job")
    parser.add_argument(
        "--runner-version",
        default=os.environ.get(ENV_VERSION, DEFAULT_VERSION),
        help=f"the runner version it claims to GitHub (default: ${ENV_VERSION}, else "
        f"{DEFAULT_VERSION}); one below GitHub's minimum is refused and exits {OUTDATED_EXIT}",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    # Never an argument: anyone on the host can read a process's command line.
    if args.jitconfig_stdin:
        encoded = sys.stdin.readline().strip()
    else:
        encoded = os.environ.get(ENV_JITCONFIG, "")
    if not encoded:
        print(
            f"fake-runner: no JIT config: set {ENV_JITCONFIG} or pass --jitconfig-stdin",
            file=sys.stderr,
        )
        return 2
    try:
        identity = decode_jit_config(encoded)
    except ValueError as e:
        print(f"fake-runner: {e}", file=sys.stderr)
        return 2

    def log(line: str) -> None:
        print(line, flush=True)

    try:
        return serve_one_job(identity, max_wait=args.max_wait, log=log, version=args.runner_version)
    except httpx.HTTPError as e:
        print(
            f"fake-runner: {identity.name}: cannot reach {identity.server}: {type(e).__name__}",
            file=sys.stderr,
        )
        return 1


def main(argv: list[str] | None = None) -> int:
    """``python -m rungar.cli.fake_runner``: the same program without the ``rungar`` dispatcher."""
    parser = argparse.ArgumentParser(prog="rungar fake-runner")
    sub = parser.add_subparsers(dest="command")
    add_parser(sub, "fake-runner", "run one job of the GitHub emulator")
    return run(parser.parse_args(["fake-runner", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    sys.exit(main())
