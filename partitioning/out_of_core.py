"""The out-of-core partition pipeline: a graph on disk in, the partition folder out, in O(N) memory.

Stages (each timed, with its peak memory, in the returned ``stages``):

1. **plan** (:func:`plan_memory`): the O(N) arrays and the chunk buffers a memory budget allows;
   refuses before anything runs when the budget cannot hold the O(N) arrays.
2. **csr** (streaming methods): the symmetric adjacency built on disk by external bucketing
   (both directions of every chunk's edges appended to one spill file per block of source
   nodes; each block sorted alone and appended to one raw int32/int64 file).
3. **assign**: LDG or Fennel over that file, block by block (blocks in a seeded random order,
   the block's nodes shuffled, placed ``chunk_size`` at a time with the in-memory streamer's
   :func:`~gnnscale.partitioning.streaming.neighbor_counts` and
   :func:`~gnnscale.partitioning.streaming.place_chunk`); state O(N). Or an in-memory method
   (``metis``, a registered name) when the plan says the in-memory graph fits; or a given
   assignment.
4. **bucket**: every chunk's in-edges appended to their owner's spill files (a part and a range
   of its nodes: a bucket), ids int32 where they fit; the undirected pairs too, by the owner of
   their smaller endpoint, for the edge cut.
5. **write**: each part from its own buckets alone: sorted and deduplicated as
   :func:`~gnnscale.partitioning.graph.to_csc` does, indices streamed to disk, feature rows and
   labels copied from the mapped source in slices; spill files deleted as they are read.

The folder is the format of :func:`~gnnscale.partitioning.format.write_partitions` byte for
byte for the same assignment (every part file; meta.json the same but for ``created`` and the
timings). Memory: the O(N) arrays (:func:`plan_memory`'s ``node_bytes``) plus the chunk buffers,
independent of the edge count. :mod:`gnnscale.dist_partition` runs stages 4-5 on several
processes (both through :mod:`gnnscale.partitioning.part_writer`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gnnscale.errors import PartitionError
from gnnscale.partitioning.disk_graph import DiskGraph
from gnnscale.partitioning.feature_dtype import check_feature_dtype
from gnnscale.partitioning.format import _MASKS, write_meta
from gnnscale.partitioning.resources import ResourceMeter
from gnnscale.partitioning.part_writer import _progress, id_dtype, write_from_assignment
from gnnscale.partitioning.spill import SpillFiles
from gnnscale.partitioning.streaming import (
    STREAMING_KINDS,
    capacity,
    default_chunk_size,
    fennel_alpha,
    neighbor_counts,
    place_chunk,
)

logger = logging.getLogger(__name__)

BASE_BYTES = 600_000_000  # Python, numpy, torch and the libraries, measured ~0.5-0.6 GB
NODE_BYTES = 64  # per node: parts, new/old ids, indptr, y, masks, the stream's state (int64 where needed)
EDGE_BUFFER_BYTES = 128  # per input edge of a chunk held at once: the ids, keys, sort and routing temporaries
IN_MEMORY_EDGE_BYTES = 44  # per directed edge, today's in-memory pipeline (docs/scaling.md)
MIN_CHUNK = 1 << 16


def plan_memory(num_nodes: int, num_edges: int, num_parts: int, budget_gb: float | None,
                method: str = "ldg") -> dict[str, Any]:
    """The O(N) arrays, the chunk sizes and the estimate of a run, or a refusal.

    Args:
        num_nodes: N. num_edges: input columns (directed edges). num_parts: P.
        budget_gb: the whole process's memory budget in GB (1e9 bytes); None = 8 GB of buffers.
        method: a streaming kind (``ldg``/``fennel``, O(N)) or an in-memory method (it must fit).

    Returns:
        ``{node_bytes, chunk_edges, estimate_bytes, in_memory_bytes, budget_bytes}``: the
        estimate is ``BASE_BYTES + node_bytes + chunk_edges * EDGE_BUFFER_BYTES``.

    Raises:
        PartitionError: the budget cannot hold the O(N) arrays and a minimal chunk, or (an
            in-memory method) the in-memory graph.
    """
    node_bytes = NODE_BYTES * int(num_nodes)
    in_memory = BASE_BYTES + IN_MEMORY_EDGE_BYTES * int(num_edges) + node_bytes
    budget = None if budget_gb is None else int(float(budget_gb) * 1e9)
    floor = BASE_BYTES + node_bytes + MIN_CHUNK * EDGE_BUFFER_BYTES
    if budget is not None and budget < floor:
        raise PartitionError(
            f"expected a memory budget of at least {floor / 1e9:.2f} GB for {num_nodes} nodes (the O(N) arrays "
            f"{node_bytes / 1e9:.2f} GB + {BASE_BYTES / 1e9:.1f} GB of libraries + a minimal chunk), found "
            f"--memory-budget {budget_gb}; raise the budget"
        )
    if method not in STREAMING_KINDS and budget is not None and in_memory > budget:
        raise PartitionError(
            f"expected the in-memory graph of method {method!r} to fit the budget, found an estimate of "
            f"{in_memory / 1e9:.2f} GB for {num_edges} edges against --memory-budget {budget_gb}; use "
            "--method ldg or fennel (O(N) memory) or raise the budget"
        )
    room = (8_000_000_000 if budget is None else budget) - BASE_BYTES - node_bytes
    chunk = int(min(1 << 27, max(MIN_CHUNK, room // EDGE_BUFFER_BYTES)))
    return {
        "node_bytes": node_bytes,
        "chunk_edges": chunk,
        "estimate_bytes": BASE_BYTES + node_bytes + chunk * EDGE_BUFFER_BYTES,
        "in_memory_bytes": in_memory,
        "budget_bytes": budget,
    }


def disk_csr(graph: DiskGraph, work: Path, chunk_edges: int, show: bool = False) -> tuple[np.ndarray, Path]:
    """The symmetric adjacency without self loops (duplicates kept: they count twice) on disk.

    Returns:
        ``(indptr int64 [N+1], path)``: the neighbors of ``v`` are rows ``indptr[v]:indptr[v+1]``
        of the raw file ``path`` (:func:`id_dtype`), each block's rows sorted by node.
    """
    n, dt = graph.num_nodes, id_dtype(graph.num_nodes)
    block = max(1, min(n, chunk_edges * n // max(1, 2 * graph.num_input_edges)))
    spill = SpillFiles(work / "csr", 2, dt, "b")
    bar = _progress(graph.num_input_edges, "adjacency", "edge", show)
    for src, dst in graph.edge_chunks(chunk_edges):  # loop over chunks of edges
        k = src.shape[0]
        rows = np.empty((2 * k, 2), dtype=dt)  # both directions, in the id dtype
        rows[:k, 0] = src
        rows[k:, 0] = dst
        rows[:k, 1] = dst
        rows[k:, 1] = src
        del src, dst
        spill.append(rows[:, 0] // block, rows)
        del rows
        if bar is not None:
            bar.update(k)
    if bar is not None:
        bar.close()
    indptr = np.zeros(n + 1, dtype=np.int64)
    path = work / "adjacency.bin"
    with open(path, "wb") as fh:
        for k, lo in enumerate(range(0, n, block)):  # loop over blocks of nodes
            rows = spill.read(k)
            order = np.argsort(rows[:, 0], kind="stable")
            rows[order, 1].tofile(fh)
            hi = min(n, lo + block)
            indptr[lo + 1 : hi + 1] = np.bincount(rows[:, 0] - lo, minlength=hi - lo)
    np.cumsum(indptr, out=indptr)
    shutil.rmtree(work / "csr", ignore_errors=True)
    return indptr, path


def stream_assign(indptr: np.ndarray, path: Path, num_parts: int, *, kind: str = "ldg", slack: float = 0.05,
                  seed: int = 0, block_edges: int = 1 << 24, chunk_size: int | None = None, gamma: float = 1.5,
                  alpha: float | None = None, passes: int = 1, show: bool = False) -> np.ndarray:
    """LDG or Fennel over the disk CSR of :func:`disk_csr`, one block of nodes in memory at a time.

    The stream visits blocks of consecutive ids (about ``block_edges`` adjacency entries each) in a
    seeded random order and each block's nodes in a seeded random order, placing ``chunk_size``
    nodes at once as :func:`~gnnscale.partitioning.streaming.stream_partition` does; ``passes`` > 1
    restreams (neighbors not yet placed in this pass count in their last pass's part).

    Returns:
        int64 ``[N]`` part ids in ``[0, P)``.
    """
    n = indptr.shape[0] - 1
    dt = id_dtype(n)
    if n == 0 or num_parts == 1:
        return np.zeros(n, dtype=np.int64)
    cap = capacity(n, num_parts, slack)
    if alpha is None:
        alpha = fennel_alpha(n, int(indptr[-1]) / 2.0, num_parts)
    chunk_size = int(chunk_size or default_chunk_size(n, num_parts))
    mean = max(1.0, int(indptr[-1]) / n)
    block = int(max(chunk_size, min(n, block_edges / mean)))
    rng = np.random.default_rng(seed)
    starts = np.arange(0, n, block, dtype=np.int64)
    previous = None
    for _ in range(int(passes)):  # a handful of passes
        assign = np.full(n, -1, dtype=np.int32)
        known = assign if previous is None else previous.copy()
        sizes = np.zeros(num_parts, dtype=np.int64)
        bar = _progress(n, f"{kind} pass", "node", show)
        for lo in rng.permutation(starts).tolist():  # loop over blocks of nodes
            hi = min(n, lo + block)
            e0, e1 = int(indptr[lo]), int(indptr[hi])
            nbrs = np.fromfile(path, dtype=dt, count=e1 - e0, offset=e0 * dt.itemsize)
            ptr = indptr[lo : hi + 1] - e0
            deg = np.diff(ptr)
            order = rng.permutation(hi - lo)
            for a in range(0, hi - lo, chunk_size):  # loop over chunks of the block's nodes
                v = order[a : a + chunk_size]
                counts = neighbor_counts(ptr, nbrs, deg, v, known, num_parts)
                chosen = place_chunk(counts, sizes, cap, kind, alpha, gamma, rng)
                assign[lo + v] = chosen
                if previous is not None:
                    known[lo + v] = chosen
            if bar is not None:
                bar.update(hi - lo)
        if bar is not None:
            bar.close()
        previous = assign
    return previous.astype(np.int64)


# -- stage 4-5: bucketing by owner and writing each part ----------------------------------------

def _in_memory_assign(graph: DiskGraph, num_parts: int, method: str, y, masks, chunk_edges: int, balance,
                      imbalance: float, seed: int, options: Mapping[str, Any]) -> np.ndarray:
    """An in-memory method's assignment: the edges read into memory (the plan said they fit)."""
    import torch
    from torch_geometric.data import Data

    from gnnscale.partitioning.api import assign_parts

    pieces = [np.stack([s, d]) for s, d in graph.edge_chunks(chunk_edges)]  # loop over chunks
    ei = np.concatenate(pieces, axis=1) if pieces else np.zeros((2, 0), dtype=np.int64)
    del pieces
    if graph.undirected:
        ei = np.concatenate([ei, ei[::-1]], axis=1)
    data = Data(edge_index=torch.from_numpy(ei), num_nodes=graph.num_nodes, y=torch.from_numpy(y),
                **{m: torch.from_numpy(masks[m]) for m in _MASKS})
    return assign_parts(data, num_parts, method=method, balance=balance, imbalance=imbalance, seed=seed,
                        options=dict(options))


def partition_on_disk(
    source: str | os.PathLike | DiskGraph,
    num_parts: int,
    out_dir: str | os.PathLike,
    *,
    method: str = "ldg",
    parts: np.ndarray | None = None,
    memory_budget_gb: float | None = None,
    balance=("nodes", "train"),
    imbalance: float = 0.05,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    work_dir: str | os.PathLike | None = None,
    show_progress: bool = True,
    undirected: bool = False,
    chunk_edges: int | None = None,
    feature_dtype: str = "float32",
    extra_meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Partition a graph on disk (:class:`~gnnscale.partitioning.disk_graph.DiskGraph`, or a
    ``dir:``-layout folder) into ``out_dir`` in O(N) memory plus chunk buffers.

    Args:
        source: the graph or its folder.
        num_parts: P.
        out_dir: the partition folder (format 1, as ``gnnscale partition`` writes it).
        method: ``ldg`` / ``fennel`` (streamed from disk), or an in-memory method (``metis``, a
            registered name) when the plan says the graph fits the budget.
        parts: a given assignment int ``[N]`` (skips the assignment; ``method`` is recorded).
        memory_budget_gb: the whole process's budget (sets the chunk sizes; too small refuses).
        balance, imbalance, seed, options: as :func:`~gnnscale.partitioning.api.partition_graph`
            (streaming: ``slack`` (default imbalance), ``chunk_size``, ``gamma``, ``alpha``, ``passes``).
        work_dir: where spill files go (default ``out_dir/.spill``; deleted at the end).
        undirected: with a folder ``source``: store every edge in both directions.
        chunk_edges: edges per chunk instead of the plan's (tests: many buckets on a small graph).
        feature_dtype: ``float32``, ``float16`` or ``bfloat16``: how the parts store the feature rows
            (as :func:`~gnnscale.partitioning.api.partition_graph`'s; any source dtype is read as float32).

    Returns:
        meta.json's dict, with ``out_of_core`` {plan, stages {name: seconds, peak_rss_bytes},
        spill_bytes, peak_rss_bytes}.
    """
    graph = source if isinstance(source, DiskGraph) else DiskGraph.open(source, undirected=undirected)
    check_feature_dtype(feature_dtype)
    options = dict(options or {})
    n, num_parts = graph.num_nodes, int(num_parts)
    if not 1 <= num_parts <= n:
        raise PartitionError(f"expected 1 <= num_parts <= {n} (nodes), found {num_parts}; choose fewer parts")
    directed = graph.num_input_edges * (2 if graph.undirected else 1)
    plan = plan_memory(n, directed, num_parts, memory_budget_gb, method if parts is None else "ldg")
    logger.info("out-of-core plan: %d nodes, %d edges, %d parts: O(N) arrays %.2f GB, chunks of %d edges, "
                "estimate %.2f GB (in-memory pipeline ~%.2f GB)", n, directed, num_parts, plan["node_bytes"] / 1e9,
                plan["chunk_edges"], plan["estimate_bytes"] / 1e9, plan["in_memory_bytes"] / 1e9)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise PartitionError(f"expected {out} to be a folder for the partition, found a file; pick another output path")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(work_dir) if work_dir is not None else out / ".spill"
    work.mkdir(parents=True, exist_ok=True)
    chunk = int(chunk_edges or plan["chunk_edges"])
    stages: dict[str, dict] = {}
    spill_peak = 0

    def stage(name: str, meter: ResourceMeter) -> None:
        stages[name] = {"seconds": round(meter.seconds, 3), "peak_rss_bytes": int(meter.peak_rss_bytes)}

    try:
        with ResourceMeter() as total:
            with ResourceMeter() as m:
                y, masks, num_classes = graph.node_arrays()
            stage("nodes", m)
            if parts is None and method in STREAMING_KINDS:
                with ResourceMeter() as m:
                    indptr, adj = disk_csr(graph, work, chunk, show_progress)
                stage("csr", m)
                spill_peak = max(spill_peak, adj.stat().st_size)
                known = {"slack", "chunk_size", "gamma", "alpha", "passes"}
                unknown = sorted(set(options) - known)
                if unknown:
                    raise PartitionError(f"expected options of the out-of-core {method} among {sorted(known)}, found "
                                         f"{unknown}; drop them")
                kw = {"slack": float(options.get("slack", imbalance)), **{k: options[k] for k in options if k != "slack"}}
                with ResourceMeter() as m:
                    parts = stream_assign(indptr, adj, num_parts, kind=method, seed=seed, block_edges=chunk,
                                          show=show_progress, **kw)
                stage("assign", m)
                del indptr
                adj.unlink()
            elif parts is None:
                with ResourceMeter() as m:
                    parts = _in_memory_assign(graph, num_parts, method, y, masks, chunk, balance, imbalance, seed, options)
                stage("assign", m)
            parts = np.asarray(parts)
            if parts.shape != (n,) or not np.issubdtype(parts.dtype, np.integer):
                raise PartitionError(f"expected an assignment int [{n}], found {parts.dtype} {parts.shape}; "
                                     "pass one part id per node")
            meta, info = write_from_assignment(graph, parts.astype(np.int32), num_parts, out, work, chunk, y, masks,
                                               num_classes, method, show_progress, feature_dtype)
            stages.update(info["stages"])
            spill_peak = max(spill_peak, info["spill_bytes"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    extra = {"balance_constraints": list(balance), "imbalance": float(imbalance), "seed": int(seed),
             "options": json.loads(json.dumps(options, default=str)),
             "out_of_core": {"plan": plan, "stages": stages, "spill_bytes": int(spill_peak),
                             "seconds": round(total.seconds, 3), "peak_rss_bytes": int(total.peak_rss_bytes)}}
    meta.update(extra)
    meta.update(extra_meta or {})  # the caller's records: the input's identity (gnnscale partition)
    write_meta(out, meta)
    logger.info("wrote %d parts to %s out of core in %.1f s (edge cut %d = %.2f%%, peak RSS %.2f GB)", num_parts,
                out, total.seconds, meta["edge_cut"], 100 * meta["edge_cut_fraction"], total.peak_rss_bytes / 1e9)
    return meta

