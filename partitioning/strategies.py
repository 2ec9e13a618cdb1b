"""The built-in partitioning strategies: metis, random, hash, range, ldg, fennel, kaminpar, kahip.

Every strategy is ``<name>_strategy(data, num_parts, *, <options>) -> int64 numpy [N]``, the
part of every node. ``partition_graph`` passes ``balance``, ``imbalance`` and ``seed`` to those that
name them and the method's own options (``partition_graph(..., options={...})``) by keyword.

=========  ===================================================================================
metis      METIS on the symmetrized graph; multi-constraint balance among ``nodes``,
           ``train`` (also ``val``/``test``) and ``edges`` (in-degree) within ``imbalance``;
           ``data.edge_weight`` (if present) as edge weights (``edge_weight=False`` to ignore);
           ``scheme`` (auto/kway/recursive), ``ncuts``, ``niter``.
random     a seeded random permutation cut into P equal ranges (balanced, cut ~ (P-1)/P).
hash       ``id % P`` (what a hash-partitioned store gives).
range      contiguous original-id ranges of equal size (what a user gets with no partitioner).
ldg        streaming Linear Deterministic Greedy; ``slack`` (default: ``imbalance``),
           ``chunk_size``, ``passes`` (1; more = restreaming).
fennel     streaming Fennel; as ldg, plus ``gamma`` (1.5) and ``alpha`` (sqrt(P) M / N^1.5).
kaminpar   KaMinPar (deep multilevel, optional package); ``context`` (default/fast/terapart/...),
           ``threads`` (1), ``edge_weight``; one node weight from ``balance``.
kahip      KaHIP's KaFFPa (optional package); ``mode`` (auto/fast/eco/strong/*social), ``edge_weight``;
           one node weight from ``balance``.
=========  ===================================================================================

``metis`` honours every ``balance`` constraint; ``kaminpar`` and ``kahip`` balance one node
weight made from them (:func:`~gnnscale.partitioning.multilevel.single_node_weight`: ``nodes``,
``train``, or several scaled and summed), within ``imbalance``; the others balance node counts
(exactly for random/hash/range, within ``slack`` for the streaming ones).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from gnnscale.errors import PartitionError
from gnnscale.partitioning.graph import to_undirected_csr_weighted, undirected_csr_native
from gnnscale.partitioning.metis import integer_edge_weights, metis_partition
from gnnscale.partitioning.multilevel import kahip_assign, kaminpar_assign, single_node_weight
from gnnscale.partitioning.streaming import stream_partition
from gnnscale.partitioning.weights import build_vertex_weights

if TYPE_CHECKING:  # torch_geometric costs 2 s to import; workers never need it
    from torch_geometric.data import Data

logger = logging.getLogger(__name__)

METIS_SCHEMES = ("auto", "kway", "recursive")


def _num_nodes(data: Data) -> int:
    n = getattr(data, "num_nodes", None)
    if n is None:
        raise PartitionError(
            "expected data.num_nodes (or node features x), found none; fix the dataset"
        )
    return int(n)


def _edge_weight(data: Data, use: bool) -> np.ndarray | None:
    """``data.edge_weight`` as float64 numpy ``[E]`` when present and wanted, else None."""
    w = getattr(data, "edge_weight", None) if use else None
    if w is None:
        return None
    w = torch.as_tensor(w).detach().cpu().numpy()
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    return w


def _symmetric_graph(
    data: Data, use_edge_weight: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Symmetrized simple graph (CSR, int32 or int64) and, when ``data.edge_weight`` is used,
    the weight of each adjacency entry (float64)."""
    n = _num_nodes(data)
    w = _edge_weight(data, use_edge_weight)
    if w is None:
        indptr, indices = undirected_csr_native(data.edge_index, n)
        return indptr, indices, None
    return to_undirected_csr_weighted(data.edge_index, n, w)


def metis_strategy(
    data: Data,
    num_parts: int,
    *,
    balance: Sequence[str] = ("nodes", "train"),
    imbalance: float = 0.05,
    seed: int = 0,
    edge_weight: bool = True,
    scheme: str = "auto",
    ncuts: int = 1,
    niter: int | None = None,
    backend: str = "auto",
) -> np.ndarray:
    """Multi-constraint METIS on the symmetrized graph.

    ``scheme="auto"`` uses recursive bisection when two or more balance constraints are
    active and k-way otherwise: METIS's multi-constraint k-way refinement gives up much of the
    cut to keep every constraint balanced on dense graphs (Squirrel, 4 parts, nodes+train
    within 5%: 28.2% of the edges cut by k-way, 14.9% by recursive bisection; Cora 6.4% /
    6.3%; CiteSeer 1.8% / 1.7%; the 2.45M-node products-size synthetic graph, 8 parts,
    18.1% / 18.2% and 55 s / 49 s). Recursive bisection compounds the tolerance over its
    ``ceil(log2 P)`` levels, so each bisection gets ``(1 + imbalance)^(1 / levels) - 1``
    and the final parts stay within ``imbalance``.

    Args:
        data: graph with ``edge_index`` int [2, E], masks for the ``train``/``val``/``test``
            constraints, optional ``edge_weight`` [E] (real or int, >= 0).
        num_parts: P.
        balance: balance constraints among ``nodes``, ``train``, ``val``, ``test``, ``edges``
            (in-degree); each is kept within ``imbalance``.
        imbalance: allowed relative overweight of a part per constraint (0.05 = 5%).
        seed: METIS seed.
        edge_weight: use ``data.edge_weight`` when present (the weight of an undirected edge
            is the sum over both directions, scaled to integers, see ``integer_edge_weights``).
        scheme: ``"auto"``, ``"kway"`` or ``"recursive"`` (see above).
        ncuts: partitionings to compute, keeping the best (METIS_OPTION_NCUTS).
        niter: refinement iterations per level (METIS_OPTION_NITER, METIS default 10).
        backend: ``"auto"``, ``"libmetis"`` or ``"pymetis"``.

    Returns:
        int64 numpy ``[N]``.
    """
    if scheme not in METIS_SCHEMES:
        raise PartitionError(
            f"expected a METIS scheme from {list(METIS_SCHEMES)}, found {scheme!r}; "
            "pass scheme='auto', 'kway' or 'recursive'"
        )
    weights = build_vertex_weights(data, balance)
    active = 0 if weights is None else int(np.count_nonzero(weights.sum(axis=0) > 0))
    recursive = scheme == "recursive" or (scheme == "auto" and active >= 2)
    per_level = float(imbalance)
    if recursive and num_parts > 2:
        levels = math.ceil(math.log2(num_parts))
        per_level = (1.0 + float(imbalance)) ** (1.0 / levels) - 1.0
    indptr, indices, w = _symmetric_graph(data, edge_weight)
    ew = None if w is None else integer_edge_weights(w)
    logger.debug(
        "metis: %s, %d active constraint(s), imbalance %.4f per %s",
        "recursive bisection" if recursive else "k-way",
        active,
        per_level,
        "bisection" if recursive else "part",
    )
    return metis_partition(
        indptr, indices, num_parts, weights, imbalance=per_level, seed=seed, backend=backend,
        edge_weights=ew, ncuts=ncuts, niter=niter, recursive=recursive,
    )


def random_strategy(data: Data, num_parts: int, *, seed: int = 0) -> np.ndarray:
    """A seeded random permutation cut into P equal ranges: part sizes differ by at most 1.

    Returns:
        int64 numpy ``[N]``.
    """
    n = _num_nodes(data)
    perm = np.random.default_rng(seed).permutation(n)
    parts = np.empty(n, dtype=np.int64)
    parts[perm] = np.arange(n, dtype=np.int64) * num_parts // max(n, 1)
    return parts


def hash_strategy(data: Data, num_parts: int) -> np.ndarray:
    """``id % P`` (int64 numpy ``[N]``)."""
    return np.arange(_num_nodes(data), dtype=np.int64) % num_parts


def range_strategy(data: Data, num_parts: int) -> np.ndarray:
    """Contiguous original-id ranges of equal size: ``id * P // N`` (int64 numpy ``[N]``)."""
    n = _num_nodes(data)
    return np.arange(n, dtype=np.int64) * num_parts // max(n, 1)


def _streaming(
    kind: str,
    data: Data,
    num_parts: int,
    imbalance: float,
    seed: int,
    slack: float | None,
    chunk_size: int | None,
    edge_weight: bool,
    passes: int,
    **extra: float | None,
) -> np.ndarray:
    indptr, indices, w = _symmetric_graph(data, edge_weight)
    slack = float(imbalance if slack is None else slack)
    return stream_partition(
        indptr, indices, num_parts, kind=kind, slack=slack, seed=seed, chunk_size=chunk_size,
        edge_weights=w, passes=passes, **extra,
    )


def ldg_strategy(
    data: Data,
    num_parts: int,
    *,
    imbalance: float = 0.05,
    seed: int = 0,
    slack: float | None = None,
    chunk_size: int | None = None,
    edge_weight: bool = True,
    passes: int = 1,
) -> np.ndarray:
    """Streaming Linear Deterministic Greedy (see :mod:`gnnscale.partitioning.streaming`).

    Args:
        data: graph (``edge_index``, optional ``edge_weight``).
        num_parts: P.
        imbalance: default of ``slack``.
        seed: stream order and tie-breaking seed.
        slack: parts hold at most ``(1 + slack) * N / P`` nodes (default: ``imbalance``).
        chunk_size: nodes placed together (default ``N / (64 P)`` in [16, 8192]).
        edge_weight: count neighbors by ``data.edge_weight`` when present.
        passes: streams over the nodes (> 1: restreaming, each pass seeing the last one).

    Returns:
        int64 numpy ``[N]``.
    """
    return _streaming(
        "ldg", data, num_parts, imbalance, seed, slack, chunk_size, edge_weight, passes
    )


def fennel_strategy(
    data: Data,
    num_parts: int,
    *,
    imbalance: float = 0.05,
    seed: int = 0,
    slack: float | None = None,
    chunk_size: int | None = None,
    gamma: float = 1.5,
    alpha: float | None = None,
    edge_weight: bool = True,
    passes: int = 1,
) -> np.ndarray:
    """Streaming Fennel (see :mod:`gnnscale.partitioning.streaming`).

    Args:
        data: graph (``edge_index``, optional ``edge_weight``).
        num_parts: P.
        imbalance: default of ``slack``.
        seed: stream order and tie-breaking seed.
        slack: parts hold at most ``(1 + slack) * N / P`` nodes (default: ``imbalance``).
        chunk_size: nodes placed together (default ``N / (64 P)`` in [16, 8192]).
        gamma: load exponent (default 1.5).
        alpha: load weight (default ``sqrt(P) * M / N^1.5``, M undirected edges).
        edge_weight: count neighbors by ``data.edge_weight`` when present.
        passes: streams over the nodes (> 1: restreaming, each pass seeing the last one).

    Returns:
        int64 numpy ``[N]``.
    """
    return _streaming(
        "fennel", data, num_parts, imbalance, seed, slack, chunk_size, edge_weight, passes,
        gamma=gamma, alpha=alpha,
    )


def _multilevel_inputs(
    data: Data, balance: Sequence[str], edge_weight: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Symmetric CSR, one node weight (int64 ``[N]`` or None) and integer edge weights (or None)."""
    node_w = single_node_weight(build_vertex_weights(data, balance), _num_nodes(data))
    indptr, indices, w = _symmetric_graph(data, edge_weight)
    return indptr, indices, node_w, None if w is None else integer_edge_weights(w)


def kaminpar_strategy(
    data: Data,
    num_parts: int,
    *,
    balance: Sequence[str] = ("nodes", "train"),
    imbalance: float = 0.05,
    seed: int = 0,
    context: str = "default",
    threads: int = 1,
    edge_weight: bool = True,
) -> np.ndarray:
    """KaMinPar (``pip install 'gnnscale[kaminpar]'``) on the symmetrized graph.

    Args:
        data: graph (``edge_index``, masks for the ``train``/``val``/``test`` weights, optional
            ``edge_weight``).
        num_parts: P.
        balance: constraints made into one node weight (see ``single_node_weight``).
        imbalance: every part's weight at most ``(1 + imbalance) * ceil(total / P)``.
        seed: KaMinPar's seed.
        context: preset (``default``, ``fast``, ``eco``, ``strong``, ``terapart``, ...).
        threads: KaMinPar's threads.
        edge_weight: use ``data.edge_weight`` when present (scaled to integers as for METIS).

    Returns:
        int64 numpy ``[N]``.
    """
    indptr, indices, node_w, edge_w = _multilevel_inputs(data, balance, edge_weight)
    return kaminpar_assign(
        indptr, indices, num_parts, node_weights=node_w, edge_weights=edge_w, imbalance=imbalance,
        seed=seed, context=context, threads=threads,
    )


def kahip_strategy(
    data: Data,
    num_parts: int,
    *,
    balance: Sequence[str] = ("nodes", "train"),
    imbalance: float = 0.05,
    seed: int = 0,
    mode: str = "auto",
    edge_weight: bool = True,
) -> np.ndarray:
    """KaHIP's KaFFPa (``pip install 'gnnscale[kahip]'``) on the symmetrized graph.

    Args:
        data, num_parts, balance, imbalance, seed, edge_weight: as :func:`kaminpar_strategy`.
        mode: ``auto`` (default: ``strong``/``eco`` by size, ``*social`` for skewed degrees;
            :func:`~gnnscale.partitioning.multilevel.choose_kahip_mode`), ``fast``, ``eco``, ``strong``,
            ``fastsocial``, ``ecosocial``, ``strongsocial``.

    Returns:
        int64 numpy ``[N]``.
    """
    indptr, indices, node_w, edge_w = _multilevel_inputs(data, balance, edge_weight)
    return kahip_assign(
        indptr, indices, num_parts, node_weights=node_w, edge_weights=edge_w, imbalance=imbalance,
        seed=seed, mode=mode,
    )


BUILTIN_STRATEGIES = {
    "metis": metis_strategy,
    "random": random_strategy,
    "hash": hash_strategy,
    "range": range_strategy,
    "ldg": ldg_strategy,
    "fennel": fennel_strategy,
    "kaminpar": kaminpar_strategy,
    "kahip": kahip_strategy,
}
"""Built-in methods in the order they are listed (the default, ``metis``, first)."""
