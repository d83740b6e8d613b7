"""The ``docker`` runtime: one container per runner, over the Docker Engine API's unix socket.

docs/admission.md, "What a job's memory is": a container per job in the
slice, with the profile's limits and runnerd's labels). Each container gets the profile's
memory as Memory and MemorySwap (no swap past the cap), its cpus as NanoCpus, the slice as its
CgroupParent, the JIT config in its environment, and labels so a restarted runnerd adopts it.
``[host] isolation`` picks the OCI runtime its own Docker Engine runs under: ``sysbox``
(sysbox-runc, unprivileged) or ``unsafe-dind`` (runc, privileged); the container is labelled
``runnerd.isolation`` with it, and every isolation keeps the same slice, limits and labels.

Memory is read from the container's cgroup v2 directory when the host exposes it (job memory,
memory.events.local ``oom`` for "met its cap", ``sock_throttled``), else from the Engine's
stats (usage less the file LRU lists, and State.OOMKilled).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from rungar.model.output import tail_lines
from runnerd import readers
from runnerd.runtime.base import (
    MANAGED_LABEL,
    NAME_LABEL,
    Adopted,
    RunnerSpec,
    SliceUsage,
    Usage,
)

API = "/v1.43"
ISOLATION_LABEL = "runnerd.isolation"
# [host] isolation → (the Engine's runtime name, privileged)
ISOLATIONS = {"sysbox": ("sysbox-runc", False), "unsafe-dind": ("runc", True)}


class DockerRuntime:
    kind = "docker"

    def __init__(
        self,
        socket: str = "/var/run/docker.sock",
        slice_name: str = "runnerd.slice",
        cgroup_root: str = "/sys/fs/cgroup",
        transport: httpx.AsyncBaseTransport | None = None,
        stop_timeout: int = 10,
        isolation: str | None = None,
    ) -> None:
        if isolation is not None and isolation not in ISOLATIONS:
            raise ValueError(f"unknown isolation {isolation!r}")
        self.isolation = isolation
        self.socket = socket
        self.slice = slice_name
        self.cgroup_root = cgroup_root
        self.stop_timeout = stop_timeout
        self._client = httpx.AsyncClient(
            transport=transport or httpx.AsyncHTTPTransport(uds=socket),
            base_url="http://docker" + API,
            timeout=30.0,
        )
        self._cpu_seconds: dict[str, float] = {}

    def describe(self) -> str:
        how = f", isolation {self.isolation}" if self.isolation else ""
        return f"docker runtime: Engine API at {self.socket}, containers in {self.slice}{how}"

    async def close(self) -> None:
        await self._client.aclose()

    async def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return await self._client.request(method, path, **kw)
        except httpx.HTTPError as e:
            raise RuntimeError(f"the Docker Engine at {self.socket} did not answer: {e}") from e

    async def start(self, spec: RunnerSpec) -> str:
        body: dict[str, Any] = {
            "Image": spec.image,
            "Env": [f"{k}={v}" for k, v in spec.env.items()],
            "Labels": dict(spec.labels),
            "HostConfig": {
                "Memory": spec.memory,
                "MemorySwap": spec.memory,
                "NanoCpus": int(spec.cpus * 1e9),
                "CgroupParent": self.slice,
            },
        }
        if self.isolation is not None:
            runtime, privileged = ISOLATIONS[self.isolation]
            body["HostConfig"]["Runtime"] = runtime
            body["HostConfig"]["Privileged"] = privileged
            body["Labels"][ISOLATION_LABEL] = self.isolation
        if spec.command:
            body["Cmd"] = list(spec.command)
        created = await self._call(
            "POST", "/containers/create", params={"name": spec.name}, json=body
        )
        if created.status_code == 404:  # no such image: pull it once, then create again
            pulled = await self._call("POST", "/images/create", params={"fromImage": spec.image})
            if pulled.status_code != 200:
                raise RuntimeError(f"cannot pull {spec.image}: {_message(pulled)}")
            created = await self._call(
                "POST", "/containers/create", params={"name": spec.name}, json=body
            )
        if created.status_code != 201:
            raise RuntimeError(f"cannot create the container: {_message(created)}")
        ident = str(created.json()["Id"])
        started = await self._call("POST", f"/containers/{ident}/start")
        if started.status_code not in (204, 304):
            await self._call("DELETE", f"/containers/{ident}", params={"force": "true"})
            raise RuntimeError(f"cannot start the container: {_message(started)}")
        return ident

    async def sample(self, handle: str) -> Usage | None:
        inspected = await self._call("GET", f"/containers/{handle}/json")
        if inspected.status_code == 404:
            return None
        state = inspected.json().get("State", {})
        running = bool(state.get("Running"))
        cgroup = readers.read_cgroup(self._cgroup_dir(handle)) if running else None
        if cgroup is not None:
            memory, held = cgroup.job_memory, cgroup.held
            self._cpu_seconds[handle] = cgroup.cpu_seconds
            met_cap = cgroup.events_local.get("oom", 0) > 0
            killed = cgroup.events.get("oom_kill", 0) > 0 and not met_cap
            throttled = cgroup.events.get("sock_throttled")
        else:
            memory, held, met_cap, killed, throttled = 0, 0, False, False, None
            if running:
                stats = await self._call(
                    "GET", f"/containers/{handle}/stats", params={"stream": "false"}
                )
                if stats.status_code == 200:
                    memory, cpu = _from_stats(stats.json())
                    held = memory
                    self._cpu_seconds[handle] = cpu
            met_cap = bool(state.get("OOMKilled"))
        return Usage(
            memory=memory,
            held=held,
            cpu_seconds=self._cpu_seconds.get(handle, 0.0),
            met_cap=met_cap,
            killed_for_memory=killed,
            sock_throttled=throttled,
            exited=not running and state.get("Status") in ("exited", "dead"),
            exit_code=None if running else int(state.get("ExitCode", 0)),
        )

    def _cgroup_dir(self, handle: str) -> Path:
        return Path(self.cgroup_root) / readers.slice_dir(self.slice) / f"docker-{handle}.scope"

    async def last_output(self, handle: str, lines: int) -> list[str]:
        """``docker logs --tail``: the engine's multiplexed stream, its frames joined."""
        if lines <= 0:
            return []
        answer = await self._call(
            "GET",
            f"/containers/{handle}/logs",
            params={"stdout": "1", "stderr": "1", "tail": str(lines)},
        )
        if answer.status_code != 200:
            return []
        return tail_lines(demultiplex(answer.content), lines)

    async def stop(self, handle: str) -> None:
        await self._call("POST", f"/containers/{handle}/stop", params={"t": str(self.stop_timeout)})
        removed = await self._call("DELETE", f"/containers/{handle}", params={"force": "true"})
        if removed.status_code not in (204, 404):
            raise RuntimeError(f"cannot remove container {handle[:12]}: {_message(removed)}")
        self._cpu_seconds.pop(handle, None)

    async def slice_usage(self) -> SliceUsage | None:
        sample = readers.read_cgroup(Path(self.cgroup_root) / readers.slice_dir(self.slice))
        return SliceUsage(sample.slice_memory, sample.held) if sample else None

    async def adopt(self) -> list[Adopted]:
        filters = json.dumps({"label": [f"{MANAGED_LABEL}=true"]})
        listed = await self._call(
            "GET", "/containers/json", params={"all": "true", "filters": filters}
        )
        if listed.status_code != 200:
            raise RuntimeError(f"cannot list containers: {_message(listed)}")
        found = []
        for item in listed.json():
            if item.get("State") != "running":
                continue
            inspected = await self._call("GET", f"/containers/{item['Id']}/json")
            if inspected.status_code != 200:
                continue
            detail = inspected.json()
            labels = dict(detail.get("Config", {}).get("Labels") or {})
            host = detail.get("HostConfig", {})
            found.append(
                Adopted(
                    name=labels.get(NAME_LABEL, str(item["Id"])[:12]),
                    handle=str(item["Id"]),
                    labels=labels,
                    started_at=_epoch(detail.get("State", {}).get("StartedAt", "")),
                    cpus=int(host.get("NanoCpus", 0)) / 1e9,
                    memory=int(host.get("Memory", 0)),
                )
            )
        return found


def _from_stats(stats: dict[str, Any]) -> tuple[int, float]:
    memory = stats.get("memory_stats", {})
    detail = memory.get("stats", {})
    usage = int(memory.get("usage", 0))
    files = int(detail.get("active_file", 0)) + int(detail.get("inactive_file", 0))
    cpu_ns = int(stats.get("cpu_stats", {}).get("cpu_usage", {}).get("total_usage", 0))
    return max(0, usage - files), cpu_ns / 1e9


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", response.status_code))
    except ValueError:
        return f"HTTP {response.status_code}"


def _epoch(text: str) -> float:
    """Docker's RFC 3339 time with nanoseconds, in UTC, as epoch seconds."""
    stem = text.rstrip("Z").split("+")[0]
    whole, _, fraction = stem.partition(".")
    try:
        moment = datetime.fromisoformat(whole + "+00:00")
    except ValueError:
        return 0.0
    return moment.timestamp() + (float("0." + fraction) if fraction.isdigit() else 0.0)


def demultiplex(data: bytes) -> bytes:
    """A container's log stream without its 8-byte frame headers (stream, 0, 0, 0, size); a
    stream without them (a TTY container) is returned as it is."""
    if len(data) < 8 or data[0] not in (0, 1, 2) or data[1:4] != b"\0\0\0":
        return data
    out, at = bytearray(), 0
    while at + 8 <= len(data):
        size = int.from_bytes(data[at + 4 : at + 8], "big")
        out += data[at + 8 : at + 8 + size]
        at += 8 + size
    return bytes(out)
