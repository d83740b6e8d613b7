"""A loopback world for driving ``rungar serve`` as a user would: a real daemon process, the
GitHub emulator, and fake providers served over gRPC whose machines really run fake runners.

The providers live in the test process, so they outlive a daemon killed with ``kill -9``.
Optionally the daemon also serves Prometheus metrics and a webhook receiver that the emulator
sends signed ``workflow_job`` deliveries to.

Polling is cheap: :meth:`DaemonWorld.status` and :meth:`DaemonWorld.reconcile` ask the daemon's
admin socket from the test process (no CLI process per poll), and :meth:`DaemonWorld.wait_for`
re-asks every ``POLL_SECONDS`` until its condition holds. :meth:`DaemonWorld.rungar` runs the
real CLI, for tests about what a user sees.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from rungar.model.machine import (
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    ProviderInfo,
    Refusal,
    Removal,
)
from rungar.model.output import tail_lines
from rungar.rpc.admin_client import AdminClient, DaemonUnreachable
from rungar.rpc.server import ProviderServer, serve
from rungar.testing.fake_provider import FakeProvider
from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator
from tests.waiting import WAIT

POLL_SECONDS = 0.1


class RunningProvider:
    """A FakeProvider whose machines boot: each created machine runs ``rungar fake-runner``
    (unless ``boot`` is off: then machines exist but no runner ever connects)."""

    def __init__(
        self,
        fake: FakeProvider,
        log_dir: Path,
        *,
        boot: bool = True,
        command: list[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.fake = fake
        self.env = dict(env or {})  # added to each runner's environment (a proxy, a CA file)
        self.log_dir = log_dir
        self.boot = boot
        # What each machine runs: the fake runner, or a test's (one that exits at once, say).
        self.command = command or [sys.executable, "-m", "rungar.cli.fake_runner"]
        self.runners: dict[str, subprocess.Popen[bytes]] = {}

    async def info(self) -> ProviderInfo:
        return await self.fake.info()

    async def validate_runner(self, runner: Mapping[str, Any]) -> list[str]:
        return await self.fake.validate_runner(runner)

    async def create(self, request: CreateRequest) -> Created | Refusal:
        result = await self.fake.create(request)
        if self.boot and isinstance(result, Created) and request.runner_name not in self.runners:
            log = (self.log_dir / f"{request.runner_name}.log").open("wb")
            self.runners[request.runner_name] = subprocess.Popen(
                self.command,
                # As a real runner takes it: in the environment, never on the command line.
                env={
                    **os.environ,
                    **self.env,
                    "ACTIONS_RUNNER_INPUT_JITCONFIG": request.jit_config,
                },
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return result

    async def delete(self, name: str, removal: Removal | None = None) -> None:
        await self.fake.delete(name, removal)
        process = self.runners.pop(name, None)
        if process is not None and process.poll() is None:
            process.terminate()

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        for name, process in self.runners.items():
            if process.poll() is not None:  # its runner ended: the machine stops, as a VM would
                self.fake.set_state(name, MachineState.STOPPED)
        return await self.fake.list(selector)

    async def update_runner(self, name: str, job: JobHint) -> None:
        await self.fake.update_runner(name, job)

    async def last_output(self, name: str, lines: int = 20) -> Sequence[str]:
        """The tail of the machine's runner output, as a host keeps its console."""
        try:
            text = (self.log_dir / f"{name}.log").read_bytes()
        except OSError:
            return []
        return tail_lines(text, lines)

    def stop_all(self) -> None:
        for process in self.runners.values():
            if process.poll() is None:
                process.kill()


def free_port() -> int:
    """A loopback port free now; the daemon binds it a moment later (a race too small to matter
    here: losing it can fail a test, never pass one)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def sample_key(name: str, labels: Mapping[str, str]) -> str:
    """A sample as the exposition format writes it: ``name{a="x",b="y"}``."""
    if not labels:
        return name
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


class DaemonWorld:
    def __init__(
        self,
        root: Path,
        providers: dict[str, FakeProvider],
        clock_factor: float = 10,
        *,
        metrics: bool = False,
        webhook_secret: str = "",
        relative_paths: bool = False,
        cwd: Path | None = None,
        open_files: int = 0,
        boot_runners: bool = True,
        dashboard: bool = False,
        runner_command: list[str] | None = None,
        github_timing: Mapping[str, Any] | None = None,
        emulator_options: Mapping[str, Any] | None = None,
        app_private_key: str = "",
        apps: Mapping[str, tuple[int, str]] | None = None,
        log_level: str = "",
        github: Mapping[str, Any] | None = None,
        daemon_env: Mapping[str, str] | None = None,
        runner_env: Mapping[str, str] | None = None,
        control_verify: ssl.SSLContext | bool = True,
    ):
        self.root = root
        # Write every path in rungar.yaml and scale_sets.yaml relative to root, and start the
        # daemon in ``cwd``: the files must mean the same wherever the daemon starts.
        self.relative_paths = relative_paths
        self.cwd = cwd
        self.providers = {
            n: RunningProvider(p, root, boot=boot_runners, command=runner_command, env=runner_env)
            for n, p in providers.items()
        }
        self.github = dict(github or {})  # more github.* keys of rungar.yaml
        self.daemon_env = dict(daemon_env or {})  # added to the daemon's environment
        self.control_verify = control_verify  # the emulator's certificate, when it serves HTTPS
        self.servers: list[ProviderServer] = []
        self.metrics_port = free_port() if metrics else 0
        self.webhook_port = free_port() if webhook_secret else 0
        self.webhook_secret = webhook_secret
        self.dashboard_port = free_port() if dashboard else 0  # the fleet page's
        self.open_files = open_files  # the daemon's RLIMIT_NOFILE; 0 = inherited
        self.github_timing = dict(github_timing or {})  # rungar.yaml's github.timing
        self.emulator = GitHubEmulator(
            EmulatorOptions(
                **dict(emulator_options or {}),
                long_poll_seconds=1.0,
                session_idle_ttl=600.0,
                assignment_timeout=600.0,
                clock_factor=clock_factor,
                webhook_url=(
                    f"http://127.0.0.1:{self.webhook_port}/webhook" if webhook_secret else ""
                ),
                webhook_secret=webhook_secret,
            )
        )
        # A GitHub App's private key (PEM): the daemon authenticates as the App's installation,
        # whose public key the emulator is given in ``emulator_options={"apps": ...}``.
        self.app_private_key = app_private_key
        # Several Apps (github.apps): client id -> (installation id, private key PEM).
        self.apps = dict(apps or {})
        self.log_level = log_level
        self.daemon: subprocess.Popen[bytes] | None = None
        self.socket = str(root / "rungar.sock")

    async def start(self, scale_sets: dict[str, Any]) -> None:
        if not self.emulator.port:  # a test may start it first, to put a proxy in front of it
            self.emulator.start_in_thread()
        for name, provider in self.providers.items():
            self.servers.append(await serve(provider, f"unix://{self.root}/{name}.sock"))
        for entry in scale_sets["providers"]:
            if "command" in entry:
                continue  # a plugin the daemon starts itself
            address = f"unix:{entry['name']}.sock" if self.relative_paths else None
            entry.setdefault("address", address or f"unix://{self.root}/{entry['name']}.sock")
        if self.dashboard_port:
            scale_sets.setdefault("dashboard", {"listen": f"127.0.0.1:{self.dashboard_port}"})
        (self.root / "scale_sets.yaml").write_text(yaml.safe_dump(scale_sets, sort_keys=False))
        (self.root / "token").write_text("emulator-pat")
        (self.root / "token").chmod(0o600)
        settings: dict[str, Any] = {
            "github": {
                "url": self.emulator.org_url,
                "token_path": str(self.root / "token"),
                "long_poll_timeout": 3,
                **({"timing": self.github_timing} if self.github_timing else {}),
                **self.github,
            },
            "scale_sets": str(self.root / "scale_sets.yaml"),
            "installation": "gh-e2e",
            "state_dir": str(self.root / "state"),
            "socket": self.socket,
            "log_format": "json",
        }
        if self.app_private_key:
            key = self.root / "app-key.pem"
            key.write_text(self.app_private_key)
            key.chmod(0o600)
            del settings["github"]["token_path"]
            app_id = next(iter(self.emulator.options.apps))
            settings["github"].update(
                app_client_id=app_id, app_installation_id=1, app_private_key_path=str(key)
            )
        if self.apps:
            del settings["github"]["token_path"]
            listed = []
            for n, (client_id, (installation, private)) in enumerate(self.apps.items()):
                key = self.root / f"app-key-{n}.pem"
                key.write_text(private)
                key.chmod(0o600)
                listed.append(
                    {
                        "client_id": client_id,
                        "installation_id": installation,
                        "private_key_path": str(key),
                    }
                )
            settings["github"]["apps"] = listed
        if self.log_level:
            settings["log_level"] = self.log_level
        if self.relative_paths:
            settings["github"]["token_path"] = "token"
            settings.update(scale_sets="scale_sets.yaml", state_dir="state", socket="rungar.sock")
        if self.metrics_port:
            settings["metrics"] = {"listen": f"127.0.0.1:{self.metrics_port}"}
        if self.webhook_secret:
            secret = self.root / "webhook-secret"
            secret.write_text(self.webhook_secret)
            secret.chmod(0o600)
            settings["webhook"] = {
                "listen": f"127.0.0.1:{self.webhook_port}",
                "secret_path": str(secret),
            }
        (self.root / "rungar.yaml").write_text(yaml.safe_dump(settings))
        await self.start_daemon()

    async def start_daemon(self) -> None:
        log = (self.root / "daemon.log").open("ab")
        self.daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rungar.cli.main",
                "serve",
                "-c",
                str(self.root / "rungar.yaml"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.cwd,
            env={**os.environ, **self.daemon_env},
            preexec_fn=self._limit_open_files if self.open_files else None,
        )
        await self.wait_for(lambda s: s is not None, "the daemon to answer", WAIT)
        # The admin socket answers first; the other servers start right after it.
        for port in (self.metrics_port, self.webhook_port, self.dashboard_port):
            if port:
                await self.wait_for_port(port, WAIT)

    def _limit_open_files(self) -> None:
        """In the daemon's process before it runs: what systemd gives a unit by default."""
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

    async def wait_for_port(self, port: int, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                if loop.time() > end:
                    raise AssertionError(f"nothing listens on 127.0.0.1:{port}") from None
                await asyncio.sleep(POLL_SECONDS)
                continue
            writer.close()
            await writer.wait_closed()
            return

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}/"

    def kill_daemon(self) -> None:
        assert self.daemon is not None
        os.kill(self.daemon.pid, signal.SIGKILL)
        self.daemon.wait()

    async def stop(self) -> None:
        """Stop the daemon, then the providers' servers, their runners and the emulator. The
        servers stop on this event loop whatever happened before: a gRPC server left to be
        collected later is torn down on no loop, and can hang the test process that does."""
        try:
            if self.daemon is not None and self.daemon.poll() is None:
                self.daemon.terminate()
                try:
                    await asyncio.to_thread(self.daemon.wait, 30)
                except subprocess.TimeoutExpired:
                    self.daemon.kill()  # not left behind; the test still fails on it
                    await asyncio.to_thread(self.daemon.wait)
                    raise
        finally:
            try:
                for server in self.servers:
                    await server.stop()
            finally:
                self.servers.clear()
                for provider in self.providers.values():
                    provider.stop_all()
                self.emulator.stop_thread()

    async def rungar(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "rungar.cli.main", *args, "--socket", self.socket]
        return await asyncio.to_thread(
            subprocess.run, command, capture_output=True, text=True, timeout=60
        )

    async def status(self) -> dict[str, Any] | None:
        """What ``rungar status --json`` prints, asked in-process; None when nobody answers."""
        try:
            async with AdminClient(self.socket) as client:
                return await client.status()
        except DaemonUnreachable:
            return None

    async def reconcile(self) -> list[str]:
        """One reconcile pass now, as ``rungar reconcile`` asks for it; returns when it ran."""
        async with AdminClient(self.socket) as client:
            return await client.reconcile([])

    async def wait_for(self, check: Any, what: str, seconds: float) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        last: dict[str, Any] | None = None
        while loop.time() < end:
            last = await self.status()
            if check(last):
                assert last is not None
                return last
            await asyncio.sleep(POLL_SECONDS)
        raise AssertionError(f"timed out waiting for {what}; last status: {last}")

    async def queue_job(self, **spec: Any) -> dict[str, Any]:
        """Queue a job through the emulator's control API (``/_fake/jobs``): unlike a call on
        its state from this thread, it runs on the emulator's loop, which its webhook sender
        must send from."""
        control = self.emulator.url_for("127.0.0.1")  # base_url's host may be the proxy's alone
        async with httpx.AsyncClient(timeout=WAIT, verify=self.control_verify) as client:
            answer = await client.post(f"{control}/_fake/jobs", json=spec)
        answer.raise_for_status()
        job: dict[str, Any] = answer.json()
        return job

    async def scrape(self) -> dict[str, float]:
        """The daemon's metrics over HTTP, by sample (see :func:`sample_key`)."""
        async with httpx.AsyncClient(timeout=WAIT) as client:
            answer = await client.get(f"http://127.0.0.1:{self.metrics_port}/metrics")
        answer.raise_for_status()
        return {
            sample_key(s.name, s.labels): s.value
            for family in text_string_to_metric_families(answer.text)
            for s in family.samples
        }

    async def wait_for_metrics(
        self, check: Callable[[dict[str, float]], bool], what: str, seconds: float
    ) -> dict[str, float]:
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        last: dict[str, float] = {}
        while loop.time() < end:
            last = await self.scrape()
            if check(last):
                return last
            await asyncio.sleep(POLL_SECONDS)
        shown = {
            k: v for k, v in last.items() if not k.split("{")[0].endswith(("_bucket", "_created"))
        }
        raise AssertionError(f"timed out waiting for {what}; last metrics: {shown}")

    def log_lines(self) -> list[dict[str, Any]]:
        """The daemon's JSON log lines (others, such as a traceback's, are skipped)."""
        lines = []
        for line in (self.root / "daemon.log").read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
        return lines

    def machines(self) -> list[str]:
        return sorted(m.name for p in self.providers.values() for m in p.fake.machines)
