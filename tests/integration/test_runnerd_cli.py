"""``runnerd serve -c`` as a real process; Rungar's client creates through its socket and
``runnerctl`` reads status (over the local API), a job's record (the history) and doctor."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from runnerd import ctl, sentences

from rungar.model.machine import Created, CreateRequest, JobHint, Refusal
from rungar.model.runner_block import RunnerBlock
from rungar.rpc.client import GrpcProvider
from tests.waiting import WAIT, accepting, until, until_awaited

M = 1024**2
SLEEP = "import time\ntime.sleep(60)\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(tmp_path: Path, metrics_port: int = 0) -> Path:
    path = tmp_path / "runnerd.toml"
    metrics = f'metrics_listen = "127.0.0.1:{metrics_port}"' if metrics_port else ""
    path.write_text(
        f"""
[host]
slice = "rdcli{uuid.uuid4().hex[:8]}.slice"
memory_max = "1G"
cpus = 2
state_dir = "{tmp_path / "state"}"
{metrics}

[profiles.node]
command = [{json.dumps(sys.executable)}, "-c", {json.dumps(SLEEP)}]
cpus = 1
memory = "256M"
slots = 2
"""
    )
    return path


def runnerctl(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnerd.ctl", "-c", str(config), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


async def test_runnerd_serves_and_runnerctl_reads_it(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path, metrics_port=port)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "runnerd.cli", "serve", "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    socket = tmp_path / "state" / "provider.sock"
    try:
        await until(
            lambda: accepting(socket) and accepting(tmp_path / "state" / "runnerd.sock"),
            "listened on both sockets",
        )
        client = GrpcProvider("host-a", f"unix://{socket}", timeout=WAIT)
        request = CreateRequest(
            "r1",
            "q1",
            "node",
            {"rungar.sh/managed": "true"},
            RunnerBlock(vcpus=1, memory_bytes=256 * 1024**2),
            "jit-secret",
            (JobHint("octo/app", "ci", "build"),),
        )
        assert isinstance(await client.create(request), Created)
        await client.update_runner("r1", JobHint("octo/app", "ci", "build", "4242"))
        assert isinstance(
            await client.create(CreateRequest("r2", "q2", "node", {}, RunnerBlock(), "j")), Created
        )
        full = await client.create(CreateRequest("r3", "q3", "node", {}, RunnerBlock(), "j"))
        assert isinstance(full, Refusal) and full.resource == "slots"
        await client.close()

        status = await asyncio.to_thread(runnerctl, config, "status")
        assert status.returncode == 0, status.stderr
        assert status.stdout.splitlines()[0] == "budget: 512M of 1G reserved (caps), 512M free"
        assert status.stdout.splitlines()[1].startswith("host: ")
        assert "octo/app ci/build" in status.stdout
        # The refused scale set waits in the queue, as the dashboard's Queue lists it.
        (waits,) = [line for line in status.stdout.splitlines() if line.startswith("queue: ")]
        assert waits.startswith("queue: node waits for a slot since ")
        assert waits.endswith(f": {full.message}")

        job = await asyncio.to_thread(runnerctl, config, "job", "4242")
        assert job.returncode == 0, job.stderr
        assert (
            "admitted by caps: reserved 256M, its profile's memory; 1G of the budget was free"
            in job.stdout
        )

        async with httpx.AsyncClient() as http:
            scraped = await http.get(f"http://127.0.0.1:{port}/metrics")
        assert 'runnerd_concurrency_utilization{profile="node"} 1.0' in scraped.text
        assert 'runnerd_refusals_total{profile="node",resource="slots"} 1.0' in scraped.text

        doctor = await asyncio.to_thread(runnerctl, config, "doctor")
        assert "ok: MemoryMax 1G" in doctor.stdout
        assert "process runtime" in doctor.stdout

        # runnerctl events -f follows; a reload (SIGHUP) re-reads the config and the slice.
        follower = subprocess.Popen(
            [sys.executable, "-m", "runnerd.ctl", "-c", str(config), "events", "-f", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            config.write_text(config.read_text().replace('memory_max = "1G"', 'memory_max = "2G"'))
            daemon.send_signal(signal.SIGHUP)
            assert follower.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(follower.stdout.readline), WAIT)
            event = json.loads(line)
            assert event["kind"] == "slice.changed" and event["data"]["memory_max"] == 2 * 1024**3
        finally:
            follower.terminate()
            follower.communicate(timeout=WAIT)
        status = await asyncio.to_thread(runnerctl, config, "status")
        assert status.stdout.splitlines()[0] == "budget: 512M of 2G reserved (caps), 1.5G free"
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            _, err = daemon.communicate(timeout=WAIT)
        except subprocess.TimeoutExpired:
            daemon.kill()
            _, err = daemon.communicate()
    assert "jit-secret" not in err
    assert daemon.returncode in (0, -signal.SIGTERM), err


def test_a_job_record_reads_as_sentences_with_each_figure_and_its_clock() -> None:
    at = 1_700_000_000.0
    row = {
        "id": 7, "job_id": "4242", "repository": "octo/app", "workflow": "ci", "job_name": "build",
        "runner": "r1", "profile": "node", "result": "succeeded", "peak_memory": 1024**3,
        "cap_memory": 7 * 1024**3, "avg_cpu": 0.8, "met_cap": 0, "killed_for_memory": 0,
        "sock_throttled": 2, "policy": "measured", "reserved_memory": 1280 * 1024**2,
        "basis": "the p95 peak of its job's last 10 runs + the margin", "budget_free": 10 * 1024**3,
        "slot_wait": 65.0, "host_wait": 0.0, "cpu_wait": 0.0,
        "queued_at": at, "started_at": at + 66, "job_started_at": at + 70,
        "finished_at": at + 100, "github_queued_at": at + 3600, "github_started_at": at + 3670,
        "github_completed_at": at + 3699, "slots": 4,
    }  # fmt: skip

    def clock(t: float) -> str:
        return time.strftime("%H:%M:%S", time.localtime(t))

    assert sentences.job_sentence(row).splitlines() == [
        "job 4242: octo/app ci/build, runner r1 in profile node: succeeded",
        "peak 1G of its 7G cap, average CPU 0.80; its sockets were throttled 2 times",
        "admitted by measured peaks: reserved 1.25G, the p95 peak of its job's last 10 runs + the "
        "margin; 10G of the budget was free",
        f"runnerd's clock: queued {clock(at)}, runner started {clock(at + 66)}, job started "
        f"{clock(at + 70)}, ended {clock(at + 100)}; ran 30s",
        "waited 1m 10s from its queue time: held back 1m 05s by this host for a slot, 0s for the "
        "host, 0s for CPU; its runner idled 0s before the job queued",
        f"GitHub's clock: queued {clock(at + 3600)}, started {clock(at + 3670)}, completed "
        f"{clock(at + 3699)}; waited 1m 10s, ran 29s",
    ]


def test_check_config_refuses_a_budget_memory_max_cannot_hold(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    config.write_text(config.read_text().replace("slots = 2", "slots = 8"))
    result = subprocess.run(
        [sys.executable, "-m", "runnerd.cli", "check-config", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ},
    )
    assert result.returncode == 2
    assert f"{config}:2:1: profiles: slots × memory (node 8 × 256M) take 2G" in result.stderr


def start_serving(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runnerd.cli", "serve", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


async def answered_status(config: Path) -> str:
    """``runnerctl status`` once the daemon answers: a killed one's sockets are left behind."""

    async def status() -> str:
        done = await asyncio.to_thread(runnerctl, config, "status")
        return done.stdout if done.returncode == 0 else ""

    return await until_awaited(status, "answered runnerctl status", every=0.1)


def stop_serving(daemon: subprocess.Popen[str]) -> str:
    daemon.send_signal(signal.SIGTERM)
    try:
        _, err = daemon.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        daemon.kill()
        _, err = daemon.communicate()
    return err


async def test_a_runnerd_killed_and_restarted_lists_its_runner_again(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    first = start_serving(config)
    try:
        await answered_status(config)
        client = GrpcProvider(
            "host-a", f"unix://{tmp_path / 'state' / 'provider.sock'}", timeout=10
        )
        request = CreateRequest("r1", "q1", "node", {}, RunnerBlock(), "jit-secret")
        assert isinstance(await client.create(request), Created)
        await client.close()
    finally:
        first.kill()
        first.wait()
    pid = json.loads((tmp_path / "state" / "runners" / "r1.json").read_text())["pid"]
    os.kill(pid, 0)  # the runner outlived its runnerd

    second = start_serving(config)
    try:
        status = await answered_status(config)
        assert status.splitlines()[0] == "budget: 256M of 1G reserved (caps), 768M free"
        rows = [line.split()[:4] for line in status.splitlines() if line.startswith("r1 ")]
        assert rows == [["r1", "node", "node", "running"]]
    finally:
        err = stop_serving(second)
    assert "runner.adopted" in err and "jit-secret" not in err
    assert not (tmp_path / "state" / "runners" / "r1.json").exists()  # stopped with runnerd
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


async def test_runnerd_started_from_another_folder_keeps_its_state_next_to_its_config(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path)
    config.write_text(config.read_text().replace(f'"{tmp_path / "state"}"', '"state"'))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    daemon = subprocess.Popen(
        [sys.executable, "-m", "runnerd.cli", "serve", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=elsewhere,
    )
    try:
        status = await answered_status(config)  # runnerctl, from the test's own folder
        assert status.startswith("budget:")
        assert (tmp_path / "state" / "provider.sock").exists()
        assert list(elsewhere.iterdir()) == [], "nothing is made in the working directory"
    finally:
        stop_serving(daemon)


def test_runnerctl_jobs_lists_each_recorded_job_with_its_conclusion_and_leaves_out_old_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from runnerd.history import History, JobEnd, JobKey, JobStart

    config = write_config(tmp_path)
    (tmp_path / "state").mkdir()
    history = History(tmp_path / "state" / "history.db")
    now = time.time()

    def start(runner: str, at: float) -> JobStart:
        return JobStart(runner, "node", "node", 256 * M, 1.0, "caps", 256 * M, 1.0,
                        "its profile's memory", None, None, at, queued_at=at - 4)  # fmt: skip

    key = JobKey("node", "octo/app", ".github/workflows/ci.yml", "build")
    for runner, result, at in (("old", "succeeded", now - 40 * 86400), ("r1", "failed", now - 60)):
        row = history.start(start(runner, at))
        history.took_job(row, key, f"job-{runner}", 256 * M, 1.0, "x", "main", "77")
        history.finish(
            row, JobEnd(result, 100 * M, 0.5, False, False, None, at + 30, 0, peak_cpu=0.9)
        )
    history.start(start("running", now))  # no result yet: not listed
    history.close()

    assert ctl.main(["-c", str(config), "jobs", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert {k: entry[k] for k in ("id", "repository", "workflow", "job", "runner")} == {
        "id": "job-r1",
        "repository": "octo/app",
        "workflow": ".github/workflows/ci.yml",
        "job": "build",
        "runner": "r1",
    }
    assert (entry["conclusion"], entry["peak_memory"], entry["peak_cpu"]) == (
        "failed",
        100 * M,
        0.9,
    )
    assert (entry["wait"], entry["duration"], entry["branch"]) == (4.0, 30.0, "main")
    assert ctl.main(["-c", str(config), "jobs", "--since", "60d"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:6] == ["ID", "REPOSITORY", "WORKFLOW", "JOB", "RUNNER", "CONCLUSION"]
    assert [line.split()[0] for line in table[1:-1]] == ["job-old", "job-r1"]
    assert table[-1].startswith("By runnerd's clock")


async def test_runnerctl_with_only_the_api_socket_prints_the_dashboards_login_link(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path)
    port = free_port()
    text = config.read_text().replace(
        "[host]\n", f'[host]\ndashboard_listen = "127.0.0.1:{port}"\n'
    )
    config.write_text(text)
    daemon = start_serving(config)
    try:
        await answered_status(config)
        api = tmp_path / "state" / "runnerd.sock"

        # No config file at all: the running runnerd is asked over its socket (once its
        # dashboard serves: the API answers first).
        async def asked_it() -> subprocess.CompletedProcess[str] | None:
            done = await asyncio.to_thread(
                runnerctl, tmp_path / "no-such.toml", "--socket", str(api), "dashboard"
            )
            return done if done.returncode == 0 else None

        asked = await until_awaited(asked_it, "printed the link", every=0.2)
        assert asked is not None

        with_config = runnerctl(config, "dashboard")
        assert asked.stdout == with_config.stdout
        link = asked.stdout.strip()
        assert link.startswith(f"http://127.0.0.1:{port}/?token=")
        assert httpx.get(link, follow_redirects=True, timeout=WAIT).status_code == 200
    finally:
        stop_serving(daemon)
