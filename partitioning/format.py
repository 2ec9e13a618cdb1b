"""The versioned on-disk partition format (FORMAT_VERSION = 1): writer, loader, summary.

Layout of a partition folder ``OUT/``::

    meta.json                  format_version, dataset, method, num_parts, num_nodes, num_edges,
                               offsets, feature_dim, num_classes, feature_dtype, parts (sizes),
                               edge_cut (int), edge_cut_fraction, balance, halo,
                               replication_factor, files {relpath: sha256}, created, ...
    part{p}/indptr.npy         int64 [n_p + 1]  CSC of the in-edges of owned nodes (local dst)
    part{p}/indices.npy        int64 [E_p]      source of each in-edge, in NEW global ids
    part{p}/x.npy              float32 [n_p, F]
    part{p}/y.npy              int64 [n_p]
    part{p}/train_mask.npy     bool [n_p]   (also val_mask.npy, test_mask.npy)
    part{p}/orig_ids.npy       int64 [n_p]  new id offsets[p]+i -> original id orig_ids[i]

Edges are those of ``data.edge_index`` with duplicates removed; self loops are kept as given.
meta.json is written last, so a folder without it is an unfinished write.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnnscale.errors import PartitionError
from gnnscale.partitioning.manifest import (  # noqa: F401 - re-exported
    _RERUN_HINT,
    FORMAT_VERSION,
    META_FILE,
    PART_FILES,
    _verify_files,
    load_meta,
    part_dir_name,
    sha256_file,
    verify_part,
)
from gnnscale.partitioning.book import PartitionBook
from gnnscale.partitioning.graph import as_edge_array, edge_cut, sorted_unique, to_csc
from gnnscale.partitioning.metrics import metrics_from_counts
from gnnscale.partitioning.relabel import contiguous_relabel
from gnnscale.partitioning.validate import check_pointers, load_array

if TYPE_CHECKING:  # torch_geometric costs 2 s to import; workers never need it
    from torch_geometric.data import Data

logger = logging.getLogger(__name__)

_MASKS = ("train_mask", "val_mask", "test_mask")


def _gnnscale_version() -> str:
    try:
        from importlib.metadata import version

        return version("gnnscale")
    except Exception:  # noqa: BLE001 - metadata missing in a source checkout
        return "unknown"


# --------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------


def _node_tensor(data: Data, name: str, n: int, ndim: int) -> torch.Tensor:
    value = getattr(data, name, None)
    if value is None:
        raise PartitionError(
            f"expected data.{name} with {n} rows, found none; the dataset loader must provide "
            "x, y, train_mask, val_mask and test_mask"
        )
    t = torch.as_tensor(value).detach().cpu()
    if t.dim() != ndim or t.shape[0] != n:
        want = f"[{n}, F]" if ndim == 2 else f"[{n}]"
        raise PartitionError(
            f"expected data.{name} of shape {want}, found {tuple(t.shape)}; fix the dataset"
        )
    return t


def _remove_stale(out: Path, num_parts: int) -> None:
    """Drop an old meta.json and old ``part{p}`` folders (p >= num_parts) holding only our files."""
    meta = out / META_FILE
    if meta.exists():
        logger.info("overwriting the partition folder %s", out)
        meta.unlink()
    for child in out.glob("part*"):
        suffix = child.name[4:]
        if not (child.is_dir() and suffix.isdigit() and int(suffix) >= num_parts):
            continue
        if {c.name for c in child.iterdir()} <= set(PART_FILES):
            shutil.rmtree(child)


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
                 x: torch.Tensor, y: torch.Tensor, masks: dict) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The arrays of the part owning new ids ``[lo, hi)`` by file name, and its sizes for meta.json."""
    ids_np = old_of_new[lo:hi]
    ids = torch.from_numpy(ids_np)
    e_lo, e_hi = int(indptr_g[lo]), int(indptr_g[hi])
    indices = indices_g[e_lo:e_hi]
    arrays = {
        "indptr.npy": indptr_g[lo : hi + 1] - e_lo,
        "indices.npy": indices,
        "x.npy": x[ids].numpy().astype(np.float32, copy=False),
        "y.npy": y[ids].numpy().astype(np.int64, copy=False),
        "train_mask.npy": masks["train_mask"][ids].numpy(),
        "val_mask.npy": masks["val_mask"][ids].numpy(),
        "test_mask.npy": masks["test_mask"][ids].numpy(),
        "orig_ids.npy": ids_np,
    }
    remote = indices[(indices < lo) | (indices >= hi)]
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
) -> dict[str, Any]:
    """Relabel nodes contiguously by part and write the format-1 partition folder.

    Args:
        data: the graph (``x`` float [N, F], ``y`` int [N], ``edge_index`` int [2, E],
            ``train_mask``/``val_mask``/``test_mask`` bool [N], optional ``num_classes``).
        parts: int ``[N]``, the part of every original node.
        out_dir: output folder (created; an existing partition there is replaced).
        method: partitioner name, recorded in meta.json.
        dataset: dataset name, recorded in meta.json.
        num_parts: P (defaults to ``parts.max() + 1``; pass it to keep empty trailing parts).
        extra_meta: extra JSON-serializable entries merged into meta.json.
        write_threads: threads that write and hash the files (default: the usable cores, at
            most 4; 1 writes them one after the other).

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
    x = _node_tensor(data, "x", n, 2)
    y = _node_tensor(data, "y", n, 1)
    masks = {m: _node_tensor(data, m, n, 1).to(torch.bool) for m in _MASKS}
    num_classes = getattr(data, "num_classes", None)
    if num_classes is None:
        num_classes = int(y.max()) + 1 if y.numel() else 0
    feature_dim = int(x.shape[1])

    new_of_old, old_of_new, offsets = contiguous_relabel(parts, num_parts)
    num_parts = offsets.shape[0] - 1
    ei = as_edge_array(data.edge_index, n)
    cut, undirected = edge_cut(ei, parts, n)
    indptr_g, indices_g = to_csc(ei, n, dedupe=True, relabel=new_of_old)
    num_input_edges = int(ei.shape[1])
    del ei, new_of_old

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise PartitionError(
            f"expected {out} to be a folder for the partition, found a file; pick another "
            "output path"
        )
    out.mkdir(parents=True, exist_ok=True)
    _remove_stale(out, num_parts)

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
            arrays, size = _part_arrays(lo, hi, old_of_new, indptr_g, indices_g, x, y, masks)
            sizes.append(size)
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
        "format_version": FORMAT_VERSION,
        "dataset": dataset,
        "method": method,
        "num_parts": num_parts,
        "num_nodes": n,
        "num_edges": int(indptr_g[-1]),
        "num_input_edges": num_input_edges,
        "offsets": [int(o) for o in offsets],
        "feature_dim": feature_dim,
        "num_classes": int(num_classes),
        "feature_dtype": "float32",
        "parts": sizes,
        **quality,
        "files": files,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "gnnscale_version": _gnnscale_version(),
    }
    if extra_meta:
        clash = set(extra_meta) & {"format_version", "files", "offsets", "num_parts"}
        if clash:
            raise PartitionError(
                f"expected extra_meta not to override core keys, found {sorted(clash)}; "
                "rename those entries"
            )
        meta.update(extra_meta)
    write_meta(out, meta)
    logger.info(
        "wrote %d parts to %s (%d nodes, %d edges, edge cut %d = %.2f%%)",
        num_parts,
        out,
        n,
        meta["num_edges"],
        cut,
        100.0 * meta["edge_cut_fraction"],
    )
    return meta


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------


@dataclass
class LocalPart:
    """One part loaded from disk. Owned nodes have new global ids ``offset .. offset+n-1``.

    Attributes:
        part_id: p.
        meta: the folder's meta.json.
        book: the PartitionBook of the whole partitioning.
        indptr: int64 ``[n+1]`` CSC row pointer over owned (local) targets.
        indices: int64 ``[E_p]`` sources of the in-edges, new global ids.
        x: read-only float32 memmap ``[n, F]``.
        y: int64 ``[n]``; train_mask / val_mask / test_mask: bool ``[n]``.
        orig_ids: int64 ``[n]``, original id of local node i.
    """

    part_id: int
    meta: dict[str, Any]
    book: PartitionBook
    indptr: torch.Tensor
    indices: torch.Tensor
    x: np.ndarray = field(repr=False)
    y: torch.Tensor = field(repr=False)
    train_mask: torch.Tensor = field(repr=False)
    val_mask: torch.Tensor = field(repr=False)
    test_mask: torch.Tensor = field(repr=False)
    orig_ids: torch.Tensor = field(repr=False)

    @property
    def num_owned(self) -> int:
        """Number of nodes this part owns."""
        return int(self.orig_ids.shape[0])

    @property
    def offset(self) -> int:
        """New global id of local node 0."""
        return int(self.book.offsets[self.part_id])

    @property
    def owned_ids(self) -> torch.Tensor:
        """int64 ``[n]``: the new global ids this part owns."""
        return torch.arange(self.offset, self.offset + self.num_owned, dtype=torch.int64)

    def feature_rows(self) -> torch.Tensor:
        """float32 ``[n, F]``: every owned row as a tensor over the mapped file (no copy: the
        pages are read as they are touched and stay the page cache's). Read-only: never write it."""
        if not isinstance(self.x, np.ndarray):
            return torch.as_tensor(self.x)
        import warnings

        with warnings.catch_warnings():  # torch warns that the mapping is not writable: it is not written
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(self.x)

    def features(self, local_idx: torch.Tensor) -> torch.Tensor:
        """Feature rows of owned nodes.

        Args:
            local_idx: int64 ``[k]`` local indices in ``[0, num_owned)``.

        Returns:
            float32 ``[k, F]`` (a copy, in memory).
        """
        idx = torch.as_tensor(local_idx).detach().cpu().to(torch.int64).numpy()
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= self.num_owned):
            raise PartitionError(
                f"expected local indices in [0, {self.num_owned}) for part {self.part_id}, "
                f"found [{int(idx.min())}, {int(idx.max())}]; convert global ids with "
                "book.to_local(ids, part) first"
            )
        return torch.from_numpy(np.ascontiguousarray(self.x[idx], dtype=np.float32))


def load_part(part_dir: str | os.PathLike, part: int, verify: bool = True) -> LocalPart:
    """Load part ``part`` of a partition folder.

    Args:
        part_dir: the folder written by :func:`write_partitions`.
        part: part id in ``[0, num_parts)``.
        verify: check the sha256 of every file of this part against meta.json.

    Returns:
        A :class:`LocalPart`; ``x`` and ``indices`` stay memory-mapped (``indices``
        copy-on-write), the other arrays are loaded.
    """
    root = Path(part_dir)
    meta = load_meta(root)
    num_parts = int(meta["num_parts"])
    if not isinstance(part, (int, np.integer)) or not 0 <= int(part) < num_parts:
        raise PartitionError(
            f"expected a part id in [0, {num_parts}), found {part!r}; {root} has {num_parts} parts"
        )
    part = int(part)
    pdir = root / part_dir_name(part)
    for fname in PART_FILES:
        if not (pdir / fname).is_file():
            raise PartitionError(
                f"expected {pdir / fname}, found no such file; {_RERUN_HINT}"
            )
    if verify:
        _verify_files(root, meta, part)
    book = PartitionBook(torch.tensor(meta["offsets"], dtype=torch.int64))
    n = book.part_size(part)
    f = int(meta["feature_dim"])
    indptr = load_array(pdir / "indptr.npy", np.int64, (n + 1,), mmap=False)
    # Mapped, not read: the edges are the part's largest array after x; their pages are shared
    # by the processes that open the part and dropped under memory pressure, not swapped.
    indices = load_array(pdir / "indices.npy", np.int64, (None,), mmap="c")
    check_pointers(pdir / "indptr.npy", indptr, indices.shape[0])
    x = load_array(pdir / "x.npy", np.float32, (n, f))
    y = load_array(pdir / "y.npy", np.int64, (n,), mmap=False)
    masks = {m: load_array(pdir / f"{m}.npy", np.bool_, (n,), mmap=False) for m in _MASKS}
    orig_ids = load_array(pdir / "orig_ids.npy", np.int64, (n,), mmap=False)
    return LocalPart(
        part_id=part,
        meta=meta,
        book=book,
        indptr=torch.from_numpy(indptr),
        indices=torch.from_numpy(indices),
        x=x,
        y=torch.from_numpy(y),
        train_mask=torch.from_numpy(masks["train_mask"]),
        val_mask=torch.from_numpy(masks["val_mask"]),
        test_mask=torch.from_numpy(masks["test_mask"]),
        orig_ids=torch.from_numpy(orig_ids),
    )


def summarize(part_dir: str | os.PathLike) -> dict[str, Any]:
    """Sizes, quality metrics and cost of a partition folder, for ``gnnscale info`` (reads
    meta.json and the file sizes only).

    Returns:
        JSON-serializable dict with dataset, method, num_parts, num_nodes, num_edges,
        feature_dim, num_classes, created, the partitioner's settings and cost
        (balance_constraints, imbalance, seed, options, partition_seconds, write_seconds,
        total_seconds, peak_rss_bytes, ...), the quality metrics ``edge_cut`` (int),
        ``edge_cut_fraction``, ``undirected_edges``, ``balance`` {nodes, train, in_edges}
        (max/mean over parts, 1.0 = perfect), ``halo`` (list per part),
        ``replication_factor`` (+ ``replication_factor_per_part``), and ``parts`` (per part:
        part, nodes, in_edges, train, val, test, remote_sources (= halo), bytes on disk).
        Folders written before the metrics were stored get ``balance`` computed from
        ``parts`` and the old ``edge_cut`` dict converted.
    """
    root = Path(part_dir)
    meta = load_meta(root)
    parts = []
    for p, size in enumerate(meta.get("parts", [])):
        on_disk = sum(
            (root / rel).stat().st_size
            for rel in meta["files"]
            if rel.startswith(part_dir_name(p) + "/") and (root / rel).is_file()
        )
        parts.append({"part": p, **size, "bytes": on_disk})
    keys = (
        "format_version",
        "dataset",
        "method",
        "num_parts",
        "num_nodes",
        "num_edges",
        "feature_dim",
        "num_classes",
        "created",
        "gnnscale_version",
        "balance_constraints",
        "imbalance",
        "seed",
        "options",
        "edge_cut",
        "edge_cut_fraction",
        "undirected_edges",
        "balance",
        "halo",
        "replication_factor",
        "replication_factor_per_part",
        "partition_seconds",
        "write_seconds",
        "total_seconds",
        "partition_peak_rss_bytes",
        "peak_rss_bytes",
        "peak_rss_growth_bytes",
        "peak_rss_exact",
    )
    out = {k: meta[k] for k in keys if k in meta}
    cut = out.get("edge_cut")
    if isinstance(cut, dict):  # folders written before edge_cut became an int
        out["edge_cut"] = int(cut.get("count", 0))
        out["edge_cut_fraction"] = float(cut.get("fraction", 0.0))
        out["undirected_edges"] = int(cut.get("undirected_edges", 0))
    if "balance" not in out and parts:
        out["balance"] = metrics_from_counts(
            nodes=[s.get("nodes", 0) for s in parts],
            train=[s.get("train", 0) for s in parts],
            in_edges=[s.get("in_edges", 0) for s in parts],
            halo=[s.get("remote_sources", 0) for s in parts],
            cut=0,
            undirected_edges=0,
        )["balance"]
    if "halo" not in out and parts and all("remote_sources" in s for s in parts):
        out["halo"] = [int(s["remote_sources"]) for s in parts]
    out["path"] = str(root)
    out["parts"] = parts
    return out
