"""GCN: symmetric normalization on a block (its own degrees, or the graph's), self loops as CSR entries."""
from __future__ import annotations

import weakref
from typing import Optional

import torch
from torch import Tensor, nn

from gnnscale.nn.layers.contract import construct, split_input
from gnnscale.nn.layers.registry import register
from gnnscale.nn.sparse_ops import BlockAdjacency, add_self_loops, block_matmul


def block_gcn_norm(edge_index: Tensor, num_src: int, num_dst: int, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """Symmetric GCN normalization on a bipartite block, with one self loop per destination.

    The self loop of destination ``i`` comes from source ``i`` (the same node). Degrees
    count that self loop: ``deg_dst(v)`` = in-edges of ``v`` in the block + 1, and
    ``deg_src(u)`` = out-edges of ``u`` in the block + (1 if ``u < D`` else 0). An edge
    that is already a self loop (``u == v``) is kept and a self loop is still added, so
    it counts twice (PyG's ``gcn_norm`` would keep only one); blocks hold no self-loop
    edge unless the graph has one.

    Args:
        edge_index: int64 [2, M], row 0 in 0..S-1, row 1 in 0..D-1.
        num_src: S. num_dst: D (D <= S).
        dtype: dtype of the returned weights.

    Returns:
        ``(edge_norm, self_norm)``: ``edge_norm`` [M] = 1/sqrt(deg_src(u) deg_dst(v)) per
        edge, ``self_norm`` [D] = 1/sqrt(deg_src(i) deg_dst(i)) for the self loop of ``i``.
    """
    src, dst = edge_index[0], edge_index[1]
    deg_dst = torch.bincount(dst, minlength=num_dst).to(dtype) + 1.0
    deg_src = torch.bincount(src, minlength=num_src).to(dtype)
    deg_src[:num_dst] += 1.0
    # Sources with no out-edge and no self loop (u >= D, unused) have degree 0: weight 0.
    inv_src = deg_src.pow(-0.5).masked_fill_(deg_src == 0, 0.0)
    inv_dst = deg_dst.pow(-0.5)
    edge_norm = inv_src[src] * inv_dst[dst]
    self_norm = inv_src[:num_dst] * inv_dst
    return edge_norm, self_norm


def graph_gcn_norm(edge_index: Tensor, deg: Tensor, num_dst: int, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """GCN normalization with the nodes' degrees in the whole graph, for sampled blocks.

    With ``d`` the in-degree in the graph and ``k_v`` the in-edges ``v`` has in the block,
    an edge u -> v weighs ``(d_v / k_v) / sqrt((d_u + 1)(d_v + 1))`` and the self loop of
    ``v`` weighs ``1 / (d_v + 1)``: an unbiased estimate of the full-graph GCN aggregation
    under uniform neighbor sampling, and exactly it when the block holds every in-edge
    (full neighborhoods), whatever else the block holds.

    Args:
        edge_index: int64 [2, M]. deg: [S] in-degree of each source in the graph (the
            destinations are the first D sources). num_dst: D.

    Returns:
        ``(edge_norm [M], self_norm [D])``.
    """
    src, dst = edge_index[0], edge_index[1]
    d = deg.to(dtype)
    inv = (d + 1.0).pow(-0.5)
    k = torch.bincount(dst, minlength=num_dst).to(dtype).clamp_(min=1.0)
    scale = d[:num_dst] / k
    edge_norm = inv[src] * inv[dst] * scale[dst]
    self_norm = inv[:num_dst] * inv[:num_dst]
    return edge_norm, self_norm


# gcn_adjacency's last result per edge_index, reused while called again with the same tensors
# (identities checked through weak references, so a recycled id() never hits): a block used
# again (every layer of full-graph training, every chunk of chunk pipelining at every step) is
# normalized once. One entry per live edge_index at most; it goes when the edge_index is freed.
_ADJACENCY: dict = {}


def _cached_adjacency(edge_index: Tensor, num_src: int, num_dst: int, deg: Optional[Tensor]):
    hit = _ADJACENCY.get(id(edge_index))
    if hit is not None and hit[0]() is edge_index and hit[1] == (int(num_src), int(num_dst)) and \
            (hit[2] is None if deg is None else (hit[2] is not None and hit[2]() is deg)):
        return hit[3]
    return None


def _remember_adjacency(edge_index: Tensor, num_src: int, num_dst: int, deg: Optional[Tensor], adj) -> None:
    key = id(edge_index)
    fresh = key not in _ADJACENCY or _ADJACENCY[key][0]() is not edge_index
    _ADJACENCY[key] = (weakref.ref(edge_index), (int(num_src), int(num_dst)),
                       None if deg is None else weakref.ref(deg), adj)
    if fresh:
        weakref.finalize(edge_index, _forget_adjacency, key)


def _forget_adjacency(key: int) -> None:
    hit = _ADJACENCY.get(key)
    if hit is not None and hit[0]() is None:  # its edge_index is gone (not a newer tensor's entry)
        _ADJACENCY.pop(key, None)


def gcn_adjacency(edge_index: Tensor, num_src: int, num_dst: int, deg: Optional[Tensor] = None) -> BlockAdjacency:
    """The block's GCN propagation matrix ``P`` [D, S] with its self loops, as a :class:`BlockAdjacency`.

    ``(P h)[v] = self_norm[v] h[v] + sum_{u -> v} edge_norm(u, v) h[u]``: the block's M edges
    with the weights ``edge_norm`` plus one edge ``i -> i`` per destination weighing
    ``self_norm[i]`` (an edge that already is a self loop stays and adds to it), built without
    a sort when the edges are grouped by destination (:func:`gnnscale.sparse_ops.add_self_loops`).

    Args:
        edge_index: int64 [2, M]. num_src: S. num_dst: D.
        deg: optional [S] in-degrees of the sources in the whole graph: then
            :func:`graph_gcn_norm`, else :func:`block_gcn_norm` (degrees within the block).

    Returns:
        the adjacency, float32 weights, M + D entries.
    """
    adj = _cached_adjacency(edge_index, num_src, num_dst, deg)
    if adj is not None:
        return adj
    if deg is not None:
        edge_norm, self_norm = graph_gcn_norm(edge_index, deg, num_dst)
    else:
        edge_norm, self_norm = block_gcn_norm(edge_index, num_src, num_dst)
    looped, weight = add_self_loops(edge_index, num_dst, edge_norm, self_norm)
    adj = BlockAdjacency(looped, num_src, num_dst, weight=weight)
    _remember_adjacency(edge_index, num_src, num_dst, deg, adj)
    return adj



class BlockGCNConv(nn.Module):
    """GCN layer (Kipf & Welling) normalized on a bipartite sampled block.

    ``out[v] = b + W^T * sum_{u in N_block(v) + {v}} x_src[u] / sqrt(deg_src(u) deg_dst(v))``
    with the degrees of :func:`block_gcn_norm` (self loops included). On a block that
    holds every node as both source and destination (S == D == N, all edges) it equals
    ``torch_geometric.nn.GCNConv`` on the whole graph for an undirected graph (PyG
    uses in-degrees at both ends, equal to out-degrees there).

    The aggregation is a sparse [D, S] matrix (the block's edges plus one self loop per
    destination, weighted by the normalization: :func:`gcn_adjacency`) times the features,
    :func:`gnnscale.sparse_ops.block_matmul`: a compiled CSR product with no per-edge
    message tensor, forward or backward. The linear map is applied before the aggregation
    when ``out_dim < in_dim`` (the product then moves ``out_dim`` floats per edge instead of
    ``in_dim``) and after it otherwise; both orders give the same result since the
    aggregation is linear.

    Parameters mirror ``GCNConv`` (``lin.weight`` [out, in], ``bias`` [out]) so that a
    ``GCNConv`` state dict loads as is.

    Degrees: ``needs_degree = True`` tells the engine to pass ``deg`` (the sources'
    in-degrees in the whole graph); the normalization is then :func:`graph_gcn_norm`,
    which on full neighborhoods equals GCN on the whole graph for any block. Without
    ``deg`` it falls back to the degrees within the block (:func:`block_gcn_norm`).

    Args:
        in_dim: input feature size. out_dim: output feature size. bias: add a learnt bias.
    """

    needs_x0 = False
    needs_degree = True

    def __init__(self, in_dim: int, out_dim: int, bias: bool = True) -> None:
        super().__init__()
        self.in_dim = in_dim
        self.out_dim = out_dim
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.empty(out_dim)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weight, zero bias (as ``GCNConv``)."""
        nn.init.xavier_uniform_(self.lin.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(
        self, x: Tensor | tuple[Tensor, Tensor], edge_index: Tensor, size: Optional[tuple[int, int]] = None,
        deg: Optional[Tensor] = None,
    ) -> Tensor:
        """Args:
            x: ``(x_src, x_dst)``: float32 [S, in_dim], [D, in_dim] (``x_dst`` only gives
                D; the self loop of ``i`` reads ``x_src[i]``), or one tensor [N, in_dim]
                for S == D == N.
            edge_index: int64 [2, M] (row 0: sources, row 1: destinations).
            size: optional ``(S, D)``.
            deg: optional [S] in-degrees of the sources in the whole graph.

        Returns:
            float32 [D, out_dim].
        """
        x_src, x_dst = split_input(x, size)
        adj = gcn_adjacency(edge_index, x_src.size(0), x_dst.size(0), deg)
        if self.out_dim < self.in_dim:
            out = block_matmul(adj, self.lin(x_src))
        else:
            out = self.lin(block_matmul(adj, x_src))
        if self.bias is not None:
            out = out + self.bias
        return out

    def extra_repr(self) -> str:
        return f"{self.in_dim}, {self.out_dim}, bias={self.bias is not None}"



@register("gcn", "GCN with symmetric normalization computed on the sampled block (BlockGCNConv)")
def _gcn(spec, in_dim, out_dim, *, index, num_layers, **kwargs):
    return construct(spec, "BlockGCNConv", BlockGCNConv, in_dim, out_dim, **kwargs)
