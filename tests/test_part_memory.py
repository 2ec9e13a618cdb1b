"""A worker reads its own part only: bytes read and resident memory grow with the part, not the graph."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from gnnscale.datasets import generate_synthetic
from gnnscale.partitioning import partition_graph

PROBE = textwrap.dedent(
    """
    import json, sys, numpy as np, torch
    from gnnscale.partitioning import load_part

    def io():
        with open("/proc/self/io") as f:
            d = dict(line.split(": ") for line in f.read().splitlines())
        return int(d["rchar"])

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    # Warm the code paths (lazy imports, first allocations) on another part, outside the window.
    warm = load_part(sys.argv[1], int(sys.argv[3]), verify=True)
    float(warm.features(torch.arange(warm.num_owned)).sum())
    del warm
    import gc; gc.collect()
    r0, m0 = io(), rss()
    part = load_part(sys.argv[1], int(sys.argv[2]), verify=True)
    x = part.features(torch.arange(part.num_owned))  # touch every owned feature row
    s = float(x.sum()) + float(part.indices.sum())
    print(json.dumps({"read": io() - r0, "rss_growth": rss() - m0}))
    """
)


def test_worker_reads_only_its_part(tmp_path):
    data = generate_synthetic(num_nodes=60000, avg_degree=10, num_features=128, seed=1)
    out = tmp_path / "p"
    partition_graph(data, 8, out, method="metis")
    sizes = {p: sum(f.stat().st_size for f in (out / f"part{p}").iterdir()) for p in range(8)}
    total = sum(sizes.values())
    meta_bytes = (out / "meta.json").stat().st_size
    r = subprocess.run([sys.executable, "-c", PROBE, str(out), "2", "5"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    own = sizes[2]
    # Checksumming reads each own file once, loading reads the small arrays again: <= 2x own + meta.
    assert got["read"] <= 2 * own + meta_bytes + (1 << 20), (got, own, total)
    assert got["read"] < total - own  # far less than the other parts together
    # Resident memory: the own part mapped and its features copied out once (2x own), plus a
    # little allocator slack; the whole graph would be 4x more than that bound.
    assert got["rss_growth"] <= 2 * own + (8 << 20), (got, own, total)
    assert 2 * own + (8 << 20) < total / 2


# The stated constants of the law. A worker's start-up memory (before its first step: torch,
# numba, gloo with three process groups, the model, DDP, the optimizer, the part's small arrays)
# measured 460-620 MB: how much of the shared libraries counts as resident depends on what the
# page cache holds (a fresh virtual environment's libraries map in ~120 MB more). On top of it,
# one step's rows, blocks and activations or one evaluation slice's (64 MB of rows).
STARTUP_MB = 900
STEP_MB = 350


def test_worker_memory_follows_its_part_in_training_and_evaluation(tmp_path):
    """Real 2- and 4-worker runs (training steps, then layer-wise evaluation of every node):
    each worker's peak resident memory is at most 2x its part's bytes plus the stated constant
    (and its own start-up memory plus 2x its part plus one step's), and halving the part
    shrinks the memory above start-up by at least 0.35x what the part shrank (the part's pages
    and evaluation's own rows shrink; the buffers of a step or an evaluation slice do not). (Before,
    relabeling tables, presampling counts and degrees were sized by the whole graph, and
    evaluation gathered every halo row: the 4-part worker was no smaller than the 2-part one.)"""
    from gnnscale.process.launch import launch_local
    from gnnscale.training.trainer import TrainConfig, train_worker

    # Wide rows, so that the part's bytes stand well above the noise of a step's buffers.
    data = generate_synthetic(num_nodes=300_000, avg_degree=8, num_features=512, num_classes=8, seed=3)
    above, parts = {}, {}
    for P in (2, 4):
        out = tmp_path / f"p{P}"
        partition_graph(data, P, out, method="ldg")
        parts[P] = [sum(f.stat().st_size for f in (out / f"part{p}").iterdir()) / 1e6 for p in range(P)]
        metrics = tmp_path / f"m{P}.json"
        # Host reads off: the other parts' file pages a worker reads would count in its resident
        # memory (the host's page cache holds them once, shared); this bounds what a worker holds
        # for its own part, as on separate hosts.
        cfg = TrainConfig(epochs=1, max_steps=4, fanouts=[10, 5], batch_size=512, hidden=64, metrics=str(metrics),
                          progress=False, eval_every=1, eval_method="layerwise", seed=0, host_features=False,
                          host_graph=False)
        launch_local(train_worker, P, args=(str(out), cfg))
        run = json.loads(metrics.read_text())
        epoch = run["epochs"][-1]
        assert epoch["test_acc"] > 0.2  # the evaluation ran over every node (chance: 1/8)
        peaks, starts = epoch["peak_rss_mb_by_rank"], run["startup_rss_mb_by_rank"]
        print({"parts": P, "peak_mb": peaks, "startup_mb": starts, "part_mb": parts[P]})
        for peak, start, part in zip(peaks, starts, parts[P]):
            assert peak <= 2 * part + STARTUP_MB, (P, peaks, parts[P])
            assert peak <= start + 2 * part + STEP_MB, (P, peaks, starts, parts[P])
        above[P] = max(p - s for p, s in zip(peaks, starts))
    assert above[2] - above[4] >= 0.35 * (max(parts[2]) - max(parts[4])), (above, parts)
