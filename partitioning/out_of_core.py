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
processes (:class:`PartWriter` and :class:`Bucketer` are shared).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gnnscale.errors import PartitionError
from gnnscale.partitioning.disk_graph import DiskGraph
from gnnscale.partitioning.format import _MASKS, _remove_stale, _save, write_meta
from gnnscale.partitioning.graph import sorted_unique
from gnnscale.partitioning.manifest import FORMAT_VERSION, PART_FILES, part_dir_name
from gnnscale.partitioning.metrics import metrics_from_counts
from gnnscale.partitioning.relabel import contiguous_relabel
from gnnscale.partitioning.resources import ResourceMeter
from gnnscale.partitioning.spill import NpyWriter, SpillFiles, copy_raw
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


def id_dtype(num_nodes: int) -> np.dtype:
    """int32 when every node id fits, else int64 (spill files and the disk CSR)."""
    return np.dtype(np.int32 if num_nodes < 2**31 else np.int64)


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


def _progress(total: int, desc: str, unit: str, show: bool):
    if not show:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, leave=False)


# -- stage 2-3: the symmetric CSR on disk and the streaming assignment ----------------------------

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

class Bucketer:
    """Routes edges to buckets: part ``p``'s nodes split in ``sub`` ranges of local ids, bucket
    ``p * sub + s``. In-edges go by their target's owner (rows ``(local target, source)``); the
    undirected pairs ``(min, max)`` by the owner of ``min`` (rows ``(min, max)``).

    Args:
        parts: int ``[N]``; new_of_old: int64 ``[N]``; offsets: int64 ``[P+1]`` (of
            :func:`~gnnscale.partitioning.relabel.contiguous_relabel`).
        sub: ranges per part (``ceil`` of the largest part's expected edges over a chunk).
        undirected: add every edge's reverse (the ``dir:`` option).
    """

    def __init__(self, parts: np.ndarray, new_of_old: np.ndarray, offsets: np.ndarray, sub: int, undirected: bool) -> None:
        self.parts, self.new_of_old, self.offsets = parts, new_of_old, offsets
        self.sub, self.undirected = max(1, int(sub)), bool(undirected)
        self.sizes = np.diff(offsets)
        self.dtype = id_dtype(parts.shape[0])

    def _bucket(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = self.parts[nodes].astype(np.int64)
        local = self.new_of_old[nodes] - self.offsets[p]
        s = local * self.sub // np.maximum(self.sizes[p], 1)
        return p * self.sub + s, local

    def in_edges(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(bucket int64 [k], rows [k, 2] (local target, source))`` of a chunk's in-edges."""
        if self.undirected:
            src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        bucket, local = self._bucket(dst)
        return bucket, np.stack([local.astype(self.dtype), src.astype(self.dtype)], axis=1)

    def pairs(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(bucket int64 [k], rows [k, 2] (min, max))`` of a chunk's undirected pairs."""
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
        bucket, _ = self._bucket(lo)
        return bucket, np.stack([lo.astype(self.dtype), hi.astype(self.dtype)], axis=1)


def sub_ranges(num_edges: int, num_parts: int, chunk_edges: int, undirected: bool) -> int:
    """Ranges per part so that one bucket holds about a chunk of edges (2x margin for skew)."""
    per_part = (2 if undirected else 1) * num_edges / max(1, num_parts)
    return max(1, math.ceil(2 * per_part / max(1, chunk_edges)))


class PartWriter:
    """Writes part ``p`` of the folder from its buckets (:class:`SpillFiles` ``in`` and ``pair``).

    Args:
        out: the folder; graph: the source (mapped x); parts, new_of_old, old_of_new, offsets:
            the assignment relabelled; y int64 [N] and masks bool [N]; sub: ranges per part;
            rows: feature rows copied per slice.
    """

    def __init__(self, out: Path, graph: DiskGraph, parts: np.ndarray, new_of_old: np.ndarray,
                 old_of_new: np.ndarray, offsets: np.ndarray, y: np.ndarray, masks: dict, sub: int, rows: int) -> None:
        self.out, self.graph, self.parts = out, graph, parts
        self.new_of_old, self.old_of_new, self.offsets = new_of_old, old_of_new, offsets
        self.y, self.masks, self.sub, self.rows = y, masks, int(sub), max(1, int(rows))

    def write(self, p: int, spill_in: SpillFiles, spill_pairs: SpillFiles) -> dict[str, Any]:
        """Write part ``p``; returns ``{"size": {...}, "files": {relpath: sha256}, "cut", "undirected"}``."""
        n = self.parts.shape[0]
        lo, hi = int(self.offsets[p]), int(self.offsets[p + 1])
        npart = hi - lo
        pdir = self.out / part_dir_name(p)
        pdir.mkdir(parents=True, exist_ok=True)
        raw = pdir / "indices.raw"
        indptr = np.zeros(npart + 1, dtype=np.int64)
        remote = np.zeros(n, dtype=np.bool_)
        cut = undirected = 0
        with open(raw, "wb") as fh:
            for s in range(self.sub):  # loop over the part's ranges of nodes
                b = p * self.sub + s
                rows = spill_in.read(b)
                key = rows[:, 0].astype(np.int64)
                key *= n
                key += rows[:, 1]
                del rows
                key = sorted_unique(key, inplace=True)
                local = key // n
                if key.shape[0]:
                    top = int(local[-1]) + 1
                    indptr[1 : top + 1] += np.bincount(local, minlength=top)
                del local
                np.remainder(key, n, out=key)
                indices = self.new_of_old[key]  # sources in new ids, sorted by original id
                indices.tofile(fh)
                mask = (indices < lo) | (indices >= hi)
                remote[indices[mask]] = True
                del key, indices, mask
                pair = spill_pairs.read(b)
                pk = pair[:, 0].astype(np.int64)
                pk *= n
                pk += pair[:, 1]
                del pair
                pk = sorted_unique(pk, inplace=True)
                a, c = pk // n, pk % n
                undirected += int(pk.shape[0])
                cut += int(np.count_nonzero(self.parts[a] != self.parts[c]))
                del pk, a, c
        np.cumsum(indptr, out=indptr)
        num_e = int(indptr[-1])
        files: dict[str, str] = {}
        name = part_dir_name(p)
        files[f"{name}/indptr.npy"] = _save(pdir / "indptr.npy", indptr)
        with NpyWriter(pdir / "indices.npy", (num_e,), np.int64) as w:
            copy_raw(raw, w)
        files[f"{name}/indices.npy"] = w.sha256
        ids = self.old_of_new[lo:hi]
        with NpyWriter(pdir / "x.npy", (npart, self.graph.feature_dim), np.float32) as w:
            for a in range(0, npart, self.rows):  # loop over slices of feature rows
                x = self.graph.x  # mapped per slice: the pages it touched leave the resident set with it
                w.write(np.asarray(x[ids[a : a + self.rows]], dtype=np.float32))
                del x
        files[f"{name}/x.npy"] = w.sha256
        files[f"{name}/y.npy"] = _save(pdir / "y.npy", self.y[ids])
        counts = {}
        for m in _MASKS:  # loop over the three masks
            arr = self.masks[m][ids]
            counts[m] = int(np.count_nonzero(arr))
            files[f"{name}/{m}.npy"] = _save(pdir / f"{m}.npy", arr)
        files[f"{name}/orig_ids.npy"] = _save(pdir / "orig_ids.npy", ids)
        size = {"nodes": npart, "in_edges": num_e, "train": counts["train_mask"], "val": counts["val_mask"],
                "test": counts["test_mask"], "remote_sources": int(np.count_nonzero(remote))}
        return {"size": size, "files": files, "cut": cut, "undirected": undirected}


def folder_meta(graph: DiskGraph, results: list[dict], offsets: np.ndarray, num_classes: int, method: str,
                extra_meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """meta.json of the folder from the parts' results (the keys of ``write_partitions``, in its order)."""
    from gnnscale.partitioning.format import _gnnscale_version

    sizes = [r["size"] for r in results]
    cut = sum(r["cut"] for r in results)
    undirected = sum(r["undirected"] for r in results)
    quality = metrics_from_counts(nodes=[s["nodes"] for s in sizes], train=[s["train"] for s in sizes],
                                  in_edges=[s["in_edges"] for s in sizes], halo=[s["remote_sources"] for s in sizes],
                                  cut=cut, undirected_edges=undirected)
    del quality["sizes"]
    files: dict[str, str] = {}
    for r in results:  # loop over parts
        files.update(r["files"])
    num_edges = sum(s["in_edges"] for s in sizes)
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "dataset": graph.name,
        "method": method,
        "num_parts": len(results),
        "num_nodes": graph.num_nodes,
        "num_edges": num_edges,
        # the dir: loader's edge_index is the cleaned edges, which the parts store once each
        "num_input_edges": num_edges,
        "offsets": [int(o) for o in offsets],
        "feature_dim": graph.feature_dim,
        "num_classes": int(num_classes),
        "target": {"kind": "class", "num_classes": int(num_classes), "num_outputs": int(num_classes)},
        "edge_feature_dim": 0,
        "feature_dtype": "float32",
        "parts": sizes,
        **quality,
        "files": files,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "gnnscale_version": _gnnscale_version(),
    }
    meta.update(dict(extra_meta or {}))
    return meta


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

    Returns:
        meta.json's dict, with ``out_of_core`` {plan, stages {name: seconds, peak_rss_bytes},
        spill_bytes, peak_rss_bytes}.
    """
    graph = source if isinstance(source, DiskGraph) else DiskGraph.open(source, undirected=undirected)
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
                                               num_classes, method, show_progress)
            stages.update(info["stages"])
            spill_peak = max(spill_peak, info["spill_bytes"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    extra = {"balance_constraints": list(balance), "imbalance": float(imbalance), "seed": int(seed),
             "options": json.loads(json.dumps(options, default=str)),
             "out_of_core": {"plan": plan, "stages": stages, "spill_bytes": int(spill_peak),
                             "seconds": round(total.seconds, 3), "peak_rss_bytes": int(total.peak_rss_bytes)}}
    meta.update(extra)
    write_meta(out, meta)
    logger.info("wrote %d parts to %s out of core in %.1f s (edge cut %d = %.2f%%, peak RSS %.2f GB)", num_parts,
                out, total.seconds, meta["edge_cut"], 100 * meta["edge_cut_fraction"], total.peak_rss_bytes / 1e9)
    return meta


def write_from_assignment(graph: DiskGraph, parts: np.ndarray, num_parts: int, out: Path, work: Path, chunk: int,
                          y: np.ndarray, masks: dict, num_classes: int, method: str, show: bool = False,
                          ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Stages 4-5 on one process: bucket every chunk by owner, then write each part (meta not yet written).

    Returns:
        ``(meta, {"stages": {...}, "spill_bytes": peak bytes of spill files})``.
    """
    stages: dict[str, dict] = {}
    with ResourceMeter() as m:
        new_of_old, old_of_new, offsets = contiguous_relabel(parts, num_parts)
        undirected = graph.undirected
        sub = sub_ranges(graph.num_input_edges, num_parts, chunk, undirected)
        bucketer = Bucketer(parts, new_of_old, offsets, sub, undirected)
        spill_in = SpillFiles(work / "parts", 2, bucketer.dtype, "in")
        spill_pairs = SpillFiles(work / "parts", 2, bucketer.dtype, "pair")
        bar = _progress(graph.num_input_edges, "bucketing", "edge", show)
        for src, dst in graph.edge_chunks(chunk // (2 if undirected else 1)):  # loop over chunks of edges
            spill_in.append(*bucketer.in_edges(src, dst))
            spill_pairs.append(*bucketer.pairs(src, dst))
            if bar is not None:
                bar.update(src.shape[0])
        if bar is not None:
            bar.close()
    stages["bucket"] = {"seconds": round(m.seconds, 3), "peak_rss_bytes": int(m.peak_rss_bytes)}
    spill_bytes = spill_in.bytes_written + spill_pairs.bytes_written
    _remove_stale(out, num_parts, PART_FILES)
    rows = max(1, chunk * 8 // max(1, 4 * graph.feature_dim))
    writer = PartWriter(out, graph, parts, new_of_old, old_of_new, offsets, y, masks, sub, rows)
    with ResourceMeter() as m:
        results = []
        bar = _progress(num_parts, "writing parts", "part", show)
        for p in range(num_parts):  # loop over parts
            results.append(writer.write(p, spill_in, spill_pairs))
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
    stages["write"] = {"seconds": round(m.seconds, 3), "peak_rss_bytes": int(m.peak_rss_bytes)}
    meta = folder_meta(graph, results, offsets, num_classes, method)
    return meta, {"stages": stages, "spill_bytes": spill_bytes}

