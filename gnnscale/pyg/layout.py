"""A sampled batch laid out as PyG lays it out: its subgraph types (``directional``,
``bidirectional``, ``induced``: :func:`induced_edges`), repeated seeds (:func:`first_occurrences`,
:func:`repeat_rows`: each copy of a seed gets the seed's draws), and values shown in messages
(:func:`shown`: a tensor by dtype and shape, never its entries). Used by the homogeneous and the
typed samplers (:mod:`gnnscale.pyg.sampler`, :mod:`gnnscale.pyg.hetero`)."""
from __future__ import annotations

from typing import Any

import torch


def shown(value: Any) -> str:
    """``value`` for a message: a tensor by its dtype and shape (never its entries), a tuple item by item."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        return f"{'an' if dtype.startswith('int') else 'a'} {dtype} tensor of shape {tuple(value.shape)}"
    if isinstance(value, tuple):
        return "(" + ", ".join(shown(v) for v in value) + ")"
    return f"{value!r:.80}"


SUBGRAPH_TYPES = ("directional", "bidirectional", "induced")


def induced_edges(indptr: torch.Tensor, indices: torch.Tensor, perm: torch.Tensor, dst: torch.Tensor,
                  src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(row, col, edge) int64 [M] of every edge from a node of ``src`` to a node of ``dst`` (distinct int64
    ids; the CSC's target and source id ranges): local source (index into ``src``), local target (into
    ``dst``), original edge id; targets in ``dst``'s order, each one's in-edges in CSC order (PyG's
    ``subgraph_type='induced'``: the subgraph the sampled nodes induce)."""
    start = indptr[dst]
    count = indptr[dst + 1] - start
    total = int(count.sum())
    if total == 0 or src.numel() == 0:
        return (torch.empty(0, dtype=torch.int64),) * 3
    col = torch.repeat_interleave(torch.arange(dst.numel()), count)
    pos = torch.repeat_interleave(start - (torch.cumsum(count, 0) - count), count) + torch.arange(total)
    ends = indices[pos]
    order = torch.argsort(src)
    at = torch.searchsorted(src[order], ends).clamp_(max=src.numel() - 1)
    hit = src[order][at] == ends
    return order[at[hit]], col[hit], perm[pos[hit]]


def first_occurrences(seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """None when ``seeds`` int64 [B] are distinct, else ``(distinct int64 [U] in order of first
    appearance, where int64 [U]: each one's first position in ``seeds``, which int64 [B]: each seed's
    index into the distinct ones)``."""
    uniq, inv = torch.unique(seeds, return_inverse=True)
    if uniq.numel() == seeds.numel():
        return None
    first = torch.full((uniq.numel(),), seeds.numel(), dtype=torch.int64)
    first.scatter_reduce_(0, inv, torch.arange(seeds.numel()), reduce="amin")
    order = torch.argsort(first)
    slot = torch.empty_like(order)
    slot[order] = torch.arange(order.numel())
    return uniq[order], first[order], slot[inv]


def repeat_rows(row: torch.Tensor, col: torch.Tensor, edge: torch.Tensor, hop0: int, seeds_at_dst: bool,
                seeds_at_src: bool, where: torch.Tensor, which: torch.Tensor, num_seeds: int, num_nodes: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """A relation's edges of a batch sampled from its distinct seeds, laid out for the repeated seeds
    (:func:`first_occurrences`' ``where``/``which``; ``num_seeds`` B, ``num_nodes`` the type's sampled
    nodes before): local ids of the seeds' type shifted (seed ``u`` -> its first position, the
    others after the B seed rows), and every later copy of a seed given the seed's first-hop
    in-edges (the ``hop0`` first edges) too, so that each copy's neighbourhood is the seed's.
    Returns (row, col, edge, edges added to the first hop)."""
    U = where.numel()
    remap = torch.cat([where, torch.arange(U, num_nodes) - U + num_seeds])
    if seeds_at_src:
        row = remap[row]
    if not seeds_at_dst:
        return row, col, edge, 0
    copies = torch.nonzero(where[which] != torch.arange(num_seeds)).flatten()  # later copies of a seed
    c0 = col[:hop0]
    order = torch.argsort(c0, stable=True)
    count = torch.bincount(c0, minlength=U)
    start = torch.cumsum(count, 0) - count
    per = count[which[copies]]
    pos = order[torch.repeat_interleave(start[which[copies]] - (torch.cumsum(per, 0) - per), per)
                + torch.arange(int(per.sum()))]
    col = remap[col]
    add_col = torch.repeat_interleave(copies, per)
    row = torch.cat([row[:hop0], row[pos], row[hop0:]])
    col = torch.cat([col[:hop0], add_col, col[hop0:]])
    edge = torch.cat([edge[:hop0], edge[pos], edge[hop0:]])
    return row, col, edge, int(per.sum())
