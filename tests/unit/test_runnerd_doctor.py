"""``runnerd doctor`` (= ``runnerctl doctor``): the binding constraint, the warnings, ``--json``,
and a host left as it was; ``runnerd init``: a commented config for this host, checked."""

from __future__ import annotations

import json
import sqlite3
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from runnerd.admission.model import Holder
from runnerd.cli import main as runnerd_main
from runnerd.config import load_config, parse_config
from runnerd.ctl import main as runnerctl_main
from runnerd.doctor import HostFacts, capacity, checks, sizing_checks
from runnerd.history import JobEnd, JobKey, JobStart
from runnerd.history_generate import GeneratedJob, write_history
from runnerd.readers import MemInfo
from runnerd.sizing import runs as runs_module

from tests.unit.sizing_fixtures import NOW, G, config, profile

FACTS = HostFacts(
    memory_max=33 * G,
    slice_cpus=32.0,
    slice_exists=True,
    controllers=("cpu", "memory", "io"),
    meminfo=MemInfo(64 * G, 48 * G),
    full_avg10=0.0,
    disk_free=500 * G,
)


@pytest.mark.parametrize(
    ("cfg", "facts", "binding", "runners"),
    [
        (config(profile(memory=7, slots=8)), FACTS, "memory", 4),  # 33G holds 4 × 7G
        (config(profile(memory=2, slots=3)), FACTS, "slots", 3),
        (config(profile(memory=2, slots=8, cpus=8), cpu_overcommit=1.0), FACTS, "cpu", 4),
        (config(profile(memory=2, slots=8)), replace(FACTS, disk_free=34 * G), "disk", 3),
    ],
)
def test_doctor_names_the_binding_constraint(
    cfg: object, facts: HostFacts, binding: str, runners: int
) -> None:
    from runnerd.config import RunnerdConfig

    assert isinstance(cfg, RunnerdConfig)
    found = capacity(cfg, facts, cfg.profiles["node"])
    assert (found.binding, found.runners) == (binding, runners)
    report = checks(cfg, facts, [])
    assert report.binding == binding
    assert f"node: {runners} runners at once, bound by {binding}" in report.text()


def test_the_hosts_memory_binds_when_it_leaves_the_slice_less_than_memory_max() -> None:
    busy = replace(FACTS, meminfo=MemInfo(64 * G, 12 * G))  # 12G available less a 4G margin
    found = capacity(config(profile(memory=2, slots=8)), busy, profile(memory=2, slots=8))
    assert (found.binding, found.fits["memory"]) == ("memory", 4)


def test_doctor_warns_when_the_disk_is_short() -> None:
    short = replace(FACTS, disk_free=12 * G)  # the 10G reserve and one runner's 8G need 18G
    text = checks(config(profile()), short, []).text()
    assert "warning: the disk is short" in text and "12G free, less than the 10G reserve" in text


def test_doctor_warns_when_the_host_is_short_of_memory_naming_the_programs() -> None:
    holders = (Holder("java", int(9.3 * G)), Holder("qemu-system-x86", int(5.8 * G)))
    short = replace(FACTS, meminfo=MemInfo(64 * G, 6 * G), holders=holders, full_avg10=7.0)
    text = checks(config(profile(memory=7)), short, []).text()
    assert "warning: the host is short of memory: 2G to spare, less than the smallest " in text
    assert "most java 9.3G and qemu-system-x86 5.8G" in text
    assert "warning: the host stalls short of memory (7% full pressure)" in text


def heavy_history(db: Path, peak: float) -> None:
    rows = []
    for i in range(12):
        at = NOW - 86400 + i * 600
        start = JobStart(
            f"r{i}", "node", "node", 7 * G, 8.0, "caps", 7 * G, 8.0, "cap", None, None, at - 300
        )
        end = JobEnd("succeeded", int(peak * G), None, False, False, 0, at)
        rows.append(GeneratedJob(start, JobKey("node", "acme/web", "ci", "e2e"), end, str(i)))
    write_history(db, rows)


def test_doctor_warns_when_a_profiles_jobs_need_more_than_its_memory(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    heavy_history(db, 6.8)  # 6.8G + the 1G page-cache room > 7G
    cfg = config(profile(memory=7))
    cfg = replace(cfg, host=replace(cfg.host, history=str(db)))
    (check,) = sizing_checks(cfg, 33 * G, NOW)
    assert check.level == "warning"
    assert check.message.startswith("profile node: its jobs need 8G, more than its memory of 7G")
    assert "(acme/web ci/e2e)" in check.message
    light = tmp_path / "light.db"
    heavy_history(light, 2.0)
    cfg = replace(cfg, host=replace(cfg.host, history=str(light)))
    assert [c.level for c in sizing_checks(cfg, 33 * G, NOW)] == ["ok"]


def test_the_memory_pressure_insight_names_the_repositories_whose_jobs_were_throttled(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.db"
    rows = []
    for i, (repository, throttled) in enumerate(
        [("acme/web", 5), ("acme/web", 2), ("acme/api", 1), ("acme/docs", 0)]
    ):
        at = NOW - 3600 + i * 60
        start = JobStart(
            f"r{i}", "node", "node", 7 * G, 8.0, "caps", 7 * G, 8.0, "cap", None, None, at - 300
        )
        end = JobEnd("succeeded", 2 * G, None, False, False, throttled, at)
        rows.append(GeneratedJob(start, JobKey("node", repository, "ci", "e2e"), end, str(i)))
    write_history(db, rows)
    cfg = config(profile(memory=7))
    cfg = replace(cfg, host=replace(cfg.host, history=str(db)))
    (pressure,) = [c for c in sizing_checks(cfg, 33 * G, NOW) if c.name == "memory_pressure"]
    assert pressure.level == "warning"
    assert pressure.message.startswith(
        "memory pressure slowed the downloads of jobs of acme/web (7 times in 2 runs), "
        "acme/api (1 time in 1 run) in the last 7 days"
    )
    assert "acme/docs" not in pressure.message


def test_the_sizing_check_is_skipped_while_the_history_lacks_what_its_wal_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.test_runnerd_wal import history_with_wal

    def refused(path: Path) -> sqlite3.Connection:  # as for a user who may not write there
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(runs_module, "_connect_read_only", refused)
    db = tmp_path / "history.db"
    history = history_with_wal(db)
    try:
        cfg = config(profile(memory=7))
        cfg = replace(cfg, host=replace(cfg.host, history=str(db)))
        (check,) = sizing_checks(cfg, 33 * G, NOW)
        assert check.level == "warning" and check.message.startswith("sizing check skipped")
    finally:
        history.close()


def test_doctor_leaves_no_cgroup_behind_and_answers_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The host's real cgroup trees: on this machine a writable v1 memory controller, where the
    # process runtime would make the slice's directory when it starts. Doctor must not.
    name = f"rdoctor{uuid.uuid4().hex[:8]}.slice"
    path = tmp_path / "runnerd.toml"
    path.write_text(
        f'[host]\nslice = "{name}"\nmemory_max = "4G"\nstate_dir = "{tmp_path / "state"}"\n\n'
        '[profiles.node]\ncommand = ["true"]\ncpus = 1\nmemory = "1G"\nslots = 2\n'
    )
    assert runnerd_main(["doctor", "-c", str(path), "--json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert runnerctl_main(["-c", str(path), "doctor", "--json"]) in (0, 1)
    again = json.loads(capsys.readouterr().out)  # runnerctl doctor is the same thing
    assert [c["name"] for c in again["checks"]] == [c["name"] for c in report["checks"]]
    assert again["capacity"][0]["fits"]["slots"] == report["capacity"][0]["fits"]["slots"]
    # Other tests on this machine make and remove slices: only this one's name is looked for.
    assert name not in {p.name for p in Path("/sys/fs/cgroup").rglob("*.slice")}
    assert not (tmp_path / "state").exists()
    assert report["capacity"][0]["profile"] == "node"
    assert report["binding"] in ("memory", "cpu", "slots", "disk")
    assert {c["name"] for c in report["checks"]} >= {"cgroup", "slice", "runtime", "capacity"}


def test_init_writes_a_commented_config_sized_for_this_host_and_checks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text("MemTotal: 67108864 kB\nMemAvailable: 50331648 kB\n")
    cgroup = tmp_path / "cgroup" / "runnerd.slice"
    cgroup.mkdir(parents=True)
    (cgroup / "cpuset.cpus.effective").write_text("0-15\n")
    path = tmp_path / "etc" / "runnerd.toml"
    args = ["init", "-c", str(path), "--state-dir", str(tmp_path / "state")]
    args += ["--cgroup-root", str(cgroup.parent), "--proc-root", str(proc)]
    assert runnerd_main(args) == 0
    out = capsys.readouterr().out
    assert f"{path}: ok" in out and "runnerd init runs none of these" in out
    text = path.read_text()
    assert 'memory_max = "48G"         # 3/4 of this host\'s 64G' in text
    assert "auto = true                    # runnerd sizes memory" in text
    written = load_config(path)
    node = written.profiles["default"]
    assert (node.memory, node.slots, node.cpus) == (8 * G, 4, 4.0)  # one slot per 4 of 16 CPUs
    assert written.sizing.auto and written.host.memory_max == 48 * G
    assert parse_config(text, str(path)) == written
    assert runnerd_main(args) == 2  # an existing file is kept
    assert "exists; --force replaces it" in capsys.readouterr().err


def test_doctor_checks_the_host_before_there_is_a_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "runnerd.toml"
    assert runnerd_main(["doctor", "-c", str(missing), "--json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert report["checks"][0] == {
        "level": "warning",
        "name": "config",
        "message": f"no {missing}: the host is checked with the defaults; runnerd init -c "
        f"{missing} writes one for it",
    }
    assert not missing.exists()
