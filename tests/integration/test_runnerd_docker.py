"""The docker runtime against a small local fake of the Docker Engine API, on a unix socket.

A container engine is not assumed on the machine running the tests, so the fake answers the
endpoints runnerd calls, as the Engine documents them, and keeps what it was asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from runnerd.config import parse_config
from runnerd.daemon import open_daemon
from runnerd.runtime.base import MANAGED_LABEL, NAME_LABEL, RunnerSpec
from runnerd.runtime.docker import DockerRuntime
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rungar.clock import SystemClock
from rungar.model.machine import Created, CreateRequest, JobHint
from rungar.model.runner_block import RunnerBlock

M = 1024**2


@dataclass
class FakeEngine:
    containers: dict[str, dict[str, Any]] = field(default_factory=dict)
    images: set[str] = field(default_factory=lambda: {"runner:node"})
    pulls: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        async def create(request: Request) -> Response:
            body = await request.json()
            if body["Image"] not in self.images:
                return JSONResponse({"message": f"No such image: {body['Image']}"}, 404)
            ident = uuid.uuid4().hex * 2
            self.containers[ident] = {
                "Id": ident,
                "Name": request.query_params["name"],
                "Config": {
                    "Labels": body["Labels"],
                    "Env": body["Env"],
                    "Cmd": body.get("Cmd"),
                    "Image": body["Image"],
                },
                "HostConfig": body["HostConfig"],
                "State": {"Status": "created", "Running": False, "ExitCode": 0, "OOMKilled": False},
                "usage": 300 * M,
                "files": 100 * M,
            }
            return JSONResponse({"Id": ident, "Warnings": []}, 201)

        async def pull(request: Request) -> Response:
            self.pulls.append(request.query_params["fromImage"])
            self.images.add(request.query_params["fromImage"])
            return Response("{}", 200)

        def found(request: Request) -> dict[str, Any] | None:
            return self.containers.get(request.path_params["ident"])

        async def start(request: Request) -> Response:
            c = found(request)
            if c is None:
                return JSONResponse({"message": "No such container"}, 404)
            c["State"].update(
                Status="running", Running=True, StartedAt="2026-11-30T10:00:00.123456789Z"
            )
            return Response(status_code=204)

        async def inspect(request: Request) -> Response:
            c = found(request)
            if c is None:
                return JSONResponse({"message": "No such container"}, 404)
            return JSONResponse({k: v for k, v in c.items() if k not in ("usage", "files")})

        async def stats(request: Request) -> Response:
            c = found(request)
            if c is None:
                return JSONResponse({"message": "No such container"}, 404)
            return JSONResponse(
                {
                    "memory_stats": {
                        "usage": c["usage"],
                        "stats": {"active_file": c["files"] // 2, "inactive_file": c["files"] // 2},
                    },
                    "cpu_stats": {"cpu_usage": {"total_usage": 3_000_000_000}},
                }
            )

        async def stop(request: Request) -> Response:
            c = found(request)
            if c is None:
                return JSONResponse({"message": "No such container"}, 404)
            c["State"].update(Status="exited", Running=False, ExitCode=143)
            return Response(status_code=204)

        async def remove(request: Request) -> Response:
            if self.containers.pop(request.path_params["ident"], None) is None:
                return JSONResponse({"message": "No such container"}, 404)
            return Response(status_code=204)

        async def listing(request: Request) -> Response:
            wanted = json.loads(request.query_params.get("filters", "{}")).get("label", [])
            out = []
            for c in self.containers.values():
                labels = c["Config"]["Labels"]
                if all(labels.get(w.split("=")[0]) == w.split("=", 1)[1] for w in wanted):
                    out.append({"Id": c["Id"], "Labels": labels, "State": c["State"]["Status"]})
            return JSONResponse(out)

        base = "/v1.43"
        return Starlette(
            routes=[
                Route(f"{base}/containers/create", create, methods=["POST"]),
                Route(f"{base}/images/create", pull, methods=["POST"]),
                Route(f"{base}/containers/json", listing, methods=["GET"]),
                Route(f"{base}/containers/{{ident}}/start", start, methods=["POST"]),
                Route(f"{base}/containers/{{ident}}/json", inspect, methods=["GET"]),
                Route(f"{base}/containers/{{ident}}/stats", stats, methods=["GET"]),
                Route(f"{base}/containers/{{ident}}/stop", stop, methods=["POST"]),
                Route(f"{base}/containers/{{ident}}", remove, methods=["DELETE"]),
            ]
        )


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[tuple[FakeEngine, str]]:
    fake = FakeEngine()
    socket = str(tmp_path / "docker.sock")
    server = uvicorn.Server(
        uvicorn.Config(fake.app(), uds=socket, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server._serve())  # no signal capture inside a test
    while not server.started:
        await asyncio.sleep(0.01)
    yield fake, socket
    server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await task


def spec(name: str = "r1", image: str = "runner:node") -> RunnerSpec:
    return RunnerSpec(
        name=name,
        profile="node",
        scale_set="node-set",
        image=image,
        command=(),
        cpus=2.0,
        memory=512 * M,
        labels={MANAGED_LABEL: "true", NAME_LABEL: name, "runnerd.profile": "node"},
        env={"ACTIONS_RUNNER_INPUT_JITCONFIG": "jit", "RUNGAR_JITCONFIG": "jit"},
    )


async def test_a_runner_is_a_container_with_its_limits_labels_and_jit_config(
    engine: tuple[FakeEngine, str], tmp_path: Path
) -> None:
    fake, socket = engine
    runtime = DockerRuntime(socket, "runnerd.slice", str(tmp_path / "no-cgroup"))
    handle = await runtime.start(spec())
    container = fake.containers[handle]
    assert container["HostConfig"] == {
        "Memory": 512 * M,
        "MemorySwap": 512 * M,
        "NanoCpus": 2_000_000_000,
        "CgroupParent": "runnerd.slice",
    }
    assert "RUNGAR_JITCONFIG=jit" in container["Config"]["Env"]
    assert container["Config"]["Labels"][NAME_LABEL] == "r1"
    usage = await runtime.sample(handle)
    assert usage is not None and not usage.exited
    assert usage.memory == 200 * M  # usage less the file LRU lists
    assert usage.cpu_seconds == 3.0
    await runtime.close()


async def test_a_missing_image_is_pulled_once(engine: tuple[FakeEngine, str]) -> None:
    fake, socket = engine
    runtime = DockerRuntime(socket)
    await runtime.start(spec(image="runner:jvm"))
    assert fake.pulls == ["runner:jvm"]
    await runtime.close()


async def test_a_container_killed_at_its_limit_met_its_cap(engine: tuple[FakeEngine, str]) -> None:
    fake, socket = engine
    runtime = DockerRuntime(socket)
    handle = await runtime.start(spec())
    fake.containers[handle]["State"].update(
        Status="exited", Running=False, ExitCode=137, OOMKilled=True
    )
    usage = await runtime.sample(handle)
    assert usage is not None
    assert (usage.exited, usage.exit_code, usage.met_cap) == (True, 137, True)
    await runtime.stop(handle)
    assert handle not in fake.containers
    await runtime.stop(handle)  # an unknown container is success
    assert await runtime.sample(handle) is None
    await runtime.close()


async def test_a_restarted_runnerd_adopts_the_containers_it_left(
    engine: tuple[FakeEngine, str], tmp_path: Path
) -> None:
    _, socket = engine
    text = f"""
[host]
runtime = "docker"
docker_socket = "{socket}"
memory_max = "8G"
cpus = 4
state_dir = "{tmp_path / "state"}"
cgroup_root = "{tmp_path / "no-cgroup"}"

[profiles.node]
image = "runner:node"
cpus = 2
memory = "2G"
slots = 4
"""
    config = parse_config(text)
    first = await open_daemon(config, SystemClock(), config_text=text)
    request = CreateRequest(
        runner_name="r1",
        request_id="q1",
        scale_set="node",
        labels={"rungar.sh/managed": "true", "rungar.sh/runner": "r1"},
        runner=RunnerBlock(vcpus=2, memory_bytes=2 * 1024**3),
        jit_config="jit",
        job_hints=(JobHint("octo/app", "ci", "test"),),
    )
    assert isinstance(await first.provider.create(request), Created)
    await first.close()

    second = await open_daemon(config, SystemClock(), config_text=text)
    listed = await second.provider.list({"rungar.sh/runner": "r1"})
    assert [m.name for m in listed] == ["r1"]
    assert second.provider.runners["r1"].reserved == 2 * 1024**3  # at its cap until sampled
    await second.provider.delete("r1")
    assert await second.provider.list({}) == []
    await second.close()


@pytest.mark.parametrize(
    ("isolation", "runtime_name", "privileged"),
    [("sysbox", "sysbox-runc", False), ("unsafe-dind", "runc", True)],
)
async def test_isolation_picks_the_runners_oci_runtime_and_labels_the_container(
    engine: tuple[FakeEngine, str], isolation: str, runtime_name: str, privileged: bool
) -> None:
    fake, socket = engine
    runtime = DockerRuntime(socket, "runnerd.slice", isolation=isolation)
    handle = await runtime.start(spec())
    host = fake.containers[handle]["HostConfig"]
    assert (host["Runtime"], host["Privileged"]) == (runtime_name, privileged)
    assert host["CgroupParent"] == "runnerd.slice"  # every isolation keeps the slice and caps
    assert host["Memory"] == 512 * M
    assert fake.containers[handle]["Config"]["Labels"]["runnerd.isolation"] == isolation
    await runtime.close()


async def test_a_config_with_isolation_and_image_stage_runs_the_docker_runtime_with_them(
    engine: tuple[FakeEngine, str], tmp_path: Path
) -> None:
    fake, socket = engine
    fake.images.add("ghcr.io/ayagmar/runnerd-runner:node-0.0.20")
    text = f"""
[host]
slice = "runnerd.slice"
isolation = "sysbox"
docker_socket = "{socket}"
memory_max = "33G"
cpus = 16
state_dir = "{tmp_path / "state"}"
cgroup_root = "{tmp_path / "no-cgroup"}"

[profiles.node]
image_stage = "node"
cpus = 8
memory = "7G"
slots = 2
"""
    config = parse_config(text)
    daemon = await open_daemon(config, SystemClock(), config_text=text)
    request = CreateRequest(
        runner_name="r1",
        request_id="q1",
        scale_set="node",
        labels={"rungar.sh/managed": "true"},
        runner=RunnerBlock(),
        jit_config="jit",
    )
    assert isinstance(await daemon.provider.create(request), Created)
    (container,) = fake.containers.values()
    assert container["HostConfig"]["Runtime"] == "sysbox-runc"
    assert container["Config"]["Image"] == "ghcr.io/ayagmar/runnerd-runner:node-0.0.20"
    assert fake.pulls == []  # the stage's image, not an image named "node"
    assert container["Config"]["Labels"]["runnerd.isolation"] == "sysbox"
    await daemon.provider.delete("r1")
    await daemon.close()
