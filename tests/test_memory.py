"""A worker's heap keeps freed memory (gnnscale.process.memory): the next step's tensors reuse
the pages instead of faulting fresh ones in, unless the user set malloc's variables."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, resource, sys
import torch
from gnnscale.process.memory import keep_freed_memory

state = keep_freed_memory() if sys.argv[1] == "keep" else "untouched"
faults = []
for i in range(12):  # a step's large tensors (64-72 MB), allocated, written, freed, as training does
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = torch.empty((16 + i % 3) * 2**20)
    t.fill_(1.0)
    del t
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"state": state, "again": keep_freed_memory() if state != "untouched" else None, "faults": faults,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _run(mode: str, **env) -> dict:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    full["THP_MEM_ALLOC_ENABLE"] = "1"  # as workers run (launch.thread_env)
    full.update(env)
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=120, env=full)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt (Linux)")
def test_freed_memory_is_reused_without_page_faults_and_user_settings_win():
    plain = _run("plain")
    kept = _run("keep")
    assert kept["state"] == "kept" and kept["again"] == "kept"
    # glibc maps each 64-72 MB block afresh and faults it in (32-36 huge pages and more); kept,
    # the later rounds reuse the first rounds' pages. Most rounds, not all: where the interpreter's
    # own small blocks land in the heap decides whether the largest size fits a freed range again,
    # and on some runs (CI's, and here under pytest one run in two) every 72 MB round takes a fresh
    # block ([578, 546, 548, 0, 0, 548, 0, 0, 548, ...]) and the heap keeps the old ones: peak 640
    # MB against 292 over 12 rounds (process/memory.py gives the worst case measured). What holds
    # on every run: two thirds of the later rounds fault nothing, together at most half as often
    # as the plain heap; the peak is the plain one when every later round reuses.
    later_plain, later_kept = plain["faults"][3:], kept["faults"][3:]
    assert min(later_plain) >= 32, plain
    assert sum(f <= 4 for f in later_kept) >= 2 * len(later_kept) // 3, kept
    assert sum(later_kept) <= sum(later_plain) / 2, (kept, plain)
    if max(later_kept) <= 4:
        assert kept["peak_mb"] <= plain["peak_mb"] * 1.05 + 5, (kept, plain)
    else:
        assert kept["peak_mb"] <= plain["peak_mb"] * 2.5, (kept, plain)
    assert _run("keep", MALLOC_TRIM_THRESHOLD_="131072")["state"] == "user settings"
    assert _run("keep", GLIBC_TUNABLES="glibc.malloc.mmap_max=4")["state"] == "user settings"
    assert _run("keep", THP_MEM_ALLOC_ENABLE="0")["state"] == "default (THP_MEM_ALLOC_ENABLE is not 1)"
