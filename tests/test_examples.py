"""The OGB example scripts run unchanged, offline, on tiny OGB-layout copies of their datasets.

Each script is started as a user would start it on one machine (``--root``, ``--epochs 5``,
``--workers 2``, ``--cache-dir``; no other flag), on a few hundred nodes written by
``ogb_fixture.write_tiny_ogb`` in OGB's own raw layout (csv for arxiv/products, npz for
papers100M), so the path through ``ogb``, partitioning, the spawned workers and OGB's Evaluator
is the real one.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ogb_fixture import write_tiny_ogb

REPO = Path(__file__).resolve().parents[1]
ACC = re.compile(r"^test accuracy \(OGB Evaluator\): (\S+) ", re.MULTILINE)
SECONDS = re.compile(r"^epoch seconds: (\S+)$", re.MULTILINE)


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, name",
    [("ogbn_arxiv.py", "ogbn-arxiv"), ("ogbn_products.py", "ogbn-products"), ("ogbn_papers100M.py", "ogbn-papers100M")],
)
def test_example_runs_on_tiny_ogb(tmp_path: Path, script: str, name: str) -> None:
    pytest.importorskip("ogb")
    root, cache = tmp_path / "ogb", tmp_path / "cache"
    write_tiny_ogb(root, name, num_nodes=240, num_features=16, num_classes=4, seed=0)
    env = dict(os.environ, GNNSCALE_CACHE=str(tmp_path / "env-cache"), CI="1")
    cmd = [sys.executable, str(REPO / "examples" / script), "--root", str(root), "--epochs", "5", "--workers", "2",
           "--cache-dir", str(cache)]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{script} exited with {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr[-4000:]}"
    acc = ACC.search(r.stdout)
    assert acc, f"no test accuracy line in the output of {script}:\n{r.stdout}"
    # 4 classes (chance 0.25), labels learnable from features + graph; 5 epochs (one step each:
    # every script's batch holds all the train nodes) so that every script learns. Measured with
    # the fixture's seed 0 and the scripts' --seed 0: arxiv 1.000, products 0.958, papers100M
    # 0.791 (48, 48, 43 test nodes); over --seed 0..2 the lowest were 0.979, 0.938, 0.721. With
    # --epochs 1, products stayed near chance (0.29-0.48 over --seed 0..3).
    assert float(acc.group(1)) > 0.6, f"{script}: {acc.group(0)}"
    secs = SECONDS.search(r.stdout)
    assert secs and float(secs.group(1)) > 0.0, r.stdout
    assert any(cache.iterdir()), "the partition was not written to --cache-dir"
