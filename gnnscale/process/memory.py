"""A worker's heap: freed tensors' memory is kept for the next step, not returned to the kernel.

Every training step allocates and frees the same large tensors (the gathered input rows, each
layer's output, their gradients: 1-35 MB each at batch 1024). glibc's malloc serves blocks
above its mmap threshold (at most 32 MB) with a fresh ``mmap`` and trims the heap's free top
above twice that threshold, so those blocks go back to the kernel when freed and the next step
takes them again as fresh pages: a page fault and the kernel zeroing every page, each step. On
this project's VMs a fresh 64 MB tensor filled once took 17-44 ms against 6 ms for a warm one.
One step of GraphSAGE 3 x 256 on R-MAT 100k (batch 1024, fan-outs 5,10,15, 2 threads, huge
pages on as workers run) took 1,150-1,700 page faults and, over 4 alternating runs of 3 epochs
each, a median of 1.25 s of forward, backward and Adam per epoch; with the heap kept, 18-66
faults and 0.99 s (the compiled ReLU-dropout and aggregation kernels, which write fresh
outputs, 2-2.7x faster). Peak memory is the same (1,097 against 1,094 MB): what a worker keeps is
what it used.

:func:`keep_freed_memory` sets glibc's ``M_MMAP_MAX`` to 0 (large blocks come from the heap,
which keeps them) and ``M_TRIM_THRESHOLD`` to 2 GiB - 1 (freed memory stays mapped), once, in
the worker. Only with torch's huge-page allocation on (``THP_MEM_ALLOC_ENABLE=1``, what
``launch.thread_env`` gives workers unless the user set it): torch then asks for 2 MB aligned
blocks, which the kept heap reuses (64 MB tensors of three sizes in turn: 0 faults after the
first round, peak 291 MB as without). With torch's default 64-byte alignment glibc's aligned
allocation leaves small pieces behind that stop a freed block from being reused whole (the
same test: peak 431 MB against 291), so the heap is left as glibc has it. It also does nothing
on another C library or platform, or when the user configured malloc through its environment
(``MALLOC_MMAP_MAX_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TOP_PAD_`` or ``glibc.malloc`` tunables): a value the user set wins.

The cost, in the worst heap layout: a kept heap never returns its holes, and when the
interpreter's small blocks sit between freed large ones, the largest of a cycle of sizes may not
fit any hole and take a fresh block each cycle until the holes grow large enough. 64/68/72 MB in
turn for 90 rounds: peak 400 MB on 12 of 14 runs, 604 and 1,036 MB on the other two (plain heap:
400 on every run). To give the memory back, set ``MALLOC_MMAP_MAX_=65536`` (glibc's default) in
the workers' environment: the user's setting wins, and the run's metrics say ``user settings``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_MAX = -4
USER_SETTINGS = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")
_STATE: dict[str, str] = {}


def keep_freed_memory() -> str:
    """Keep this process's freed heap memory mapped (see the module doc); idempotent.

    Returns what the heap does now, for the run's metrics: ``"kept"``, ``"user settings"``
    (the user's malloc variables are in force) or ``"default (<why>)"`` (torch's huge-page
    allocation off, not glibc, or ``mallopt`` refused)."""
    if "heap" in _STATE:
        return _STATE["heap"]
    if os.environ.get("THP_MEM_ALLOC_ENABLE") != "1":
        state = "default (THP_MEM_ALLOC_ENABLE is not 1)"
    elif any(k in os.environ for k in USER_SETTINGS) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        state = "user settings"
    elif not sys.platform.startswith("linux"):
        state = f"default ({sys.platform})"
    else:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
            gnu = libc.gnu_get_libc_version  # glibc only (musl has no mallopt tuning of this kind)
        except (OSError, AttributeError):
            state = "default (not glibc)"
        else:
            mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            gnu.restype = ctypes.c_char_p
            ok = mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, 2**31 - 1) == 1
            state = "kept" if ok else f"default (mallopt refused, glibc {gnu().decode()})"
    _STATE["heap"] = state
    return state
