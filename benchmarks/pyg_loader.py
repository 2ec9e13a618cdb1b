"""PyG-shaped loading (gnnscale.pyg) beside the engine's block sampler, in the same run (issue 46).

One synthetic graph (datasets.synthetic: 100,000 nodes, average degree 20, 128 features),
fan-outs 15,10,5 from the seeds, batch 1024 shuffled training nodes, 2 threads. Two pairs,
timed alternately (engine, PyG-shaped, engine, ...) since the machine is noisy; ratios of medians:

- sampler: ``GnnscaleSampler.sample_from_nodes`` (PyG's ``SamplerOutput``: node, row, col,
  e_id, per-hop counts) against ``samplers.NeighborSampler.sample`` (the engine's blocks);
- loader: iterating ``gnnscale.pyg.NeighborLoader`` (PyG's ``NodeLoader``: sampling, then PyG's
  ``filter_data`` gathering x, y, masks and e_id into a ``Data``) against the engine's sample plus
  the gather of its input rows' x and its seeds' y (what the engine's loader fetches).

The PyG shape draws each node's in-edges once (at the hop that reached it); the engine's blocks
draw every destination of every hop (the seeds again at hop 2, ...), so they draw more edges.

    python benchmarks/pyg_loader.py --json results/pyg_loader.json
    python benchmarks/pyg_loader.py --smoke
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import write_json  # noqa: E402

from gnnscale.datasets.synthetic import generate_synthetic  # noqa: E402
from gnnscale.pyg import GnnscaleSampler, NeighborLoader  # noqa: E402
from gnnscale.samplers import NeighborSampler  # noqa: E402
from torch_geometric.sampler import NodeSamplerInput  # noqa: E402


def timed(fn, min_seeds: int) -> dict:
    """Run ``fn() -> iterator of (seeds, edges)`` until ``min_seeds`` seeds are done."""
    n_seeds = n_edges = n_batches = 0
    t0 = time.perf_counter()
    while n_seeds < min_seeds:
        for seeds, edges in fn():
            n_seeds, n_edges, n_batches = n_seeds + seeds, n_edges + edges, n_batches + 1
            if n_seeds >= min_seeds:
                break
    dt = time.perf_counter() - t0
    return dict(seconds=dt, seeds=n_seeds, seeds_per_s=n_seeds / dt, mean_edges=n_edges / n_batches)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-nodes", type=int, default=100_000)
    ap.add_argument("--avg-degree", type=float, default=20)
    ap.add_argument("--features", type=int, default=128)
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs per side")
    ap.add_argument("--min-seeds", type=int, default=20480, help="seeds per timed run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="5,000 nodes, 16 features, 1 run per side")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.num_nodes, args.features, args.repeats, args.min_seeds, args.batch_size = 5000, 16, 1, 2048, 256
    fanouts = [int(f) for f in args.fanouts.split(",")]
    torch.set_num_threads(args.threads)
    try:
        import numba

        numba.set_num_threads(args.threads)
    except ImportError:
        pass

    data = generate_synthetic(num_nodes=args.num_nodes, avg_degree=args.avg_degree, num_features=args.features,
                              train_frac=0.3, seed=0)
    train = torch.nonzero(data.train_mask).flatten()
    pyg = GnnscaleSampler(data.edge_index, data.num_nodes, fanouts, seed=0)
    engine = NeighborSampler(pyg.indptr, pyg.indices, fanouts, seed=0)
    loader = NeighborLoader(data, num_neighbors=fanouts, input_nodes=train, batch_size=args.batch_size,
                            shuffle=True, seed=0)
    gen = torch.Generator().manual_seed(0)

    def engine_batches(fetch: bool):
        perm = train[torch.randperm(train.numel(), generator=gen)]
        for step, seeds in enumerate(torch.split(perm, args.batch_size)):
            mb = engine.sample(seeds, epoch=0, step=step)
            if fetch:
                data.x[mb.input_ids], data.y[seeds]
            yield seeds.numel(), mb.num_sampled_edges

    def pyg_samples():
        perm = torch.randperm(train.numel(), generator=gen)
        for ids in torch.split(perm, args.batch_size):
            out = pyg.sample_from_nodes(NodeSamplerInput(input_id=ids, node=train[ids]))
            yield ids.numel(), out.row.numel()

    def pyg_loader():
        for batch in loader:
            yield batch.batch_size, batch.edge_index.size(1)

    pairs = {"sampler": (lambda: engine_batches(False), pyg_samples),
             "loader": (lambda: engine_batches(True), pyg_loader)}
    for eng, ours in pairs.values():  # warm-up: numba's compile / cache load, first allocations
        next(iter(eng())), next(iter(ours()))
    report = dict(graph=dict(num_nodes=data.num_nodes, num_edges=data.edge_index.size(1), features=args.features),
                  fanouts=fanouts, batch_size=args.batch_size, threads=args.threads, kernels=pyg.kernels.name,
                  target_ratio=0.8, pairs={})
    for name, (eng, ours) in pairs.items():
        runs = {"engine": [], "pyg": []}
        for r in range(args.repeats):
            runs["engine"].append(timed(eng, args.min_seeds))
            runs["pyg"].append(timed(ours, args.min_seeds))
            print(f"[{name}] run {r}: engine {runs['engine'][-1]['seeds_per_s']:,.0f} seeds/s "
                  f"({runs['engine'][-1]['mean_edges']:,.0f} edges/batch), PyG-shaped "
                  f"{runs['pyg'][-1]['seeds_per_s']:,.0f} seeds/s ({runs['pyg'][-1]['mean_edges']:,.0f} edges/batch)",
                  flush=True)
        med = {k: statistics.median(r["seeds_per_s"] for r in v) for k, v in runs.items()}
        report["pairs"][name] = dict(runs=runs, median_seeds_per_s=med,
                                     ratio_pyg_over_engine=med["pyg"] / med["engine"])
    print("\npair      engine seeds/s   PyG-shaped seeds/s   ratio (target >= 0.8)")
    for name, e in report["pairs"].items():
        m = e["median_seeds_per_s"]
        print(f"{name:8s} {m['engine']:15,.0f} {m['pyg']:20,.0f} {e['ratio_pyg_over_engine']:7.2f}")
    write_json(args.json, report)


if __name__ == "__main__":
    main()
