"""`make dist` builds a wheel and an sdist that hold what an installed Rungar needs, and the
wheel installs into a new virtual environment whose `rungar` then works from the installed copy.

What this checks, honestly: the new environment has no pip and no network; the wheel is
installed into it with `--no-deps`, and a path file lends it the dependencies already installed
in this checkout's environment. So it proves the wheel's own contents (packages, console
scripts, the demo's data files) and that nothing is read from the checkout; that the
dependencies are *declared* is checked on the wheel's metadata instead (`demo` extra: moto's
server and boto3). `rungar demo --no-live` from the installed copy takes a minute: it is marked
long.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_dist.py"), str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def wheel_of(dist: Path) -> Path:
    [wheel] = dist.glob("rungar-*.whl")
    return wheel


def test_the_wheel_holds_the_packages_scripts_demo_files_and_no_tests(dist: Path) -> None:
    with zipfile.ZipFile(wheel_of(dist)) as wheel:
        names = set(wheel.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = wheel.read(info).decode()
        scripts = wheel.read(info.replace("METADATA", "entry_points.txt")).decode()
    for module in (
        "rungar/cli/main.py",
        "rungar/rpc/_gen/rungar/provider/v1/provider_pb2.py",
        "rungar/testing/github_emulator/server.py",
        "runnerd/cli.py",
        "rungar_gcp/server.py",
        "rungar_aws/server.py",
        "rungar/py.typed",
        # runnerd's dashboard serves these from its package: no build step, no checkout
        "runnerd/dashboard/templates/overview.html",
        "runnerd/dashboard/static/dashboard.js",
        "rungar/web/static/vendor/uplot/uPlot.iife.min.js",
    ):
        assert module in names, module
    data = "rungar-0.1.0.data/data/share/rungar/examples/"
    for example in ("demo/scale_sets.yaml", "demo/runnerd.toml", "03-hosts-then-cloud/README.md"):
        assert data + example in names, example
    assert not [n for n in names if n.startswith("tests/")]
    for script in ("rungar", "runnerd", "runnerctl", "rungar-provider-gcp", "rungar-provider-aws"):
        assert f"\n{script} = " in scripts, script
    assert 'Requires-Dist: moto[server]>=5.0; extra == "demo"' in metadata
    assert 'Requires-Dist: boto3>=1.34; extra == "demo"' in metadata


def test_the_sdist_holds_what_the_wheel_is_built_from_and_what_users_copy(dist: Path) -> None:
    [sdist] = dist.glob("rungar-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for path in (
        "pyproject.toml",
        "README.md",
        "examples/demo/scale_sets.yaml",
        "config/systemd/rungar.service",
        "proto/rungar/provider/v1/provider.proto",
        "rungar/cli/main.py",
    ):
        assert path in names, path


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "lend-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel_of(dist)),
        ],
        check=True,
        timeout=300,
    )
    yield venv


def run_installed(
    venv: Path, *argv: str, cwd: Path, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(cwd)},
    )


def test_the_installed_copy_runs_from_its_own_files(installed: Path, tmp_path: Path) -> None:
    where = run_installed(
        installed, "python", "-c", "import rungar.cli.main as m; print(m.__file__)", cwd=tmp_path
    )
    assert where.stdout.startswith(str(installed)), where.stdout + where.stderr
    version = run_installed(installed, "rungar", "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("rungar ")


def test_rungar_validate_works_from_the_installed_copy(installed: Path, tmp_path: Path) -> None:
    example = installed / "share" / "rungar" / "examples" / "01-single-host" / "scale_sets.yaml"
    assert example.is_file()
    (tmp_path / "s.yaml").write_text(
        "providers:\n"
        "  - { name: gcp, type: gcp, max_runners: 20, project: acme, zones: [europe-west1-b] }\n"
        "scale_sets: [{ name: s, max_runners: 2, providers: [gcp] }]\n"
    )
    done = run_installed(installed, "rungar", "validate", "s.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "s.yaml is valid: 1 provider, 1 scale set\n"
    shown = run_installed(installed, "rungar", "config", "s.yaml", cwd=tmp_path)
    assert f"{installed}/bin/rungar-provider-gcp" in shown.stdout  # the shipped plugin beside it


@pytest.mark.long
def test_rungar_demo_runs_from_the_installed_copy(installed: Path, tmp_path: Path) -> None:
    done = run_installed(
        installed,
        "rungar",
        "demo",
        "--no-live",
        "--small",
        "6",
        "--large",
        "1",
        cwd=tmp_path,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # 6 small, 1 large, and the one whose runner fits nowhere, its run cancelled.
    assert "jobs run" in done.stdout and "8 of 8" in done.stdout
    assert "1 of them cancelled" in done.stdout
