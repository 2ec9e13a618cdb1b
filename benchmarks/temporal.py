"""Time-respecting sampling throughput against the same sampler without time (issue 57).

One random graph (skewed in-degrees, random integer times), fan-outs 15,10,5, batches of
1024 seeds, the compiled kernels on one thread; runs alternate (untimed, timed, ...) since the
machine is shared, and medians of seeds/s are reported:

- ``untimed``: :class:`gnnscale.samplers.local.NeighborSampler` (uniform, no time);
- ``temporal-shared``: :class:`~gnnscale.samplers.temporal.TemporalNeighborSampler`, one time per
  batch after every edge (the same candidates as untimed: the cost of the binary search, the
  time-mixed key and the edge times), not disjoint;
- ``temporal-shared-3/4``: one time per batch at 3/4 of the span (the binary search runs; about
  3/4 of the candidates);
- ``temporal-disjoint``: one random time per seed, a tree per seed (the temporal link task's
  batches); ``temporal-last``: the same with ``last``; ``temporal-window``: uniform in a window.

    python benchmarks/temporal.py --json results/temporal.json
    python benchmarks/temporal.py --smoke          # a tiny graph, one round (the smoke test)

PyG's temporal ``NeighborLoader`` needs pyg-lib; it is timed when importable, else said so.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]


def make_graph(n: int, e: int, span: int, seed: int = 0):
    """(indptr, indices, edge_time sorted per node, src, dst, t): a T-CSR of a random graph."""
    from gnnscale.partitioning.graph import to_csc
    from gnnscale.samplers.temporal import time_sorted_csc

    g = np.random.default_rng(seed)
    dst = np.minimum((g.random(e) ** 2 * n).astype(np.int64), n - 1)  # skewed in-degrees (density ~ 1/sqrt)
    dst = g.permutation(n)[dst]
    src = g.integers(0, n, e)
    t = g.integers(0, span, e)
    indptr, indices, eids = map(torch.from_numpy, to_csc(np.stack([src, dst]), n, return_edge_ids=True))
    et = torch.from_numpy(t)[eids]
    indices, perm = time_sorted_csc(indptr, indices, et, eids)
    return indptr, indices.contiguous(), et[perm].contiguous(), src, dst, t


def hash_trees(kernels, n: int):
    """Disjoint trees relabeled as before TreeRelabeler: the combined ids ``tree * N + node`` through
    the hash relabeling (for the before / after comparison; the blocks are the same)."""
    def trees(dst, dst_tree, counts, nbrs, times):
        nbr_tree = torch.from_numpy(np.repeat(dst_tree.numpy(), counts.numpy()))
        comb, local = kernels.relabel(dst_tree * n + dst, nbr_tree * n + nbrs)
        tree = torch.div(comb, n, rounding_mode="floor")
        return comb - tree * n, tree, times[tree], local
    return trees


def time_runs(fns: dict, batches: list, rounds: int) -> dict:
    """Median seconds per batch of each sampler, alternating between them every round."""
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for i, b in enumerate(batches):
                fn(b, i)
            times[name].append((time.perf_counter() - t0) / len(batches))
    return {k: statistics.median(v) for k, v in times.items()}


def pyg_temporal(src, dst, t, n, seeds, times, fanouts, batch):
    """Seconds per batch of PyG's NeighborLoader with time_attr (needs pyg-lib), or the reason not."""
    try:
        import pyg_lib  # noqa: F401
    except ImportError:
        return None, "pyg-lib is not installed here (PyG's temporal NeighborLoader needs it): not run"
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader

    data = Data(edge_index=torch.from_numpy(np.stack([src, dst])), edge_time=torch.from_numpy(t), num_nodes=n)
    loader = NeighborLoader(data, num_neighbors=fanouts, input_nodes=seeds, input_time=times, time_attr="edge_time",
                            batch_size=batch)
    t0 = time.perf_counter()
    k = sum(1 for _ in loader)
    return (time.perf_counter() - t0) / k, "pyg-lib"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--span", type=int, default=1_000_000, help="times are drawn in [0, span)")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--window", type=int, default=200_000)
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="a tiny graph, one round")
    ap.add_argument("--hash-relabel", action="store_true", help="also time disjoint trees relabeled the old way (a "
                    "hash of tree * N + node), in the same alternating rounds: the before / after of TreeRelabeler")
    a = ap.parse_args(argv)
    if a.smoke:
        a.nodes, a.edges, a.batches, a.rounds, a.batch = 2000, 20000, 2, 1, 128
    torch.set_num_threads(1)
    from gnnscale.samplers import cpu_kernels
    from gnnscale.samplers.local import NeighborSampler
    from gnnscale.samplers.temporal import TemporalNeighborSampler

    cpu_kernels.match_torch_threads()
    fanouts = [int(f) for f in a.fanouts.split(",")]
    indptr, indices, et, src, dst, t = make_graph(a.nodes, a.edges, a.span)
    g = np.random.default_rng(1)
    batches = [torch.from_numpy(g.choice(a.nodes, a.batch, replace=False)) for _ in range(a.batches)]
    seed_times = [torch.from_numpy(g.integers(a.span // 2, a.span, a.batch)) for _ in range(a.batches)]
    after_all = a.span + 1
    plain = NeighborSampler(indptr, indices, fanouts, seed=0, backend="numba")
    shared = TemporalNeighborSampler(indptr, indices, et, fanouts, seed=0, disjoint=False)
    disjoint = TemporalNeighborSampler(indptr, indices, et, fanouts, seed=0)
    last = TemporalNeighborSampler(indptr, indices, et, fanouts, seed=0, strategy="last")
    window = TemporalNeighborSampler(indptr, indices, et, fanouts, seed=0, window=a.window)
    fns = {
        "untimed": lambda b, i: plain.sample(b, 0, i),
        "temporal-shared": lambda b, i: shared.sample(b, after_all, 0, i),
        "temporal-shared-3/4": lambda b, i: shared.sample(b, 3 * a.span // 4, 0, i),
        "temporal-disjoint": lambda b, i: disjoint.sample(b, seed_times[i], 0, i),
        "temporal-last": lambda b, i: last.sample(b, seed_times[i], 0, i),
        "temporal-window": lambda b, i: window.sample(b, seed_times[i], 0, i),
    }
    if a.hash_relabel:
        hashed = TemporalNeighborSampler(indptr, indices, et, fanouts, seed=0)
        hashed.trees = hash_trees(hashed.kernels, a.nodes)
        fns["temporal-disjoint-hash"] = lambda b, i: hashed.sample(b, seed_times[i], 0, i)
        for i, b in enumerate(batches):  # the same blocks either way
            x, y = disjoint.sample(b, seed_times[i], 0, i), hashed.sample(b, seed_times[i], 0, i)
            assert all(torch.equal(p.src_ids, q.src_ids) and torch.equal(p.edge_index, q.edge_index)
                       and torch.equal(p.src_tree, q.src_tree) for p, q in zip(x.blocks, y.blocks))
    for name, fn in fns.items():  # compile and warm up outside the timed runs
        fn(batches[0], 0)
    sec = time_runs(fns, batches, a.rounds)
    edges = {k: plain.sample(batches[0], 0, 0).stats["sampled_edges"] if k == "untimed" else None for k in fns}
    edges["temporal-shared"] = shared.sample(batches[0], after_all, 0, 0).stats["sampled_edges"]
    edges["temporal-shared-3/4"] = shared.sample(batches[0], 3 * a.span // 4, 0, 0).stats["sampled_edges"]
    edges["temporal-disjoint"] = disjoint.sample(batches[0], seed_times[0], 0, 0).stats["sampled_edges"]
    pyg_sec, pyg_note = pyg_temporal(src, dst, t, a.nodes, torch.cat(batches), torch.cat(seed_times), fanouts,
                                     a.batch)
    out = {
        "graph": {"nodes": a.nodes, "edges": a.edges, "span": a.span}, "fanouts": fanouts, "batch": a.batch,
        "threads": 1, "rounds": a.rounds, "batches": a.batches,
        "seeds_per_s": {k: a.batch / v for k, v in sec.items()},
        "edges_first_batch": {k: v for k, v in edges.items() if v is not None},
        "ratio_temporal_shared_vs_untimed": sec["temporal-shared"] / sec["untimed"],
        "ratio_temporal_shared_3_4_vs_untimed": sec["temporal-shared-3/4"] / sec["untimed"],
        "ratio_temporal_disjoint_vs_untimed": sec["temporal-disjoint"] / sec["untimed"],
        "pyg_temporal_seeds_per_s": None if pyg_sec is None else a.batch / pyg_sec, "pyg_note": pyg_note,
    }
    if a.hash_relabel:
        out["ratio_temporal_disjoint_hash_vs_untimed"] = sec["temporal-disjoint-hash"] / sec["untimed"]
    for k, v in out["seeds_per_s"].items():
        print(f"{k:20s} {v:12,.0f} seeds/s")
    print(f"time cost (same candidates, temporal-shared / untimed seconds per batch): "
          f"{out['ratio_temporal_shared_vs_untimed']:.2f}x; at 3/4 of the span (searching): "
          f"{out['ratio_temporal_shared_3_4_vs_untimed']:.2f}x; disjoint per-seed times: "
          f"{out['ratio_temporal_disjoint_vs_untimed']:.2f}x")
    print(f"PyG temporal NeighborLoader: {pyg_note}" + ("" if pyg_sec is None else f", {a.batch / pyg_sec:,.0f} seeds/s"))
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
