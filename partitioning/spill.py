"""External bucketing: rows appended to one spill file per bucket, read back one bucket at a time.

The out-of-core pipeline (:mod:`gnnscale.partitioning.out_of_core`) routes every chunk of
edges to buckets (a part and a range of its nodes) and appends each bucket's rows to its file,
so that a part is later sorted from its own buckets alone; memory holds one chunk, never the
graph. Files are raw (no header) rows of a fixed integer dtype and width; a bucket's file is
deleted when it has been read for the last time. Also here: writing a ``.npy`` file in pieces
with the same bytes as ``np.save`` (header first, then the rows), hashed as it is written.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np


class SpillFiles:
    """Spill files ``root/{kind}{bucket}.bin`` of rows ``[k, width]`` of ``dtype``.

    Args:
        root: a folder for the files (created).
        width: columns per row.
        dtype: int32 where every value fits, else int64.
        kind: a name prefix (several kinds may share ``root``).
    """

    def __init__(self, root: str | os.PathLike, width: int, dtype: np.dtype, kind: str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.width, self.dtype, self.kind = int(width), np.dtype(dtype), kind
        self.bytes_written = 0
        self.rows: dict[int, int] = {}

    def path(self, bucket: int) -> Path:
        return self.root / f"{self.kind}{int(bucket)}.bin"

    def append(self, bucket: np.ndarray, rows: np.ndarray) -> None:
        """Append ``rows`` (``[k, width]``) to the files of their ``bucket`` (int ``[k]``): one sort
        of the chunk by bucket, then one write per bucket present (a loop over buckets, not rows)."""
        if bucket.shape[0] == 0:
            return
        order = np.argsort(bucket, kind="stable")
        b = bucket[order]
        rows = np.ascontiguousarray(rows[order], dtype=self.dtype)
        starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
        ends = np.r_[starts[1:], b.shape[0]]
        for s, e in zip(starts.tolist(), ends.tolist()):  # loop over the buckets of this chunk
            key = int(b[s])
            with open(self.path(key), "ab") as fh:
                rows[s:e].tofile(fh)
            self.rows[key] = self.rows.get(key, 0) + (e - s)
        self.bytes_written += rows.nbytes

    def read(self, bucket: int, delete: bool = True) -> np.ndarray:
        """The rows of ``bucket`` (``[k, width]``; empty when none came), its file deleted after."""
        path = self.path(bucket)
        if not path.exists():
            return np.zeros((0, self.width), dtype=self.dtype)
        out = np.fromfile(path, dtype=self.dtype).reshape(-1, self.width)
        if delete:
            path.unlink()
        return out

    def disk_bytes(self) -> int:
        """Bytes the files of this kind hold now."""
        return sum(p.stat().st_size for p in self.root.glob(f"{self.kind}*.bin"))


class NpyWriter:
    """Write ``path`` as ``np.save`` writes an array of ``shape`` and ``dtype`` (same bytes), in
    row pieces, and give the sha256 of the file (hashed as it is written).

    Example::

        with NpyWriter(path, (n, f), np.float32) as w:
            for piece in pieces:
                w.write(piece)
        sha = w.sha256
    """

    def __init__(self, path: str | os.PathLike, shape: tuple[int, ...], dtype) -> None:
        self.path, self.shape, self.dtype = Path(path), tuple(int(s) for s in shape), np.dtype(dtype)
        self.digest = hashlib.sha256()
        self.fh = open(self.path, "wb")
        self.sha256 = ""
        self._left = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": self.shape}
        self.fh_write_header(header)

    def fh_write_header(self, header: dict) -> None:
        np.lib.format.write_array_header_1_0(self, header)  # np.save's version for these dtypes

    def write(self, data) -> None:
        """Append bytes or an array's rows (cast to the file's dtype, C order)."""
        if isinstance(data, np.ndarray):
            data = np.ascontiguousarray(data, dtype=self.dtype).tobytes()
            self._left -= len(data)
        self.digest.update(data)
        self.fh.write(data)

    def __enter__(self) -> NpyWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.fh.close()
        if exc_type is None:
            if self._left != 0:
                raise RuntimeError(f"internal: {self.path} written {self._left} bytes short of its shape {self.shape}")
            self.sha256 = self.digest.hexdigest()


def copy_raw(src: Path, writer: NpyWriter, piece_bytes: int = 64 << 20) -> None:
    """Stream the raw rows of ``src`` into ``writer`` (bounded pieces) and delete ``src``."""
    with open(src, "rb") as fh:
        while True:  # loop over pieces of the file
            buf = fh.read(piece_bytes)
            if not buf:
                break
            writer.write(buf)
            writer._left -= len(buf)
    src.unlink()


def remove_all(paths: Iterable[Path]) -> None:
    for p in paths:  # loop over leftover spill files
        try:
            p.unlink()
        except FileNotFoundError:
            pass
