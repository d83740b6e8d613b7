"""The demo's loopback world: a GitHub emulator, runnerd hosts, AWS on moto, and the daemon.

Everything listens on 127.0.0.1 or a unix socket in a private temporary folder; nothing needs an
account or a cloud. The hosts are real ``runnerd serve`` processes with the process runtime, so
the runners they admit are real ``rungar fake-runner`` processes that allocate the memory their
jobs ask for. Machines that AWS (moto) "launches" are booted by :mod:`rungar.demo.cloudboot`,
which runs each one's user data the way a cloud image would: a fake runner with its JIT config.

The same world runs the numbered ``examples/``: an example names its hosts, and its
scale_sets.yaml decides which clouds start. A cloud provider's keys (region, subnets, project,
zones) are in scale_sets.yaml, which Rungar hands over to the plugin it starts; the plugin's own
file ``${DIR}/<name>.yaml`` holds only what scale_sets.yaml has no key for, the loopback
endpoint: moto's server for every provider of type ``aws`` (``${SUBNET_1}`` and
``${SUBNET_2}`` are the subnets made there, as ``${AMI}`` is its image), and for every provider
of type ``gcp`` a local GCE fake (:mod:`rungar.testing.gce_fake`) holding its ``project``, where
the zones in ``gcp_out_of_stock`` answer every insert with ``ZONE_RESOURCE_POOL_EXHAUSTED``.
With ``aws_spot_capacity`` set, the AWS providers launch through
:class:`rungar.demo.spotmarket.SpotMarket`, which refuses Spot launches past that many.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any, ClassVar

import yaml

from rungar.daemon.control import Control
from rungar.daemon.daemon import Daemon
from rungar.daemon.settings import DaemonSettings, load_settings
from rungar.demo.files import examples_root
from rungar.engine.report.events import Event
from rungar.stopping import terminate_group
from rungar.testing.fake_provider import with_fake
from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator

HERE = examples_root() / "demo"
INSTALLATION = "rungar-demo"
PAT = "emulator-pat"
MOTO_REGION = "us-east-1"
# Stopping stays within the 10 seconds every command promises (docs/commands.md, "Stopping").
DAEMON_STOP_GRACE = 4.0
HOST_STOP_GRACE = 4.0
# What an AWS account would already have: placeholders until moto's server has made them.
CLOUD_PLACEHOLDERS = {"AMI": "ami-unused", "SUBNET_1": "subnet-unused", "SUBNET_2": "subnet-unused"}


class StackStopped(Exception):
    """Asked to stop (``stop_event`` set) before the world was up."""


@dataclass(frozen=True, slots=True)
class Host:
    name: str
    memory_max: str


DEFAULT_HOSTS = (Host("host1", "1000M"), Host("host2", "800M"), Host("host3", "600M"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Stack:
    """A running demo world; ``async with Stack(...) as stack`` brings it up and down."""

    example: Path = HERE
    hosts: tuple[Host, ...] = DEFAULT_HOSTS
    clock_factor: float = 20.0
    with_aws: bool = True
    gcp_out_of_stock: tuple[str, ...] = ()  # zones of the GCE fake that refuse every insert
    aws_spot_capacity: int | None = None  # Spot instances moto's market holds; None = no limit
    keep_dir: bool = False
    # Each host's past before it starts: called with its index and its runnerd.toml, it writes
    # the host's job history (a host that has run before); None: every host starts new.
    past: Callable[[int, Path], None] | None = None
    # Serve the fleet page (dashboard.listen) and each host's runnerd dashboard on loopback.
    dashboards: bool = False
    dashboard_urls: list[tuple[str, str]] = field(default_factory=list)  # (what, address)
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="rungar-demo-")))
    emulator: GitHubEmulator | None = None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    daemon_task: asyncio.Task[None] | None = None
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    settings: DaemonSettings | None = None
    # The daemon's control surface once it serves (it runs in this process), for the live view
    control: Control | None = None
    last_events: list[Event] = field(default_factory=list)  # the daemon's, as it stopped
    moto: Any = None
    booter: Any = None
    ami: str = ""
    gce: Any = None  # the GCE fake, when a provider is of type gcp
    gce_booter: Any = None
    spot_market: Any = None
    alive: ClassVar[list[Stack]] = []  # worlds up in this process, for a second Ctrl-C

    @property
    def socket(self) -> str:
        return str(self.dir / "rungar.sock")

    async def __aenter__(self) -> Stack:
        Stack.alive.append(self)
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        bin_dir = Path(sys.executable).parent
        self.emulator = GitHubEmulator(
            EmulatorOptions(
                long_poll_seconds=1.0,
                session_idle_ttl=600.0,
                assignment_timeout=600.0,
                clock_factor=self.clock_factor,
            )
        )
        self.emulator.start_in_thread()
        for index, host in enumerate(self.hosts):
            self._start_host(index, host)
        template = Template((self.example / "scale_sets.yaml").read_text())
        values = {"DIR": str(self.dir), "BIN": str(bin_dir), **CLOUD_PLACEHOLDERS}
        clouds = _cloud_providers(template.substitute(values))
        aws = [p for p in clouds if p["type"] == "aws"]
        if aws and self.with_aws:
            values.update(self._start_moto(aws))
        gcp = [p for p in clouds if p["type"] == "gcp"]
        if gcp:
            self._start_gce(gcp)
        scale_sets = template.substitute(values)
        if not self.with_aws:
            scale_sets = _without_aws(scale_sets)
        if self.dashboards:
            port = free_port()
            scale_sets += f"\ndashboard:\n  listen: 127.0.0.1:{port}\n"
            self.dashboard_urls.insert(0, ("fleet page", f"http://127.0.0.1:{port}/"))
        (self.dir / "scale_sets.yaml").write_text(scale_sets)
        (self.dir / "token").write_text(PAT)
        (self.dir / "token").chmod(0o600)
        settings = {
            "github": {
                "url": self.emulator.org_url,
                "token_path": str(self.dir / "token"),
                "long_poll_timeout": 5,
            },
            "scale_sets": str(self.dir / "scale_sets.yaml"),
            "installation": INSTALLATION,
            "state_dir": str(self.dir / "rungar"),
            "socket": self.socket,
            "log_level": "warning",
        }
        (self.dir / "rungar.yaml").write_text(yaml.safe_dump(settings))
        (self.dir / "rungar").mkdir(mode=0o700, exist_ok=True)  # as rungar doctor wants it
        await self._wait_for_hosts()
        await self._login_links()
        self.settings = load_settings(str(self.dir / "rungar.yaml"))
        self.daemon_task = asyncio.create_task(
            Daemon(
                self.settings,
                kinds=with_fake(),
                on_control=self._serving,
                settings_path=str(self.dir / "rungar.yaml"),
            ).run(self.stop_event)
        )
        await self._wait_for(lambda: Path(self.socket).exists(), "the rungar daemon", 30)

    def _serving(self, control: Control | None) -> None:
        if control is None and self.control is not None:  # the daemon is stopping
            self.last_events = self.control.ctx.events.recent()
        self.control = control

    def _start_host(self, index: int, host: Host) -> None:
        host_dir = self.dir / host.name
        host_dir.mkdir(parents=True)
        values = {
            "NAME": host.name,
            "RUN": self.dir.name,
            "MEMORY_MAX": host.memory_max,
            "DIR": str(self.dir),
            "PYTHON": sys.executable,
        }
        toml = Template((self.example / "runnerd.toml").read_text()).substitute(values)
        if self.dashboards and runnerd_has_dashboard():
            port = free_port()
            toml = with_dashboard_listen(toml, f"127.0.0.1:{port}")
            # The address until runnerd has made its login token; then the link with it.
            self.dashboard_urls.append((f"runnerd {host.name}", f"http://127.0.0.1:{port}/"))
        (host_dir / "runnerd.toml").write_text(toml)
        if self.past is not None:
            self.past(index, host_dir / "runnerd.toml")
        log = (host_dir / "runnerd.log").open("wb")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.processes.append(
            subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
                [
                    sys.executable,
                    "-m",
                    "runnerd.cli",
                    "serve",
                    "-c",
                    str(host_dir / "runnerd.toml"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        )

    async def _wait_for_hosts(self) -> None:
        for host in self.hosts:
            sock = self.dir / host.name / "provider.sock"
            await self._wait_for(sock.exists, f"runnerd on {host.name}", 30)

    async def _login_links(self) -> None:
        """Each host's dashboard as the link that opens it: on loopback with runnerd's token
        (``runnerctl -c host/runnerd.toml dashboard`` prints the same)."""
        from runnerd.config import load_config
        from runnerd.dashboard.login import login_link, token_path

        for i, (what, _) in enumerate(self.dashboard_urls):
            if not what.startswith("runnerd "):
                continue
            host = load_config(str(self.dir / what.split()[1] / "runnerd.toml")).host
            await self._wait_for(token_path(host).exists, f"{what}'s dashboard token", 30)
            self.dashboard_urls[i] = (what, login_link(host))

    async def _wait_for(self, ready: Any, what: str, seconds: float) -> None:
        for _ in range(int(seconds * 10)):
            if ready():
                return
            if self.stop_event.is_set():
                raise StackStopped(f"asked to stop while waiting for {what}")
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a demo process exited early while waiting for {what}")
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{what} did not start within {seconds:.0f}s (logs in {self.dir})")

    def _start_moto(self, providers: list[dict[str, Any]]) -> dict[str, str]:
        """Start moto's server with a region ready to launch in; the placeholders it fills."""
        from moto.server import ThreadedMotoServer

        from rungar.demo.cloudboot import CloudBooter, prepare_region

        port = free_port()
        self.moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self.moto.start()
        endpoint = f"http://127.0.0.1:{port}"
        for key, value in {
            "AWS_ACCESS_KEY_ID": "demo",
            "AWS_SECRET_ACCESS_KEY": "demo",
            "AWS_DEFAULT_REGION": MOTO_REGION,
        }.items():
            os.environ.setdefault(key, value)
        subnets, self.ami = prepare_region(endpoint)
        self.booter = CloudBooter(endpoint, self.dir / "aws-machines")
        self.booter.start()
        if self.aws_spot_capacity is not None:
            from rungar.demo.spotmarket import SpotMarket

            self.spot_market = SpotMarket(endpoint, self.aws_spot_capacity).start()
            endpoint = self.spot_market.endpoint  # the providers launch through the market
        for provider in providers:
            if provider.get("region") != MOTO_REGION:  # where the subnets and booter are
                raise RuntimeError(
                    f"provider {provider['name']}: the demo's AWS is region {MOTO_REGION}, "
                    f"not {provider.get('region')}"
                )
            own = {"endpoint_url": endpoint}  # the rest is handed over from scale_sets.yaml
            (self.dir / f"{provider['name']}.yaml").write_text(yaml.safe_dump(own))
        return {"AMI": self.ami, "SUBNET_1": subnets[0], "SUBNET_2": subnets[1]}

    def _start_gce(self, providers: list[dict[str, Any]]) -> None:
        from rungar.demo.cloudboot import GceBooter
        from rungar.testing.gce_fake import GceFake, GceFault

        projects = {str(p["project"]) for p in providers}
        if len(projects) != 1:
            raise RuntimeError(f"the demo's GCE fake holds one project, not {sorted(projects)}")
        self.gce = GceFake(project=projects.pop()).start()
        for zone in self.gcp_out_of_stock:
            self.gce.inject(
                GceFault(
                    "ZONE_RESOURCE_POOL_EXHAUSTED",
                    503,
                    message=f"The zone '{zone}' does not have enough resources available to "
                    "fulfill the request. Try a different zone, or try again later.",
                    zone=zone,
                    times=1_000_000,  # out of stock for as long as the example runs
                )
            )
        for provider in providers:
            own = {"endpoint": self.gce.endpoint, "anonymous": True}  # the rest is handed over
            (self.dir / f"{provider['name']}.yaml").write_text(yaml.safe_dump(own))
        self.gce_booter = GceBooter(self.gce.endpoint, self.gce.project, self.dir / "gcp-machines")
        self.gce_booter.start()

    @classmethod
    def terminate_all_now(cls) -> None:
        """For a second Ctrl-C: SIGTERM to every running world's hosts (which stop their
        runners and remove their cgroups by themselves), its plugins and its cloud machines;
        a detached sweeper then removes whatever is left once they ended or were killed, and
        the folders (a kept one stays)."""
        from rungar.demo.sweep import sweep_later
        from rungar.rpc.plugin import PluginProcess

        plugins = list(PluginProcess.running)
        for stack in list(cls.alive):
            started = [*stack.processes, *stack._booted()]
            for process in started:
                if process.poll() is None:
                    terminate_group(process.pid)
            for plugin in plugins:
                terminate_group(plugin.pid)
            folders = [str(stack.dir)] if not stack.keep_dir else []
            folders += [plugin.folder for plugin in plugins if plugin.folder]
            pids = [p.pid for p in started] + [p.pid for p in plugins if p.pid is not None]
            sweep_later(pids, folders, stack.dir.name)

    def _booted(self) -> list[subprocess.Popen[bytes]]:
        """The cloud machines' runners the booters started."""
        found: list[subprocess.Popen[bytes]] = []
        for booter in (self.booter, self.gce_booter):
            if booter is not None:
                found.extend(booter.booted.values())
        return found

    async def stop(self) -> None:
        self.stop_event.set()
        if self.daemon_task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self.daemon_task, DAEMON_STOP_GRACE)
        for booter in (self.booter, self.gce_booter):
            if booter is not None:
                booter.stop()
        for process in self.processes:
            if process.poll() is None:
                process.terminate()  # runnerd stops its runners and removes their cgroups
        deadline = time.monotonic() + HOST_STOP_GRACE
        for process in self.processes:
            try:
                await asyncio.to_thread(process.wait, max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
        if self.spot_market is not None:
            self.spot_market.stop()
        if self.moto is not None:
            with contextlib.suppress(Exception):
                self.moto.stop()
        if self.gce is not None:
            self.gce.stop()
        if self.emulator is not None:
            self.emulator.stop_thread()
        await self._sweep()
        if self in Stack.alive:
            Stack.alive.remove(self)

    async def _sweep(self) -> None:
        """Whatever outlived its grace (a runner of a killed host, a plugin the daemon did not
        get to stop): killed; the demo's cgroups and folders removed (a kept folder stays)."""
        from rungar.demo.sweep import sweep
        from rungar.rpc.plugin import PluginProcess

        left = [plugin for plugin in PluginProcess.running if plugin.folder]
        for plugin in left:
            terminate_group(plugin.pid)
        folders = [plugin.folder for plugin in left]
        if self.keep_dir:
            await asyncio.to_thread(sweep, [str(self.dir)], self.dir.name, remove=False)
        else:
            folders.append(str(self.dir))
        await asyncio.to_thread(sweep, folders, self.dir.name)


def with_dashboard_listen(toml: str, listen: str) -> str:
    """A host's runnerd.toml with ``[host] dashboard_listen`` set to ``listen``."""
    if "\n[host]\n" not in "\n" + toml:
        raise ValueError("the host's runnerd.toml has no [host] table")
    return ("\n" + toml).replace("\n[host]\n", f'\n[host]\ndashboard_listen = "{listen}"\n', 1)[1:]


def runnerd_has_dashboard() -> bool:
    """Whether this runnerd serves a dashboard (``[host] dashboard_listen``): a runnerd
    without it refuses the key, so the demo sets it only where it is known."""
    import dataclasses

    from runnerd.config import HostConfig

    return any(f.name == "dashboard_listen" for f in dataclasses.fields(HostConfig))


def _cloud_providers(text: str) -> list[dict[str, Any]]:
    """The providers of type aws or gcp in a rendered scale_sets.yaml."""
    data = yaml.safe_load(text)
    return [p for p in data.get("providers", []) if p.get("type") in ("aws", "gcp")]


def _without_aws(text: str) -> str:
    """The example without its AWS providers (for runs that skip moto)."""
    data = yaml.safe_load(text)
    aws = {p["name"] for p in data["providers"] if p.get("type") == "aws"}
    data["providers"] = [p for p in data["providers"] if p["name"] not in aws]
    for scale_set in data["scale_sets"]:
        scale_set["providers"] = [
            p for p in scale_set["providers"] if (p if isinstance(p, str) else p["name"]) not in aws
        ]
    for key in [k for k in data if k.startswith("x-")]:
        data.pop(key)
    return yaml.safe_dump(data, sort_keys=False)
