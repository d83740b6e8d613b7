"""Every long-running command stops when asked (docs/commands.md, "Stopping"): SIGINT or SIGTERM
stops it within 10 s, it stops what it started, removes what it created and exits 0; a second one
while it stops ends it at once with 130. Each command runs as a real process and gets each signal.

(Checked that these can fail: with the emulator's uvicorn server taking the signals over again,
its SIGTERM run exits -15; without the plugin's socket removal the socket assertion fails.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rungar.testing.gce_fake import GceFake
from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator
from tests.waiting import WAIT, until_sync

# The commands bound their own stop at 10 s (README); the test allows a busy machine more.
STOP_WITHIN = WAIT
SIGNALS = [signal.SIGINT, signal.SIGTERM]
ids = ["SIGINT", "SIGTERM"]


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_for_line(process: subprocess.Popen[str], needle: str) -> str:
    """Read stdout until a line holds ``needle``; fails if the process ends first."""
    assert process.stdout is not None
    for line in process.stdout:
        if needle in line:
            return line
    _, err = process.communicate(timeout=STOP_WITHIN)
    raise AssertionError(f"ended ({process.returncode}) before printing {needle!r}: {err}")


def wait_for_path(process: subprocess.Popen[str], path: Path) -> None:

    def there() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"ended ({process.returncode}): {process.communicate()[1]}")
        return path.exists()

    until_sync(there, f"made {path}")


def stopped_by(process: subprocess.Popen[str], signum: int) -> tuple[int, str]:
    process.send_signal(signum)
    try:
        _, err = process.communicate(timeout=STOP_WITHIN)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()  # not communicate(): a child it left may hold the pipes open
        raise AssertionError(f"still running {STOP_WITHIN:g}s after {signum!r}") from None
    return process.returncode, err


@pytest.fixture
def emulator() -> Iterator[GitHubEmulator]:
    em = GitHubEmulator(EmulatorOptions(long_poll_seconds=0.5))
    em.start_in_thread()
    try:
        yield em
    finally:
        em.stop_thread()


@pytest.mark.parametrize("signum", SIGNALS, ids=ids)
def test_rungar_serve_stops_removes_its_socket_and_exits_0(
    signum: int, tmp_path: Path, emulator: GitHubEmulator
) -> None:
    (tmp_path / "scale_sets.yaml").write_text(
        "providers: [{ name: p, type: fake }]\n"
        "scale_sets: [{ name: s, max_runners: 1, providers: [p] }]\n"
    )
    (tmp_path / "token").write_text("emulator-pat")
    (tmp_path / "token").chmod(0o600)
    sock = tmp_path / "rungar.sock"
    settings = {
        "github": {"url": emulator.org_url, "token_path": str(tmp_path / "token")},
        "scale_sets": str(tmp_path / "scale_sets.yaml"),
        "state_dir": str(tmp_path / "state"),
        "socket": str(sock),
        "log_level": "warning",
    }
    (tmp_path / "rungar.yaml").write_text(yaml.safe_dump(settings))
    daemon = start("-m", "rungar.cli.main", "serve", "-c", str(tmp_path / "rungar.yaml"))
    wait_for_path(daemon, sock)
    code, err = stopped_by(daemon, signum)
    assert code == 0, err
    assert not sock.exists()


PLUGIN = """
import asyncio, os, sys
from rungar.rpc.plugin import serve_plugin
from rungar.testing.fake_provider import FakeProvider

with open(sys.argv[1], "w") as f:
    f.write(f"{os.getpid()} {os.path.dirname(os.environ['RUNGAR_PLUGIN_SOCKET'])}")
asyncio.run(serve_plugin(FakeProvider("mine")))
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("signum", SIGNALS, ids=ids)
def test_rungar_serve_stops_the_plugins_it_started_and_removes_their_folders(
    signum: int, tmp_path: Path, emulator: GitHubEmulator
) -> None:
    (tmp_path / "plugin.py").write_text(PLUGIN)
    started = tmp_path / "plugin.started"
    command = json.dumps([sys.executable, str(tmp_path / "plugin.py"), str(started)])
    (tmp_path / "scale_sets.yaml").write_text(
        f"providers: [{{ name: mine, type: mine, command: {command} }}]\n"
        "scale_sets: [{ name: s, max_runners: 1, providers: [mine] }]\n"
    )
    (tmp_path / "token").write_text("emulator-pat")
    (tmp_path / "token").chmod(0o600)
    settings = {
        "github": {"url": emulator.org_url, "token_path": str(tmp_path / "token")},
        "scale_sets": str(tmp_path / "scale_sets.yaml"),
        "state_dir": str(tmp_path / "state"),
        "socket": str(tmp_path / "rungar.sock"),
        "log_level": "warning",
    }
    (tmp_path / "rungar.yaml").write_text(yaml.safe_dump(settings))
    daemon = start("-m", "rungar.cli.main", "serve", "-c", str(tmp_path / "rungar.yaml"))
    wait_for_path(daemon, tmp_path / "rungar.sock")
    pid_text, folder = started.read_text().split(" ", 1)
    assert alive(int(pid_text)) and Path(folder).is_dir()
    code, err = stopped_by(daemon, signum)
    assert code == 0, err
    assert not alive(int(pid_text)), "the plugin outlived the daemon"
    assert not Path(folder).exists(), "the plugin's private folder was left behind"


@pytest.mark.parametrize("signum", SIGNALS, ids=ids)
def test_the_github_emulator_stops_and_exits_0(signum: int) -> None:
    process = start("-m", "rungar.cli.main", "github-emulator", "--port", "0")
    wait_for_line(process, "http://")  # its URL, the first line it prints
    code, err = stopped_by(process, signum)
    assert code == 0, err


@pytest.mark.parametrize("signum", SIGNALS, ids=ids)
def test_runnerd_serve_stops_removes_its_sockets_and_exits_0(signum: int, tmp_path: Path) -> None:
    config = tmp_path / "runnerd.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [host]
            slice = "rdstop{uuid.uuid4().hex[:8]}.slice"
            memory_max = "1G"
            cpus = 2
            state_dir = "{tmp_path / "state"}"

            [profiles.node]
            command = [{json.dumps(sys.executable)}, "-c", "pass"]
            cpus = 1
            memory = "256M"
            slots = 1
            """
        )
    )
    process = start("-m", "runnerd.cli", "serve", "-c", str(config))
    sock = tmp_path / "state" / "provider.sock"
    wait_for_path(process, sock)
    code, err = stopped_by(process, signum)
    assert code == 0, err
    assert not sock.exists()


@pytest.mark.long  # google-cloud-compute takes seconds to import; the same stop path as aws below
@pytest.mark.parametrize("signum", SIGNALS, ids=ids)
def test_a_cloud_plugin_serving_a_socket_stops_removes_it_and_exits_0(
    signum: int, tmp_path: Path
) -> None:
    with GceFake() as fake:
        config = tmp_path / "gcp.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "project": fake.project,
                    "zones": ["us-central1-a"],
                    "installation": "gh-1",
                    "endpoint": fake.endpoint,
                    "anonymous": True,
                }
            )
        )
        sock = tmp_path / "gcp.sock"
        process = start(
            "-m", "rungar_gcp.server", "--config", str(config), "--listen", f"unix://{sock}"
        )
        wait_for_path(process, sock)
        code, err = stopped_by(process, signum)
    assert code == 0, err
    assert not sock.exists()


@pytest.mark.parametrize("signum", SIGNALS, ids=ids)
def test_a_cloud_plugin_started_by_rungar_stops_removes_its_socket_and_exits_0(
    signum: int, tmp_path: Path
) -> None:
    from rungar.rpc.plugin import SETTINGS_ENV, SOCKET_ENV

    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "region": "us-east-1",
                "subnets": ["subnet-1"],
                "installation": "gh-1",
                "endpoint_url": "http://127.0.0.1:9",
                "name": "aws",
            }
        )
    )
    sock = tmp_path / "provider.sock"
    env = {**os.environ, SOCKET_ENV: str(sock), SETTINGS_ENV: str(settings)}
    env.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")  # never used: nothing is called
    process = start("-m", "rungar_aws.server", env=env)
    wait_for_line(process, "RUNGAR_PLUGIN 1 unix://")
    code, err = stopped_by(process, signum)
    assert code == 0, err
    assert not sock.exists()


SLOW_TO_STOP = """
import asyncio, sys
from rungar.stopping import stop_on_signals

async def main():
    stop = asyncio.Event()
    stop_on_signals(stop, at_once=lambda: print("at once", flush=True))
    print("ready", flush=True)
    await stop.wait()
    print("stopping", flush=True)
    await asyncio.Event().wait()  # a stop that never ends: only a second signal ends it

asyncio.run(main())
"""


@pytest.mark.parametrize("second", SIGNALS, ids=ids)
def test_a_second_signal_while_stopping_ends_the_command_at_once_with_130(second: int) -> None:
    process = start("-c", SLOW_TO_STOP)
    wait_for_line(process, "ready")
    process.send_signal(signal.SIGINT)
    wait_for_line(process, "stopping")
    code, _ = stopped_by(process, second)
    assert code == 130
    assert process.stdout is not None


STUCK_STOP = """
import asyncio, sys
from rungar.stopping import stop_on_signals

async def main():
    stop = asyncio.Event()
    stop_on_signals(stop, at_once=lambda: print("at once", flush=True), within=0.5)
    print("ready", flush=True)
    await stop.wait()
    print("stopping", flush=True)
    await asyncio.Event().wait()  # a stop stuck for good: nothing else would end it

asyncio.run(main())
"""


@pytest.mark.parametrize("signum", SIGNALS, ids=ids)
def test_a_stop_that_outlasts_its_bound_ends_the_command_with_1_all_the_same(signum: int) -> None:
    process = start("-c", STUCK_STOP)
    wait_for_line(process, "ready")
    process.send_signal(signum)
    try:
        out, err = process.communicate(timeout=STOP_WITHIN)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(f"still running {STOP_WITHIN:g}s after {signum!r}") from None
    assert process.returncode == 1, err
    assert "did not stop within 0.5 s of being asked: stopped at once" in err
    assert out.split() == ["stopping", "at", "once"]  # what it started is stopped on the way out


SIGNALLED_WHILE_IMPORTING = """
import os, signal, sys
from rungar.stopping import exit_until_serving

exit_until_serving(unwound=sys.argv[1] == "unwound")

class Field:
    def __set_name__(self, owner, name):  # as dataclasses' fields do, importing rungar
        os.kill(os.getpid(), int(sys.argv[2]))
        for _ in range(1000):  # the handler runs here, between two steps
            pass

class Settings:
    key = Field()

print("never", flush=True)
"""


@pytest.mark.parametrize("signum", SIGNALS, ids=ids)
def test_a_command_signalled_while_importing_exits_0_without_a_traceback(signum: int) -> None:
    # rungar serve leaves with unwound=False; the default, unwinding, shows what it did before:
    # SystemExit raised into __set_name__ came out as a RuntimeError, a traceback and 1.
    for how, code in (("not unwound", 0), ("unwound", 1)):
        process = start("-c", SIGNALLED_WHILE_IMPORTING, how, str(int(signum)))
        out, err = process.communicate(timeout=STOP_WITHIN)
        assert process.returncode == code, err
        assert "never" not in out
        assert ("Traceback" in err) == (code != 0)


def demo_slices(run: str) -> list[Path]:
    """The cgroups a demo run's hosts made, under either cgroup version's hierarchy."""
    return [p for p in Path("/sys/fs/cgroup").glob(f"**/{run}-*.slice") if p.is_dir()]


@pytest.mark.long
@pytest.mark.parametrize(
    ("keep", "signum"),
    [(keep, s) for keep in (False, True) for s in SIGNALS],
    ids=["burst-SIGINT", "burst-SIGTERM", "keep-SIGINT", "keep-SIGTERM"],
)
def test_the_demo_stops_its_hosts_removes_its_folder_and_cgroups_and_exits_0(
    keep: bool, signum: int
) -> None:
    args = ["-m", "rungar.cli.main", "demo", "--no-live", "--small", "6", "--large", "1"]
    process = start(*args, *(["--keep"] if keep else []))
    line = wait_for_line(process, "files in ")
    folder = Path(line.rsplit("files in ", 1)[1].strip())
    assert folder.is_dir()
    if keep:
        wait_for_line(process, "Press Ctrl-C to stop.")
        assert demo_slices(folder.name), "the hosts made no cgroup: nothing is checked below"
    code, err = stopped_by(process, signum)
    assert code == 0, err
    assert not folder.exists()
    assert demo_slices(folder.name) == []
