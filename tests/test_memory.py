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
for i in range(9):  # a step's large tensors (64-72 MB), allocated, written, freed, as training does
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
    # the later rounds reuse the first round's pages, at the same peak.
    assert min(plain["faults"][3:]) >= 32, plain
    assert max(kept["faults"][3:]) <= 4, kept
    assert kept["peak_mb"] <= plain["peak_mb"] * 1.05 + 5, (kept, plain)
    assert _run("keep", MALLOC_TRIM_THRESHOLD_="131072")["state"] == "user settings"
    assert _run("keep", GLIBC_TUNABLES="glibc.malloc.mmap_max=4")["state"] == "user settings"
    assert _run("keep", THP_MEM_ALLOC_ENABLE="0")["state"] == "default (THP_MEM_ALLOC_ENABLE is not 1)"
