"""One part of a partition folder, loaded: :class:`LocalPart` and :func:`load_part` (format 1 or 2).

The layout of the folder and its writer are in :mod:`gnnscale.partitioning.format`; meta.json
and the hashes of the files in :mod:`gnnscale.partitioning.manifest`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnscale.errors import PartitionError
from gnnscale.partitioning.book import PartitionBook, TypedPartitionBook
from gnnscale.partitioning.manifest import (
    _MASKS,
    _RERUN_HINT,
    TYPED_FORMAT_VERSION,
    _verify_files,
    edge_feature_dim,
    load_meta,
    part_dir_name,
    part_files,
)
from gnnscale.partitioning.feature_dtype import as_tensor, file_dtype, meta_feature_dtype
from gnnscale.partitioning.link import load_link
from gnnscale.partitioning.typed import TypedPart
from gnnscale.partitioning.validate import check_pointers, load_array, load_targets


@dataclass
class LocalPart:
    """One part loaded from disk. Owned nodes have new global ids ``offset .. offset+n-1``.

    Attributes:
        part_id: p.
        meta: the folder's meta.json.
        book: the PartitionBook of the whole partitioning.
        indptr: int64 ``[n+1]`` CSC row pointer over owned (local) targets.
        indices: int64 ``[E_p]`` sources of the in-edges, new global ids.
        x: read-only memmap ``[n, F]`` of the stored rows: float32, float16, or bfloat16's bits
            as uint16, as ``feature_dtype`` says (typed parts: an empty float32 ``[n, 0]``;
            their features are per type, in ``typed.x_by_type``).
        y: the targets (meta's ``target``): int64 ``[n]`` for class/binary, float32 ``[n, C]``
            for multilabel, float32 ``[n]`` or ``[n, D]`` for regression; train_mask /
            val_mask / test_mask: bool ``[n]``.
        orig_ids: int64 ``[n]``, original id of local node i.
        typed: the typed side of a format-2 part (a
            :class:`~gnnscale.partitioning.typed.TypedPart`: ``meta``, ``etype``,
            ``x_by_type``, ``type_starts``, ``book``); None for format 1.
        link: a link-prediction split's edges whose source this part owns, in new ids
            (``{"train": int64 [2, n], "val": ..., "val_neg_dst": int64 [n, Kn], ...}``,
            :mod:`gnnscale.partitioning.link`); None without a split.
        edge_attr: float32 ``[E_p, De]`` features of the in-edges, aligned with ``indices``
            (a tensor over the copy-on-write mapped file, like ``indices``); None when the
            folder has no edge features (``meta["edge_feature_dim"]`` absent or 0).
        edge_ids: int64 ``[E_p]``, the column of the dataset's ``edge_index`` each in-edge
            comes from (mapped copy-on-write); None without edge features.
        edge_time: int64 ``[E_p]`` a temporal part's in-edge times, aligned with ``indices``,
            ascending within each node's in-edges (mapped copy-on-write); None otherwise.
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
    typed: TypedPart | None = field(default=None, repr=False)
    link: dict | None = field(default=None, repr=False)
    edge_attr: torch.Tensor | None = field(default=None, repr=False)
    edge_ids: torch.Tensor | None = field(default=None, repr=False)
    edge_time: torch.Tensor | None = field(default=None, repr=False)

    @property
    def feature_dtype(self) -> str:
        """How ``x``'s rows are stored: ``float32``, ``float16`` or ``bfloat16`` (meta.json's
        ``feature_dtype``; float32 for folders written before it)."""
        return meta_feature_dtype(self.meta)

    def stored_rows(self) -> torch.Tensor:
        """``[n, F]`` every owned row in the stored dtype (float32/float16/bfloat16), a tensor
        over the mapped file (no copy). Read-only: never write it."""
        self._untyped("stored_rows()")
        import warnings

        with warnings.catch_warnings():  # torch warns that the mapping is not writable: it is not written
            warnings.simplefilter("ignore", UserWarning)
            return as_tensor(self.x, self.feature_dtype) if isinstance(self.x, np.ndarray) else torch.as_tensor(self.x)

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

    def _untyped(self, what: str) -> None:
        if self.typed is not None:
            raise PartitionError(
                f"expected an untyped part for {what}, found a typed one (format_version "
                f"{TYPED_FORMAT_VERSION}: features per node type, no single matrix); read "
                "part.typed.x_by_type[t] or part.typed.features(t, idx)"
            )

    def feature_rows(self) -> torch.Tensor:
        """float32 ``[n, F]``: every owned row as a tensor over the mapped file (no copy: the
        pages are read as they are touched and stay the page cache's). Read-only: never write it.
        Rows stored at lower precision (``feature_dtype`` float16/bfloat16) come as a float32
        copy in memory; :meth:`stored_rows` maps them as stored.

        Raises:
            PartitionError: on a typed part (its features are per type: ``typed.x_by_type``).
        """
        self._untyped("feature_rows()")  # the error names what the caller called
        rows = self.stored_rows()
        return rows if rows.dtype == torch.float32 else rows.to(torch.float32)

    def features(self, local_idx: torch.Tensor) -> torch.Tensor:
        """Feature rows of owned nodes.

        Args:
            local_idx: int64 ``[k]`` local indices in ``[0, num_owned)``.

        Returns:
            float32 ``[k, F]`` (a copy, in memory; lower-precision rows cast).

        Raises:
            PartitionError: on a typed part (use ``typed.features(t, idx)``).
        """
        self._untyped("features()")
        idx = torch.as_tensor(local_idx).detach().cpu().to(torch.int64).numpy()
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= self.num_owned):
            raise PartitionError(
                f"expected local indices in [0, {self.num_owned}) for part {self.part_id}, "
                f"found [{int(idx.min())}, {int(idx.max())}]; convert global ids with "
                "book.to_local(ids, part) first"
            )
        if self.feature_dtype != "float32":
            return as_tensor(np.ascontiguousarray(self.x[idx]), self.feature_dtype).to(torch.float32)
        return torch.from_numpy(np.ascontiguousarray(self.x[idx], dtype=np.float32))

    def relation_indptr(self) -> torch.Tensor:
        """Per-relation CSC pointer of a typed part, for relation-wise sampling.

        Returns:
            int64 ``[n * R + 1]``: the in-edges of local node ``v`` with relation ``r`` are
            ``indices[ptr[v * R + r] : ptr[v * R + r + 1]]`` (one run, since the in-edges of
            each node are sorted by relation). Computed once (in slices of the edges) and kept.

        Raises:
            PartitionError: on an untyped part.
        """
        if self.typed is None:
            raise PartitionError(
                f"expected a typed part (format_version {TYPED_FORMAT_VERSION}) for "
                "relation_indptr(), found an untyped one; partition a typed dataset"
            )
        if self.typed._relation_indptr is None:
            self.typed._relation_indptr = relation_indptr(
                self.indptr.numpy(), self.typed.etype.numpy(), self.typed.num_relations
            )
        return self.typed._relation_indptr


def relation_indptr(indptr: np.ndarray, etype: np.ndarray, num_relations: int) -> torch.Tensor:
    """Per-relation CSC pointer: int64 ``[n * R + 1]``, row ``v * R + r`` spanning the in-edges of
    local node ``v`` with relation ``r`` (each node's in-edges sorted by relation). ``bincount(v *
    R + etype)`` then a running sum, over slices of the edges (bounded temporaries)."""
    n, r = indptr.shape[0] - 1, int(num_relations)
    counts = np.zeros(n * r, dtype=np.int64)
    num_e = int(indptr[-1])
    step = 1 << 22
    for a in range(0, num_e, step):  # loop over slices of a few million edges
        b = min(num_e, a + step)
        dst = np.searchsorted(indptr, np.arange(a, b, dtype=np.int64), side="right") - 1
        dst *= r
        dst += etype[a:b]
        # the keys rise along the edges (sorted by node, then relation): count over their span
        lo, hi = int(dst.min()), int(dst.max())
        dst -= lo
        counts[lo : hi + 1] += np.bincount(dst, minlength=hi - lo + 1)
    out = np.zeros(n * r + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return torch.from_numpy(out)


def _load_typed(pdir: Path, meta: dict[str, Any], part: int, book: PartitionBook, n: int,
                num_edges: int) -> TypedPart:
    """The typed side of part ``part`` of a format-2 folder (files checked for dtype and shape)."""
    tmeta = meta["typed"]
    tbook = TypedPartitionBook(book, tmeta["type_starts"], tmeta["type_offsets"])
    starts = tbook.type_starts[part]
    etype = load_array(pdir / "etype.npy", np.int16, (num_edges,), mmap="c")
    x_by_type = {}
    for t, dim in enumerate(tmeta["feature_dims"]):  # loop over node types
        if int(dim) > 0:
            rows = int(starts[t + 1] - starts[t])
            x_by_type[t] = load_array(pdir / f"x_t{t}.npy", np.float32, (rows, int(dim)))
    return TypedPart(meta=tmeta, etype=torch.from_numpy(etype), x_by_type=x_by_type,
                     type_starts=starts.clone(), book=tbook)


def load_part(part_dir: str | os.PathLike, part: int, verify: bool = True) -> LocalPart:
    """Load part ``part`` of a partition folder (format 1 or 2).

    Args:
        part_dir: the folder written by
            :func:`~gnnscale.partitioning.format.write_partitions`.
        part: part id in ``[0, num_parts)``.
        verify: check the sha256 of every file of this part against meta.json.

    Returns:
        A :class:`LocalPart`; ``x`` and ``indices`` stay memory-mapped (``indices``
        copy-on-write), the other arrays are loaded. A format-2 part has ``typed`` set
        (``etype`` copy-on-write mapped, ``x_by_type`` mapped) and an empty ``x`` ``[n, 0]``.
        With edge features (either format) ``edge_attr`` and ``edge_ids`` are set (mapped
        copy-on-write, as ``indices``).
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
    for fname in part_files(meta):
        if not (pdir / fname).is_file():
            raise PartitionError(
                f"expected {pdir / fname}, found no such file; {_RERUN_HINT}"
            )
    if verify:
        _verify_files(root, meta, part)
    book = PartitionBook(torch.tensor(meta["offsets"], dtype=torch.int64))
    n = book.part_size(part)
    typed = meta["format_version"] == TYPED_FORMAT_VERSION
    f = int(meta.get("feature_dim", 0))
    indptr = load_array(pdir / "indptr.npy", np.int64, (n + 1,), mmap=False)
    # Mapped, not read: the edges are the part's largest array after x; their pages are shared
    # by the processes that open the part and dropped under memory pressure, not swapped.
    indices = load_array(pdir / "indices.npy", np.int64, (None,), mmap="c")
    check_pointers(pdir / "indptr.npy", indptr, indices.shape[0])
    x = np.zeros((n, 0), dtype=np.float32) if typed else load_array(
        pdir / "x.npy", file_dtype(meta_feature_dtype(meta)), (n, f))
    y = load_targets(pdir / "y.npy", meta, n, mmap=False)
    edge_attr = edge_ids = None
    de = edge_feature_dim(meta)
    if de > 0:
        edge_attr = torch.from_numpy(load_array(pdir / "edge_attr.npy", np.float32, (indices.shape[0], de), mmap="c"))
        edge_ids = torch.from_numpy(load_array(pdir / "edge_ids.npy", np.int64, (indices.shape[0],), mmap="c"))
    edge_time = None
    if meta.get("temporal"):  # each in-edge's time, ascending within each node (docs/temporal.md)
        edge_time = torch.from_numpy(load_array(pdir / "edge_time.npy", np.int64, (indices.shape[0],), mmap="c"))
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
        typed=_load_typed(pdir, meta, part, book, n, indices.shape[0]) if typed else None,
        link=load_link(pdir, meta),
        edge_attr=edge_attr,
        edge_ids=edge_ids,
        edge_time=edge_time,
    )
