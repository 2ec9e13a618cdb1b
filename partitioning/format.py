"""The versioned on-disk partition format and its writer.

Layout of a partition folder ``OUT/`` (format 1, untyped graphs)::

    meta.json                  format_version, dataset, method, num_parts, num_nodes, num_edges,
                               offsets, feature_dim, num_classes, target {kind, num_classes,
                               num_outputs}, edge_feature_dim, feature_dtype, parts (sizes),
                               edge_cut (int), edge_cut_fraction, balance, halo,
                               replication_factor, files {relpath: sha256}, created, ...
    part{p}/indptr.npy         int64 [n_p + 1]  CSC of the in-edges of owned nodes (local dst)
    part{p}/indices.npy        int64 [E_p]      source of each in-edge, in NEW global ids
    part{p}/x.npy              float32 [n_p, F], or float16 / bfloat16 (its bits as uint16) as
                               meta's feature_dtype says (absent: float32; see feature_dtype.py)
    part{p}/y.npy              int64 [n_p] (target kind class/binary), float32 [n_p, C]
                               (multilabel) or float32 [n_p] / [n_p, D] (regression)
    part{p}/train_mask.npy     bool [n_p]   (also val_mask.npy, test_mask.npy)
    part{p}/orig_ids.npy       int64 [n_p]  new id offsets[p]+i -> original id orig_ids[i]
    part{p}/edge_attr.npy      float32 [E_p, De]  features of each in-edge (aligned with indices),
                                            only with edge features (edge_feature_dim De > 0)
    part{p}/edge_ids.npy       int64 [E_p]  column of data.edge_index each in-edge comes from
                                            (a deduplicated edge: its first, lowest, column);
                                            with edge features or edge times
    part{p}/edge_time.npy      int64 [E_p]  time of each in-edge (a temporal graph, meta's ``temporal``):
                                            each node's in-edges are then ordered by (time, input
                                            column), a T-CSR (docs/temporal.md); repeated pairs kept
    part{p}/link_*.npy         int64        a link-prediction split's edges whose source the part owns
                                            (``data.link_split``; :mod:`gnnscale.partitioning.link`,
                                            ``docs/link_prediction.md``), named in meta.json's ``link``

Format 2 (typed graphs, ``docs/typed_graphs.md`` section 2) has no ``x.npy``; instead::

    part{p}/etype.npy          int16 [E_p]          relation of each in-edge (aligned with indices)
    part{p}/x_t{t}.npy         float32 [n_pt, F_t]  features of the part's nodes of type t
                                                    (only the types with features)

and meta.json has ``format_version: 2``, ``feature_dim: 0`` and a ``typed`` entry
(node_types, edge_types, target_type, type_starts [P][T+1], type_offsets [T][P+1],
num_nodes_per_type, feature_dims, edges_per_relation, cut_per_relation, balance_per_type).
A part's nodes are numbered by type, then original id; the in-edges of each node are sorted by
(relation, original source id) (format 1: by original source id). A typed temporal graph (a
``HeteroData`` with per-relation edge times or node times, every event kept) sorts them by
(relation, time, the relation's input column) instead, a T-CSR per relation, with ``edge_time.npy``
and ``edge_ids.npy`` (each in-edge's column in its relation's ``edge_index``).

Edges are those of ``data.edge_index`` with duplicates removed (format 2: duplicate (source,
target, relation)); self loops are kept as given. meta.json is written last, so a folder
without it is an unfinished write. Targets and edge features follow
``docs/targets_and_edge_features.md`` (sections 1 and 3): meta's ``target.kind`` comes from
``gnnscale.datasets.targets.target_kind(data)``, and ``edge_feature_dim`` is 0 without
``data.edge_attr`` (then neither edge file is written, both formats as before).

The loader is :mod:`gnnscale.partitioning.part` (:class:`~gnnscale.partitioning.part.LocalPart`,
:func:`~gnnscale.partitioning.part.load_part`), the summary for ``gnnscale info``
:mod:`gnnscale.partitioning.summary` (:func:`~gnnscale.partitioning.summary.summarize`); both
are re-exported here.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnnscale.errors import PartitionError
from gnnscale.partitioning.manifest import (  # noqa: F401 - re-exported
    _MASKS,
    _RERUN_HINT,
    EDGE_FILES,
    FORMAT_VERSION,
    META_FILE,
    PART_FILES,
    TYPED_FORMAT_VERSION,
    _verify_files,
    load_meta,
    part_dir_name,
    part_files,
    sha256_file,
    verify_part,
)
from gnnscale.partitioning.feature_dtype import check_feature_dtype, encode_rows
from gnnscale.partitioning.link import is_link_file, split_by_source
from gnnscale.partitioning.inputs import edge_features, edge_times, node_tensor, targets
from gnnscale.partitioning.graph import as_edge_array, edge_cut, sorted_unique, to_csc
from gnnscale.partitioning.metrics import metrics_from_counts
from gnnscale.partitioning.part import LocalPart, load_part  # noqa: F401 - re-exported
from gnnscale.partitioning.relabel import contiguous_relabel
from gnnscale.partitioning.summary import summarize, typed_summary  # noqa: F401 - re-exported
from gnnscale.partitioning.typed import is_typed, type_tables, typed_spec
from gnnscale.partitioning.typed_write import TypedWrite, typed_tcsr

if TYPE_CHECKING:  # torch_geometric costs 2 s to import; workers never need it
    from torch_geometric.data import Data

logger = logging.getLogger(__name__)


def _gnnscale_version() -> str:
    try:
        from importlib.metadata import version

        return version("gnnscale")
    except Exception:  # noqa: BLE001 - metadata missing in a source checkout
        return "unknown"


def _remove_stale(out: Path, num_parts: int, keep: tuple[str, ...] = PART_FILES) -> None:
    """Drop an old meta.json, old ``part{p}`` folders (p >= num_parts) holding only our files,
    and, in the parts kept, our files not named in ``keep`` (those of the other format, or of
    a node type that no longer has features)."""
    meta = out / META_FILE
    if meta.exists():
        logger.info("overwriting the partition folder %s", out)
        meta.unlink()
    for child in out.glob("part*"):
        suffix = child.name[4:]
        if not (child.is_dir() and suffix.isdigit()):
            continue
        ours = [c for c in child.iterdir() if _is_part_file(c.name)]
        if int(suffix) >= num_parts:
            if len(ours) == len(list(child.iterdir())):
                shutil.rmtree(child)
        else:  # a kept part: drop our files that this write does not rewrite
            for c in ours:
                if c.name not in keep:
                    c.unlink()


def _is_part_file(name: str) -> bool:
    """A file name that a part of either format holds (format 1's, etype.npy, x_t{t}.npy)."""
    return name in PART_FILES or name in EDGE_FILES or name == "etype.npy" or is_link_file(name) or (
        name.startswith("x_t") and name.endswith(".npy") and name[3:-4].isdigit()
    )


def write_meta(out_dir: str | os.PathLike, meta: dict[str, Any]) -> None:
    """Write ``meta`` to ``out_dir/meta.json`` atomically (temp file + rename)."""
    out = Path(out_dir)
    tmp = out / (META_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=1)
    os.replace(tmp, out / META_FILE)


class _HashingWriter:
    """A write-only file that hashes what goes through it (sha256 without reading back)."""

    def __init__(self, fh, digest) -> None:
        self.fh, self.digest = fh, digest

    def write(self, data) -> int:
        self.digest.update(data)  # releases the GIL on large buffers, as the write does
        return self.fh.write(data)


def _save(path: Path, arr: np.ndarray) -> str:
    """Write ``arr`` as ``np.save`` does (the same bytes) and return the file's sha256, hashed
    as it is written (numpy writes through the wrapper in 16 MiB pieces)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "wb") as fh:
        np.lib.format.write_array(_HashingWriter(fh, digest), np.asanyarray(arr), allow_pickle=False)
    return digest.hexdigest()


def _writer_threads() -> int:
    """Threads that write and hash part files: the cores this process may use, at most 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def _part_arrays(lo: int, hi: int, old_of_new: np.ndarray, indptr_g: np.ndarray, indices_g: np.ndarray,
                 x: torch.Tensor | None, y: torch.Tensor, masks: dict, typed: TypedWrite | None = None,
                 part: int = 0, edges: tuple[np.ndarray, np.ndarray] | None = None,
                 feature_dtype: str = "float32",
                 times: np.ndarray | None = None) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The arrays of the part owning new ids ``[lo, hi)`` by file name, and its sizes for meta.json.

    ``y``: the targets as stored (:func:`~gnnscale.partitioning.inputs.targets`: int64 or float32).
    ``typed``: a typed graph's extras: ``etype.npy`` and ``x_t{t}.npy`` (instead of ``x.npy``),
    and the part's per-relation edge and cut counts added to ``typed``'s running sums.
    ``edges``: ``(edge_ids_g, edge_attr)``, the original column of every stored edge (aligned
    with the global CSC) and the float32 ``[E, De]`` features of the input's columns: adds
    ``edge_ids.npy`` and ``edge_attr.npy`` (the part's rows gathered, aligned with ``indices``).
    ``feature_dtype``: how ``x.npy``'s rows are stored (:func:`encode_rows`).
    ``times``: a temporal graph's int64 times aligned with the global T-CSR: adds ``edge_time.npy``.
    """
    ids_np = old_of_new[lo:hi]
    ids = torch.from_numpy(ids_np)
    e_lo, e_hi = int(indptr_g[lo]), int(indptr_g[hi])
    indices = indices_g[e_lo:e_hi]
    arrays = {
        "indptr.npy": indptr_g[lo : hi + 1] - e_lo,
        "indices.npy": indices,
        "x.npy": None if x is None else encode_rows(x[ids].to(torch.float32), feature_dtype),
        "y.npy": y[ids].numpy(),
        "train_mask.npy": masks["train_mask"][ids].numpy(),
        "val_mask.npy": masks["val_mask"][ids].numpy(),
        "test_mask.npy": masks["test_mask"][ids].numpy(),
        "orig_ids.npy": ids_np,
    }
    if edges is not None:  # edge features, or a temporal graph: each in-edge's input column
        edge_ids = edges[0][e_lo:e_hi]
        if edges[1] is not None:
            arrays["edge_attr.npy"] = edges[1][edge_ids]
        arrays["edge_ids.npy"] = edge_ids
    if times is not None:
        arrays["edge_time.npy"] = times[e_lo:e_hi]
    remote_mask = (indices < lo) | (indices >= hi)
    remote = indices[remote_mask]
    if typed is not None:
        del arrays["x.npy"]
        arrays.update(typed.part_arrays(part, ids_np, e_lo, e_hi, remote_mask))
    del remote_mask
    size = {
        "nodes": hi - lo,
        "in_edges": e_hi - e_lo,
        "train": int(np.count_nonzero(arrays["train_mask.npy"])),
        "val": int(np.count_nonzero(arrays["val_mask.npy"])),
        "test": int(np.count_nonzero(arrays["test_mask.npy"])),
        "remote_sources": int(sorted_unique(remote, inplace=True).shape[0]),
    }
    return arrays, size


def write_partitions(
    data: Data,
    parts: np.ndarray | torch.Tensor,
    out_dir: str | os.PathLike,
    *,
    method: str,
    dataset: str,
    num_parts: int | None = None,
    extra_meta: dict[str, Any] | None = None,
    write_threads: int | None = None,
    feature_dtype: str = "float32",
) -> dict[str, Any]:
    """Relabel nodes contiguously by part and write the partition folder: format 1 for a
    plain graph, format 2 for a typed one (``data.node_types`` and ``data.edge_type``, see
    ``docs/typed_graphs.md``).

    Args:
        data: the graph (``x`` float [N, F], ``y`` int [N], ``edge_index`` int [2, E],
            ``train_mask``/``val_mask``/``test_mask`` bool [N], optional ``num_classes``).
            ``y`` may be of any target kind (``docs/targets_and_edge_features.md``: float
            [N, C] multilabel, float [N] / [N, D] regression, with optional ``target_kind``);
            optional ``edge_attr`` float [E, De] aligned with ``edge_index``'s columns.
            A typed graph has ``x_dict`` {type: float [N_t, F_t]} instead of ``x``, and
            ``node_types``, ``edge_types``, ``type_ptr``, ``edge_type`` int [E],
            ``target_type``.
        parts: int ``[N]``, the part of every original node.
        out_dir: output folder (created; an existing partition there is replaced).
        method: partitioner name, recorded in meta.json.
        dataset: dataset name, recorded in meta.json.
        num_parts: P (defaults to ``parts.max() + 1``; pass it to keep empty trailing parts).
        extra_meta: extra JSON-serializable entries merged into meta.json.
        write_threads: threads that write and hash the files (default: the usable cores, at
            most 4; 1 writes them one after the other).
        feature_dtype: ``float32``, ``float16`` or ``bfloat16``: the precision of ``x.npy``'s
            rows, recorded in meta.json (format 1 only; a typed graph refuses the others).

    Returns:
        The meta dict that was written to ``out_dir/meta.json``.
    """
    n = int(data.num_nodes)
    if isinstance(parts, torch.Tensor):
        parts = parts.detach().cpu().numpy()
    parts = np.asarray(parts)
    if parts.shape != (n,):
        raise PartitionError(
            f"expected one part id per node, i.e. parts of shape [{n}], found "
            f"{tuple(parts.shape)}; the partitioner output does not match the graph"
        )
    spec = typed_spec(data) if is_typed(data) else None
    feature_dtype = check_feature_dtype(feature_dtype)
    if spec is not None and feature_dtype != "float32":
        raise PartitionError(
            f"expected --feature-dtype float32 for a typed graph (its rows are per node type), found "
            f"{feature_dtype!r}; leave --feature-dtype out"
        )
    x = node_tensor(data, "x", n, 2) if spec is None else None
    y, target = targets(data, n)
    masks = {m: node_tensor(data, m, n, 1).to(torch.bool) for m in _MASKS}
    num_classes = target["num_classes"]
    feature_dim = int(x.shape[1]) if x is not None else 0

    new_of_old, old_of_new, offsets = contiguous_relabel(parts, num_parts)
    num_parts = offsets.shape[0] - 1
    ei = as_edge_array(data.edge_index, n)
    edge_attr = edge_features(data, int(ei.shape[1]))
    edge_time = edge_times(data, int(ei.shape[1]))
    cut, undirected = edge_cut(ei, parts, n)
    typed = None
    edges = None  # with edge features: (original column of every stored edge, edge_attr)
    times_g = None  # a temporal graph: each stored edge's time (the global T-CSR)
    if spec is None:
        temporal = edge_time is not None  # every event kept (no dedupe), in-edges by (time, column)
        csc = to_csc(ei, n, dedupe=not temporal, relabel=new_of_old,
                     return_edge_ids=edge_attr is not None or temporal)
        indptr_g, indices_g = csc[:2]
        if temporal:
            row = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr_g))
            perm = np.lexsort((csc[-1], edge_time[csc[-1]], row))
            del row
            indices_g = indices_g[perm]
            csc = (indptr_g, indices_g, csc[-1][perm])
            times_g = edge_time[csc[-1]]
            if edge_attr is None:
                edges = (csc[-1], None)
    else:
        temporal = edge_time is not None  # every event kept; each relation's in-edges by (time, column)
        csc = to_csc(
            ei, n, dedupe=not temporal, relabel=new_of_old, edge_type=spec.edge_type,
            num_relations=spec.num_relations, return_edge_ids=edge_attr is not None or temporal,
        )
        indptr_g, indices_g = csc[:2]
        etype_g = csc[2]
        if temporal:
            ids_g, rel_local = typed_tcsr(indptr_g, csc[-1], etype_g, edge_time, spec)
            indices_g, etype_g = indices_g[ids_g[0]], etype_g[ids_g[0]]
            times_g = edge_time[ids_g[1]]
            csc = (indptr_g, indices_g, etype_g, ids_g[1])
            if edge_attr is None:
                edges = (rel_local, None)  # edge_ids.npy: each in-edge's column in its relation's edge_index
        spec.edge_type = None  # a view of data.edge_type: not needed any more
        typed = TypedWrite(spec, etype_g, *type_tables(old_of_new, offsets, spec.type_ptr))
    if edge_attr is not None:
        edges = (csc[-1], edge_attr)
    del csc
    num_input_edges = int(ei.shape[1])
    link_split = getattr(data, "link_split", None)  # a link-prediction split: by source owner, new ids
    link_parts, link_meta = split_by_source(link_split, new_of_old, offsets) if link_split is not None else (None, None)
    del ei, new_of_old

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise PartitionError(
            f"expected {out} to be a folder for the partition, found a file; pick another "
            "output path"
        )
    out.mkdir(parents=True, exist_ok=True)
    version = FORMAT_VERSION if typed is None else TYPED_FORMAT_VERSION
    edge_dim = 0 if edge_attr is None else int(edge_attr.shape[1])
    temporal_meta = None if times_g is None else {
        "edge_time": True, "order": "time within each node's in-edges (T-CSR)", "events": int(times_g.shape[0]),
        "time_min": int(times_g.min()) if times_g.size else 0, "time_max": int(times_g.max()) if times_g.size else 0,
        "source": getattr(data, "time_source", "edge_time"), "edge_ids": True,
    }
    if temporal_meta is not None and typed is not None:  # per relation: each node's in-edges of it by time
        temporal_meta["order"] = "time within each node's in-edges of each relation (T-CSR per relation)"
        temporal_meta["edge_ids"] = "column of the relation's edge_index"
    keep = part_files({"format_version": version, "link": link_meta, "edge_feature_dim": edge_dim,
                       "temporal": temporal_meta,
                       "typed": None if typed is None else {"feature_dims": spec.feature_dims}})
    _remove_stale(out, num_parts, keep)

    files: dict[str, str] = {}
    sizes: list[dict[str, int]] = []
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    it = range(num_parts)
    if tqdm is not None and n >= 1_000_000:
        it = tqdm(it, desc="writing parts", unit="part")
    # Files are written and hashed by a few threads (both release the GIL), while the next
    # part's arrays are gathered; at most two parts' copies are alive (this one and the one
    # being written).
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=write_threads or _writer_threads(), thread_name_prefix="gnnscale-write")
    writing: dict[str, Any] = {}
    try:
        for p in it:  # loop over parts
            lo, hi = int(offsets[p]), int(offsets[p + 1])
            pdir = out / part_dir_name(p)
            pdir.mkdir(exist_ok=True)
            arrays, size = _part_arrays(lo, hi, old_of_new, indptr_g, indices_g, x, y, masks, typed, p, edges,
                                        feature_dtype, times_g)
            sizes.append(size)
            if link_parts is not None:
                arrays.update(link_parts[p])
                link_parts[p] = None
            done = writing
            writing = {f"{part_dir_name(p)}/{fname}": pool.submit(_save, pdir / fname, arr)
                       for fname, arr in arrays.items()}
            del arrays
            files.update({name: fut.result() for name, fut in done.items()})  # the part before
            logger.debug("writing %s: %d nodes, %d in-edges", pdir, hi - lo, size["in_edges"])
        files.update({name: fut.result() for name, fut in writing.items()})
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

    quality = metrics_from_counts(
        nodes=[s["nodes"] for s in sizes],
        train=[s["train"] for s in sizes],
        in_edges=[s["in_edges"] for s in sizes],
        halo=[s["remote_sources"] for s in sizes],
        cut=cut,
        undirected_edges=undirected,
    )
    del quality["sizes"]  # the same numbers are in "parts"
    meta: dict[str, Any] = {
        "format_version": version,
        "dataset": dataset,
        "method": method,
        "num_parts": num_parts,
        "num_nodes": n,
        "num_edges": int(indptr_g[-1]),
        "num_input_edges": num_input_edges,
        "offsets": [int(o) for o in offsets],
        "feature_dim": feature_dim,
        "num_classes": int(num_classes),
        "target": target,
        "edge_feature_dim": edge_dim,
        "feature_dtype": feature_dtype,
        "parts": sizes,
        **quality,
        "files": files,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "gnnscale_version": _gnnscale_version(),
    }
    if typed is not None:
        meta["typed"] = typed.meta(np.diff(typed.type_starts, axis=1))
    if link_meta is not None:
        meta["link"] = link_meta
    if temporal_meta is not None:
        meta["temporal"] = temporal_meta
    if extra_meta:
        clash = set(extra_meta) & {"format_version", "files", "offsets", "num_parts", "typed", "link", "target",
                                   "edge_feature_dim", "temporal"}
        if clash:
            raise PartitionError(
                f"expected extra_meta not to override core keys, found {sorted(clash)}; "
                "rename those entries"
            )
        meta.update(extra_meta)
    write_meta(out, meta)
    logger.debug(  # partition_graph logs the one line of a write, with its time and memory
        "wrote %d parts to %s (%d nodes, %d edges, edge cut %d = %.2f%%)",
        num_parts,
        out,
        n,
        meta["num_edges"],
        cut,
        100.0 * meta["edge_cut_fraction"],
    )
    return meta
