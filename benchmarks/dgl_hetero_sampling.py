#!/usr/bin/env python
"""DGL 2.1's heterogeneous neighbour sampling on a typed graph saved by ``hetero.py --what sampling``.

Run with the DGL peer's Python (``/tmp/peers/dgl/bin/python``, built by
``bash ../shared/peers/setup_peers.sh dgl``); called by ``benchmarks/hetero.py``, one timed run per
call (the caller alternates it with gnnscale's and takes the ratio of medians).

The graph folder (written once by ``hetero.py``) holds ``graph.json`` (node types and their counts,
relations ``[src type, name, dst type]``, the target type) and, per relation ``r`` (in relation-id
order), ``rel{r}_src.npy`` / ``rel{r}_dst.npy`` (int64 per-type ids), plus ``seeds.npy`` (int64
per-type ids of the target type's training nodes). ``dgl.heterograph`` of exactly those edges, then
``dgl.dataloading.NeighborSampler`` with the same fan-out for every relation (an int per layer:
DGL applies it to each edge type), a ``DataLoader`` over the seeds (batch ``--batch-size``, shuffled,
``num_workers=0``). ``--fanouts`` lists hops from the seeds outwards (PyG's order, as gnnscale's
``--fanouts``); DGL takes them from the input layer, i.e. reversed.

    /tmp/peers/dgl/bin/python benchmarks/dgl_hetero_sampling.py --graph DIR --fanouts 15,10 --out run.json
"""
import argparse
import json
import os
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", required=True, help="folder written by hetero.py --what sampling")
    ap.add_argument("--fanouts", default="15,10", help="per hop from the seeds (same for every relation)")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--min-seeds", type=int, default=51200, help="seeds per timed run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    os.environ.setdefault("DGLBACKEND", "pytorch")
    import torch
    import dgl

    torch.set_num_threads(args.threads)
    os.environ["GNNSCALE_WORKER_THREADS"] = str(args.threads)  # the engine workers' kernels (parallel)
    torch.manual_seed(args.seed)
    meta = json.load(open(os.path.join(args.graph, "graph.json")))
    t0 = time.perf_counter()
    data = {}
    for r, (s, name, d) in enumerate(meta["edge_types"]):
        src = torch.from_numpy(np.load(os.path.join(args.graph, f"rel{r}_src.npy")))
        dst = torch.from_numpy(np.load(os.path.join(args.graph, f"rel{r}_dst.npy")))
        data[(s, name, d)] = (src, dst)
    g = dgl.heterograph(data, num_nodes_dict=dict(zip(meta["node_types"], meta["num_nodes"])))
    g = g.formats(["csc"])
    build_s = time.perf_counter() - t0
    seeds = torch.from_numpy(np.load(os.path.join(args.graph, "seeds.npy")))
    fanouts = [int(f) for f in args.fanouts.split(",")]
    sampler = dgl.dataloading.NeighborSampler(list(reversed(fanouts)))
    loader = dgl.dataloading.DataLoader(g, {meta["target_type"]: seeds}, sampler, batch_size=args.batch_size,
                                        shuffle=True, drop_last=False, num_workers=0)
    it = iter(loader)  # warm-up: two batches
    for _ in range(min(2, len(loader))):
        next(it)
    del it
    etypes = g.canonical_etypes
    per_rel = {name: 0 for _, name, _ in etypes}
    n_seeds = n_batches = n_input = n_edges = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    while n_seeds == 0 or n_seeds < args.min_seeds:  # passes over the seeds
        for input_nodes, output_nodes, blocks in loader:
            n_seeds += sum(v.numel() for v in output_nodes.values())
            n_batches += 1
            n_input += sum(v.numel() for v in input_nodes.values())
            for b in blocks:
                for et in b.canonical_etypes:
                    m = b.num_edges(et)
                    per_rel[et[1]] += m
                    n_edges += m
            if n_seeds >= args.min_seeds:
                break
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    out = dict(system="dgl", dgl_version=dgl.__version__, torch_version=torch.__version__, time_s=dt, cpu_s=cpu,
               seeds=n_seeds, batches=n_batches, seeds_per_s=n_seeds / dt, seeds_per_cpu_s=n_seeds / cpu, mean_sampled_edges=n_edges / n_batches,
               mean_input_nodes=n_input / n_batches,
               mean_sampled_edges_per_relation={k: v / n_batches for k, v in per_rel.items()},
               graph_build_s=build_s, num_edges=int(g.num_edges()), threads=args.threads,
               dgl_fanouts=list(reversed(fanouts)))
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"[dgl] {n_seeds / dt:,.0f} seeds/s, {n_edges / n_batches:,.0f} sampled edges/batch, "
          f"{n_input / n_batches:,.0f} input nodes/batch ({n_batches} batches, {dt:.2f} s)", flush=True)


if __name__ == "__main__":
    main()
