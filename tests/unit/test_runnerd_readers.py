"""Readers on fixture trees in the cgroup v2 format and on this machine's real /proc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from runnerd import readers
from runnerd.admission.model import Holder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runnerd"
CGROUP = FIXTURES / "cgroup"
PROC = FIXTURES / "proc"
G = 1024**3
M = 1024**2


def test_job_memory_is_current_less_the_file_lru_lists_so_tmpfs_stays_counted() -> None:
    sample = readers.read_cgroup(CGROUP / "runnerd.slice" / "runner-a")
    assert sample is not None
    assert sample.current == 5 * G
    assert sample.job_memory == 2 * G  # 5G − 1G active − 2G inactive; shmem 512M stays in
    assert sample.held == 2 * G - 128 * M  # the host guard also leaves reclaimable slab out


def test_slice_memory_is_current_less_inactive_file_as_docker_stats_counts_it() -> None:
    sample = readers.read_cgroup(CGROUP / "runnerd.slice")
    assert sample is not None
    assert sample.slice_memory == 27 * G
    assert readers.slice_memory(100, {"inactive_file": 200}) == 100


def test_memory_events_and_the_local_ones_are_read_by_key() -> None:
    sample = readers.read_cgroup(CGROUP / "runnerd.slice" / "runner-a")
    assert sample is not None
    assert sample.events_local["oom"] == 1
    assert sample.events["sock_throttled"] == 4
    assert sample.limit == 7 * G
    assert sample.cpu_seconds == 120.0


def test_memory_stat_is_read_by_key_whatever_the_order_and_unknown_keys() -> None:
    stat = readers.parse_keyed(
        "zswap 5\ninactive_file 2\nnew_key_from_a_later_kernel 9\nactive_file 1\n"
    )
    assert readers.job_memory(10, stat) == 7
    assert stat["new_key_from_a_later_kernel"] == 9


def test_memory_max_of_max_means_no_limit() -> None:
    assert readers.parse_limit("max\n") is None
    assert readers.parse_limit("35433480192\n") == 33 * G


def test_a_cgroup_that_has_gone_reads_as_none() -> None:
    assert readers.read_cgroup(CGROUP / "runnerd.slice" / "runner-gone") is None


def test_a_nested_slice_lives_where_systemd_puts_it() -> None:
    assert readers.slice_dir("runnerd.slice") == "runnerd.slice"
    assert readers.slice_dir("ci-runners.slice") == "ci.slice/ci-runners.slice"


def test_the_slices_limit_and_cpus_come_from_its_cgroup() -> None:
    assert readers.read_slice_limit(str(CGROUP), "runnerd.slice") == 33 * G
    assert readers.read_slice_cpus(str(CGROUP), "runnerd.slice") == 4.0  # 8 allowed, quota 4
    assert readers.parse_cpuset("0-3,6") == 5


def test_meminfo_and_pressure_are_parsed_from_proc() -> None:
    info = readers.read_meminfo(str(PROC))
    assert info == readers.MemInfo(64 * G, 31 * G)
    pressure = readers.read_pressure(str(PROC))
    assert pressure is not None
    assert (pressure.some_avg10, pressure.full_avg10, pressure.full_total) == (12.5, 6.0, 1234567)


def test_programs_outside_the_slice_holding_512M_are_named_largest_first() -> None:
    found = readers.biggest_holders(readers.read_processes(str(PROC)), "runnerd.slice", 512 * M)
    assert [h.name for h in found] == ["java", "qemu-system-x86"]
    assert found[0] == Holder("java", 9751757 * 1024)


def test_processes_of_one_program_add_up() -> None:
    procs = [("chrome", 300 * M, ["0::/user.slice"]), ("chrome", 300 * M, ["0::/user.slice"])]
    assert readers.biggest_holders(procs, "runnerd.slice", 512 * M) == [Holder("chrome", 600 * M)]


@pytest.mark.skipif(not Path("/proc/meminfo").exists(), reason="no /proc on this machine")
def test_this_machines_proc_reads() -> None:
    info = readers.read_meminfo()
    assert info is not None and 0 < info.available <= info.total
    assert readers.process_tree_rss(os.getpid()) > 1 * M
    processes = readers.read_processes()
    assert any(name.startswith("python") or name == "pytest" for name, _, _ in processes)
    if Path("/proc/pressure/memory").exists():
        pressure = readers.read_pressure()
        assert pressure is not None and pressure.full_avg10 >= 0.0
    assert (readers.disk_free("/") or 0) > 0
