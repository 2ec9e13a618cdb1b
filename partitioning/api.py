"""``partition_graph``: validate, partition, relabel, write. Also the partitioner registry.

A partitioner is ``fn(data, num_parts, *, balance, imbalance, seed) -> int [N]`` (numpy array
or LongTensor) giving the part of every node. The registry below is the only place methods are
looked up; add one with :func:`register_partitioner`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from gnnscale.errors import PartitionError
from gnnscale.partitioning.format import write_partitions
from gnnscale.partitioning.graph import to_undirected_csr
from gnnscale.partitioning.metis import metis_partition
from gnnscale.partitioning.weights import build_vertex_weights

logger = logging.getLogger(__name__)

Partitioner = Callable[..., "np.ndarray | torch.Tensor"]


def _metis(
    data: Data,
    num_parts: int,
    *,
    balance: Sequence[str] = ("nodes", "train"),
    imbalance: float = 0.05,
    seed: int = 0,
    **_: Any,
) -> np.ndarray:
    """Multi-constraint k-way METIS on the symmetrized graph; int64 ``[N]``."""
    n = int(data.num_nodes)
    indptr, indices = to_undirected_csr(data.edge_index, n)
    weights = build_vertex_weights(data, balance)
    return metis_partition(indptr, indices, num_parts, weights, imbalance=imbalance, seed=seed)


_PARTITIONERS: dict[str, Partitioner] = {"metis": _metis}


def register_partitioner(name: str, fn: Partitioner, *, overwrite: bool = False) -> None:
    """Make ``fn`` available as ``partition_graph(..., method=name)``.

    Args:
        name: method name (what ``--method`` accepts).
        fn: ``fn(data, num_parts, *, balance, imbalance, seed) -> int [N]``.
        overwrite: allow replacing an existing method of that name.
    """
    if not isinstance(name, str) or not name:
        raise PartitionError(f"expected a non-empty method name, found {name!r}")
    if not callable(fn):
        raise PartitionError(f"expected a callable partitioner for {name!r}, found {fn!r}")
    if name in _PARTITIONERS and not overwrite:
        raise PartitionError(
            f"expected a new method name, found {name!r} already registered; pass "
            "overwrite=True to replace it"
        )
    _PARTITIONERS[name] = fn


def available_methods() -> list[str]:
    """Names of the registered partitioners, sorted."""
    return sorted(_PARTITIONERS)


def get_partitioner(method: str) -> Partitioner:
    """The partitioner registered as ``method``; PartitionError listing the known ones if none."""
    try:
        return _PARTITIONERS[method]
    except (KeyError, TypeError):
        raise PartitionError(
            f"expected a partitioning method from {available_methods()}, found {method!r}; "
            "pick one of those (or register_partitioner a new one)"
        ) from None


def partition_graph(
    data: Data,
    num_parts: int,
    out_dir: str | os.PathLike,
    *,
    method: str = "metis",
    balance: Sequence[str] = ("nodes", "train"),
    imbalance: float = 0.05,
    seed: int = 0,
    dataset: str | None = None,
) -> dict[str, Any]:
    """Partition ``data`` into ``num_parts`` parts and write the format-1 folder ``out_dir``.

    Args:
        data: graph following the dataset contract (x, y, edge_index, masks, num_classes).
        num_parts: P, 1 <= P <= number of nodes.
        out_dir: output folder.
        method: registered partitioner name (see :func:`available_methods`).
        balance: balance constraints ("nodes", "train", "val", "test", "edges").
        imbalance: allowed relative overweight per constraint (0.05 = 5%).
        seed: partitioner seed.
        dataset: name recorded in meta.json (default: ``data.name``).

    Returns:
        The meta dict written to ``out_dir/meta.json`` (includes ``partition_seconds``).
    """
    partitioner = get_partitioner(method)
    n = int(data.num_nodes) if data.num_nodes is not None else 0
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)):
        raise PartitionError(f"expected an integer num_parts, found {num_parts!r}")
    num_parts = int(num_parts)
    if num_parts < 1 or num_parts > n:
        raise PartitionError(
            f"expected 1 <= num_parts <= number of nodes ({n}), found num_parts={num_parts}; "
            f"choose between 1 and {n} parts"
        )
    if getattr(data, "edge_index", None) is None:
        raise PartitionError("expected data.edge_index [2, E], found none; fix the dataset")
    if isinstance(balance, str):
        balance = (balance,)
    balance = tuple(balance)
    if dataset is None:
        dataset = str(getattr(data, "name", None) or "unknown")
    num_edges = int(data.edge_index.shape[1])
    logger.info(
        "partitioning %s (%d nodes, %d edges) into %d parts with %s, balance=%s, "
        "imbalance=%.3f, seed=%d",
        dataset,
        n,
        num_edges,
        num_parts,
        method,
        ",".join(balance) or "none",
        imbalance,
        seed,
    )
    t0 = time.perf_counter()
    parts = partitioner(data, num_parts, balance=balance, imbalance=imbalance, seed=seed)
    seconds = time.perf_counter() - t0
    if isinstance(parts, torch.Tensor):
        parts = parts.detach().cpu().numpy()
    parts = np.asarray(parts)
    valid = parts.shape == (n,) and (n == 0 or np.issubdtype(parts.dtype, np.integer))
    if valid and n:
        valid = 0 <= int(parts.min()) and int(parts.max()) < num_parts
    if not valid:
        raise PartitionError(
            f"expected partitioner {method!r} to return {n} integer part ids in "
            f"[0, {num_parts}), found shape {tuple(parts.shape)} dtype {parts.dtype}; "
            "fix the partitioner"
        )
    counts = np.bincount(parts, minlength=num_parts)
    logger.info(
        "%s finished in %.2f s; nodes per part min %d / max %d",
        method,
        seconds,
        int(counts.min()),
        int(counts.max()),
    )
    t1 = time.perf_counter()
    meta = write_partitions(
        data,
        parts,
        out_dir,
        method=method,
        dataset=dataset,
        num_parts=num_parts,
        extra_meta={
            "balance_constraints": list(balance),
            "imbalance": float(imbalance),
            "seed": int(seed),
            "partition_seconds": round(seconds, 4),
        },
    )
    logger.info("partition written to %s in %.2f s", out_dir, time.perf_counter() - t1)
    return meta
