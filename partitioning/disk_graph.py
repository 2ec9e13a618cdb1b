"""A graph that stays on disk: edge files read in chunks, feature rows memory-mapped.

The input of the out-of-core pipeline (:mod:`gnnscale.partitioning.out_of_core`). A folder in
the ``dir:`` dataset layout (``docs/datasets.md``)::

    edge_index.npy   int [2, E] or [E, 2]   read in column slices (pread, not mapped: see EdgeFile)
    edges/*.npy      or, instead, chunked edge lists: each int [2, E_i] (or [E_i, 2]), in name order
    x.npy            [N, F] float (float16 or float32), mapped; parts store float32 rows
    y.npy            int [N] class ids, negative = unlabelled (class targets only)
    split.npz        optional: train_mask/val_mask/test_mask or train_idx/val_idx/test_idx;
                     without it the ``dir:`` loader's seeded random split

Edges are cleaned as the ``dir:`` loader cleans them: self loops dropped, duplicates dropped
(by the writer's sort), and with ``undirected`` every edge stored in both directions; so a
folder partitioned out of core equals ``partition_graph(load_dataset("dir:FOLDER"))`` for the
same assignment. Node arrays (y, masks) are O(N) and loaded whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gnnscale.errors import PartitionError


def _open_edges(path: Path) -> tuple[np.ndarray, bool]:
    """The mapped edge array of ``path`` and whether it is stored ``[E, 2]`` (rows) not ``[2, E]``."""
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise PartitionError(f"expected a .npy edge file at {path}, could not read it ({exc}); write it with np.save") from None
    if arr.ndim != 2 or 2 not in arr.shape or not np.issubdtype(arr.dtype, np.integer):
        raise PartitionError(
            f"expected integer edges [2, E] or [E, 2] in {path}, found {arr.dtype} {arr.shape}; "
            "store source ids in row 0 and target ids in row 1"
        )
    return arr, arr.shape[0] != 2  # as the dir: loader reads it: [2, E] whenever the first axis is 2


class EdgeFile:
    """Reads columns of one ``.npy`` edge file with ``pread`` (np.fromfile at an offset), not through
    a mapping: the pages read stay the page cache's and never count in this process's resident set.

    ``pairs``: the two ids of an edge lie side by side on disk (``[E, 2]`` in C order, or ``[2, E]``
    in Fortran order); else the sources then the targets (``[2, E]`` C, ``[E, 2]`` Fortran).
    """

    def __init__(self, path: Path) -> None:
        arr, by_rows = _open_edges(path)
        self.path, self.dtype = path, arr.dtype
        self.count = int(arr.shape[0] if by_rows else arr.shape[1])
        fortran = bool(arr.flags.f_contiguous and not arr.flags.c_contiguous)
        self.pairs = by_rows != fortran
        self.offset = int(arr.offset)
        del arr

    def read(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Columns ``[a, b)``: ``(src, dst)`` int64 ``[b - a]`` each."""
        size = self.dtype.itemsize
        if self.pairs:
            both = np.fromfile(self.path, dtype=self.dtype, count=2 * (b - a), offset=self.offset + 2 * a * size)
            return both[0::2].astype(np.int64), both[1::2].astype(np.int64)
        src = np.fromfile(self.path, dtype=self.dtype, count=b - a, offset=self.offset + a * size)
        dst = np.fromfile(self.path, dtype=self.dtype, count=b - a, offset=self.offset + (self.count + a) * size)
        return src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False)


@dataclass
class DiskGraph:
    """A graph whose edges and features stay on disk.

    Attributes:
        folder: the folder.
        edge_files: the edge files in order (their columns concatenated are the edge list).
        edge_counts: int64 ``[len(edge_files)]`` columns per file.
        num_nodes: N (rows of x.npy).
        feature_dim: F.
        undirected: every edge is also stored reversed (the ``dir:`` option).
        name: recorded in meta.json as the dataset.
    """

    folder: Path
    edge_files: list[Path]
    edge_counts: np.ndarray
    num_nodes: int
    feature_dim: int
    undirected: bool = False
    name: str = "dir"

    @classmethod
    def open(cls, folder: str | Path, *, undirected: bool = False, name: str | None = None) -> DiskGraph:
        """Open a ``dir:``-layout folder (``edge_index.npy`` or ``edges/*.npy``, ``x.npy``, ``y.npy``)."""
        folder = Path(folder)
        if (folder / "edge_index.npy").is_file():
            files = [folder / "edge_index.npy"]
        else:
            files = sorted((folder / "edges").glob("*.npy")) if (folder / "edges").is_dir() else []
        if not files:
            raise PartitionError(
                f"expected {folder}/edge_index.npy or edge chunk files {folder}/edges/*.npy, found neither; "
                "write the edges there (int [2, E])"
            )
        counts = []
        for f in files:  # loop over edge files (a handful)
            arr, rows = _open_edges(f)
            counts.append(arr.shape[0] if rows else arr.shape[1])
        x = cls._x(folder)
        return cls(folder, files, np.asarray(counts, dtype=np.int64), int(x.shape[0]), int(x.shape[1]),
                   bool(undirected), name or f"dir:{folder}")

    @staticmethod
    def _x(folder: Path) -> np.ndarray:
        path = folder / "x.npy"
        if not path.is_file():
            raise PartitionError(f"expected feature rows {path}, found no such file; write x.npy [N, F]")
        x = np.load(path, mmap_mode="r", allow_pickle=False)
        if x.ndim != 2 or x.dtype.kind not in "biuf":
            raise PartitionError(f"expected numeric features [N, F] in {path}, found {x.dtype} {x.shape}; store a 2-D float array")
        return x

    @property
    def x(self) -> np.ndarray:
        """The feature rows, mapped read-only: ``[N, F]`` as stored."""
        return self._x(self.folder)

    @property
    def num_input_edges(self) -> int:
        """Columns of all edge files together (before cleaning)."""
        return int(self.edge_counts.sum())

    def edge_slices(self, rows: int, start: int = 0, stop: int | None = None) -> list[tuple[int, int, int]]:
        """The slices ``(file index, first column, end column)`` that :meth:`edge_chunks` reads: the
        input columns ``[start, stop)`` cut at file ends and every ``rows`` columns."""
        stop = self.num_input_edges if stop is None else int(stop)
        rows = max(1, int(rows))
        out, first = [], 0
        for i, count in enumerate(self.edge_counts.tolist()):  # loop over edge files
            lo, hi = max(start, first), min(stop, first + count)
            out += [(i, a, min(hi - first, a + rows)) for a in range(lo - first, hi - first, rows)]
            first += count
        return out

    def edge_chunks(self, rows: int, start: int = 0, stop: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The input columns ``[start, stop)`` in slices of at most ``rows`` columns (:meth:`edge_slices`).

        Yields:
            ``(src, dst)``: int64 ``[k]`` each, self loops dropped, ids checked in ``[0, N)``.
            Not symmetrized: with ``undirected`` the consumer adds the reverse edges.
        """
        opened: tuple[int, EdgeFile] | None = None
        for i, a, b in self.edge_slices(rows, start, stop):  # loop over slices of the files
            if opened is None or opened[0] != i:
                opened = (i, EdgeFile(self.edge_files[i]))
            src, dst = opened[1].read(a, b)
            self._check(src, dst, self.edge_files[i])
            keep = src != dst
            yield (src, dst) if keep.all() else (src[keep], dst[keep])

    def _check(self, src: np.ndarray, dst: np.ndarray, where: Path) -> None:
        if src.size:
            lo = min(int(src.min()), int(dst.min()))
            hi = max(int(src.max()), int(dst.max()))
            if lo < 0 or hi >= self.num_nodes:
                raise PartitionError(
                    f"expected node ids in [0, {self.num_nodes}) (rows of x.npy) in {where}, found [{lo}, {hi}]; "
                    "fix the edge file or x.npy"
                )

    def node_arrays(self, *, seed: int = 0, train_frac: float = 0.6, val_frac: float = 0.2) -> tuple[np.ndarray, dict[str, np.ndarray], int]:
        """``(y int64 [N] (-1 = unlabelled), {train_mask, val_mask, test_mask: bool [N]}, num_classes)``,
        as the ``dir:`` loader builds them (split.npz, else its seeded random split; unlabelled
        nodes dropped from the masks)."""
        from gnnscale.datasets.directory import _split

        path = self.folder / "y.npy"
        y = np.load(path, allow_pickle=False) if path.is_file() else None
        if y is not None and y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y is None or y.shape != (self.num_nodes,) or y.dtype.kind not in "biu":
            raise PartitionError(
                f"expected integer class ids y.npy [{self.num_nodes}] in {self.folder}, found "
                f"{'no file' if y is None else f'{y.dtype} {y.shape}'}; the out-of-core pipeline takes class targets"
            )
        y = y.astype(np.int64)
        y[y < 0] = -1
        train, val, test = _split(self.folder, np.where(y >= 0, 0, -1),
                                  {"seed": seed, "train_frac": train_frac, "val_frac": val_frac})
        labelled = y >= 0
        masks = {k: np.asarray(m, dtype=np.bool_) & labelled for k, m in
                 zip(("train_mask", "val_mask", "test_mask"), (train, val, test))}
        return y, masks, int(y.max()) + 1 if y.size else 0
