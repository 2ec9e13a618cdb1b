"""Relation-wise neighbour sampling of typed graphs (docs/typed_graphs.md, section 3).

A typed graph's CSC lists each node's in-edges sorted by relation, so the edges of relation
``r`` into local node ``v`` are one run: row ``v * R + r`` of a finer pointer
(:func:`relation_indptr`) over the same ``indices``. A hop samples each relation's fan-out
from its run with the ordinary kernels (one call per relation: a loop over relations, never
over nodes), keyed by the hop's stream key and the relation, so that the owner of a node draws
for a requester exactly what a single process draws. The hop's output lists each
destination's neighbours by relation: ``counts_kr`` int64 [k, R] and the neighbours in
(destination, relation) order; :func:`split_counts` turns that into per-destination counts
and each sampled edge's relation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from gnnscale.errors import SamplerError
from gnnscale.samplers.fanouts import typed_fanouts  # noqa: F401 - re-exported
from gnnscale.samplers.rng import stream_key


def relation_indptr(indptr: torch.Tensor, etype: torch.Tensor, num_relations: int) -> torch.Tensor:
    """int64 [n * R + 1]: row ``v * R + r`` spans the in-edges of local node ``v`` with relation ``r``
    (the partition's :func:`~gnnscale.partitioning.part.relation_indptr`, after checking that each
    node's in-edges are sorted by relation).

    Args:
        indptr: int64 [n + 1] CSC pointers; etype: int [E] relation of each in-edge.
    """
    from gnnscale.partitioning.part import relation_indptr as count_runs

    n = indptr.numel() - 1
    row = torch.repeat_interleave(torch.arange(n, dtype=torch.int64), torch.diff(indptr), output_size=etype.numel())
    key = row * int(num_relations) + etype.to(torch.int64)
    if key.numel() > 1 and bool((key[1:] < key[:-1]).any()):
        raise SamplerError("expected each node's in-edges sorted by relation (typed partition format 2), found "
                           "them unsorted; re-run `gnnscale partition` with this version")
    return count_runs(indptr.numpy(), etype.numpy(), num_relations)


@dataclass
class TypedGraph:
    """What a sampler needs to sample a typed graph by relation.

    Attributes:
        rel_indptr: int64 [n * R + 1] (see :func:`relation_indptr`) over the sampler's CSC rows.
        dst_type: int64 [R] destination node type of each relation.
        fanouts: int [H][R] fan-outs per hop and relation
            (:func:`~gnnscale.samplers.fanouts.typed_fanouts`).
        node_type: ``ids -> int64 types`` of global ids (the partition book's, or a lookup).
    """

    rel_indptr: torch.Tensor
    dst_type: torch.Tensor
    fanouts: list[list[int]]
    node_type: Callable[[torch.Tensor], torch.Tensor]

    @property
    def num_relations(self) -> int:
        return int(self.dst_type.numel())


def relation_key(key: int | torch.Tensor, relation: int) -> int | torch.Tensor:
    """The stream key of ``relation`` under a hop's key (an int, or int64 [k] per-row keys)."""
    if isinstance(key, int):
        return stream_key(key, relation)
    uniq, inv = torch.unique(key, return_inverse=True)  # a handful of requesters' keys
    return torch.tensor([stream_key(int(k), relation) for k in uniq.tolist()], dtype=torch.int64)[inv]


def relation_keys(key: int | torch.Tensor, num_relations: int, k: int) -> torch.Tensor:
    """int64 [k * R]: :func:`relation_key` of every (row, relation) pair, rows major, for ``k``
    rows under a hop's key (an int, or int64 [k] per-row keys)."""
    if isinstance(key, int):
        return torch.tensor([stream_key(key, r) for r in range(num_relations)], dtype=torch.int64).repeat(k)
    uniq, inv = torch.unique(key, return_inverse=True)  # a handful of requesters' keys
    table = torch.tensor([[stream_key(int(q), r) for r in range(num_relations)] for q in uniq.tolist()],
                         dtype=torch.int64).view(-1, num_relations)
    return table[inv].flatten()


def _edges_kw(return_edges: bool) -> dict:
    """The kernels' ``return_edges`` keyword, passed only when asked (any ``sample`` callable works
    without it)."""
    return {"return_edges": True} if return_edges else {}


def sample_relations(sample: Callable, typed: TypedGraph, indices: torch.Tensor, rows: torch.Tensor,
                     row_types: torch.Tensor, node_keys: torch.Tensor, hop: int, key: int | torch.Tensor,
                     variant: dict, return_edges: bool = False) -> tuple[torch.Tensor, ...]:
    """One hop of relation-wise sampling.

    Args:
        sample: the kernels' ``sample`` (``Kernels.sample``).
        indices: int64 [E] sources (global ids) of the CSC ``typed.rel_indptr`` points into.
        rows: int64 [k] CSC rows (local nodes) to sample; row_types: int64 [k] their node types;
        node_keys: int64 [k] their stream identities (original ids).
        key: the hop's stream key, an int or int64 [k] (one per row: several requesters).
        variant: the kernels' variant keywords (``replace``, ``weights``; weights aligned with
            ``indices``).
        return_edges: also return each neighbour's edge position in the CSC (its index into
            ``indices``); the draws are the same.

    Returns:
        counts_kr: int64 [k, R] neighbours drawn per row and relation; nbrs: int64
        [counts_kr.sum()] their global ids, grouped by row, then by relation; with
        ``return_edges``, edges int64 [counts_kr.sum()] aligned with ``nbrs``.
    """
    R = typed.num_relations
    k = rows.numel()
    fan = typed.fanouts[hop]
    if len(set(fan)) == 1:
        # One fan-out for every relation: one kernel call over every (row, relation) run, which
        # comes out grouped by row then relation; a relation into another node type has an
        # empty run there. Draws are the per-relation calls' (same keys, same runs).
        exp_rows = (rows.unsqueeze(1) * R + torch.arange(R, dtype=torch.int64)).flatten()
        out = sample(typed.rel_indptr, indices, exp_rows, torch.repeat_interleave(node_keys, R), fan[0],
                     relation_keys(key, R, k), **_edges_kw(return_edges), **variant)
        return (out[0].view(k, R),) + tuple(out[1:])
    return sample_each_relation(sample, typed, indices, rows, row_types, node_keys, hop, key, variant, return_edges)


def sample_each_relation(sample: Callable, typed: TypedGraph, indices: torch.Tensor, rows: torch.Tensor,
                         row_types: torch.Tensor, node_keys: torch.Tensor, hop: int, key: int | torch.Tensor,
                         variant: dict, return_edges: bool = False) -> tuple[torch.Tensor, ...]:
    """:func:`sample_relations` with one kernel call per relation (fan-outs that differ between
    relations), the draws (and, with ``return_edges``, their CSC edge positions) put into
    their (row, relation) runs."""
    R = typed.num_relations
    k = rows.numel()
    counts_kr = torch.zeros(k, R, dtype=torch.int64)
    pieces = []
    for r in range(R):  # loop over relations, not nodes
        f = typed.fanouts[hop][r]
        sel = torch.nonzero(row_types == typed.dst_type[r]).flatten()
        if sel.numel() == 0:
            continue
        kr = relation_key(key, r) if isinstance(key, int) else relation_key(key[sel], r)
        out = sample(typed.rel_indptr, indices, rows[sel] * R + r, node_keys[sel], f, kr,
                     **_edges_kw(return_edges), **variant)
        counts_kr[sel, r] = out[0]
        pieces.append((sel, r) + tuple(out))
    flat = counts_kr.flatten()
    total = int(flat.sum())
    nbrs = torch.empty(total, dtype=torch.int64)
    edges = torch.empty(total, dtype=torch.int64) if return_edges else None
    starts = torch.cumsum(flat, 0) - flat
    for sel, r, c, nb, *eg in pieces:  # each relation's draws into their (row, relation) runs
        first = starts[sel * R + r]
        pos = torch.repeat_interleave(first - (torch.cumsum(c, 0) - c), c, output_size=nb.numel())
        at = pos + torch.arange(nb.numel())
        nbrs[at] = nb
        if return_edges:
            edges[at] = eg[0]
    return (counts_kr, nbrs, edges) if return_edges else (counts_kr, nbrs)


def split_counts(counts_kr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(counts int64 [k], edge_type int64 [counts.sum()]) from counts per row and relation [k, R]."""
    k, R = counts_kr.shape
    rel = torch.arange(R, dtype=torch.int64).repeat(k)
    flat = counts_kr.flatten()
    return counts_kr.sum(1), torch.repeat_interleave(rel, flat, output_size=int(flat.sum()))
