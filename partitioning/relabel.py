"""Relabel nodes so that every part owns a contiguous range of new ids."""

from __future__ import annotations

import numpy as np
import torch

from gnnscale.errors import PartitionError


def contiguous_relabel(
    parts: np.ndarray | torch.Tensor, num_parts: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stable relabeling: new ids are grouped by part, original order kept within a part.

    Args:
        parts: int ``[N]``, the part of every (original) node, values in ``[0, P)``.
        num_parts: P; defaults to ``parts.max() + 1``. Pass it so that trailing empty parts
            still get an (empty) range.

    Returns:
        ``(new_of_old, old_of_new, offsets)``: int64 ``[N]``, int64 ``[N]`` (inverse
        permutations of each other) and int64 ``[P+1]``; part ``p`` owns new ids
        ``offsets[p] .. offsets[p+1]-1``.
    """
    if isinstance(parts, torch.Tensor):
        parts = parts.detach().cpu().numpy()
    parts = np.asarray(parts)
    if parts.ndim != 1:
        raise PartitionError(
            f"expected parts of shape [N], found shape {tuple(parts.shape)}; pass one part id "
            "per node"
        )
    if parts.size and not np.issubdtype(parts.dtype, np.integer):
        raise PartitionError(f"expected integer part ids, found dtype {parts.dtype}")
    parts = parts.astype(np.int64, copy=False)
    n = parts.shape[0]
    lo = int(parts.min()) if n else 0
    hi = int(parts.max()) if n else -1
    if num_parts is None:
        num_parts = max(hi + 1, 1)
    num_parts = int(num_parts)
    if lo < 0 or hi >= num_parts:
        raise PartitionError(
            f"expected part ids in [0, {num_parts}), found ids in [{lo}, {hi}]; the "
            "partitioner returned invalid ids"
        )
    old_of_new = np.argsort(parts, kind="stable").astype(np.int64, copy=False)
    new_of_old = np.empty(n, dtype=np.int64)
    new_of_old[old_of_new] = np.arange(n, dtype=np.int64)
    offsets = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(np.bincount(parts, minlength=num_parts), out=offsets[1:])
    return new_of_old, old_of_new, offsets
