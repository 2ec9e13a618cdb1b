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

``--what dist`` (or ``local,dist``): the same samplers over 2 ranks (real processes, gloo on
127.0.0.1, a 2-part partition of the same graph, or of CollegeMsg with ``--graph collegemsg``):
``DistNeighborSampler`` (untimed) beside ``DistTemporalSampler`` (disjoint, a time per seed), each
rank sampling its own batches of ``--batch`` seeds, and the 1-process samplers over the whole
graph timed by rank 0 between the 2-rank runs (rank 1 waits at a barrier), all in interleaved
rounds; plus ``temporal-before``: the 2-rank temporal sampler with fed2f50's per-hop exchange
(:func:`draw_hop_before`, a drop-in, checked to give the same blocks), and ``-keys`` rows with a
stream key per node (the rank loaders' requests, ``gnnscale.pyg.run_temporal``). Exchanges
(rounds and all_to_all calls) and bytes per hop are read from the communicator's accounting, by
category. Seeds/s of 2 ranks count both ranks' seeds.

    python benchmarks/temporal.py --what dist --json results/temporal_dist.json
    python benchmarks/temporal.py --what dist --graph collegemsg --json results/temporal_dist_cm.json

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
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED  # noqa: E402


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


def draw_hop_before(self, dst, times, fanout, key):
    """fed2f50's :meth:`DistTemporalSampler.draw_hop` (the before of the one-exchange hop): the
    request's columns split and concatenated per rank, the own part drawn apart, the answers
    split per rank and merged back one value at a time. Bound to a sampler as a drop-in."""
    from gnnscale.partitioning.routing import Route

    comm, rank, P = self.comm, self.comm.rank, self.comm.world_size
    route = Route.build(self.book.owner(dst), P)
    per_node = isinstance(key, torch.Tensor)
    cols = [route.split(dst), route.split(times)] + ([route.split(key)] if per_node else [])
    ids, ts = cols[0], cols[1]
    req = [torch.cat([c[r] for c in cols]) if r != rank else dst.new_empty(0) for r in range(P)]
    got = comm.exchange(req, "sample_request")
    w = len(cols)
    sizes = [g.numel() // w for g in got]
    served, served_t, *served_k = [torch.cat([g.view(w, -1)[j] for g in got]) for j in range(w)]
    k = 3 if self.edge_ids is None else 4
    s_counts, s_nbrs, *s_vals = self._own(served, served_t, fanout, served_k[0] if per_node else key)
    per_c = list(torch.split(s_counts, sizes))
    e_sizes = [int(c.sum()) for c in per_c]
    per_v = [torch.split(v, e_sizes) for v in (s_nbrs, *s_vals)]
    reply = [torch.cat([c, *(v[r] for v in per_v)]) for r, c in enumerate(per_c)]
    back = comm.exchange(reply, "sample_response")
    own = self._own(ids[rank], ts[rank], fanout, cols[2][rank] if per_node else key)
    counts_l, vals_l = [], [[] for _ in range(k - 1)]
    for r in range(P):
        if r == rank:
            c, vals = own[0], own[1:]
        else:
            n_r = ids[r].numel()
            c = back[r][:n_r]
            vals = torch.split(back[r][n_r:], (back[r].numel() - n_r) // (k - 1))
        counts_l.append(c)
        for acc, v in zip(vals_l, vals):
            acc.append(v)
    counts, nbrs = route.merge_segments(counts_l, vals_l[0])
    rest = [route.merge_segments(counts_l, v)[1] for v in vals_l[1:]]
    return counts, nbrs, rest[0], rest[1] if k == 4 else None


def keyed_per_node(sampler):
    """``sampler`` drawing with a stream key per frontier node (sent with the requests), as the
    rank loaders of ``gnnscale.pyg.run_temporal`` do: the same draws."""
    def hop(dst, times, fanout, key):
        return sampler.draw_hop(dst, times, fanout, torch.full((dst.numel(),), key, dtype=torch.int64))[:3]
    sampler._hop = hop
    return sampler


def same_blocks(x, y) -> bool:
    return all(torch.equal(p.src_ids, q.src_ids) and torch.equal(p.edge_index, q.edge_index)
               and torch.equal(p.edge_time, q.edge_time) and torch.equal(p.src_tree, q.src_tree)
               for p, q in zip(x.blocks, y.blocks))


def comm_per_hop(comm, fn, hops: int) -> dict:
    """One batch's exchanges by category from the communicator's accounting, per hop: rounds
    (``exchange`` calls), all_to_all calls, bytes this rank sent and received."""
    comm.stats.reset()
    fn()
    st = comm.stats.snapshot()
    return {k: {c: v / hops for c, v in st[k].items()} for k in ("rounds", "calls", "sent", "received")}


def dist_worker(parts_dir: str, whole, fanouts: list, batch: int, batches: int, rounds: int, span: int,
                num_nodes: int) -> dict:
    """One rank of ``--what dist`` (module docstring): seconds per batch of each sampler per round,
    the exchanges per hop, and the 1-process samplers' seconds (rank 0)."""
    import os
    import types

    from gnnscale.partitioning import load_part
    from gnnscale.process.comm import Communicator
    from gnnscale.process.groups import init_distributed
    from gnnscale.samplers import cpu_kernels
    from gnnscale.samplers.distributed import DistNeighborSampler
    from gnnscale.samplers.local import NeighborSampler
    from gnnscale.samplers.temporal import DistTemporalSampler, TemporalNeighborSampler

    torch.set_num_threads(1)
    cpu_kernels.match_torch_threads()
    info = init_distributed(timeout=300)
    comm = Communicator(info.rank, info.world_size, timeout=300)
    rank = info.rank
    part = load_part(parts_dir, rank)
    untimed = DistNeighborSampler(part.indptr, part.indices, part.book, comm, fanouts, seed=0,
                                  owned_keys=part.orig_ids, backend="numba")

    def temporal(disjoint=True):
        return DistTemporalSampler(part.indptr, part.indices, part.edge_time, part.orig_ids, part.book, comm,
                                   fanouts, seed=0, disjoint=disjoint)

    new, before, new_k, before_k = temporal(), temporal(), keyed_per_node(temporal()), temporal()
    shared, shared_before = temporal(False), temporal(False)
    for s in (before, before_k, shared_before):
        s.draw_hop = types.MethodType(draw_hop_before, s)
    keyed_per_node(before_k)
    after_all = span + 1  # one time after every edge: the untimed sampler's candidates
    g = np.random.default_rng(100 + rank)
    seeds = [torch.from_numpy(g.choice(num_nodes, batch, replace=False)) for _ in range(batches)]
    times = [torch.from_numpy(g.integers(span // 2, span, batch)) for _ in range(batches)]
    fns = {
        "dist-untimed": lambda i: untimed.sample(seeds[i], 0, i),
        "dist-temporal": lambda i: new.sample(seeds[i], times[i], 0, i),
        "dist-temporal-before": lambda i: before.sample(seeds[i], times[i], 0, i),
        "dist-temporal-shared": lambda i: shared.sample(seeds[i], after_all, 0, i),
        "dist-temporal-shared-before": lambda i: shared_before.sample(seeds[i], after_all, 0, i),
        "dist-temporal-keys": lambda i: new_k.sample(seeds[i], times[i], 0, i),
        "dist-temporal-keys-before": lambda i: before_k.sample(seeds[i], times[i], 0, i),
    }
    for i in range(min(3, batches)):  # the same blocks either way (also warms the kernels up)
        ref = new.sample(seeds[i], times[i], 0, i)
        for other in (before, new_k, before_k):
            assert same_blocks(ref, other.sample(seeds[i], times[i], 0, i)), "the hops disagree"
        assert same_blocks(shared.sample(seeds[i], after_all, 0, i), shared_before.sample(seeds[i], after_all, 0, i))
        untimed.sample(seeds[i], 0, i)
    hops = len(fanouts)
    exchanges = {k: comm_per_hop(comm, lambda: fn(0), hops) for k, fn in fns.items()}
    edges = {"dist-untimed": untimed.sample(seeds[0], 0, 0).stats["sampled_edges"],
             "dist-temporal": new.sample(seeds[0], times[0], 0, 0).stats["sampled_edges"],
             "dist-temporal-shared": shared.sample(seeds[0], after_all, 0, 0).stats["sampled_edges"]}
    local = {}
    if rank == 0 and whole is not None:
        indptr, indices, et = whole
        plain = NeighborSampler(indptr, indices, fanouts, seed=0, backend="numba")
        disjoint = TemporalNeighborSampler(indptr, indices, et, fanouts, seed=0)
        one_time = TemporalNeighborSampler(indptr, indices, et, fanouts, seed=0, disjoint=False)
        local = {"1proc-untimed": lambda i: plain.sample(seeds[i], 0, i),
                 "1proc-temporal": lambda i: disjoint.sample(seeds[i], times[i], 0, i),
                 "1proc-temporal-shared": lambda i: one_time.sample(seeds[i], after_all, 0, i)}
        for fn in local.values():
            fn(0)
    secs = {k: [] for k in (*fns, "1proc-untimed", "1proc-temporal", "1proc-temporal-shared")}
    load = [os.getloadavg()[0]]
    for _ in range(rounds):
        for name, fn in fns.items():
            comm.barrier()
            t0 = time.perf_counter()
            for i in range(batches):
                fn(i)
            secs[name].append((time.perf_counter() - t0) / batches)
        comm.barrier()
        for name, fn in local.items():  # rank 0 alone; rank 1 waits at the barrier below
            t0 = time.perf_counter()
            for i in range(batches):
                fn(i)
            secs[name].append((time.perf_counter() - t0) / batches)
        comm.barrier()
        load.append(os.getloadavg()[0])
    return {"rank": rank, "secs": {k: v for k, v in secs.items() if v}, "exchanges": exchanges, "edges": edges,
            "load": load}


def run_dist(a, fanouts: list) -> dict:
    """``--what dist``: partition the graph into 2 parts, time 2 ranks against 1 process."""
    import tempfile

    from gnnscale.partitioning import partition_graph
    from gnnscale.partitioning.graph import to_csc
    from gnnscale.process.launch import launch_local
    from gnnscale.samplers.temporal import time_sorted_csc

    from gnnscale.datasets.temporal import read_events, temporal_data

    if a.graph == "collegemsg":
        data = read_events(Path(SHARED) / "collegemsg" / "CollegeMsg.txt", sorted=True)
        src, dst = data.edge_index.numpy()
        t = data.edge_time.numpy()
        n = int(data.num_nodes)
        t0, span = int(t.min()), int(t.max() - t.min()) + 1
        t = t - t0  # times from 0: the seeds' times are drawn in the span's second half
    else:
        _, _, _, src, dst, t = make_graph(a.nodes, a.edges, a.span)
        n, span = a.nodes, a.span
    data = temporal_data(src, dst, torch.from_numpy(t), n, a.graph, "benchmark")
    indptr, indices, eids = map(torch.from_numpy, to_csc(data.edge_index, n, return_edge_ids=True))
    et = data.edge_time[eids]
    indices, perm = time_sorted_csc(indptr, indices, et, eids)
    whole = (indptr, indices.contiguous(), et[perm].contiguous())
    parts = Path(tempfile.mkdtemp(prefix="gnnscale-temporal-bench-")) / "p2"
    partition_graph(data, 2, parts, method=a.method, dataset=a.graph)
    res = launch_local("temporal:dist_worker", 2, args=(str(parts), whole, fanouts, a.batch, a.batches,
                                                         a.rounds, span, n), threads_per_worker=1)
    r0 = next(r for r in res if r["rank"] == 0)
    med = {k: statistics.median(v) for k, v in r0["secs"].items()}
    seeds = {k: (2 if k.startswith("dist") else 1) * a.batch / v for k, v in med.items()}

    def ratio(x, y):  # same-round ratios of seconds per batch, then their median
        return statistics.median(p / q for p, q in zip(r0["secs"][x], r0["secs"][y]))

    out = {
        "graph": {"name": a.graph, "nodes": n, "edges": int(len(src)), "span": span, "method": a.method},
        "fanouts": fanouts, "batch_per_rank": a.batch, "batches": a.batches, "rounds": a.rounds, "threads": 1,
        "load_average": r0["load"],
        "seconds_per_batch_median": med, "seconds_per_batch_rounds": r0["secs"], "seeds_per_s": seeds,
        "ratios_same_round": {
            # the same candidates and frontiers (one time after every edge, not disjoint): the time's cost
            "dist_temporal_shared_vs_dist_untimed": ratio("dist-temporal-shared", "dist-untimed"),
            "dist_temporal_shared_before_vs_dist_untimed": ratio("dist-temporal-shared-before", "dist-untimed"),
            "1proc_temporal_shared_vs_1proc_untimed": ratio("1proc-temporal-shared", "1proc-untimed"),
            # a time per seed, a tree per seed (the temporal link task's batches)
            "dist_temporal_vs_dist_untimed": ratio("dist-temporal", "dist-untimed"),
            "dist_temporal_before_vs_dist_untimed": ratio("dist-temporal-before", "dist-untimed"),
            "1proc_temporal_vs_1proc_untimed": ratio("1proc-temporal", "1proc-untimed"),
            # the one-exchange hop against fed2f50's
            "dist_temporal_before_vs_after": ratio("dist-temporal-before", "dist-temporal"),
            "dist_temporal_shared_before_vs_after": ratio("dist-temporal-shared-before", "dist-temporal-shared"),
            "dist_temporal_keys_before_vs_after": ratio("dist-temporal-keys-before", "dist-temporal-keys"),
            # per seed: one rank's batch of B against one process's batch of B
            "dist_temporal_vs_1proc_temporal_per_batch": ratio("dist-temporal", "1proc-temporal"),
            "dist_untimed_vs_1proc_untimed_per_batch": ratio("dist-untimed", "1proc-untimed"),
        },
        "exchanges_per_hop_rank0": r0["exchanges"], "sampled_edges_first_batch_rank0": r0["edges"],
    }
    for k, v in seeds.items():
        print(f"{k:28s} {v:12,.0f} seeds/s  ({med[k] * 1e3:8.1f} ms per batch)")
    for k, v in out["ratios_same_round"].items():
        print(f"{k:46s} {v:6.2f}x")
    for k, v in out["exchanges_per_hop_rank0"].items():
        print(f"{k:28s} per hop: rounds {v['rounds']}, all_to_all {v['calls']}, "
              f"sent {{{', '.join(f'{c}: {b:,.0f}' for c, b in v['sent'].items())}}} bytes")
    print(f"load average (1 min) over the rounds: {', '.join(f'{x:.1f}' for x in out['load_average'])}")
    return out


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
    ap.add_argument("--what", default="local", help="local (one process, the rows above), dist (2 ranks beside "
                    "1 process, module docstring) or local,dist")
    ap.add_argument("--graph", choices=("random", "collegemsg"), default="random",
                    help="--what dist's graph: the random graph above, or CollegeMsg (../shared/data/collegemsg)")
    ap.add_argument("--method", default="metis", help="--what dist's partitioning method")
    a = ap.parse_args(argv)
    if a.smoke:
        a.nodes, a.edges, a.batches, a.rounds, a.batch = 2000, 20000, 2, 1, 128
        a.what = "local,dist"
    what = set(a.what.split(","))
    if not what <= {"local", "dist"}:
        ap.error(f"--what takes local, dist or local,dist; found {a.what!r}")
    fanouts = [int(f) for f in a.fanouts.split(",")]
    out_all = {}
    if "dist" in what:
        if a.smoke:
            from _common import fork_smoke_workers

            fork_smoke_workers(2)
        out_all["dist"] = run_dist(a, fanouts)
    if "local" in what:
        out_all.update(run_local(a, fanouts))
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out_all, indent=2))
    return 0


def run_local(a, fanouts: list) -> dict:
    """The one-process rows (module docstring)."""
    torch.set_num_threads(1)
    from gnnscale.samplers import cpu_kernels
    from gnnscale.samplers.local import NeighborSampler
    from gnnscale.samplers.temporal import TemporalNeighborSampler

    cpu_kernels.match_torch_threads()
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
    return out


if __name__ == "__main__":
    sys.exit(main())
