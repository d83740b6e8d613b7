"""A ``rungar serve`` whose start fails after its provider plugins started leaves nothing behind.

The real ``rungar serve`` process starts a plugin (a real process with its private folder under
``TMPDIR``), then a later step of its start fails: the metrics port is taken, another daemon
listens on the admin socket, or a second plugin does not start. It must stop the plugin, remove
its folder, print the one line ``FILE: key: problem`` and exit 2 (a configuration error): no
process it started survives (checked by pid, by process group and by every command line in
/proc), and its ``TMPDIR`` is left empty.

(Checked that this can fail: without the start's clean-up the plugin survives with PPID 1 and
its folder stays; without the file named, the line does not start with rungar.yaml's path.)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from tests.waiting import WAIT, until_sync

PLUGIN = """
import asyncio, os, sys
from rungar.rpc.plugin import serve_plugin
from rungar.testing.fake_provider import FakeProvider

with open(sys.argv[1], "w") as f:
    f.write(f"{os.getpid()} {os.path.dirname(os.environ['RUNGAR_PLUGIN_SOCKET'])}")
asyncio.run(serve_plugin(FakeProvider("mine")))
"""


@pytest.fixture
def root() -> Iterator[Path]:
    # Short: the plugin's socket lives in a folder under it (a unix socket path is short).
    path = Path(tempfile.mkdtemp(prefix="rgf", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def write_config(root: Path, providers: list[dict[str, object]], **settings: object) -> Path:
    names = [str(p["name"]) for p in providers]
    (root / "scale_sets.yaml").write_text(
        yaml.safe_dump(
            {
                "providers": providers,
                "scale_sets": [{"name": "s", "max_runners": 1, "providers": names}],
            }
        )
    )
    (root / "token").write_text("a-token")
    (root / "token").chmod(0o600)
    with socket.socket() as closed:  # a port nothing listens on: GitHub is never reached
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    config = {
        "github": {"url": f"http://127.0.0.1:{port}/octo", "token_path": "token"},
        "scale_sets": "scale_sets.yaml",
        "state_dir": "state",
        "socket": str(root / "rungar.sock"),
        "log_level": "error",
        **settings,
    }
    (root / "rungar.yaml").write_text(yaml.safe_dump(config))
    return root / "rungar.yaml"


def plugin(root: Path) -> dict[str, object]:
    (root / "plugin.py").write_text(PLUGIN)
    command = [sys.executable, str(root / "plugin.py"), str(root / "plugin.started")]
    return {"name": "mine", "type": "mine", "command": command}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def command_lines_naming(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue  # ended meanwhile
            if text in line:
                found.append(f"{entry.name}: {line}")
    return found


def metrics_port_taken(root: Path, held: ExitStack) -> tuple[dict[str, object], str]:
    taken = held.enter_context(socket.create_server(("127.0.0.1", 0)))
    listen = f"127.0.0.1:{taken.getsockname()[1]}"
    problem = f"{root / 'rungar.yaml'}: metrics.listen: cannot listen on {listen}: "
    return {"metrics": {"listen": listen}}, problem


def admin_socket_in_use(root: Path, held: ExitStack) -> tuple[dict[str, object], str]:
    other = held.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    other.bind(str(root / "rungar.sock"))  # another daemon serves there
    other.listen()
    path = root / "rungar.sock"
    problem = f"{root / 'rungar.yaml'}: socket: {path} is in use: another rungar daemon listens"
    return {}, problem


FAILURES: dict[str, Callable[[Path, ExitStack], tuple[dict[str, object], str]]] = {
    "metrics_port_taken": metrics_port_taken,
    "admin_socket_in_use": admin_socket_in_use,
}


def serve(config: Path, tmpdir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    command = [sys.executable, "-m", "rungar.cli.main", "serve", "-c", str(config)]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=WAIT, check=False
    )


def assert_nothing_left(root: Path, tmpdir: Path) -> None:
    pid_text, folder = (root / "plugin.started").read_text().split(" ", 1)
    pid = int(pid_text)
    assert Path(folder).parent == tmpdir, "the plugin's folder is made under TMPDIR"
    assert not alive(pid), "the plugin outlived the daemon"
    assert not group_alive(pid), "a process of the plugin's group outlived the daemon"
    assert command_lines_naming(str(root)) == []
    assert not Path(folder).exists(), "the plugin's folder was left behind"
    assert list(tmpdir.iterdir()) == []


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_start_failing_after_the_plugins_started_stops_them_and_names_the_key(
    failure: str, root: Path
) -> None:
    tmpdir = root / "tmp"
    tmpdir.mkdir()
    with ExitStack() as held:
        settings, problem = FAILURES[failure](root, held)
        config = write_config(root, [plugin(root)], **settings)
        ran = serve(config, tmpdir)
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.startswith(problem), ran.stderr
    assert len(ran.stderr.splitlines()) == 1, f"one line, no traceback:\n{ran.stderr}"
    assert_nothing_left(root, tmpdir)


def test_a_second_plugin_that_does_not_start_stops_the_first(root: Path) -> None:
    tmpdir = root / "tmp"
    tmpdir.mkdir()
    broken: dict[str, object] = {
        "name": "broken",
        "type": "broken",
        "command": [sys.executable, "-c", "raise SystemExit(3)"],
    }
    config = write_config(root, [plugin(root), broken])
    ran = serve(config, tmpdir)
    assert ran.returncode == 2, ran.stderr
    problem = f"{root / 'scale_sets.yaml'}: providers.broken: its plugin did not start: "
    assert ran.stderr.startswith(problem), ran.stderr
    assert len(ran.stderr.splitlines()) == 1, f"one line, no traceback:\n{ran.stderr}"
    assert_nothing_left(root, tmpdir)


def test_the_plugin_command_used_here_serves_when_nothing_fails(root: Path) -> None:
    """The control: the same plugin and settings start a daemon that serves (and stops on
    SIGTERM, exit 0), so the failures above are the ones provoked."""
    tmpdir = root / "tmp"
    tmpdir.mkdir()
    config = write_config(root, [plugin(root)])
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "rungar.cli.main", "serve", "-c", str(config)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until_sync(
            lambda: (root / "rungar.sock").exists() or daemon.poll() is not None,
            "the daemon serves",
        )
        assert daemon.poll() is None, daemon.communicate()[1]
        daemon.terminate()
        _, err = daemon.communicate(timeout=WAIT)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert daemon.returncode == 0, err
    assert_nothing_left(root, tmpdir)
