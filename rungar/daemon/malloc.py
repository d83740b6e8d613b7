"""glibc's malloc, set for a daemon that runs for months and reads large answers
(docs/operating.md, "Memory").

Three habits of glibc's malloc let a daemon's resident memory grow while what it keeps does not:

* glibc serves a block of 128 KiB or more with a mapping of its own, unmapped when freed,
  unless its threshold has risen: glibc raises it to the size of every mapped block freed, so
  once a provider has answered with a few hundred KB, every later answer of that size is carved
  from the heap, between small blocks that live on (events, log lines), and the heap grows by
  the gaps. gRPC reads a large message in slices of 64 KiB: the threshold is fixed at 64 KiB,
  so each slice is a mapping, given back when freed (a few system calls per large answer; an
  answer under 64 KiB, as providers' answers are, costs none).
* Each thread that allocates gets a heap (an arena) of its own, up to eight per core, and what
  each leaves free is kept for that thread. The daemon's work runs on one thread, gRPC's I/O
  on a few others: one arena for all lets a block freed by one be reused by another.
* Memory freed inside the heap stays resident until the top of the heap is free:
  ``malloc_trim`` gives back every free page, and the daemon calls
  :func:`give_back_free_memory` after each reconcile pass.

A setting glibc reads from the environment (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_ARENA_MAX``)
is left to hold. Measured with a provider refusing every Create with 200 KB texts
(docs/benchmarks.md, refusal_memory).
"""

from __future__ import annotations

import ctypes
import os
import platform
from typing import Any

M_MMAP_THRESHOLD = -3  # mallopt's parameters (malloc.h)
M_ARENA_MAX = -8
MMAP_THRESHOLD = 64 * 1024  # gRPC's read slices, and anything larger
ARENA_MAX = 1
# Each parameter set, and glibc's environment variable for it: one the user set is kept.
SETTINGS = {
    "MALLOC_MMAP_THRESHOLD_": (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
    "MALLOC_ARENA_MAX": (M_ARENA_MAX, ARENA_MAX),
}

_libc: Any = None  # the C library, once set_for_a_daemon found it glibc's


def set_for_a_daemon() -> bool:
    """Once, early in the daemon's process, before it starts threads: fix glibc's mmap
    threshold at :data:`MMAP_THRESHOLD` and its arenas at :data:`ARENA_MAX` (each unless the
    environment sets it, :data:`SETTINGS`), and let :func:`give_back_free_memory` trim.
    Whether the C library is glibc's: with another, nothing is changed."""
    global _libc
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt, trim = libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    trim.argtypes = (ctypes.c_size_t,)
    for variable, (parameter, value) in SETTINGS.items():
        if variable not in os.environ:
            mallopt(parameter, value)
    _libc = libc
    return True


def give_back_free_memory() -> None:
    """Give the free pages of malloc's heaps back to the system (``malloc_trim``): a few
    milliseconds at most. Nothing unless :func:`set_for_a_daemon` ran in this process."""
    if _libc is not None:
        _libc.malloc_trim(0)
