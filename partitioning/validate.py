"""Whole-folder checks of a partition folder's contents, before any worker starts.

:func:`gnnscale.partitioning.manifest.verify_parts` proves that the files are the ones the
partitioner wrote (sha256); this module proves that what they hold is a graph a worker can
train on: every field of ``meta.json`` of the right type and consistent (offsets from 0 to
``num_nodes``, increasing), every array of the dtype and shape the format fixes, CSC pointers
that start at 0, never decrease and end at the edge count, node ids inside the graph, finite
features, targets of labelled nodes that fit their kind (meta's ``target``: class ids inside
``[0, num_classes)`` for class/binary, 0/1 for multilabel, no NaN for multilabel/regression),
edge features (when ``edge_feature_dim`` > 0) of the right shape, finite, with original edge ids
inside the input's edges. Each problem is one line naming the file, what was expected and what
was found.

NumPy only (no torch): ``gnnscale train`` runs it in the launcher. Arrays are memory-mapped
and scanned in slices (bounded memory).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from gnnscale.errors import PartitionError
from gnnscale.partitioning.feature_dtype import bfloat16_bits_to_float32, file_dtype, meta_feature_dtype
from gnnscale.partitioning.manifest import (
    META_FILE,
    TYPED_FORMAT_VERSION,
    _RERUN_HINT,
    edge_feature_dim,
    load_meta,
    part_dir_name,
    target_meta,
)

_SLICE = 1 << 22  # elements per scanned slice


def _int(meta: dict, key: str, path: Path, minimum: int = 0) -> int:
    value = meta.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PartitionError(f"{path}: expected {key} to be an integer >= {minimum}, found {value!r}; {_RERUN_HINT}")
    return value


def check_meta(part_dir: str | os.PathLike) -> dict[str, Any]:
    """:func:`load_meta` plus the types and consistency of the fields a worker relies on."""
    root = Path(part_dir)
    meta = load_meta(root)
    path = root / META_FILE
    parts = _int(meta, "num_parts", path, 1)
    n = _int(meta, "num_nodes", path, 0)
    typed = meta["format_version"] == TYPED_FORMAT_VERSION
    if not typed or "feature_dim" in meta:  # typed graphs: features per type, feature_dim 0 or absent
        _int(meta, "feature_dim", path, 0 if typed else 1)
    if "num_classes" in meta and meta["num_classes"] is not None:
        _int(meta, "num_classes", path, 1)
    offsets = meta["offsets"]
    if not isinstance(offsets, list) or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets):
        raise PartitionError(f"{path}: expected offsets to be a list of {parts + 1} integers, found {offsets!r:.200}; "
                             f"{_RERUN_HINT}")
    if offsets[0] != 0 or offsets[-1] != n or any(b < a for a, b in zip(offsets, offsets[1:])):
        raise PartitionError(f"{path}: expected offsets rising from 0 to num_nodes={n}, found {offsets!r:.200}; "
                             f"{_RERUN_HINT}")
    if not isinstance(meta["files"], dict):
        raise PartitionError(f"{path}: expected files to map each part file to its sha256, found "
                             f"{type(meta['files']).__name__}; {_RERUN_HINT}")
    return meta


def load_array(path: Path, dtype, shape: tuple, mmap: bool | str = True) -> np.ndarray:
    """The ``.npy`` array at ``path``, checked to have ``dtype`` and ``shape`` (``None`` entries:
    any length). ``mmap``: True maps it read-only, ``"c"`` copy-on-write (a writable array whose
    pages stay the file's until written), False reads it into memory. Raises
    :class:`PartitionError` naming the file."""
    if not path.is_file():
        raise PartitionError(f"{path}: expected this file, found none; {_RERUN_HINT}")
    try:
        arr = np.load(path, mmap_mode=("r" if mmap is True else mmap) or None, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise PartitionError(f"{path}: expected a readable .npy file, found an error ({exc}); {_RERUN_HINT}") from None
    want = tuple(arr.shape[i] if s is None and i < arr.ndim else s for i, s in enumerate(shape))
    if arr.dtype != np.dtype(dtype) or arr.shape != want:
        raise PartitionError(f"{path}: expected dtype {np.dtype(dtype)} and shape {want}, found dtype {arr.dtype} "
                             f"and shape {arr.shape}; {_RERUN_HINT}")
    return arr


def check_pointers(path: Path, indptr: np.ndarray, num_edges: int) -> None:
    """CSC pointers rising from 0 to ``num_edges`` (the edges in indices.npy)."""
    falls = indptr.size > 1 and bool(np.any(np.diff(indptr) < 0))
    if indptr[0] != 0 or indptr[-1] != num_edges or falls:
        raise PartitionError(f"{path}: expected CSC pointers rising from 0 to {num_edges} (the edges in indices.npy), "
                             f"found first {int(indptr[0])}, last {int(indptr[-1])}{', and a decrease' if falls else ''}; "
                             f"{_RERUN_HINT}")


def _slices(n: int, per_row: int = 1):
    step = max(1, _SLICE // max(1, per_row))
    return ((a, min(n, a + step)) for a in range(0, n, step))


def check_part(part_dir: str | os.PathLike, part: int, meta: dict | None = None) -> None:
    """Check the arrays of one part (see the module docstring). Raises :class:`PartitionError`."""
    root = Path(part_dir)
    meta = meta if meta is not None else check_meta(root)
    pdir = root / part_dir_name(part)
    lo, hi = meta["offsets"][part], meta["offsets"][part + 1]
    n, total, f = hi - lo, int(meta["num_nodes"]), int(meta.get("feature_dim", 0))
    indptr = load_array(pdir / "indptr.npy", np.int64, (n + 1,))
    indices = load_array(pdir / "indices.npy", np.int64, (None,))
    check_pointers(pdir / "indptr.npy", indptr, indices.shape[0])
    for a, b in _slices(indices.shape[0]):
        s = indices[a:b]
        if s.size and (int(s.min()) < 0 or int(s.max()) >= total):
            raise PartitionError(f"{pdir / 'indices.npy'}: expected node ids in [0, {total}), found "
                                 f"[{int(s.min())}, {int(s.max())}]; {_RERUN_HINT}")
    if meta["format_version"] == TYPED_FORMAT_VERSION:
        _check_typed_part(pdir, meta, part, indptr, indices.shape[0])
    else:
        stored = meta_feature_dtype(meta)
        x = load_array(pdir / "x.npy", file_dtype(stored), (n, f))
        _check_finite(pdir / "x.npy", x if stored != "bfloat16" else _Bfloat16Rows(x))
    if edge_feature_dim(meta) > 0:
        _check_edge_files(pdir, meta, indices.shape[0])
    y = np.asarray(load_targets(pdir / "y.npy", meta, n))
    masks = {m: np.asarray(load_array(pdir / f"{m}.npy", np.bool_, (n,))) for m in ("train_mask", "val_mask", "test_mask")}
    labelled = masks["train_mask"] | masks["val_mask"] | masks["test_mask"]
    classes = meta.get("num_classes")
    kind = target_meta(meta)["kind"]
    if labelled.any() and kind in ("class", "binary"):
        yl = y[labelled]
        top = int(classes) if classes else None
        if int(yl.min()) < 0 or (top is not None and int(yl.max()) >= top):
            raise PartitionError(f"{pdir / 'y.npy'}: expected the labels of nodes in a mask in [0, {top}), found "
                                 f"[{int(yl.min())}, {int(yl.max())}]; {_RERUN_HINT}")
    elif labelled.any():
        _check_float_targets(pdir / "y.npy", y, labelled, kind)
    orig = load_array(pdir / "orig_ids.npy", np.int64, (n,))
    if n and (int(orig.min()) < 0 or int(orig.max()) >= total):
        raise PartitionError(f"{pdir / 'orig_ids.npy'}: expected original ids in [0, {total}), found "
                             f"[{int(orig.min())}, {int(orig.max())}]; {_RERUN_HINT}")


def load_targets(path: Path, meta: dict, n: int, mmap: bool | str = True) -> np.ndarray:
    """A part's ``y.npy`` checked against meta's ``target`` (old folders: class ids): int64 ``[n]``
    for class/binary, float32 ``[n, C]`` for multilabel, float32 ``[n]`` or ``[n, D]`` for
    regression (``[n]`` or ``[n, 1]`` when D is 1). Raises :class:`PartitionError` naming the file."""
    target = target_meta(meta)
    kind = target["kind"]
    if kind in ("class", "binary"):
        return load_array(path, np.int64, (n,), mmap)
    d = int(target["num_outputs"])
    shape = (n, d)
    if kind == "regression" and d == 1:
        try:  # the header only: [n] and [n, 1] are both a single regression target
            shape = (n,) if np.load(path, mmap_mode="r", allow_pickle=False).ndim == 1 else (n, 1)
        except (OSError, ValueError, EOFError):
            pass  # load_array names the problem
    return load_array(path, np.float32, shape, mmap)


def _check_float_targets(path: Path, y: np.ndarray, labelled: np.ndarray, kind: str) -> None:
    """Multilabel/regression targets of labelled rows: no NaN, and 0/1 for multilabel (in slices)."""
    rows = np.flatnonzero(labelled)
    per_row = 1 if y.ndim == 1 else y.shape[1]
    for a, b in _slices(rows.shape[0], per_row):
        part = y[rows[a:b]]
        nan = np.isnan(part)
        if nan.any():
            row = int(rows[a + int(np.argwhere(nan)[0][0])])
            raise PartitionError(f"{path}: expected no NaN {kind} targets on nodes in a mask, found {int(nan.sum())} "
                                 f"(the first in local row {row}); fill them or take those nodes out of the masks, "
                                 "then re-partition")
        if kind == "multilabel":
            other = (part != 0) & (part != 1)
            if other.any():
                row = int(rows[a + int(np.argwhere(other)[0][0])])
                raise PartitionError(f"{path}: expected multilabel targets of 0/1 on nodes in a mask, found "
                                     f"{int(other.sum())} other values (the first in local row {row}); "
                                     f"{_RERUN_HINT} from 0/1 targets")


def _check_edge_files(pdir: Path, meta: dict, num_edges: int) -> None:
    """edge_attr.npy float32 [E_p, De] of finite values; edge_ids.npy int64 [E_p] inside the input's
    edges (``num_input_edges`` when meta has it)."""
    path = pdir / "edge_attr.npy"
    _check_finite(path, load_array(path, np.float32, (num_edges, edge_feature_dim(meta))))
    path = pdir / "edge_ids.npy"
    ids = load_array(path, np.int64, (num_edges,))
    top = meta.get("num_input_edges")
    top = int(top) if isinstance(top, int) and not isinstance(top, bool) else None
    for a, b in _slices(num_edges):
        s = ids[a:b]
        if s.size and (int(s.min()) < 0 or (top is not None and int(s.max()) >= top)):
            raise PartitionError(f"{path}: expected original edge ids in [0, {top}), found "
                                 f"[{int(s.min())}, {int(s.max())}]; {_RERUN_HINT}")


class _Bfloat16Rows:
    """Slices of bfloat16 rows stored as uint16 bits, read as float32 (for :func:`_check_finite`)."""

    def __init__(self, bits: np.ndarray) -> None:
        self.bits, self.shape = bits, bits.shape

    def __getitem__(self, rows: slice) -> np.ndarray:
        return bfloat16_bits_to_float32(self.bits[rows])


def _check_finite(path: Path, x: np.ndarray) -> None:
    """Finite features (scanned in slices)."""
    for a, b in _slices(x.shape[0], x.shape[1]):
        bad = ~np.isfinite(x[a:b])
        if bad.any():
            row = a + int(np.argwhere(bad)[0][0])
            raise PartitionError(f"{path}: expected finite features, found {int(bad.sum())} NaN or infinite "
                                 f"values (first in row {row}); clean the features and re-partition")


def _check_typed_part(pdir: Path, meta: dict, part: int, indptr: np.ndarray, num_edges: int) -> None:
    """Format 2: relations in [0, R) forming one run per node (sorted), feature tables per type."""
    typed = meta["typed"]
    r = len(typed["edge_types"])
    etype = load_array(pdir / "etype.npy", np.int16, (num_edges,))
    for a, b in _slices(num_edges):
        s = etype[a:b]
        if s.size and (int(s.min()) < 0 or int(s.max()) >= r):
            raise PartitionError(f"{pdir / 'etype.npy'}: expected relations in [0, {r}), found "
                                 f"[{int(s.min())}, {int(s.max())}]; {_RERUN_HINT}")
        lo = max(a, 1)
        falls = etype[lo:b] < etype[lo - 1 : b - 1]
        first = indptr[np.searchsorted(indptr, lo) : np.searchsorted(indptr, b)]  # a node's first in-edge
        falls[first - lo] = False
        if falls.any():
            e = lo + int(np.argmax(falls))
            raise PartitionError(f"{pdir / 'etype.npy'}: expected the in-edges of every node sorted by relation, "
                                 f"found relation {int(etype[e])} after {int(etype[e - 1])} at edge {e}; {_RERUN_HINT}")
    row = typed["type_starts"][part]
    for t, dim in enumerate(typed["feature_dims"]):  # loop over node types
        if dim > 0:
            path = pdir / f"x_t{t}.npy"
            _check_finite(path, load_array(path, np.float32, (row[t + 1] - row[t], dim)))


def check_folder(part_dir: str | os.PathLike) -> dict[str, Any]:
    """Check ``meta.json`` and every part (in part order); the meta on success."""
    meta = check_meta(part_dir)
    for p in range(int(meta["num_parts"])):
        check_part(part_dir, p, meta)
    return meta
