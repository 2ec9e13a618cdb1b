"""Vectorized sampling kernels over a CSC adjacency (no Python loop over nodes or edges).

Loops run over the fanout (a handful of draws), never over nodes or edges.

Four variants, all driven by the same counter-based stream (draw ``j`` of node ``v`` is
``uniform(h_v, j)``, so results do not depend on the device, backend or worker):

- uniform without replacement (default): Floyd's algorithm, :func:`sample_positions`;
- uniform with replacement: ``fanout`` draws ``min(floor(u_j * d), d - 1)`` in draw order,
  :func:`sample_positions_replace`;
- weighted without replacement: Efraimidis-Spirakis exponential keys
  ``-log(u_p) / w_p`` per position ``p``, the ``fanout`` smallest kept (ascending position),
  :func:`weighted_without_replacement`;
- weighted with replacement: inverse-CDF draws on one precomputed float64 inclusive cumsum
  of the weights over the whole CSC, :func:`weighted_with_replacement`.

Zero-weight edges are never chosen; ``fanout == -1`` takes every neighbor once (every
positive-weight neighbor when weighted).
"""
from __future__ import annotations

import torch

from gnnscale.samplers.labor import labor_positions
from gnnscale.samplers.rng import node_hash, uniform


def sample_positions(deg: torch.Tensor, fanout: int, node_h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Choose neighbor positions uniformly without replacement.

    Args:
        deg: int64 [n] in-degree of each destination node.
        fanout: neighbors per node; -1 takes all of them.
        node_h: int64 [n] per-node stream hash (see :func:`rng.node_hash`).

    Returns:
        counts: int64 [n] number of neighbors taken per node (``min(deg, fanout)``).
        pos: int64 [counts.sum()] positions within each node's neighbor list, grouped by node
            in order, ascending within a node.

    Nodes with ``deg > fanout`` draw a uniform ``fanout``-subset with Robert Floyd's
    algorithm, vectorized across nodes: draw j picks ``t = floor(u * (d - k + j + 1))`` and
    takes ``d - k + j`` instead when ``t`` was already taken.
    """
    n = deg.numel()
    device = deg.device
    if fanout < 0:
        counts = deg.clone()
    else:
        counts = deg.clamp(max=fanout)
    total = int(counts.sum())
    starts = torch.cumsum(counts, 0) - counts
    # Default: position = rank within the node's run (takes all neighbors).
    pos = torch.arange(total, device=device) - torch.repeat_interleave(starts, counts, output_size=total)
    if fanout < 0 or n == 0:
        return counts, pos
    big = torch.nonzero(deg > fanout).flatten()
    if big.numel() == 0:
        return counts, pos
    d = deg[big]
    h = node_h[big]
    k = fanout
    chosen = torch.empty(big.numel(), k, dtype=torch.int64, device=device)
    for j in range(k):
        bound = d - k + j
        t = (uniform(h, j) * (bound + 1).to(torch.float64)).to(torch.int64)
        t = torch.minimum(t, bound)  # guard against rounding up to bound + 1
        if j > 0:
            dup = (chosen[:, :j] == t.unsqueeze(1)).any(1)
            t = torch.where(dup, bound, t)
        chosen[:, j] = t
    chosen, _ = torch.sort(chosen, dim=1)
    # Rows of big nodes in the flat output are contiguous runs of length k.
    idx = starts[big].unsqueeze(1) + torch.arange(k, device=device)
    pos[idx.flatten()] = chosen.flatten()
    return counts, pos


def sample_positions_replace(deg: torch.Tensor, fanout: int, node_h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Choose neighbor positions uniformly with replacement.

    Every node with ``deg > 0`` gets exactly ``fanout`` draws ``t_j = min(floor(u_j * d), d - 1)``
    (``u_j = uniform(node_h, j)``), kept in draw order (repeats allowed, also when
    ``deg < fanout``); ``deg == 0`` gives none; ``fanout == -1`` takes every neighbor once.

    Returns ``(counts int64 [n], pos int64 [counts.sum()])`` grouped by node.
    """
    device = deg.device
    if fanout < 0:
        counts = deg.clone()
        total = int(counts.sum())
        starts = torch.cumsum(counts, 0) - counts
        return counts, torch.arange(total, device=device) - torch.repeat_interleave(starts, counts, output_size=total)
    has = deg > 0
    counts = torch.where(has, fanout, 0).to(torch.int64)
    big = torch.nonzero(has).flatten()
    if big.numel() == 0:
        return counts, torch.empty(0, dtype=torch.int64, device=device)
    d = deg[big]
    h = node_h[big]
    u = torch.stack([uniform(h, j) for j in range(fanout)], 1)  # [m, k]
    t = (u * d.to(torch.float64).unsqueeze(1)).to(torch.int64)
    t = torch.minimum(t, (d - 1).unsqueeze(1))  # guard against rounding up to d
    return counts, t.flatten()


def _frontier_edges(start: torch.Tensor, deg: torch.Tensor):
    """Every edge of the frontier: (segment int64 [M], position in its node's list, CSC edge id)."""
    device = deg.device
    total = int(deg.sum())
    seg = torch.repeat_interleave(torch.arange(deg.numel(), device=device), deg, output_size=total)
    pos = torch.arange(total, device=device) - torch.repeat_interleave(torch.cumsum(deg, 0) - deg, deg, output_size=total)
    return seg, pos, start[seg] + pos


def _positive_edges(start: torch.Tensor, deg: torch.Tensor, weights: torch.Tensor):
    """All positive-weight edges of each node (ascending position): (counts, seg, pos, edge)."""
    seg, pos, edge = _frontier_edges(start, deg)
    keep = weights[edge] > 0
    seg, pos, edge = seg[keep], pos[keep], edge[keep]
    return torch.bincount(seg, minlength=deg.numel()), seg, pos, edge


def weighted_without_replacement(
    start: torch.Tensor, deg: torch.Tensor, fanout: int, node_h: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted sampling without replacement by exponential keys (Efraimidis-Spirakis).

    Args:
        start, deg: int64 [n] first CSC edge and degree of each node.
        fanout: neighbors per node, -1 for every positive-weight neighbor.
        node_h: int64 [n] per-node stream hash.
        weights: float [E] non-negative edge weights aligned with the CSC's ``indices``.

    Returns:
        counts int64 [n] (``min(#positive-weight edges, fanout)``) and edge int64
        [counts.sum()] CSC edge ids grouped by node, ascending within a node.

    Position ``p`` of a node's list gets key ``-log(uniform(h, p)) / w_p``; the ``fanout``
    smallest keys win (ties: smaller position). Selection is segment-wise by sorting
    (segment, key) with two stable sorts, no loop over nodes.
    """
    counts, seg, pos, edge = _positive_edges(start, deg, weights)
    if fanout < 0 or not bool((counts > fanout).any()):
        return counts, edge
    # Only nodes with more positive-weight edges than the fanout need keys.
    big_edge = (counts > fanout)[seg]
    b_seg, b_pos, b_edge = seg[big_edge], pos[big_edge], edge[big_edge]
    r = -torch.log(uniform(node_h[b_seg], b_pos)) / weights[b_edge].to(torch.float64)
    order = torch.argsort(r, stable=True)
    order = order[torch.argsort(b_seg[order], stable=True)]  # by segment, then key, then position
    m = b_seg.numel()
    c_big = torch.bincount(b_seg, minlength=deg.numel())
    seg_start = torch.cumsum(c_big, 0) - c_big
    rank = torch.arange(m, device=deg.device) - seg_start[b_seg[order]]
    chosen = torch.zeros(m, dtype=torch.bool, device=deg.device)
    chosen[order[rank < fanout]] = True
    keep = torch.ones(edge.numel(), dtype=torch.bool, device=deg.device)
    keep[big_edge] = chosen
    return counts.clamp(max=fanout), edge[keep]


def weighted_with_replacement(
    start: torch.Tensor, deg: torch.Tensor, fanout: int, node_h: torch.Tensor, cum_weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted sampling with replacement by inverse CDF on a global cumulative sum.

    Args:
        start, deg: int64 [n] first CSC edge and degree of each node.
        fanout: draws per node (>= 1; the caller handles -1).
        node_h: int64 [n] per-node stream hash.
        cum_weights: float64 [E] inclusive cumsum of the edge weights over the whole CSC
            (computed once per sampler, shared with the compiled kernel).

    Returns:
        counts int64 [n] (``fanout`` where the node's total weight ``W_v > 0``, else 0)
        and edge int64 [counts.sum()] CSC edge ids in draw order (repeats allowed).

    Draw ``j`` takes the first edge ``i`` of the node with ``cum[i] > base + u_j * W_v``
    (``base = cum[start - 1]``), so zero-weight edges (empty intervals) are never chosen;
    when rounding puts the target at or past the node's end, the node's last edge that
    raised the cumulative sum is taken.
    """
    device = deg.device
    n = deg.numel()
    if n == 0 or cum_weights.numel() == 0:
        return torch.zeros(n, dtype=torch.int64, device=device), torch.empty(0, dtype=torch.int64, device=device)
    end = start + deg
    zero = torch.zeros((), dtype=torch.float64, device=device)
    last = torch.where(deg > 0, cum_weights[(end - 1).clamp(min=0)], zero)
    base = torch.where(start > 0, cum_weights[(start - 1).clamp(min=0)], zero)
    base = torch.where(deg > 0, base, zero)
    total_w = last - base
    has = (deg > 0) & (total_w > 0)
    counts = torch.where(has, fanout, 0).to(torch.int64)
    big = torch.nonzero(has).flatten()
    if big.numel() == 0:
        return counts, torch.empty(0, dtype=torch.int64, device=device)
    h, b, w, e, lst = node_h[big], base[big], total_w[big], end[big], last[big]
    u = torch.stack([uniform(h, j) for j in range(fanout)], 1)  # [m, k]
    target = b.unsqueeze(1) + u * w.unsqueeze(1)
    idx = torch.searchsorted(cum_weights, target.flatten(), right=True).view(-1, fanout)
    fallback = torch.searchsorted(cum_weights, lst, right=False)  # first edge with cum == the node's total
    idx = torch.where(idx >= e.unsqueeze(1), fallback.unsqueeze(1), idx)
    return counts, idx.flatten()


def sample_from_csc(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    local_dst: torch.Tensor,
    node_keys: torch.Tensor,
    fanout: int,
    key: int | torch.Tensor,
    replace: bool = False,
    weights: torch.Tensor | None = None,
    cum_weights: torch.Tensor | None = None,
    return_edges: bool = False,
    labor: torch.Tensor | None = None,
) -> tuple[torch.Tensor, ...]:
    """Sample in-neighbors of ``local_dst`` from a CSC.

    Args:
        indptr: int64 [n_local + 1]; indices: int64 [E] source ids (global).
        local_dst: int64 [n] rows of the CSC to sample.
        node_keys: int64 [n] the same nodes' identities in the random stream (their original
            ids), so the draw does not depend on which worker holds the node or its relabeling.
        fanout: neighbors per node, -1 for all.
        key: int64 stream key (``SamplingKeys``: seed, epoch, step, hop), a Python int or an
            int64 [n] tensor (one key per node).
        replace: sample with replacement (``fanout`` draws per node with a neighbor).
        weights: optional float [E] non-negative edge weights aligned with ``indices``
            (weighted sampling; zero-weight edges are never chosen).
        cum_weights: float64 [E] inclusive cumsum of ``weights`` (weighted with replacement;
            computed here when not given, but samplers compute it once).
        return_edges: also return each drawn neighbor's edge position in the CSC (its index
            into ``indices``), e.g. to gather edge attributes; the draws are the same.
        labor: layer-neighbour sampling (LABOR-0, :func:`labor_positions`): int64 [E] the stream
            identity (original id) of the source of every entry of ``indices``; neighbour ``t``
            of a node of degree ``d`` is kept iff ``u_t * d < fanout``, ``u_t`` one uniform per
            (``key``, ``t``) shared by every node of the hop. Unweighted, without replacement.

    Returns:
        counts: int64 [n]; nbrs: int64 [counts.sum()] global source ids grouped by node;
        with ``return_edges``, a third tensor edges int64 [counts.sum()] (``nbrs ==
        indices[edges]``).
    """
    start = indptr[local_dst]
    deg = indptr[local_dst + 1] - start
    if labor is not None:
        counts, edge = labor_positions(start, deg, fanout, key, labor)
        return (counts, indices[edge], edge) if return_edges else (counts, indices[edge])
    h = node_hash(key, node_keys) if fanout >= 0 else node_keys
    if weights is None:
        if replace:
            counts, pos = sample_positions_replace(deg, fanout, h)
        else:
            counts, pos = sample_positions(deg, fanout, h)
        edge = torch.repeat_interleave(start, counts, output_size=pos.numel()) + pos
        return (counts, indices[edge], edge) if return_edges else (counts, indices[edge])
    if replace and fanout >= 0:
        if cum_weights is None:
            cum_weights = torch.cumsum(weights.to(torch.float64), 0)
        counts, edge = weighted_with_replacement(start, deg, fanout, h, cum_weights)
    else:  # without replacement, or every positive-weight neighbor once (fanout -1)
        counts, edge = weighted_without_replacement(start, deg, fanout, h, weights)
    return (counts, indices[edge], edge) if return_edges else (counts, indices[edge])


def relabel(dst_ids: torch.Tensor, nbrs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unique node ids with the destinations first, then new nodes in order of first appearance.

    Args:
        dst_ids: int64 [D] unique global ids. nbrs: int64 [M] global ids (repeats allowed).

    Returns:
        src_ids: int64 [S] with ``src_ids[:D] == dst_ids``; nbr_local: int64 [M] index of
        each entry of ``nbrs`` in ``src_ids``.
    """
    allv = torch.cat([dst_ids, nbrs])
    uniq, inv = torch.unique(allv, return_inverse=True)
    first = torch.full((uniq.numel(),), allv.numel(), dtype=torch.int64, device=allv.device)
    first.scatter_reduce_(0, inv, torch.arange(allv.numel(), device=allv.device), reduce="amin")
    order = torch.argsort(first)
    slot = torch.empty_like(order)
    slot[order] = torch.arange(order.numel(), device=order.device)
    local = slot[inv]
    return uniq[order], local[dst_ids.numel():]


class Kernels:
    """The sampling and relabeling functions a sampler uses.

    Args:
        num_nodes: ids run over ``[0, num_nodes)``.
        held: the id range ``(lo, hi)`` this process holds (its part's owned nodes); the
            compiled relabeler indexes it directly and hashes every other id, so its memory is
            the part's plus the batch's (default: all of ``[0, num_nodes)``, for a local graph).
        device: where the graph lives; CUDA tensors always use the torch kernels.
        backend: ``"auto"`` (compiled numba kernels on CPU when numba is installed, else
            torch), ``"numba"`` or ``"torch"``. Both give identical results.

    ``sample(indptr, indices, rows, node_keys, fanout, key, replace=False, weights=None,
    cum_weights=None, return_edges=False)`` has the signature of :func:`sample_from_csc` in
    both backends.
    """

    def __init__(self, num_nodes: int, device: torch.device | str = "cpu", backend: str = "auto",
                 held: tuple[int, int] | None = None) -> None:
        from gnnscale.samplers import cpu_kernels, labor_kernels, relabel_kernels

        if backend not in ("auto", "numba", "torch"):
            raise ValueError(f"backend must be 'auto', 'numba' or 'torch', found {backend!r}")
        on_cpu = torch.device(device).type == "cpu"
        if backend == "numba" and not (cpu_kernels.HAVE_NUMBA and on_cpu):
            raise RuntimeError("the numba backend needs numba installed and the graph on the CPU")
        self.name = "numba" if (backend == "numba" or (backend == "auto" and cpu_kernels.HAVE_NUMBA and on_cpu)) else "torch"
        if self.name == "numba":
            cpu_kernels.match_torch_threads()
            self.sample = labor_kernels.sample_from_csc  # cpu_kernels' draws, and LABOR's
            self.relabel = relabel_kernels.Relabeler(*(held or (0, int(num_nodes))))
            # edge attributes beside the neighbor ids (uniform draws): cpu_kernels.pack_edges
            self.pack_edges, self.sample_packed = cpu_kernels.pack_edges, cpu_kernels.sample_packed
        else:
            self.sample = sample_from_csc
            self.relabel = relabel
            self.pack_edges = self.sample_packed = None

    def warmup(self) -> None:
        """Load (or compile) the compiled kernels now, not inside the first timed step."""
        if self.name != "numba":
            return
        from gnnscale.samplers import cpu_kernels, relabel_kernels

        indptr = torch.tensor([0, 2, 3], dtype=torch.int64)
        indices = torch.tensor([1, 0, 0], dtype=torch.int64)
        rows = torch.tensor([0, 1], dtype=torch.int64)
        self.sample(indptr, indices, rows, rows, 1, 7)
        if cpu_kernels.parallel_enabled():  # never start a thread pool a single-threaded worker won't use
            cpu_kernels._sample_parallel(indptr.numpy(), indices.numpy(), rows.numpy(), rows.numpy(),
                                         torch.tensor([7]).numpy(), 1, rows.numpy().copy(), False)
        relabel_kernels.Relabeler(0, 1)(rows[:1], rows)
