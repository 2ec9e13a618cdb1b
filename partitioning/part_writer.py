"""Writing a partition folder from an assignment by external bucketing (stages 4-5 of
:mod:`gnnscale.partitioning.out_of_core`): every chunk's in-edges appended to their owner's
spill files (:class:`Bucketer`), each part written from its own buckets alone (:class:`PartWriter`),
meta.json from the parts' figures (:func:`folder_meta`); :func:`write_from_assignment` runs both on
one process, :mod:`gnnscale.dist_partition` on several. The files are
:func:`~gnnscale.partitioning.format.write_partitions`'s byte for byte for the same assignment."""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gnnscale.partitioning.disk_graph import DiskGraph
from gnnscale.partitioning.feature_dtype import check_feature_dtype, encode_rows, file_dtype
from gnnscale.partitioning.format import _MASKS, _remove_stale, _save
from gnnscale.partitioning.graph import sorted_unique
from gnnscale.partitioning.manifest import FORMAT_VERSION, PART_FILES, part_dir_name
from gnnscale.partitioning.metrics import metrics_from_counts
from gnnscale.partitioning.relabel import contiguous_relabel
from gnnscale.partitioning.resources import ResourceMeter
from gnnscale.partitioning.spill import NpyWriter, SpillFiles, copy_raw




def id_dtype(num_nodes: int) -> np.dtype:
    """int32 when every node id fits, else int64 (spill files and the disk CSR)."""
    return np.dtype(np.int32 if num_nodes < 2**31 else np.int64)


def _progress(total: int, desc: str, unit: str, show: bool):
    if not show:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, leave=False)


# -- stage 2-3: the symmetric CSR on disk and the streaming assignment ----------------------------

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
            rows: feature rows copied per slice; feature_dtype: how x.npy stores them
            (``float32``, ``float16``, ``bfloat16``: :func:`~gnnscale.partitioning.feature_dtype.encode_rows`,
            as ``write_partitions``).
    """

    def __init__(self, out: Path, graph: DiskGraph, parts: np.ndarray, new_of_old: np.ndarray,
                 old_of_new: np.ndarray, offsets: np.ndarray, y: np.ndarray, masks: dict, sub: int, rows: int,
                 feature_dtype: str = "float32") -> None:
        self.out, self.graph, self.parts = out, graph, parts
        self.new_of_old, self.old_of_new, self.offsets = new_of_old, old_of_new, offsets
        self.y, self.masks, self.sub, self.rows = y, masks, int(sub), max(1, int(rows))
        self.feature_dtype = check_feature_dtype(feature_dtype)

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
        with NpyWriter(pdir / "x.npy", (npart, self.graph.feature_dim), file_dtype(self.feature_dtype)) as w:
            for a in range(0, npart, self.rows):  # loop over slices of feature rows
                x = self.graph.x  # mapped per slice: the pages it touched leave the resident set with it
                w.write(self._encode(np.asarray(x[ids[a : a + self.rows]], dtype=np.float32)))
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

    def _encode(self, rows: np.ndarray) -> np.ndarray:
        """float32 [k, F] rows as x.npy stores them (16-bit: encode_rows, the in-memory writer's)."""
        if self.feature_dtype == "float32":
            return rows
        import torch

        return encode_rows(torch.from_numpy(rows), self.feature_dtype)


def folder_meta(graph: DiskGraph, results: list[dict], offsets: np.ndarray, num_classes: int, method: str,
                extra_meta: Mapping[str, Any] | None = None, feature_dtype: str = "float32") -> dict[str, Any]:
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
        "feature_dtype": check_feature_dtype(feature_dtype),
        "parts": sizes,
        **quality,
        "files": files,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "gnnscale_version": _gnnscale_version(),
    }
    meta.update(dict(extra_meta or {}))
    return meta


def write_from_assignment(graph: DiskGraph, parts: np.ndarray, num_parts: int, out: Path, work: Path, chunk: int,
                          y: np.ndarray, masks: dict, num_classes: int, method: str, show: bool = False,
                          feature_dtype: str = "float32") -> tuple[dict[str, Any], dict[str, Any]]:
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
    writer = PartWriter(out, graph, parts, new_of_old, old_of_new, offsets, y, masks, sub, rows, feature_dtype)
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
    meta = folder_meta(graph, results, offsets, num_classes, method, feature_dtype=feature_dtype)
    return meta, {"stages": stages, "spill_bytes": spill_bytes}

