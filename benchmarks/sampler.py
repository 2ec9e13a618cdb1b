"""Neighbor-sampling throughput: gnnscale beside DGL 2.1 in the same run (issue 4, item 1).

Both sample the same graph (the peers' ``graphgen.py`` R-MAT generator, bit-identical
arrays from its cache), fanouts 15,10,5 per hop from the seeds (DGL: ``NeighborSampler([5,
10, 15])``), batch 1024 shuffled training nodes, 2 threads each. Runs alternate (gnnscale,
DGL, gnnscale, DGL, ...) since the machine is noisy; the ratio of medians is reported.

    python benchmarks/sampler.py --json results/sampler.json
    python benchmarks/sampler.py --graphs 1m --repeats 3          # one graph only

DGL comes from ``../shared/peers`` (``bash ../shared/peers/setup_peers.sh dgl`` builds its
virtual environment under /tmp/peers/dgl); without it only gnnscale's figures are printed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
PEERS = Path(os.environ.get("GNNSCALE_PEERS", REPO.parent / "shared" / "peers"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DGL_PYTHON, dgl_python  # noqa: E402

DGL_PY = Path(DGL_PYTHON)

GRAPHS = {
    "1m": dict(num_nodes=1_000_000, avg_degree=20, feat_dim=128),
    "products": dict(num_nodes=2_449_029, avg_degree=25.3, feat_dim=100),
    "100k": dict(num_nodes=100_000, avg_degree=20, feat_dim=128),
    "5k": dict(num_nodes=5_000, avg_degree=10, feat_dim=16),  # --smoke
}


def graph_args(spec: dict) -> SimpleNamespace:
    return SimpleNamespace(graph="synthetic", num_classes=16, train_frac=0.1, seed=0,
                           rmat="0.45,0.22,0.22,0.11", cache_dir="/tmp/peers/cache",
                           planetoid_dir="", planetoid_split="frac", planetoid_missing_allx="error", **spec)


def load(spec: dict):
    sys.path.insert(0, str(PEERS))
    import graphgen

    name, data = graphgen.load_graph(graph_args(spec), log=lambda *a: print(*a, file=sys.stderr))
    n = int(data["num_nodes"])
    src = torch.from_numpy(np.asarray(data["src"], dtype=np.int64))
    dst = torch.from_numpy(np.asarray(data["dst"], dtype=np.int64))
    order = torch.argsort(dst * n + src)
    indices = src[order].contiguous()
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    return name, indptr, indices, torch.from_numpy(np.asarray(data["train_idx"], dtype=np.int64))


def run_gnnscale(indptr, indices, train_idx, fanouts, batch_size, min_seeds, backend, seed) -> dict:
    from gnnscale.samplers import NeighborSampler

    sampler = NeighborSampler(indptr, indices, fanouts, seed=seed, backend=backend)
    g = torch.Generator().manual_seed(seed)
    sampler.sample(train_idx[:batch_size])  # warm-up (and numba's compile/cache load)
    n_seeds = n_batches = n_edges = n_input = 0
    epoch = 0
    t0 = time.perf_counter()
    while n_seeds < min_seeds:
        perm = train_idx[torch.randperm(train_idx.numel(), generator=g)]
        for step, seeds in enumerate(torch.split(perm, batch_size)):
            mb = sampler.sample(seeds, epoch=epoch, step=step)
            n_seeds += seeds.numel()
            n_batches += 1
            n_edges += mb.num_sampled_edges
            n_input += mb.input_ids.numel()
            if n_seeds >= min_seeds:
                break
        epoch += 1
    dt = time.perf_counter() - t0
    return dict(time_s=dt, seeds=n_seeds, batches=n_batches, seeds_per_s=n_seeds / dt,
                mean_sampled_edges=n_edges / n_batches, mean_input_nodes=n_input / n_batches,
                backend=sampler.kernels.name)


def run_dgl(spec: dict, fanouts, batch_size, min_seeds, threads) -> dict | None:
    if dgl_python()[0] is None:
        print(f"{dgl_python()[1]}: gnnscale only", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "dgl.json"
        cmd = [str(DGL_PY), str(PEERS / "dgl_bench.py"), "--tasks", "sample", "--repeats", "1",
               "--num-nodes", str(spec["num_nodes"]), "--avg-degree", str(spec["avg_degree"]),
               "--feat-dim", str(spec["feat_dim"]), "--fanouts", ",".join(map(str, fanouts)),
               "--batch-size", str(batch_size), "--sample-min-seeds", str(min_seeds),
               "--threads", str(threads), "--out", str(out)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, DGLBACKEND="pytorch"))
        if r.returncode != 0 or not out.exists():
            print(f"DGL run failed:\n{r.stderr[-2000:]}", file=sys.stderr)
            return None
        res = json.loads(out.read_text())
        return res["sample"]["runs"][0] | {"foreign_cpu": res.get("info", {}).get("foreign_cpu")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", default="1m,products", help=f"comma-separated among {','.join(GRAPHS)}")
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs per system")
    ap.add_argument("--min-seeds", type=int, default=40960, help="seeds per timed run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--backend", default="auto", help="gnnscale kernels: auto, numba or torch")
    ap.add_argument("--no-dgl", action="store_true", help="time gnnscale only")
    ap.add_argument("--smoke", action="store_true", help="a 5,000-node graph, 2,048 seeds, 1 run per system")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.graphs, args.repeats, args.min_seeds, args.batch_size = "5k", 1, 2048, 256
    fanouts = [int(v) for v in args.fanouts.split(",")]
    torch.set_num_threads(args.threads)
    # the engine workers' kernels are timed: parallel with several threads, as in a worker the launcher started
    # (samplers.cpu_kernels.WORKER_THREADS_ENV)
    os.environ["GNNSCALE_WORKER_THREADS"] = str(args.threads)
    try:
        import numba

        numba.set_num_threads(args.threads)
    except ImportError:
        pass
    report = {"fanouts_per_hop": fanouts, "batch_size": args.batch_size, "threads": args.threads, "graphs": {}}
    for key in args.graphs.split(","):
        spec = GRAPHS[key]
        name, indptr, indices, train_idx = load(spec)
        ours, dgl = [], []
        for r in range(args.repeats):
            ours.append(run_gnnscale(indptr, indices, train_idx, fanouts, args.batch_size, args.min_seeds, args.backend, seed=r))
            print(f"[{key}] gnnscale run {r}: {ours[-1]['seeds_per_s']:,.0f} seeds/s "
                  f"({ours[-1]['mean_sampled_edges']:,.0f} edges/batch, {ours[-1]['backend']})", flush=True)
            if not args.no_dgl:
                d = run_dgl(spec, fanouts, args.batch_size, args.min_seeds, args.threads)
                if d:
                    dgl.append(d)
                    print(f"[{key}] DGL      run {r}: {d['seeds_per_s']:,.0f} seeds/s "
                          f"({d['mean_sampled_edges']:,.0f} edges/batch)", flush=True)
        med = statistics.median(o["seeds_per_s"] for o in ours)
        entry = {"graph": name, "spec": spec, "gnnscale": {"runs": ours, "median_seeds_per_s": med}}
        if dgl:
            dmed = statistics.median(d["seeds_per_s"] for d in dgl)
            entry["dgl"] = {"runs": dgl, "median_seeds_per_s": dmed}
            entry["ratio_gnnscale_over_dgl"] = med / dmed
        report["graphs"][key] = entry
        del indptr, indices
    print("\ngraph      gnnscale seeds/s   DGL seeds/s   ratio")
    for key, e in report["graphs"].items():
        d = e.get("dgl", {}).get("median_seeds_per_s")
        ratio = e.get("ratio_gnnscale_over_dgl")
        print(f"{key:9s} {e['gnnscale']['median_seeds_per_s']:17,.0f} {d or float('nan'):13,.0f} {ratio or float('nan'):7.2f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
