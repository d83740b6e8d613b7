"""``rungar github-emulator``: the loopback GitHub of ``rungar.testing.github_emulator``, served.

It binds any free port unless ``--port`` is given and prints its URL as the first line of its
output, so a script can read it; the control API it serves is printed by ``--help`` and
described in docs/github-emulator.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import Any

from rungar.stopping import stop_on_signals
from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator

DESCRIPTION = """\
A loopback GitHub for tests and demos: the REST and Actions-service calls Rungar makes, job
queues with simulated workloads, and `rungar fake-runner` as the runner.

The first line of output is the emulator's URL (BASE below), e.g. http://127.0.0.1:40123
(https:// with --tls-cert and --tls-key). Point
Rungar's github.url at BASE/OWNER (http://127.0.0.1:40123/octo-org) with the PAT emulator-pat."""

CONTROL_API = """\
control API (JSON; BASE is the URL on the first line of output):
  POST BASE/_fake/jobs            queue a job: {"labels": [...], "repository": "o/r",
                                  "workflow": "ci.yml", "name": "build", "duration": SECONDS,
                                  "memory_bytes": N, "cpu": CORES, "result": "succeeded",
                                  "gated": false, "event_name": "push"}; every key optional.
                                  201 {"jobId", "runnerRequestId", "workflowJobId"}. jobId is
                                  the job id Rungar passes on: the job_id in a provider's
                                  Create hints is this jobId.
  GET  BASE/_fake/jobs            every job: {"count", "value": [{"jobId", "state", "scaleSetId",
                                  "runnerName", "result", "reassignments", "labels"}]}
  POST BASE/_fake/jobs/ID/ACTION  approve (a gated job), cancel, or complete[?result=failed]
  POST BASE/_fake/runners/NAME/ACTION
                                  online, offline, start-job, or crash
  POST BASE/_fake/faults          break a route: {"route": "A12", "kind": "status|empty|bom|
                                  delay|hang", "status": 503, "count": 1, "typeName": "...",
                                  "message": "...", "headers": {...}, "delay": SECONDS,
                                  "method": "POST"}; route names: R1-R5, A1-A17, MQ_GET,
                                  MQ_DELETE, RUNNER, or * for any; {"route": "A13", "kind":
                                  "throttle", "rate": 180} lets A13 through 180 times a
                                  minute for each App installation (and the PATs) and
                                  answers 429 with Retry-After past that
  POST BASE/_fake/clock/advance?seconds=S
                                  move the emulated clock forward; answers {"now"}
  POST BASE/_fake/scalesets/ID/ACTION
                                  delete (the scale set), or evict (its message session)
  POST BASE/_fake/ratelimit       {"remaining": N, "reset_in": SECONDS}
  POST BASE/_fake/apps/APP/ACTION revoke (the GitHub App: its JWTs and every token minted
                                  through it answered 401 from now on) or restore
  POST BASE/_fake/installations/ID/ACTION
                                  suspend (the App installation: its tokens 403 at minting,
                                  refused after) or unsuspend
  POST BASE/_fake/runner-minimum  {"minimum": "2.331.0"}: GitHub's minimum runner version
                                  from now on ("" takes every version)
  POST BASE/_fake/runner-release  {"version": "2.331.0", "age": SECONDS | "published_at": ISO}:
                                  GitHub publishes a runner release ("" takes it away)
  POST BASE/_fake/webhooks/redeliver/DELIVERY_ID
                                  send a workflow_job delivery again
  GET  BASE/_fake/requests        every request received: {"count", "value": [...]}
  GET  BASE/_fake/state           a summary: {"now", "clockFactor", "scaleSets", "runners",
                                  "runnersCreated", "jobs": {STATE: count}, "faultsFired"}

time: the emulator's clock runs --clock-factor emulated seconds per real second (job
durations, assignment timeouts and session TTLs are emulated seconds, the TTLs real ones with
--session-clock wall); /_fake/clock/advance jumps it forward. Tokens are stamped and checked in
wall-clock time (--token-ttl real seconds), whatever the emulated clock does; a message poll in
progress keeps its session alive across a jump."""


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help_text,
        description=DESCRIPTION,
        epilog=CONTROL_API,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (loopback by default)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: any free port)")
    parser.add_argument("--owner", default="octo-org", help="the organization it serves")
    parser.add_argument(
        "--clock-factor", type=float, default=1.0, help="emulated seconds per real second"
    )
    parser.add_argument(
        "--long-poll", type=float, default=50.0, help="real seconds a message poll waits"
    )
    parser.add_argument(
        "--session-ttl",
        type=float,
        default=120.0,
        help="seconds without a poll before a session is stale (emulated, or real with "
        "--session-clock wall)",
    )
    parser.add_argument(
        "--session-clock",
        choices=("emulated", "wall"),
        default="emulated",
        help="the clock --session-ttl counts on: emulated (GitHub's: a compressed clock "
        "compresses a dead client's session expiry, and a jump can end an idle session) or "
        "wall (as tokens: for a client that polls by its own clock at a high clock factor)",
    )
    parser.add_argument(
        "--assignment-timeout",
        type=float,
        default=300.0,
        help="emulated seconds a job waits for a runner",
    )
    parser.add_argument(
        "--token-ttl",
        type=float,
        default=3600.0,
        help="real seconds every token it issues lasts (installation, registration, admin, "
        "message queue)",
    )
    parser.add_argument(
        "--installation-tokens",
        choices=("stateless", "stateful"),
        default="stateless",
        help="the installation tokens' shape: GitHub's stateless ghs_<app id>_<JWT> (about 520 "
        "characters) or the older ghs_ and 36 characters; the X-GitHub-Stateless-S2S-Token "
        "header overrides it per request",
    )
    parser.add_argument("--acquire-mode", choices=("broker", "legacy"), default="broker")
    parser.add_argument(
        "--runner-minimum",
        default="2.329.0",
        help="GitHub's minimum runner version: an older runner is refused when it connects "
        '("" takes every version)',
    )
    parser.add_argument(
        "--runner-latest",
        default="2.330.0",
        help="the latest runner release GET /repos/actions/runner/releases/latest names "
        '("" = none: 404)',
    )
    parser.add_argument(
        "--runner-latest-age",
        type=float,
        default=1.0,
        help="days before the emulator starts that release was published",
    )
    parser.add_argument(
        "--jit-rate",
        type=float,
        default=0.0,
        help="GitHub's registration limit: JIT configs a minute, 429 past it (default: none)",
    )
    parser.add_argument(
        "--webhook-url", default="", help="where to send signed workflow_job webhooks"
    )
    parser.add_argument("--webhook-secret-file", default="", help="file holding the webhook secret")
    parser.add_argument(
        "--tls-cert", default="", help="serve HTTPS with this certificate (PEM, chain after it)"
    )
    parser.add_argument("--tls-key", default="", help="the certificate's private key (PEM)")
    parser.add_argument(
        "--public-host",
        default="",
        help="the host name in the URL it prints (its certificate's; default: --host)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    secret = ""
    if args.webhook_secret_file:
        with open(args.webhook_secret_file, encoding="utf-8") as f:
            secret = f.read().strip()
    if args.webhook_url and not secret:
        print("github-emulator: --webhook-url needs --webhook-secret-file", flush=True)
        return 2
    if bool(args.tls_cert) != bool(args.tls_key):
        print("github-emulator: --tls-cert and --tls-key go together", flush=True)
        return 2
    options = EmulatorOptions(
        owner=args.owner,
        pats={"emulator-pat": args.owner},
        installations={1: args.owner},
        clock_factor=args.clock_factor,
        long_poll_seconds=args.long_poll,
        session_idle_ttl=args.session_ttl,
        session_clock=args.session_clock,
        assignment_timeout=args.assignment_timeout,
        token_ttl=args.token_ttl,
        admin_token_ttl=args.token_ttl,
        mq_token_ttl=args.token_ttl,
        acquire_mode=args.acquire_mode,
        stateless_installation_tokens=args.installation_tokens == "stateless",
        webhook_url=args.webhook_url,
        webhook_secret=secret,
        jit_rate_per_minute=args.jit_rate,
        runner_minimum=args.runner_minimum,
        runner_latest=args.runner_latest,
        runner_latest_age=args.runner_latest_age * 86400,
        tls_cert_file=args.tls_cert,
        tls_key_file=args.tls_key,
        public_host=args.public_host,
    )
    emulator = GitHubEmulator(options)

    def ready(base: str) -> None:
        print(base, flush=True)  # the first line: scripts read the URL from it
        print(f"github.url for rungar: {base}/{args.owner} (PAT: emulator-pat)", flush=True)

    async def serve_until_stopped() -> None:
        stop = asyncio.Event()
        stop_on_signals(stop)
        serving = asyncio.create_task(emulator.serve_forever(args.host, args.port, ready))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({serving, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for task in (serving, stopped):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving  # raises what ended it, if it ended by itself
        stopped.cancel()

    asyncio.run(serve_until_stopped())
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m rungar.cli.github_emulator``: the same without the ``rungar`` dispatcher."""
    parser = argparse.ArgumentParser(prog="rungar github-emulator")
    sub = parser.add_subparsers(dest="command")
    add_parser(sub, "github-emulator", "serve the loopback GitHub")
    return run(parser.parse_args(["github-emulator", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    sys.exit(main())
