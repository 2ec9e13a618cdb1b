"""Quality metrics of a node partition: ``partition_metrics`` (one function, a plain dict).

Definitions (N nodes, P parts, ``part[v]`` the part of node ``v``):

* ``edge_cut``: distinct undirected non-loop edges ``{u, v}`` with ``part[u] != part[v]``;
  ``edge_cut_fraction`` = edge_cut / distinct undirected non-loop edges.
* ``sizes``: per part, owned ``nodes``, owned ``train`` nodes and ``in_edges`` (distinct
  directed edges, self loops included, whose target the part owns; what its CSC stores).
* ``balance``: for each of those three, max over parts / mean over parts (1.0 = perfect).
* ``halo``: per part, the distinct remote in-neighbors of its owned nodes (sources of in-edges
  owned by another part): the nodes whose features or samples the part may need.
* ``replication_factor``: ``sum_p (owned_p + halo_p) / N`` (1.0 = no replication), and per
  part ``(owned_p + halo_p) / owned_p`` (None for an empty part).
* ``communication`` (with ``fanouts`` and ``batch_size``): the remote feature rows one training
  epoch fetches, measured by RUNNING the sampler, not by a formula. Every part ``p`` plays the
  trainer's rank ``p`` (``gnnscale.training.trainer.Worker.train_epoch``): its training nodes in
  ascending original id, shuffled with ``torch.randperm`` under the generator seed
  ``seed * 100003 + epoch * 101 + p``, cut into ``steps = max_p ceil(n_p / batch_size)``
  batches (parts with fewer batches wrap around their list), batch ``i`` sampled with
  :class:`~gnnscale.samplers.local.NeighborSampler` as requester ``p``, epoch ``epoch``, step
  ``i``. Since the random streams are keyed by original node ids and each node's in-neighbors
  are listed by original id, this draws exactly what the distributed sampler draws, so the
  rows counted (input nodes ``mb.input_ids`` not owned by ``p``) are the rows the feature
  store fetches from other parts; bytes = rows * feature_dim * 4 (float32).
* ``typed`` (typed graphs, ``docs/typed_graphs.md``): per relation the distinct stored edges
  (``edges_per_relation``) and those whose endpoints are in different parts
  (``cut_per_relation``), as the format-2 writer counts them; per node type the nodes of every
  part (``nodes_per_type`` [P][T]) and ``balance_per_type`` (max/mean over parts). The
  communication of a typed graph replays the homogeneous sampler (each hop's fan-out over all
  of a node's in-edges, not per relation) and counts ``4 * F_t`` bytes for a remote row of type
  t (0 for a type without features).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnnscale.errors import PartitionError
from gnnscale.partitioning.graph import as_edge_array, edge_cut, sorted_unique, to_csc
from gnnscale.partitioning.typed import is_typed, typed_spec

if TYPE_CHECKING:  # torch_geometric costs 2 s to import; workers never need it
    from torch_geometric.data import Data

FEATURE_BYTES = 4  # float32


def ratio(values: np.ndarray | Sequence[int]) -> float:
    """max / mean of a 1-D array (1.0 when the mean is 0): a balance figure."""
    values = np.asarray(values)
    mean = float(values.mean()) if values.size else 0.0
    return float(values.max()) / mean if mean > 0 else 1.0


_ratio = ratio


def metrics_from_counts(
    *,
    nodes: Sequence[int],
    in_edges: Sequence[int],
    halo: Sequence[int],
    cut: int,
    undirected_edges: int,
    train: Sequence[int] | None = None,
) -> dict[str, Any]:
    """The structural metrics from per-part counts (shared by the writer and
    :func:`partition_metrics`, so meta.json and the metrics agree by construction).

    Args:
        nodes, in_edges, halo: per part, owned nodes, in-edges and distinct remote in-neighbors
            (ints, length P).
        cut: undirected edges across parts; undirected_edges: distinct undirected non-loop edges.
        train: per part, owned training nodes (None when there is no training mask).

    Returns:
        dict with ``edge_cut``, ``edge_cut_fraction``, ``undirected_edges``, ``balance``
        {nodes, train, in_edges}, ``sizes`` {nodes, train, in_edges} (lists), ``halo``
        (list), ``replication_factor`` and ``replication_factor_per_part`` (list).
    """
    nodes_a = np.asarray(nodes, dtype=np.int64)
    edges_a = np.asarray(in_edges, dtype=np.int64)
    halo_a = np.asarray(halo, dtype=np.int64)
    n = int(nodes_a.sum())
    train_a = None if train is None else np.asarray(train, dtype=np.int64)
    per_part = [
        round((int(o) + int(h)) / int(o), 6) if o > 0 else None
        for o, h in zip(nodes_a.tolist(), halo_a.tolist())
    ]
    return {
        "edge_cut": int(cut),
        "edge_cut_fraction": float(cut) / undirected_edges if undirected_edges else 0.0,
        "undirected_edges": int(undirected_edges),
        "balance": {
            "nodes": _ratio(nodes_a),
            "train": None if train_a is None else _ratio(train_a),
            "in_edges": _ratio(edges_a),
        },
        "sizes": {
            "nodes": nodes_a.tolist(),
            "train": None if train_a is None else train_a.tolist(),
            "in_edges": edges_a.tolist(),
        },
        "halo": halo_a.tolist(),
        "replication_factor": float(nodes_a.sum() + halo_a.sum()) / n if n else 1.0,
        "replication_factor_per_part": per_part,
    }


def _check_parts(parts: np.ndarray | torch.Tensor, num_parts: int, n: int | None) -> np.ndarray:
    if isinstance(parts, torch.Tensor):
        parts = parts.detach().cpu().numpy()
    parts = np.asarray(parts)
    if parts.ndim != 1 or (n is not None and parts.shape[0] != n):
        raise PartitionError(
            f"expected parts of shape [{n if n is not None else 'N'}] (one part id per node), "
            f"found shape {tuple(parts.shape)}; pass the partitioner's output"
        )
    if parts.size and not np.issubdtype(parts.dtype, np.integer):
        raise PartitionError(
            f"expected integer part ids, found dtype {parts.dtype}; convert them with .long()"
        )
    parts = parts.astype(np.int64, copy=False)
    if isinstance(num_parts, bool) or int(num_parts) != num_parts or int(num_parts) < 1:
        raise PartitionError(f"expected num_parts >= 1, found {num_parts!r}")
    if parts.size and (int(parts.min()) < 0 or int(parts.max()) >= int(num_parts)):
        raise PartitionError(
            f"expected part ids in [0, {int(num_parts)}), found ids in [{int(parts.min())}, "
            f"{int(parts.max())}]; pass the right num_parts"
        )
    return parts


def _structure(
    ei: np.ndarray, parts: np.ndarray, num_parts: int, train: np.ndarray | None
) -> dict[str, Any]:
    """Edge cut, sizes, halo, balance and replication (vectorized, a few sorts of E keys)."""
    n = parts.shape[0]
    cut, undirected = edge_cut(ei, parts, n)
    # distinct directed edges as keys dst * N + src (sorted, deduplicated)
    keys = ei[1] * n
    keys += ei[0]
    keys = sorted_unique(keys, inplace=True)
    dst = keys // max(n, 1)
    src = keys - dst * max(n, 1)
    del keys
    pdst = parts[dst]
    in_edges = np.bincount(pdst, minlength=num_parts)
    remote = parts[src] != pdst
    halo_keys = pdst[remote] * n + src[remote]
    del dst, remote
    halo_keys = sorted_unique(halo_keys, inplace=True)
    halo = np.bincount(halo_keys // max(n, 1), minlength=num_parts)
    out = metrics_from_counts(
        nodes=np.bincount(parts, minlength=num_parts),
        train=None if train is None else np.bincount(parts[train], minlength=num_parts),
        in_edges=in_edges,
        halo=halo,
        cut=cut,
        undirected_edges=undirected,
    )
    out["num_edges"] = int(src.shape[0])
    return out


def typed_structure(ei: np.ndarray, edge_type: np.ndarray, num_relations: int, type_ptr: np.ndarray,
                    parts: np.ndarray, num_parts: int) -> dict[str, Any]:
    """Per-relation edges and cut, per-type sizes and balance of a typed graph's partition.

    Args:
        ei: int64 ``[2, E]``; edge_type: int64 ``[E]`` in ``[0, R)``; num_relations: R;
        type_ptr: int64 ``[T+1]``; parts: int64 ``[N]``; num_parts: P.

    Returns:
        ``edges_per_relation`` [R] and ``cut_per_relation`` [R] (distinct (source, target,
        relation) edges, as the writer stores them; cut: endpoints in different parts),
        ``nodes_per_type`` [P][T] and ``balance_per_type`` [T].
    """
    n = parts.shape[0]
    r = int(num_relations)
    keys = ei[1] * r
    keys += edge_type
    keys *= max(n, 1)
    keys += ei[0]
    keys = sorted_unique(keys, inplace=True)
    edges = np.zeros(r, dtype=np.int64)
    cut = np.zeros(r, dtype=np.int64)
    step = 1 << 22
    for a in range(0, keys.shape[0], step):  # loop over slices of a few million edges
        k = keys[a : a + step]
        src = k % max(n, 1)
        dst_rel = k // max(n, 1)
        rel = dst_rel % r
        dst_rel //= r
        edges += np.bincount(rel, minlength=r)
        cut += np.bincount(rel[parts[src] != parts[dst_rel]], minlength=r)
    del keys
    num_t = type_ptr.shape[0] - 1
    node_type = np.searchsorted(type_ptr[1:-1], np.arange(n, dtype=np.int64), side="right")
    counts = np.bincount(parts * num_t + node_type, minlength=num_parts * num_t).reshape(num_parts, num_t)
    return {
        "edges_per_relation": edges.tolist(),
        "cut_per_relation": cut.tolist(),
        "nodes_per_type": counts.tolist(),
        "balance_per_type": [ratio(counts[:, t]) for t in range(num_t)],
    }


def _epoch_batches(
    train_ids: list[torch.Tensor], batch_size: int, seed: int, epoch: int
) -> list[list[torch.Tensor]]:
    """Per part, the seeds of every step of one epoch, exactly as the trainer cuts them."""
    from gnnscale.samplers.seeds import epoch_steps, shuffled_batches

    steps = epoch_steps([t.numel() for t in train_ids], batch_size)
    return [shuffled_batches(ids, batch_size, seed, epoch, p, steps) for p, ids in enumerate(train_ids)]


def _communication(
    ei: np.ndarray,
    parts: np.ndarray,
    num_parts: int,
    train: np.ndarray,
    fanouts: Sequence[int],
    batch_size: int,
    feature_dim: int,
    seed: int,
    epoch: int,
    node_bytes: np.ndarray | None = None,
) -> dict[str, Any]:
    """Remote feature rows of one training epoch, by running the sampler (see module doc).

    ``node_bytes``: int64 ``[N]`` bytes of each node's feature row (typed graphs: 4 * F of its
    type); default ``4 * feature_dim`` for every node."""
    from gnnscale.samplers.local import NeighborSampler

    n = parts.shape[0]
    indptr, indices = to_csc(ei, n, dedupe=True)  # sources ascending by (original) id
    sampler = NeighborSampler(
        torch.from_numpy(indptr), torch.from_numpy(indices), list(fanouts), seed=seed
    )
    owner = torch.from_numpy(parts)
    train_ids = [
        torch.from_numpy(np.flatnonzero(train & (parts == p)).astype(np.int64))
        for p in range(num_parts)  # loop over parts
    ]
    batches = _epoch_batches(train_ids, batch_size, seed, epoch)
    rows = np.zeros(num_parts, dtype=np.int64)
    nbytes = np.zeros(num_parts, dtype=np.int64)
    node_bytes_t = None if node_bytes is None else torch.from_numpy(node_bytes)
    inputs = np.zeros(num_parts, dtype=np.int64)
    requests = np.zeros(num_parts, dtype=np.int64)
    edges = np.zeros(num_parts, dtype=np.int64)
    for p in range(num_parts):  # loop over parts and their batches (not nodes)
        for step, seeds in enumerate(batches[p]):
            if seeds.numel() == 0:
                continue
            mb = sampler.sample(seeds, epoch=epoch, step=step)
            inp = mb.input_ids
            remote = owner[inp] != p
            rows[p] += int(remote.sum())
            if node_bytes_t is not None:
                nbytes[p] += int(node_bytes_t[inp[remote]].sum())
            inputs[p] += int(inp.numel())
            requests[p] += sum(int((owner[b.dst_ids] != p).sum()) for b in mb.blocks)
            edges[p] += mb.num_sampled_edges
    if node_bytes is None:
        nbytes = rows * (int(feature_dim) * FEATURE_BYTES)
    return {
        "fanouts": [int(f) for f in fanouts],
        "batch_size": int(batch_size),
        "feature_dim": int(feature_dim),
        "seed": int(seed),
        "epoch": int(epoch),
        "steps_per_epoch": len(batches[0]) if batches else 0,
        "remote_rows": int(rows.sum()),
        "remote_rows_per_part": rows.tolist(),
        "remote_bytes": int(nbytes.sum()),
        "remote_bytes_per_part": nbytes.tolist(),
        "input_rows": int(inputs.sum()),
        "remote_sample_requests": int(requests.sum()),
        "remote_sample_requests_per_part": requests.tolist(),
        "sampled_edges": int(edges.sum()),
    }


def partition_metrics(
    data_or_graph: Data | np.ndarray | torch.Tensor,
    parts: np.ndarray | torch.Tensor,
    num_parts: int,
    *,
    train_mask: np.ndarray | torch.Tensor | None = None,
    fanouts: Sequence[int] | None = None,
    batch_size: int | None = None,
    feature_dim: int | None = None,
    seed: int = 0,
    epoch: int = 0,
) -> dict[str, Any]:
    """Edge cut, balance, halo, replication and (optionally) sampled communication.

    Args:
        data_or_graph: a ``Data`` (``edge_index``; ``train_mask`` and ``x`` supply the defaults
            of ``train_mask`` and ``feature_dim``), or an ``edge_index`` int ``[2, E]`` alone
            (N is then ``len(parts)``).
        parts: int ``[N]``, the part of every node (original ids).
        num_parts: P.
        train_mask: bool ``[N]`` (default ``data.train_mask``); needed for ``balance.train`` and
            for ``communication``.
        fanouts: sampler fanouts per hop (e.g. ``[10, 10]``, -1 = all); with ``batch_size``
            turns on the ``communication`` entry.
        batch_size: training batch size per part.
        feature_dim: F for bytes (default ``data.x.shape[1]``).
        seed: the training seed (``gnnscale train --seed``): shuffling and sampling streams.
        epoch: which epoch to measure.

    Returns:
        JSON-serializable dict: ``num_parts``, ``num_nodes``, ``num_edges`` (distinct directed),
        ``undirected_edges``, ``edge_cut`` (int), ``edge_cut_fraction``, ``balance`` {nodes,
        train, in_edges} (max/mean), ``sizes`` (per-part lists), ``halo`` (list),
        ``replication_factor``, ``replication_factor_per_part`` and, when ``fanouts`` and
        ``batch_size`` are given, ``communication`` {remote_rows, remote_bytes (+ per part),
        input_rows, remote_sample_requests, sampled_edges, steps_per_epoch, ...}. A typed
        ``Data`` adds ``typed`` {node_types, edge_types, target_type, feature_dims,
        edges_per_relation, cut_per_relation, nodes_per_type, balance_per_type} (see the
        module doc); its ``balance.nodes`` is over all types together.
    """
    from torch_geometric.data import Data

    spec = None
    if isinstance(data_or_graph, Data):
        data = data_or_graph
        if is_typed(data):
            spec = typed_spec(data)
        edge_index = getattr(data, "edge_index", None)
        if edge_index is None:
            raise PartitionError("expected data.edge_index [2, E], found none; fix the dataset")
        n = int(data.num_nodes)
        if train_mask is None:
            train_mask = getattr(data, "train_mask", None)
        x = getattr(data, "x", None)
        if feature_dim is None and x is not None:
            feature_dim = int(x.shape[1])
        if feature_dim is None and spec is not None:
            feature_dim = 0  # per type: spec.feature_dims
    else:
        edge_index, n = data_or_graph, None
    parts = _check_parts(parts, num_parts, n)
    n = parts.shape[0]
    num_parts = int(num_parts)
    ei = as_edge_array(edge_index, n)
    train = None
    if train_mask is not None:
        train = torch.as_tensor(train_mask).detach().cpu().numpy()
        if train.shape != (n,):
            raise PartitionError(
                f"expected train_mask of shape [{n}], found {tuple(train.shape)}; pass one "
                "boolean per node"
            )
        train = train.astype(np.bool_, copy=False)
    out: dict[str, Any] = {"num_parts": num_parts, "num_nodes": n}
    out.update(_structure(ei, parts, num_parts, train))
    node_bytes = None
    if spec is not None:
        out["typed"] = {**spec.meta_header(), "feature_dims": list(spec.feature_dims),
                        **typed_structure(ei, spec.edge_type, spec.num_relations, spec.type_ptr, parts, num_parts)}
        dims = np.asarray(spec.feature_dims, dtype=np.int64) * FEATURE_BYTES
        node_bytes = np.repeat(dims, spec.counts())
    if fanouts is not None or batch_size is not None:
        if fanouts is None or batch_size is None:
            raise PartitionError(
                f"expected both fanouts and batch_size for the communication metric, found "
                f"fanouts={fanouts!r}, batch_size={batch_size!r}; pass both or neither"
            )
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
            raise PartitionError(f"expected a positive integer batch_size, found {batch_size!r}")
        if train is None:
            raise PartitionError(
                "expected a train_mask (the epoch's seeds) for the communication metric, found "
                "none; pass train_mask= or a Data with train_mask"
            )
        if feature_dim is None:
            raise PartitionError(
                "expected feature_dim for the communication bytes, found none; pass "
                "feature_dim= or a Data with x"
            )
        from gnnscale.samplers.local import check_fanouts

        fan = check_fanouts(fanouts)
        out["communication"] = _communication(
            ei, parts, num_parts, train, fan, int(batch_size), int(feature_dim), int(seed),
            int(epoch), node_bytes,
        )
        if spec is not None:
            out["communication"]["feature_dims"] = list(spec.feature_dims)
    return out
