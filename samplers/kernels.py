"""Vectorized sampling kernels over a CSC adjacency (no Python loop over nodes or edges).

Loops run over the fanout (a handful of draws), never over nodes or edges.
"""
from __future__ import annotations

import torch

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


def sample_from_csc(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    local_dst: torch.Tensor,
    node_keys: torch.Tensor,
    fanout: int,
    key: int | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample in-neighbors of ``local_dst`` from a CSC.

    Args:
        indptr: int64 [n_local + 1]; indices: int64 [E] source ids (global).
        local_dst: int64 [n] rows of the CSC to sample.
        node_keys: int64 [n] the same nodes' identities in the random stream (their original
            ids), so the draw does not depend on which worker holds the node or its relabeling.
        fanout: neighbors per node, -1 for all.
        key: int64 stream key (seed, epoch, step, requesting rank, hop), a Python int or an
            int64 [n] tensor (one key per node, when serving several requesters at once).

    Returns:
        counts: int64 [n]; nbrs: int64 [counts.sum()] global source ids grouped by node.
    """
    start = indptr[local_dst]
    deg = indptr[local_dst + 1] - start
    h = node_hash(key, node_keys) if fanout >= 0 else node_keys
    counts, pos = sample_positions(deg, fanout, h)
    edge = torch.repeat_interleave(start, counts, output_size=pos.numel()) + pos
    return counts, indices[edge]


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
        num_nodes: size of the global id space (the compiled relabeler's table).
        device: where the graph lives; CUDA tensors always use the torch kernels.
        backend: ``"auto"`` (compiled numba kernels on CPU when numba is installed, else
            torch), ``"numba"`` or ``"torch"``. Both give identical results.
    """

    def __init__(self, num_nodes: int, device: torch.device | str = "cpu", backend: str = "auto") -> None:
        from gnnscale.samplers import cpu_kernels

        if backend not in ("auto", "numba", "torch"):
            raise ValueError(f"backend must be 'auto', 'numba' or 'torch', found {backend!r}")
        on_cpu = torch.device(device).type == "cpu"
        if backend == "numba" and not (cpu_kernels.HAVE_NUMBA and on_cpu):
            raise RuntimeError("the numba backend needs numba installed and the graph on the CPU")
        self.name = "numba" if (backend == "numba" or (backend == "auto" and cpu_kernels.HAVE_NUMBA and on_cpu)) else "torch"
        if self.name == "numba":
            cpu_kernels.match_torch_threads()
            self.sample = cpu_kernels.sample_from_csc
            self.relabel = cpu_kernels.Relabeler(num_nodes)
        else:
            self.sample = sample_from_csc
            self.relabel = relabel
