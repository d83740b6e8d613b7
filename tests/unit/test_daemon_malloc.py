"""The daemon's malloc settings (rungar.daemon.malloc), each seen in a process of its own:
glibc's settings are per process."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from rungar.daemon import malloc

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")

SET_UP = """
import ctypes, sys, threading
from rungar.daemon import malloc

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2

def resident():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

if sys.argv[1] == "set":
    assert malloc.set_for_a_daemon()
"""

# The bytes mapped for a 200 KB block after a 400 KB one was freed (which raises glibc's
# threshold, unless it is fixed).
LARGE_BLOCK = """
block = bytearray(400_000)
del block
before = libc.mallinfo2().hblkhd
block = bytearray(200_000)
print(libc.mallinfo2().hblkhd - before)
"""

# The arenas in use once four threads have allocated.
ARENAS = """
def work():
    kept = [bytearray(2000) for _ in range(1000)]
    barrier.wait()
barrier = threading.Barrier(4)
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
path = "/dev/shm/arenas-%d.xml" % __import__("os").getpid()
libc.fopen.restype = ctypes.c_void_p
f = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(f))
libc.fclose(ctypes.c_void_p(f))
print(open(path).read().count("<heap nr="))
__import__("os").unlink(path)
"""

# The resident bytes given back once most of 60 MB of small blocks are freed.
TRIM = """
blocks = [bytearray(3000) for _ in range(20_000)]
kept = blocks[::64]
del blocks
before = resident()
malloc.give_back_free_memory()
print(before - resident())
"""


def measure(mode: str, **env: str) -> tuple[int, int, int]:
    """In a new process: the bytes mapped for the large block, the arenas, the bytes trimmed."""
    environment = {k: v for k, v in os.environ.items() if k not in malloc.SETTINGS} | env
    done = subprocess.run(
        [sys.executable, "-c", SET_UP + LARGE_BLOCK + ARENAS + TRIM, mode],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    mapped, arenas, trimmed = (int(line) for line in done.stdout.split())
    return mapped, arenas, trimmed


def test_large_blocks_mapped_one_arena_and_free_pages_given_back() -> None:
    mapped, arenas, trimmed = measure("set")
    assert mapped >= 200_000, "a large block is mapped even after a larger one was freed"
    assert arenas == 1, "threads share one arena"
    assert trimmed > 20 * 1024 * 1024, "free pages are given back"


def test_without_the_settings_glibc_does_none_of_it() -> None:
    mapped, arenas, trimmed = measure("default")
    assert mapped == 0, "glibc raised its threshold"
    assert arenas > 1
    assert trimmed < 1024 * 1024, "nothing is trimmed unless set for a daemon"


def test_the_settings_the_environment_makes_hold() -> None:
    mapped, arenas, _ = measure(
        "set", MALLOC_MMAP_THRESHOLD_=str(1024 * 1024), MALLOC_ARENA_MAX="8"
    )
    assert mapped == 0
    assert arenas > 1
