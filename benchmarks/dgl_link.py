#!/usr/bin/env python
"""DGL 2.1's link-prediction training (edge prediction sampler) on a graph saved by ``link.py --what throughput``.

Run with the DGL peer's Python (``/tmp/peers/dgl/bin/python``, built by
``bash ../shared/peers/setup_peers.sh dgl``; numpy, torch 2.2.1 and dgl only, no gnnscale);
called by ``benchmarks/link.py``, one run per call (the caller alternates it with gnnscale's runs
and takes the ratio of medians).

Inputs (``--graph DIR``, written once by ``link.py``), all in the graph's **original** node ids:

* ``mp_edges.npy`` int64 [2, E]: the message-passing graph gnnscale trains on (every edge of the
  R-MAT graph but the validation and test pairs, both directions; read back from gnnscale's
  1-part partition, so both sides sample the identical graph);
* ``train_pos.npy`` int64 [2, Etr]: the supervision (seed) edges, one direction per pair;
* ``graph.json``: ``num_nodes`` and ``features`` (the ``x.npy`` [N, F] of the ``dir:`` dataset).

What runs: ``dgl.graph(mp_edges)`` (CSC and COO), ``reverse_eids`` of every edge (the graph is
symmetric), the seed edges' ids in it, then::

    sampler = NeighborSampler(fanouts reversed)        # --fanouts is per hop from the seeds
    sampler = as_edge_prediction_sampler(sampler, exclude="reverse_id", reverse_eids=rev,
                                         negative_sampler=Uniform(k))
    DataLoader(g, train_eids, sampler, batch_size=B, shuffle=True, drop_last=False, num_workers=0)

``exclude="reverse_id"`` removes every batch positive and its reverse from the sampled blocks:
what gnnscale's ``LinkSampler`` does (``--exclude self`` / ``none`` for the other choices).
``--neg per_source`` is DGL's ``negative_sampler.Uniform(k)`` (each positive's source, a uniform
destination: gnnscale's ``--neg-sampling per_source``); ``--neg uniform`` draws both endpoints
uniformly (gnnscale's ``--neg-sampling uniform``; a callable negative sampler here).

Model: GraphSAGE (``dglnn.SAGEConv(..., "mean")``), ``--num-layers`` layers, every layer
``--hidden`` wide (the last one too: the embedding), ReLU and dropout between layers, none on the
input; a dot-product decoder; BCE with logits over the positives and negatives (mean); Adam.

Timing: ``--warmup-batches`` untimed batches, then ``--epochs`` passes, each at most
``--max-steps`` batches (0: the whole epoch). Per pass: seconds, seed (positive) edges,
seed edges per second, mean loss, and the seconds spent waiting for the loader (sampling),
gathering input rows and in forward/backward/step, with per-batch means of seed nodes, input
nodes and sampled edges.

    /tmp/peers/dgl/bin/python benchmarks/dgl_link.py --graph DIR --fanouts 10,5 --max-steps 100 --out run.json
"""
import argparse
import json
import os
import time

import numpy as np


def reverse_and_train_eids(src, dst, n, train):
    """(reverse_eids int64 [E], train_eids int64 [Etr]) of a symmetric edge list (no duplicates)."""
    key = src * n + dst
    order = np.argsort(key, kind="stable")
    skey = key[order]

    def find(q, what):
        pos = np.searchsorted(skey, q)
        pos = np.minimum(pos, skey.size - 1)
        if not np.array_equal(skey[pos], q):
            raise SystemExit(f"{what}: {int((skey[pos] != q).sum())} edges are not in the message-passing graph")
        return order[pos]

    rev = find(dst * n + src, "reverse edges (the graph must be symmetric)")
    tr = find(train[0] * n + train[1], "training edges")
    return rev, tr


def build_model(in_feats, hidden, n_layers, dropout):
    import torch.nn as nn
    import torch.nn.functional as F
    import dgl.nn as dglnn

    class SAGE(nn.Module):
        def __init__(self):
            super().__init__()
            dims = [in_feats] + [hidden] * n_layers
            self.layers = nn.ModuleList(dglnn.SAGEConv(dims[i], dims[i + 1], "mean") for i in range(n_layers))
            self.dropout = nn.Dropout(dropout)

        def forward(self, blocks, x):
            h = x
            for i, (layer, block) in enumerate(zip(self.layers, blocks)):
                h = layer(block, h)
                if i != len(self.layers) - 1:
                    h = self.dropout(F.relu(h))
            return h

    return SAGE()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", required=True, help="folder written by link.py (mp_edges.npy, train_pos.npy, graph.json)")
    ap.add_argument("--fanouts", default="10,5", help="per hop from the seeds (DGL's NeighborSampler gets them reversed)")
    ap.add_argument("--batch-size", type=int, default=1024, help="positive (seed) edges per batch")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--num-layers", type=int, default=0, help="default: the number of fan-outs")
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--neg", default="per_source", choices=["per_source", "uniform"])
    ap.add_argument("--num-negatives", type=int, default=1)
    ap.add_argument("--exclude", default="reverse_id", choices=["reverse_id", "self", "none"])
    ap.add_argument("--epochs", type=int, default=2, help="timed passes")
    ap.add_argument("--max-steps", type=int, default=0, help="batches per pass (0: the whole epoch)")
    ap.add_argument("--warmup-batches", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    os.environ.setdefault("DGLBACKEND", "pytorch")
    import torch
    import torch.nn.functional as F
    import dgl

    torch.set_num_threads(args.threads)
    os.environ["GNNSCALE_WORKER_THREADS"] = str(args.threads)  # the engine workers' kernels (parallel)
    torch.manual_seed(args.seed)
    dgl.seed(args.seed)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    layers = args.num_layers or len(fanouts)
    meta = json.load(open(os.path.join(args.graph, "graph.json")))
    n = int(meta["num_nodes"])
    t0 = time.perf_counter()
    mp = np.load(os.path.join(args.graph, "mp_edges.npy"))
    train = np.load(os.path.join(args.graph, "train_pos.npy"))
    x = torch.from_numpy(np.load(meta["features"]))
    if x.shape[0] != n:
        raise SystemExit(f"features have {x.shape[0]} rows, the graph {n} nodes")
    rev, train_eids = reverse_and_train_eids(mp[0], mp[1], n, train)
    g = dgl.graph((torch.from_numpy(mp[0]), torch.from_numpy(mp[1])), num_nodes=n)
    del mp
    g = g.formats(["csc", "coo"])  # CSC: in-neighbour sampling; COO: the pair graphs' endpoints
    build_s = time.perf_counter() - t0

    if args.neg == "per_source":
        neg = dgl.dataloading.negative_sampler.Uniform(args.num_negatives)
    else:
        k = args.num_negatives

        def neg(graph, eids):  # both endpoints uniform (gnnscale's --neg-sampling uniform)
            m = len(eids) * k
            return torch.randint(0, n, (m,)), torch.randint(0, n, (m,))

    sampler = dgl.dataloading.NeighborSampler(list(reversed(fanouts)))
    ex = dict(exclude="reverse_id", reverse_eids=torch.from_numpy(rev)) if args.exclude == "reverse_id" else \
        dict(exclude="self") if args.exclude == "self" else {}
    sampler = dgl.dataloading.as_edge_prediction_sampler(sampler, negative_sampler=neg, **ex)
    loader = dgl.dataloading.DataLoader(g, torch.from_numpy(train_eids), sampler, batch_size=args.batch_size,
                                        shuffle=True, drop_last=False, num_workers=0)
    model = build_model(x.shape[1], args.hidden, layers, args.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    def step(input_nodes, pair_graph, neg_graph, blocks, tm):
        t1 = time.perf_counter()
        bx = x[input_nodes]
        t2 = time.perf_counter()
        h = model(blocks, bx)
        ps, pd = pair_graph.edges()
        ns, nd = neg_graph.edges()
        score = torch.cat([(h[ps] * h[pd]).sum(-1), (h[ns] * h[nd]).sum(-1)])
        label = torch.cat([torch.ones(ps.numel()), torch.zeros(ns.numel())])
        loss = F.binary_cross_entropy_with_logits(score, label)
        opt.zero_grad()
        loss.backward()
        opt.step()
        t3 = time.perf_counter()
        tm["gather"] += t2 - t1
        tm["compute"] += t3 - t2
        return loss.item(), int(ps.numel()), int(ns.numel())

    model.train()
    tm = dict(sample=0.0, gather=0.0, compute=0.0)
    it = iter(loader)
    for _ in range(min(args.warmup_batches, len(loader))):
        step(*next(it), tm)
    del it
    full_steps = len(loader)
    epochs = []
    for ep in range(args.epochs):
        tm = dict(sample=0.0, gather=0.0, compute=0.0)
        n_pos = n_neg = steps = n_seed_nodes = n_input = n_edges = 0
        losses = []
        c0 = time.process_time()
        t0 = time.perf_counter()
        ts = t0
        for input_nodes, pair_graph, neg_graph, blocks in loader:
            tm["sample"] += time.perf_counter() - ts
            loss, p, q = step(input_nodes, pair_graph, neg_graph, blocks, tm)
            losses.append(loss)
            n_pos += p
            n_neg += q
            steps += 1
            n_seed_nodes += pair_graph.num_nodes()
            n_input += input_nodes.numel()
            n_edges += sum(b.num_edges() for b in blocks)
            if args.max_steps and steps >= args.max_steps:
                break
            ts = time.perf_counter()
        dt = time.perf_counter() - t0
        cpu = time.process_time() - c0
        e = dict(time_s=dt, cpu_s=cpu, steps=steps, seed_edges=n_pos, negative_edges=n_neg,
                 seed_edges_per_s=n_pos / dt, loss=float(np.mean(losses)),
                 mean_seed_nodes=n_seed_nodes / steps, mean_input_nodes=n_input / steps,
                 mean_sampled_edges=n_edges / steps, complete=steps == full_steps,
                 **{k + "_s": v for k, v in tm.items()})
        epochs.append(e)
        print(f"[dgl link] pass {ep}: {dt:.2f}s {steps} steps {n_pos / dt:,.0f} seed edges/s loss {e['loss']:.4f} "
              f"(sample {tm['sample']:.2f}s gather {tm['gather']:.2f}s compute {tm['compute']:.2f}s; per batch "
              f"{e['mean_seed_nodes']:,.0f} seed nodes, {e['mean_input_nodes']:,.0f} input nodes, "
              f"{e['mean_sampled_edges']:,.0f} sampled edges)", flush=True)
    out = dict(system="dgl", dgl_version=dgl.__version__, torch_version=torch.__version__, threads=torch.get_num_threads(),
               num_nodes=n, num_edges=int(g.num_edges()), train_edges=int(train.shape[1]), graph_build_s=build_s,
               full_epoch_steps=full_steps, dgl_fanouts=list(reversed(fanouts)), num_layers=layers,
               hidden=args.hidden, batch_size=args.batch_size, neg=args.neg, num_negatives=args.num_negatives,
               exclude=args.exclude, max_steps=args.max_steps, epochs=epochs)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
