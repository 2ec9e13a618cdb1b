"""Edge-list cleaning: id checks, symmetrizing, removing duplicates and self loops.

All functions are vectorized: an edge ``(u, v)`` is encoded as the int64 key
``u * N + v`` so that deduplication is one sort (:func:`unique_int64`).
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

_MAX_NODES = 3_037_000_499  # floor(sqrt(2**63 - 1)): u * N + v must fit in int64


def unique_int64(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an int64 array [K] (``torch.unique``: a multithreaded
    sort, several times faster than numpy 2's hash-based ``np.unique`` on tens of millions of keys).
    """
    return torch.unique(torch.from_numpy(np.ascontiguousarray(keys, dtype=np.int64)), sorted=True).numpy()


def check_edge_ids(src: np.ndarray, dst: np.ndarray, num_nodes: int, where: str) -> None:
    """Raise DatasetError unless every id in ``src``/``dst`` lies in ``[0, num_nodes)``.

    ``src``, ``dst``: integer arrays [E]. ``where`` names the file or source for the message.
    """
    if src.size == 0:
        return
    lo = min(int(src.min()), int(dst.min()))
    hi = max(int(src.max()), int(dst.max()))
    if lo < 0 or hi >= num_nodes:
        bad = int(np.count_nonzero((src < 0) | (src >= num_nodes) | (dst < 0) | (dst >= num_nodes)))
        raise DatasetError(
            f"expected node ids in [0, {num_nodes}) in the edges of {where} (the graph has "
            f"{num_nodes} nodes), found ids from {lo} to {hi} ({bad} edges out of range); "
            "renumber the nodes 0..N-1 or fix the node count (number of rows of the features)"
        )


def clean_edges(
    src: np.ndarray,
    dst: np.ndarray,
    num_nodes: int,
    *,
    undirected: bool,
    drop_self_loops: bool = True,
) -> torch.Tensor:
    """Build a clean ``edge_index`` from raw endpoint arrays.

    Args:
        src, dst: integer arrays [E] of endpoint ids in ``[0, num_nodes)`` (unchecked;
            call :func:`check_edge_ids` first for untrusted input).
        num_nodes: N.
        undirected: if True every edge is also stored reversed (symmetrized).
        drop_self_loops: remove ``(u, u)`` edges.

    Returns:
        int64 tensor [2, E'] sorted by (source, target), without duplicate edges
        (row 0 = source, row 1 = target).
    """
    if num_nodes > _MAX_NODES:
        raise DatasetError(
            f"expected at most {_MAX_NODES} nodes, found {num_nodes}; such graphs are not supported"
        )
    n = np.int64(num_nodes)
    src = np.asarray(src, dtype=np.int64).reshape(-1)
    dst = np.asarray(dst, dtype=np.int64).reshape(-1)
    raw = src.size
    if drop_self_loops:
        keep = src != dst
        if not keep.all():
            src, dst = src[keep], dst[keep]
        del keep
    if undirected:
        keys = np.concatenate([src * n + dst, dst * n + src])
    else:
        keys = src * n + dst
    del src, dst
    keys = unique_int64(keys)
    row = keys // n
    keys -= row * n  # keys now holds the targets; avoids a second [E] temporary
    edge_index = torch.from_numpy(np.stack([row, keys]))
    logger.debug(
        "clean_edges: %d raw edges -> %d (undirected=%s, self loops dropped=%s)",
        raw,
        edge_index.shape[1],
        undirected,
        drop_self_loops,
    )
    return edge_index
