"""A link-prediction split in a partition folder (``docs/link_prediction.md`` section 2).

The split's edges are written in new ids, each in the part that owns its **source** (row 0)
(training edges: in that order, then cut into P equal shares, so that every rank trains on as
many edges: a part whose nodes have more training edges than its share hands the surplus to the
next parts; the owners sample every endpoint wherever the edge is trained),
as ``part{p}/link_{key}.npy`` (int64): ``train``, ``val``, ``test`` [2, n] positives,
``val_neg``/``test_neg`` [2, n'] fixed negative pairs (by their own source) and
``val_neg_dst``/``test_neg_dst`` [n, Kn] per-source negatives (rows aligned with ``val``/``test``)
and, for edge classification / regression, ``train_label``/``val_label``/``test_label`` (int64
[n] class ids or float32 [n] / [n, D] targets, in the order of ``train``/``val``/``test``).
``meta["link"]`` names the arrays written (``arrays``), their total counts, the metric and how
the split was made; every file is hashed in ``meta["files"]`` like the part's other files.

Torch-free apart from :func:`split_by_source`'s input (tensors are converted once).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gnnscale.errors import PartitionError
from gnnscale.partitioning.manifest import is_link_file, link_file, link_part_files  # noqa: F401 - file names
from gnnscale.partitioning.validate import load_array

PAIR_KEYS = ("train", "val", "test", "val_neg", "test_neg")  # int64 [2, n] each
DST_KEYS = {"val_neg_dst": "val", "test_neg_dst": "test"}  # int64 [n, Kn], rows follow the positives'
LABEL_KEYS = {"train_label": "train", "val_label": "val", "test_label": "test"}  # one label per positive, same order


def _np(t) -> np.ndarray | None:
    if t is None:
        return None
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


def split_by_source(split, new_of_old: np.ndarray, offsets: np.ndarray) -> tuple[list[dict], dict]:
    """The split's arrays of every part, in new ids, and ``meta["link"]``.

    Args:
        split: a ``gnnscale.datasets.link_split.LinkSplit`` (original ids).
        new_of_old: int64 [N], the new id of every original node.
        offsets: int64 [P + 1], part p owns new ids ``offsets[p] .. offsets[p+1]-1``.

    Returns:
        ``([{file name: array} per part], meta)``; with edge labels, ``meta["label"]`` is
        ``{"kind": "class" | "regression", "num_classes": C or 0, "dim": D}``.
    """
    if hasattr(split, "check_labels"):  # edge labels: one per positive, of one kind (a one-line DatasetError)
        split.check_labels()
    n = new_of_old.shape[0]
    num_parts = offsets.shape[0] - 1
    per_part: list[dict] = [{} for _ in range(num_parts)]
    counts: dict[str, int] = {}
    arrays = []
    kn = 0
    for key in PAIR_KEYS:
        pairs = _np(getattr(split, f"{key}_pos" if key in ("train", "val", "test") else key))
        if pairs is None:
            continue
        pairs = np.asarray(pairs, dtype=np.int64)
        if pairs.ndim != 2 or pairs.shape[0] != 2:
            raise PartitionError(f"expected the link split's {key} edges as int64 [2, n], found shape "
                                 f"{list(pairs.shape)}; fix the split")
        if pairs.size and (pairs.min() < 0 or pairs.max() >= n):
            raise PartitionError(f"expected the link split's {key} edges to name nodes in [0, {n}), found ids in "
                                 f"[{int(pairs.min())}, {int(pairs.max())}]; fix the split")
        new = new_of_old[pairs]
        owner = np.searchsorted(offsets, new[0], side="right") - 1
        order = np.argsort(owner, kind="stable")
        cuts = np.searchsorted(owner[order], np.arange(num_parts + 1))
        if key == "train":  # balanced: in source-owner order, E / P each (a heavy part's surplus to the next)
            cuts = np.round(np.linspace(0, pairs.shape[1], num_parts + 1)).astype(np.int64)
        dst_key = next((d for d, k in DST_KEYS.items() if k == key), None)
        neg_dst = _np(getattr(split, dst_key, None)) if dst_key else None
        if neg_dst is not None:
            neg_dst = np.asarray(neg_dst, dtype=np.int64)
            if neg_dst.ndim != 2 or neg_dst.shape[0] != pairs.shape[1]:
                raise PartitionError(f"expected the link split's {dst_key} as int64 [{pairs.shape[1]}, K] (one row per "
                                     f"{key} edge), found shape {list(neg_dst.shape)}; fix the split")
            if neg_dst.size and (neg_dst.min() < 0 or neg_dst.max() >= n):
                raise PartitionError(f"expected the link split's {dst_key} to name nodes in [0, {n}), found ids in "
                                     f"[{int(neg_dst.min())}, {int(neg_dst.max())}]; fix the split")
            kn = int(neg_dst.shape[1])
            neg_new = new_of_old[neg_dst][order]
        label = _np(getattr(split, f"{key}_label", None)) if key in LABEL_KEYS.values() else None
        if label is not None:  # checked by the split (LinkSplit.check_labels); reordered as the edges
            if label.shape[0] != pairs.shape[1]:
                raise PartitionError(f"expected the link split's {key}_label to hold one label per {key} edge "
                                     f"({pairs.shape[1]}), found {label.shape[0]}; fix the split")
            label = label[order]
        for p in range(num_parts):  # a loop over parts
            sel = order[cuts[p]:cuts[p + 1]]
            per_part[p][link_file(key)] = np.ascontiguousarray(new[:, sel])
            if neg_dst is not None:
                per_part[p][link_file(dst_key)] = np.ascontiguousarray(neg_new[cuts[p]:cuts[p + 1]])
            if label is not None:
                per_part[p][link_file(f"{key}_label")] = np.ascontiguousarray(label[cuts[p]:cuts[p + 1]])
        counts[key] = int(pairs.shape[1])
        arrays.append(key)
        if neg_dst is not None:
            arrays.append(dst_key)
        if label is not None:
            arrays.append(f"{key}_label")
    if "train" not in counts:
        raise PartitionError("expected the link split to have training edges (train_pos), found none; fix the split")
    meta = {"metric": str(split.metric), "arrays": arrays, "counts": counts, "neg_per_source": kn,
            "info": dict(getattr(split, "info", {}) or {})}
    label_meta = split.label_meta() if hasattr(split, "label_meta") else None
    if label_meta is not None:
        if any(f"{k}_label" not in arrays for k in LABEL_KEYS.values()):
            raise PartitionError("expected the link split's train, val and test labels together, found some missing; "
                                 "fix the split")
        meta["label"] = label_meta
    return per_part, meta


class RowFile:
    """A per-source negatives file (int64 [n, K]) read a slice of rows at a time: each
    ``rows[a:b]`` maps the file, copies those rows into an int64 tensor and unmaps it, so the
    file's pages never stay in the process's resident memory (ogbl-citation2: 1000 per source).

    Attributes: ``path``, ``shape`` (n, K)."""

    def __init__(self, path: Path, shape: tuple[int, int]) -> None:
        self.path, self.shape = Path(path), (int(shape[0]), int(shape[1]))

    def __getitem__(self, key: slice):
        import torch

        if not isinstance(key, slice):
            raise TypeError(f"{self.path}: read rows by a slice (rows[a:b]), found {key!r}")
        arr = np.load(self.path, mmap_mode="r")
        try:
            return torch.from_numpy(np.array(arr[key]))
        finally:
            del arr

    def __len__(self) -> int:
        return self.shape[0]


def _load_label(path: Path, label: dict) -> np.ndarray:
    """A part's edge labels (``meta["link"]["label"]``): int64 [n] class ids, or float32 [n] (when
    ``dim`` is 1) or [n, D] regression targets; mapped copy-on-write, checked by ``load_array``."""
    if label.get("kind") != "regression":
        return load_array(path, np.int64, (None,), mmap="c")
    dim = int(label.get("dim", 1))
    if dim != 1:
        return load_array(path, np.float32, (None, dim), mmap="c")
    try:
        return load_array(path, np.float32, (None,), mmap="c")
    except PartitionError:
        return load_array(path, np.float32, (None, 1), mmap="c")


def load_link(pdir: Path, meta: dict[str, Any]) -> dict | None:
    """``{key: int64 tensor}`` of a part's link arrays (copy-on-write mapped; the per-source
    negatives as a :class:`RowFile`, read a slice at a time), None without a split."""
    link = meta.get("link")
    if not link:
        return None
    import torch

    out = {}
    label = link.get("label")
    for key in link["arrays"]:
        shape = (None, int(link["neg_per_source"])) if key in DST_KEYS else (2, None)
        if key in LABEL_KEYS:  # int64 [n] classes; float32 [n] (dim 1) or [n, D] targets
            arr = _load_label(pdir / link_file(key), label or {})
        else:
            arr = load_array(pdir / link_file(key), np.int64, shape, mmap="c")
        out[key] = RowFile(pdir / link_file(key), arr.shape) if key in DST_KEYS else torch.from_numpy(arr)
        del arr
    for label_key, key in LABEL_KEYS.items():
        if label_key in out and out[label_key].shape[0] != out[key].shape[1]:
            raise PartitionError(f"expected {pdir / link_file(label_key)} to have one label per {key} edge "
                                 f"({out[key].shape[1]}), found {out[label_key].shape[0]}; re-partition the dataset")
    for dst_key, key in DST_KEYS.items():
        if dst_key in out and out[dst_key].shape[0] != out[key].shape[1]:
            raise PartitionError(f"expected {pdir / link_file(dst_key)} to have one row per {key} edge "
                                 f"({out[key].shape[1]}), found {out[dst_key].shape[0]}; re-partition the dataset")
    return out
