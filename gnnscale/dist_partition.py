"""Partitioning across processes on torch.distributed (issue 47 item 3): each rank reads a shard of
the edge files, edges travel to their owners' ranks with all_to_all, each rank writes its parts.

Every rank runs :func:`partition_distributed` (started by torchrun, or by
:func:`gnnscale.process.launch.launch_local` in the tests):

1. the node arrays (y, masks: O(N)) on every rank, from the shared folder;
2. the assignment: a given one, or computed on rank 0 (LDG/Fennel streamed from disk, or an
   in-memory method when the plan says it fits, as :func:`~gnnscale.partitioning.out_of_core.partition_on_disk`
   does) and broadcast as one all-reduce of int32 ``[N]`` (category ``partition_assignment``);
3. every rank reads its shard of the input columns (``[r E / W, (r + 1) E / W)``) in chunks, routes
   each chunk's in-edges and undirected pairs to their buckets
   (:class:`~gnnscale.partitioning.part_writer.Bucketer`) and sends each row ``(bucket, a, b)`` to the
   rank owning the bucket's part (part ``p`` lives on rank ``p % W``) through the
   :class:`~gnnscale.process.comm.Communicator` (category ``partition_edges``, bytes counted, every
   wait bounded by its timeout); every rank makes the same number of rounds (the largest shard's);
4. each rank sorts and writes its parts from its own spill files
   (:class:`~gnnscale.partitioning.part_writer.PartWriter`); rank 0 gathers the parts' sizes, hashes
   and cut counts and writes meta.json.

Run it as ``torchrun --nnodes H --nproc-per-node 1 ... -m gnnscale.dist_partition FOLDER --parts P --out DIR``
(one process per host), or plainly ``python -m gnnscale.dist_partition ...`` for one process
(:func:`main`; ``--memory-budget GB`` prints the plan and refuses a budget that cannot hold the O(N)
arrays before anything starts).

The folder equals the single-process pipeline's for the same assignment (each part's edges are
sorted and deduplicated, so the order in which they arrive does not matter). Every rank reads the
feature rows of its parts from the folder's ``x.npy``: on several hosts the input folder is shared
(or copied) and the output folder is one shared path.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnscale.errors import PartitionError
from gnnscale.options import key_value
from gnnscale.partitioning.disk_graph import DiskGraph
from gnnscale.partitioning.format import _remove_stale, write_meta
from gnnscale.partitioning.manifest import PART_FILES
from gnnscale.partitioning.out_of_core import _in_memory_assign, disk_csr, plan_memory, stream_assign
from gnnscale.partitioning.feature_dtype import check_feature_dtype
from gnnscale.partitioning.part_writer import Bucketer, PartWriter, folder_meta, sub_ranges
from gnnscale.partitioning.relabel import contiguous_relabel
from gnnscale.partitioning.resources import ResourceMeter
from gnnscale.partitioning.spill import SpillFiles
from gnnscale.partitioning.streaming import STREAMING_KINDS
from gnnscale.process.comm import Communicator


def _show(comm: Communicator) -> bool:
    """Progress bars on rank 0 only."""
    return comm.rank == 0


def _assignment(graph: DiskGraph, comm: Communicator, num_parts: int, method: str, parts: np.ndarray | None,
                work: Path, chunk: int, y: np.ndarray, masks: dict, seed: int, imbalance: float,
                options: Mapping[str, Any]) -> np.ndarray:
    """The assignment on every rank: given, or computed on rank 0 and broadcast (one all-reduce)."""
    n = graph.num_nodes
    if parts is not None:
        parts = np.asarray(parts)
        if parts.shape != (n,) or not np.issubdtype(parts.dtype, np.integer):
            raise PartitionError(f"expected an assignment int [{n}], found {parts.dtype} {parts.shape}; "
                                 "pass one part id per node")
        return parts.astype(np.int32)
    t = torch.zeros(n, dtype=torch.int32)
    if comm.rank == 0:
        if method in STREAMING_KINDS:
            indptr, adj = disk_csr(graph, work, chunk, _show(comm))
            kw = {"slack": float(options.get("slack", imbalance)), **{k: v for k, v in options.items() if k != "slack"}}
            local = stream_assign(indptr, adj, num_parts, kind=method, seed=seed, block_edges=chunk, show=_show(comm),
                                  **kw)
            adj.unlink()
        else:
            local = _in_memory_assign(graph, num_parts, method, y, masks, chunk, ("nodes", "train"), imbalance, seed,
                                      options)
        t += torch.from_numpy(local.astype(np.int32))
    comm.all_reduce(t, "sum", category="partition_assignment")
    return t.numpy()


def partition_distributed(
    folder: str | Path,
    num_parts: int,
    out_dir: str | Path,
    comm: Communicator,
    *,
    method: str = "ldg",
    parts: np.ndarray | None = None,
    memory_budget_gb: float | None = None,
    seed: int = 0,
    imbalance: float = 0.05,
    options: Mapping[str, Any] | None = None,
    undirected: bool = False,
    chunk_edges: int | None = None,
    work_dir: str | Path | None = None,
    feature_dtype: str = "float32",
) -> dict[str, Any]:
    """Partition the ``dir:``-layout folder ``folder`` into ``out_dir`` with every rank of ``comm``.

    Args: as :func:`~gnnscale.partitioning.out_of_core.partition_on_disk`; ``comm`` the ranks'
    communicator (its timeout bounds every wait). Every rank must call it with the same arguments.

    Returns:
        On every rank: ``{"meta": meta.json's dict (rank 0; None elsewhere), "parts_written": [p, ...],
        "stats": the communicator's byte counts, "stages": {name: seconds, peak_rss_bytes}}``.
    """
    graph = DiskGraph.open(folder, undirected=undirected)
    check_feature_dtype(feature_dtype)
    options = dict(options or {})
    n, num_parts, rank, world = graph.num_nodes, int(num_parts), comm.rank, comm.world_size
    if not 1 <= num_parts <= n:
        raise PartitionError(f"expected 1 <= num_parts <= {n} (nodes), found {num_parts}; choose fewer parts")
    directed = graph.num_input_edges * (2 if graph.undirected else 1)
    plan = plan_memory(n, directed, num_parts, memory_budget_gb, method if parts is None else "ldg")
    chunk = int(chunk_edges or plan["chunk_edges"])
    out = Path(out_dir)
    work = (Path(work_dir) if work_dir is not None else out / ".spill") / f"rank{rank}"
    stages: dict[str, dict] = {}

    def stage(name: str, m: ResourceMeter) -> None:
        stages[name] = {"seconds": round(m.seconds, 3), "peak_rss_bytes": int(m.peak_rss_bytes)}

    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        _remove_stale(out, num_parts, PART_FILES)
    work.mkdir(parents=True, exist_ok=True)
    try:
        y, masks, num_classes = graph.node_arrays()
        with ResourceMeter() as m:
            assign = _assignment(graph, comm, num_parts, method, parts, work, chunk, y, masks, seed, imbalance, options)
        stage("assign", m)
        with ResourceMeter() as m:
            new_of_old, old_of_new, offsets = contiguous_relabel(assign, num_parts)
            sub = sub_ranges(graph.num_input_edges, num_parts, chunk, graph.undirected)
            bucketer = Bucketer(assign, new_of_old, offsets, sub, graph.undirected)
            spill_in = SpillFiles(work, 2, bucketer.dtype, "in")
            spill_pairs = SpillFiles(work, 2, bucketer.dtype, "pair")
            _route(graph, comm, bucketer, spill_in, spill_pairs, chunk, num_parts * sub)
        stage("bucket", m)
        comm.barrier()  # rank 0 has cleaned the folder; every edge has arrived
        with ResourceMeter() as m:
            rows = max(1, chunk * 8 // max(1, 4 * graph.feature_dim))
            writer = PartWriter(out, graph, assign, new_of_old, old_of_new, offsets, y, masks, sub, rows, feature_dtype)
            mine = list(range(rank, num_parts, world))
            results = {p: writer.write(p, spill_in, spill_pairs) for p in mine}  # loop over this rank's parts
        stage("write", m)
        gathered = comm.all_gather_object(results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta = None
    if rank == 0:
        merged: dict[int, dict] = {}
        for r in gathered:  # loop over ranks
            merged.update(r)
        meta = folder_meta(graph, [merged[p] for p in range(num_parts)], offsets, num_classes, method,
                           feature_dtype=feature_dtype)
        meta.update({"balance_constraints": ["nodes", "train"], "imbalance": float(imbalance), "seed": int(seed),
                     "options": json.loads(json.dumps(options, default=str)),
                     "out_of_core": {"plan": plan, "stages": stages, "processes": world}})
        write_meta(out, meta)
        shutil.rmtree(out / ".spill", ignore_errors=True)
    comm.barrier()  # meta.json is written before any rank returns
    return {"meta": meta, "parts_written": mine, "stats": comm.stats.snapshot(), "stages": stages}


def _route(graph: DiskGraph, comm: Communicator, bucketer: Bucketer, spill_in: SpillFiles, spill_pairs: SpillFiles,
           chunk: int, buckets: int) -> None:
    """Read this rank's shard in chunks and send every row to the rank of its bucket's part; every rank
    makes the same number of exchanges (the largest shard's chunk count)."""
    rank, world, sub = comm.rank, comm.world_size, bucketer.sub
    e = graph.num_input_edges
    lo, hi = rank * e // world, (rank + 1) * e // world
    per = max(1, chunk // (2 if graph.undirected else 1))
    rounds = torch.tensor([len(graph.edge_slices(per, lo, hi))], dtype=torch.int64)
    comm.all_reduce(rounds, "max", category="control")
    chunks = graph.edge_chunks(per, lo, hi)
    dt = bucketer.dtype
    for _ in range(int(rounds.item())):  # loop over exchange rounds (chunks of the shard)
        src, dst = next(chunks, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        b_in, r_in = bucketer.in_edges(src, dst)
        b_pr, r_pr = bucketer.pairs(src, dst)
        bucket = np.concatenate([b_in, b_pr + buckets])  # pairs' buckets shifted past the in-edges'
        rows = np.concatenate([r_in, r_pr])
        del b_in, r_in, b_pr, r_pr
        dest = (bucket % buckets) // sub % world
        order = np.argsort(dest, kind="stable")
        send = np.empty((bucket.shape[0], 3), dtype=dt)
        send[:, 0] = bucket[order]
        send[:, 1:] = rows[order]
        sizes = torch.from_numpy(np.bincount(dest, minlength=world).astype(np.int64))
        del bucket, rows, order, dest
        got, _ = comm.exchange_flat(torch.from_numpy(send), sizes, "partition_edges")
        got = got.numpy()
        is_pair = got[:, 0] >= buckets
        spill_in.append(got[~is_pair, 0].astype(np.int64), got[~is_pair, 1:])
        spill_pairs.append(got[is_pair, 0].astype(np.int64) - buckets, got[is_pair, 1:])


def main(argv: list[str] | None = None) -> None:
    """``python -m gnnscale.dist_partition FOLDER --parts P --out DIR`` (under torchrun: every rank)."""
    import argparse
    import logging

    from gnnscale.process.groups import init_distributed, shutdown_distributed

    ap = argparse.ArgumentParser(prog="python -m gnnscale.dist_partition",
                                 description="Partition a dir:-layout folder out of core, on one or several processes.")
    ap.add_argument("folder", help="a dir: folder: edge_index.npy or edges/*.npy, x.npy, y.npy, optional split.npz")
    ap.add_argument("--parts", type=int, required=True, help="number of parts")
    ap.add_argument("--out", required=True, help="the partition folder (a path every process sees)")
    ap.add_argument("--method", default="ldg", help="ldg or fennel (streamed from disk, O(N) memory), or an "
                    "in-memory method (metis, kaminpar, ...) when the plan says the graph fits the budget")
    ap.add_argument("--method-opt", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                    help="an option of the method (ldg/fennel: slack, passes, chunk_size, gamma, alpha)")
    ap.add_argument("--memory-budget", type=float, default=None, metavar="GB",
                    help="each process's memory budget: sets the chunk sizes; refused before starting when it "
                    "cannot hold the O(N) arrays")
    ap.add_argument("--undirected", action="store_true", help="store every edge in both directions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--imbalance", type=float, default=0.05)
    ap.add_argument("--feature-dtype", default="float32", choices=["float32", "float16", "bfloat16"],
                    help="how the parts store the feature rows (16 bits: half the bytes on disk and fetched; cast to "
                    "float32 at the model)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds any collective may wait")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    graph = DiskGraph.open(args.folder, undirected=args.undirected)
    directed = graph.num_input_edges * (2 if graph.undirected else 1)
    plan = plan_memory(graph.num_nodes, directed, args.parts, args.memory_budget, args.method)
    info = init_distributed(timeout=args.timeout)
    comm = Communicator(info.rank, info.world_size, timeout=args.timeout)
    if info.rank == 0:
        print(f"plan: {graph.num_nodes:,} nodes, {directed:,} edges, {args.parts} parts on {info.world_size} "
              f"process(es): O(N) arrays {plan['node_bytes'] / 1e9:.2f} GB, chunks of {plan['chunk_edges']:,} edges, "
              f"estimate {plan['estimate_bytes'] / 1e9:.2f} GB per process (in-memory pipeline ~"
              f"{plan['in_memory_bytes'] / 1e9:.2f} GB)", flush=True)
    try:
        res = partition_distributed(args.folder, args.parts, args.out, comm, method=args.method,
                                    memory_budget_gb=args.memory_budget, seed=args.seed, imbalance=args.imbalance,
                                    options=dict(args.method_opt), undirected=args.undirected,
                                    feature_dtype=args.feature_dtype)
    finally:
        shutdown_distributed(timeout=args.timeout)
    if res["meta"] is not None:
        m = res["meta"]
        stages = ", ".join(f"{k} {v['seconds']:.1f} s / {v['peak_rss_bytes'] / 1e9:.2f} GB"
                           for k, v in m["out_of_core"]["stages"].items())
        print(f"wrote {args.parts} parts to {args.out}: edge cut {m['edge_cut_fraction']:.4f}, balance "
              f"{m['balance']['nodes']:.3f}; rank 0: {stages}; edges sent {res['stats']['sent'].get('partition_edges', 0):,} B")


if __name__ == "__main__":
    from gnnscale.errors import run_main

    run_main(main, "gnnscale.dist_partition")
