"""Feature rows stored at lower precision: ``--feature-dtype float32|float16|bfloat16``.

A partition folder keeps its feature rows (format 1's ``x.npy``) in meta.json's
``feature_dtype``; a folder without the key (written before it existed) is float32. float16 is
numpy's; bfloat16, which numpy lacks, is stored as its raw 16 bits (``uint16`` in the file) and
read back as ``torch.bfloat16``. Rows travel between workers (fetches, caches, host reads) in the
stored dtype, so the bytes fetched are half those of float32, and are cast to float32 where they
enter the model (:meth:`~gnnscale.data.feature_store.DistFeatureStore.fetch`'s output).

A row of float32 ``v`` stored as float16 reads back as ``float32(float16(v))`` (round to nearest
even, 11 significant bits; magnitudes above 65504 become inf, refused at write time); as bfloat16
as ``float32(bfloat16(v))`` (8 significant bits, float32's range).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gnnscale.errors import PartitionError

if TYPE_CHECKING:  # torch-free at import: gnnscale info and the checks of a folder read only meta and numpy
    import torch

FEATURE_DTYPES = ("float32", "float16", "bfloat16")

_FILE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}  # dtype of x.npy's array


def check_feature_dtype(name: Any) -> str:
    """``name`` if it is one of :data:`FEATURE_DTYPES`, else a one-line PartitionError."""
    if name not in FEATURE_DTYPES:
        raise PartitionError(
            f"expected --feature-dtype from {list(FEATURE_DTYPES)}, found {name!r}; pass one of those"
        )
    return str(name)


def meta_feature_dtype(meta: dict) -> str:
    """The stored dtype of a folder's feature rows (float32 when meta.json predates the key)."""
    return check_feature_dtype(meta.get("feature_dtype", "float32"))


def file_dtype(name: str) -> type:
    """numpy dtype of the rows in ``x.npy`` (bfloat16: ``uint16``, its bits)."""
    return _FILE[check_feature_dtype(name)]


def torch_dtype(name: str) -> torch.dtype:
    import torch

    return getattr(torch, check_feature_dtype(name))


def row_bytes(name: str, feature_dim: int) -> int:
    """Bytes of one stored feature row."""
    return int(feature_dim) * (4 if check_feature_dtype(name) == "float32" else 2)


def encode_rows(rows: torch.Tensor, name: str) -> np.ndarray:
    """float32 ``[k, F]`` rows -> the array written to ``x.npy`` (float32, float16, or bfloat16's
    bits as uint16). Raises a PartitionError for float16 when a finite value overflows to inf."""
    name = check_feature_dtype(name)
    if name == "float32":
        return rows.numpy().astype(np.float32, copy=False)
    import torch

    low = rows.to(torch_dtype(name))
    if name == "float16":
        out = low.numpy()
        bad = np.isinf(out) & np.isfinite(rows.numpy())
        if bool(bad.any()):
            raise PartitionError(
                f"expected feature values within float16's range (|v| <= 65504), found "
                f"{float(np.abs(rows.numpy()[bad]).max()):.6g}; use --feature-dtype bfloat16 or scale the features"
            )
        return out
    return low.view(torch.int16).numpy().view(np.uint16)


def as_tensor(x: np.ndarray, name: str) -> torch.Tensor:
    """A tensor over the stored array ``x`` (no copy) in the stored dtype (bfloat16's bits viewed)."""
    import torch

    if check_feature_dtype(name) == "bfloat16":
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(x)


def bfloat16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 values from their uint16 bits, as float32 (exact: the top half of a float32)."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
