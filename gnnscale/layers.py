"""Message-passing layers for sampled bipartite blocks, and how to pick one by name.

Blocks
------
A block has S source nodes and D destination nodes; the destinations are the first
D sources (``x_dst == x_src[:D]``). ``edge_index`` is int64 [2, M]: row 0 indexes
sources (0..S-1), row 1 indexes destinations (0..D-1); messages flow row 0 -> row 1
(PyG's ``source_to_target``). A block may hold a sampled subset of a node's in-edges
or its full neighborhood. It holds no self-loop edge unless the graph has one.

The layer contract
------------------
A layer is any ``nn.Module`` callable as::

    layer((x_src, x_dst), edge_index) -> Tensor[D, out_dim]

with ``x_src`` float32 [S, in_dim] and ``x_dst`` float32 [D, in_dim]. Every
torch_geometric conv that accepts a bipartite ``(x_src, x_dst)`` tuple follows it as
is (``SAGEConv``, ``GATConv``, ``GINConv``, ``GraphConv`` ...). A layer that needs the
initial representation (GCNII) sets the class attribute ``needs_x0 = True`` and is
called as ``layer((x_src, x_dst), edge_index, x0=x0_dst)`` with ``x0_dst`` float32
[D, dim]. The layers of this module also take an optional ``size=(S, D)`` keyword
(as the PyG convs do), so callers may pass it or not.

Picking a layer
---------------
:func:`build_conv` takes a *spec*:

* a zoo name (see :data:`ZOO`): ``sage``, ``sage-pyg``, ``gcn``, ``gat``, ``gat-pyg``, ``gin``,
  ``gcnii``. ``sage``, ``gcn``, ``gat`` and ``gcnii`` are this module's CSR layers
  (:class:`BlockSAGEConv`, :class:`BlockGCNConv`, :class:`BlockGATConv`,
  :class:`BlockGCN2Conv`); ``sage`` and ``gat`` equal PyG's ``SAGEConv`` / ``GATConv`` and
  build those instead (as ``sage-pyg`` / ``gat-pyg`` always do) when given an option only
  PyG's layer has;
* an import path ``"package.module:ClassName"``: the class is built as
  ``ClassName(in_dim, out_dim, **kwargs)`` and probed once by :func:`check_layer`;
* ``"dgl:ClassName"``: ``dgl.nn.ClassName(in_dim, out_dim, **kwargs)`` wrapped in
  :class:`DGLLayerAdapter` (DGL is optional: ``pip install 'gnnscale[dgl]'``).

Every bad spec raises :class:`LayerError` saying what was expected, what was found
and how to fix it.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import math
import weakref
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnscale.errors import GnnscaleError
from gnnscale.sparse_ops import BlockAdjacency, add_self_loops, block_matmul, block_matmul_heads, edge_softmax

__all__ = [
    "LayerError",
    "ZOO",
    "SPEC_HELP",
    "BlockSAGEConv",
    "BlockGCNConv",
    "BlockGCN2Conv",
    "BlockGATConv",
    "DGLLayerAdapter",
    "build_conv",
    "load_layer_class",
    "check_layer",
    "block_gcn_norm",
    "graph_gcn_norm",
    "gcn_adjacency",
]


class LayerError(GnnscaleError):
    """A layer spec is unknown, cannot be imported or built, or breaks the layer contract."""


#: Zoo names accepted by :func:`build_conv`, with a one-line description (for ``--help``).
ZOO: dict[str, str] = {
    "sage": "GraphSAGE, mean aggregation as a CSR product, linear map first when it narrows (BlockSAGEConv; "
    "equal to torch_geometric.nn.SAGEConv, which other --layer-kwargs select)",
    "sage-pyg": "GraphSAGE as torch_geometric.nn.SAGEConv (scatter-based; any SAGEConv option)",
    "gcn": "GCN with symmetric normalization computed on the sampled block (BlockGCNConv)",
    "gat": "GAT, attention and aggregation on the block's CSR (BlockGATConv; equal to torch_geometric.nn.GATConv, "
    "which attention dropout or other GATConv --layer-kwargs select); heads=4, hidden layers concatenate heads, "
    "the last averages them",
    "gat-pyg": "GAT as torch_geometric.nn.GATConv (scatter-based; any GATConv option); heads as gat",
    "gin": "GIN with a 2-layer MLP and trainable eps (torch_geometric.nn.GINConv)",
    "gcnii": "GCNII: initial residual + identity mapping (BlockGCN2Conv); needs in_dim == out_dim; alpha=0.1, theta=0.5",
}

#: How a layer spec may be written (for ``--help``).
SPEC_HELP: str = (
    "a zoo name (" + ", ".join(ZOO) + "), an import path 'package.module:ClassName' "
    "(built as ClassName(in_dim, out_dim, **kwargs)), or 'dgl:ClassName' (dgl.nn.ClassName, needs DGL)"
)

#: GATConv options BlockGATConv takes too (dropout only as 0.0): with others, "gat" builds GATConv.
_BLOCK_GAT_OPTIONS = frozenset({"negative_slope", "add_self_loops", "bias", "dropout"})

_SIGNATURE = "forward(self, x: tuple[Tensor, Tensor], edge_index: Tensor) -> Tensor"
_DGL_MISSING = "DGL is not installed; pip install 'gnnscale[dgl]' (DGL 2.1 needs torch <= 2.2.1)"


# --------------------------------------------------------------------------- helpers


def _split_input(x: Tensor | tuple[Tensor, Tensor], size: Optional[tuple[int, int]]) -> tuple[Tensor, Tensor]:
    """``(x_src, x_dst)`` from a tuple or a single tensor (then S == D, or D = size[1])."""
    if isinstance(x, Tensor):
        x_src = x
        num_dst = x.size(0) if size is None else int(size[1])
        x_dst = x[:num_dst]
    else:
        x_src, x_dst = x
        if x_dst is None:
            if size is None:
                raise LayerError("x_dst is None and no size=(S, D) was given: cannot tell the number of destinations")
            x_dst = x_src[: int(size[1])]
    if x_src.dim() != 2 or x_dst.dim() != 2:
        raise LayerError(
            f"expected x_src [S, F] and x_dst [D, F] (2-D), found shapes {tuple(x_src.shape)} and {tuple(x_dst.shape)}"
        )
    if x_dst.size(0) > x_src.size(0):
        raise LayerError(
            f"a block's destinations are its first D sources, so D <= S; found S={x_src.size(0)}, D={x_dst.size(0)}"
        )
    if size is not None and (int(size[0]), int(size[1])) != (x_src.size(0), x_dst.size(0)):
        raise LayerError(f"size={tuple(size)} does not match x_src/x_dst with S={x_src.size(0)}, D={x_dst.size(0)}")
    return x_src, x_dst


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


# --------------------------------------------------------------------------- our layers


class BlockSAGEConv(nn.Module):
    """GraphSAGE with mean aggregation on a bipartite block, as a CSR product.

    ``out[v] = lin_l(mean_{u -> v} x_src[u]) + lin_r(x_dst[v])``, the same function and the
    same parameters (``lin_l.weight`` [out, in] with ``lin_l.bias``, ``lin_r.weight`` without
    bias) as ``torch_geometric.nn.SAGEConv(in_dim, out_dim)``, so its state dict loads as is.
    When ``out_dim < in_dim`` the neighbor map ``lin_l`` is applied to the S source rows first
    and the narrower rows are aggregated (as DGL's ``SAGEConv``); otherwise the aggregation
    comes first. The aggregation is :func:`gnnscale.sparse_ops.block_matmul` (no per-edge
    message tensor, forward or backward).

    Args:
        in_dim: input feature size. out_dim: output feature size. bias: a bias in ``lin_l``.
    """

    needs_x0 = False

    def __init__(self, in_dim: int, out_dim: int, bias: bool = True) -> None:
        super().__init__()
        self.in_dim = in_dim
        self.out_dim = out_dim
        self.lin_l = nn.Linear(in_dim, out_dim, bias=bias)
        self.lin_r = nn.Linear(in_dim, out_dim, bias=False)

    def reset_parameters(self) -> None:
        self.lin_l.reset_parameters()
        self.lin_r.reset_parameters()

    def forward(
        self, x: Tensor | tuple[Tensor, Tensor], edge_index: Tensor, size: Optional[tuple[int, int]] = None,
        adj: Optional[BlockAdjacency] = None,
    ) -> Tensor:
        """Args:
            x: ``(x_src, x_dst)`` float32 [S, in_dim], [D, in_dim], or one tensor [N, in_dim].
            edge_index: int64 [2, M] (row 0: sources, row 1: destinations).
            size: optional ``(S, D)``.
            adj: the block's :class:`BlockAdjacency` when the caller built it already.

        Returns:
            float32 [D, out_dim].
        """
        x_src, x_dst = _split_input(x, size)
        if adj is None:
            adj = BlockAdjacency(edge_index, x_src.size(0), x_dst.size(0))
        if self.out_dim < self.in_dim:
            nbr = block_matmul(adj, F.linear(x_src, self.lin_l.weight))
            if self.lin_l.bias is not None:
                nbr = nbr + self.lin_l.bias
        else:
            nbr = self.lin_l(block_matmul(adj, x_src))
        return nbr + self.lin_r(x_dst)

    def extra_repr(self) -> str:
        return f"{self.in_dim}, {self.out_dim}, aggr=mean"


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
        x_src, x_dst = _split_input(x, size)
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


class BlockGCN2Conv(nn.Module):
    """GCNII layer (Chen et al., 2020) normalized on a bipartite sampled block.

    Same math as ``torch_geometric.nn.GCN2Conv(channels, alpha, theta, layer,
    shared_weights)`` with ``normalize=True``, but the propagation ``P x`` is the block's
    :func:`gcn_adjacency` (a CSR product; :func:`graph_gcn_norm` with ``deg``, else
    :func:`block_gcn_norm`, self loops included)::

        h   = (1 - alpha) * P x_src + alpha * x0
        out = (1 - beta) * h + beta * h @ W1                   (shared_weights=True)
        out = (1 - beta) * ((1 - alpha) P x_src) + beta * ((1 - alpha) P x_src) @ W1
              + (1 - beta) * alpha x0 + beta * (alpha x0) @ W2  (shared_weights=False)

    with ``beta = log(theta / layer + 1)``. Called as ``layer((x_src, x_dst),
    edge_index, x0=x0_dst)`` (``needs_x0 = True``).

    Args:
        channels: feature size (input == output). alpha: initial-residual weight.
        theta: identity-mapping strength. layer: 1-based layer position (for beta).
        shared_weights: one weight for both terms (True) or a separate ``weight2``.
    """

    needs_x0 = True
    needs_degree = True

    def __init__(
        self, channels: int, alpha: float = 0.1, theta: float = 0.5, layer: int = 1, shared_weights: bool = True
    ) -> None:
        super().__init__()
        if layer < 1:
            raise LayerError(f"BlockGCN2Conv: layer is 1-based, found layer={layer}")
        self.channels = channels
        self.alpha = float(alpha)
        self.theta = float(theta)
        self.layer = int(layer)
        self.beta = math.log(theta / layer + 1.0)
        self.weight1 = nn.Parameter(torch.empty(channels, channels))
        self.weight2 = None if shared_weights else nn.Parameter(torch.empty(channels, channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weights (as ``GCN2Conv``)."""
        nn.init.xavier_uniform_(self.weight1)
        if self.weight2 is not None:
            nn.init.xavier_uniform_(self.weight2)

    def forward(
        self,
        x: Tensor | tuple[Tensor, Tensor],
        edge_index: Tensor,
        x0: Optional[Tensor] = None,
        size: Optional[tuple[int, int]] = None,
        deg: Optional[Tensor] = None,
    ) -> Tensor:
        """Args:
            x: ``(x_src, x_dst)``: float32 [S, channels], [D, channels], or one tensor.
            edge_index: int64 [2, M].
            x0: float32 [D, channels], the initial representation of the destinations
                (a longer tensor is cut to its first D rows, as ``GCN2Conv`` does).
            size: optional ``(S, D)``.
            deg: optional [S] in-degrees of the sources in the whole graph.

        Returns:
            float32 [D, channels].
        """
        if x0 is None:
            raise LayerError(
                "BlockGCN2Conv needs the initial representation: call layer((x_src, x_dst), edge_index, x0=x0_dst)"
            )
        x_src, x_dst = _split_input(x, size)
        num_dst = x_dst.size(0)
        if x0.dim() != 2 or x0.size(0) < num_dst or x0.size(1) != self.channels:
            raise LayerError(
                f"BlockGCN2Conv: expected x0 of shape [D={num_dst}, {self.channels}], found {tuple(x0.shape)}"
            )
        h = block_matmul(gcn_adjacency(edge_index, x_src.size(0), num_dst, deg), x_src) * (1.0 - self.alpha)
        h0 = x0[:num_dst] * self.alpha
        if self.weight2 is None:
            h = h + h0
            return torch.addmm(h, h, self.weight1, beta=1.0 - self.beta, alpha=self.beta)
        out = torch.addmm(h, h, self.weight1, beta=1.0 - self.beta, alpha=self.beta)
        return out + torch.addmm(h0, h0, self.weight2, beta=1.0 - self.beta, alpha=self.beta)

    def extra_repr(self) -> str:
        return f"{self.channels}, alpha={self.alpha}, theta={self.theta}, layer={self.layer}, shared_weights={self.weight2 is None}"


class BlockGATConv(nn.Module):
    """GAT (Velickovic et al., 2018) on a bipartite block, attention and aggregation on the CSR.

    For destination ``v`` with in-edges ``u -> v`` in the block plus one self loop (source ``v``,
    the same node) and head ``k`` of ``H``::

        xw       = x_src @ lin.weight^T, viewed [S, H, C]
        a_src[u, k] = <xw[u, k], att_src[k]>,  a_dst[v, k] = <(x_dst @ lin.weight^T)[v, k], att_dst[k]>
        alpha[u -> v, k] = softmax over v's edges of leaky_relu(a_src[u, k] + a_dst[v, k], negative_slope)
        out[v, k] = sum_{u -> v} alpha[u -> v, k] xw[u, k]
        out = concat over heads [D, H*C] (concat=True) or mean over heads [D, C]; + bias

    This is ``torch_geometric.nn.GATConv(in_dim, out_dim, heads, concat, negative_slope,
    dropout=0.0, add_self_loops, bias=bias)`` applied to ``((x_src, x_dst), edge_index)``, with
    the same parameters (``lin.weight`` [H*C, in_dim], ``att_src`` and ``att_dst`` [1, H, C],
    ``bias`` [H*C] or [C]), so a ``GATConv`` state dict loads as is. As there, an edge that
    already is a self loop (``u == v``) is dropped before one loop per destination is added
    (with ``add_self_loops``); without loops a destination with no in-edge gets ``bias``.

    How: the destinations' logits come from ``x_dst`` times ``lin.weight`` folded with
    ``att_dst`` ([in_dim, H]; no [D, H*C] projection), the sources' from ``x_src`` the same way
    when ``in_dim <= H*C`` (else from ``xw``); scores and the edge softmax
    (:func:`gnnscale.sparse_ops.edge_softmax`) are [M + D, H] tensors; the aggregation is
    :func:`gnnscale.sparse_ops.block_matmul_heads`, compiled forward and backward with no
    [M, H, C] per-edge message tensor.

    Args:
        in_dim: input feature size. out_dim: features per head (C).
        heads: H. concat: concatenate the heads (True) or average them.
        negative_slope: of the leaky ReLU on the scores.
        dropout: attention dropout; only 0.0 (``build_conv("gat", ..., dropout=p)`` builds
            PyG's ``GATConv`` for p > 0).
        add_self_loops: add one self loop per destination. bias: add a learnt bias.
    """

    needs_x0 = False

    def __init__(
        self, in_dim: int, out_dim: int, heads: int = 1, concat: bool = True, negative_slope: float = 0.2,
        dropout: float = 0.0, add_self_loops: bool = True, bias: bool = True,
    ) -> None:
        super().__init__()
        if dropout != 0.0:
            raise LayerError(
                f"BlockGATConv: attention dropout is not implemented, expected dropout=0.0, found {dropout!r}; "
                "use the zoo name 'gat-pyg' (torch_geometric.nn.GATConv) or build_conv('gat', ..., dropout=p), "
                "which builds GATConv for p > 0"
            )
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise LayerError(f"BlockGATConv: heads must be a positive int, found {heads!r}")
        self.in_channels = in_dim
        self.out_channels = out_dim
        self.heads = heads
        self.concat = bool(concat)
        self.negative_slope = float(negative_slope)
        self.dropout = 0.0
        self.add_self_loops = bool(add_self_loops)
        self.lin = nn.Linear(in_dim, heads * out_dim, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_dim))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_dim))
        self.bias = nn.Parameter(torch.empty(heads * out_dim if concat else out_dim)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weight and attention vectors, zero bias (as ``GATConv``)."""
        nn.init.xavier_uniform_(self.lin.weight)
        for att in (self.att_src, self.att_dst):  # glorot over the last two dims: fan = H + C
            bound = math.sqrt(6.0 / (att.size(-2) + att.size(-1)))
            nn.init.uniform_(att, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def _folded(self, att: Tensor) -> Tensor:
        """[in_dim, H]: ``lin.weight`` of each head times its attention vector, so that
        ``x @ folded == ((x @ lin.weight^T).view(-1, H, C) * att).sum(-1)``."""
        w = self.lin.weight.view(self.heads, self.out_channels, self.in_channels)
        return torch.einsum("hci,hc->ih", w, att[0])

    def adjacency(self, edge_index: Tensor, num_src: int, num_dst: int) -> BlockAdjacency:
        """The attention's edges as a :class:`BlockAdjacency`: ``edge_index`` without its self
        loops plus one loop per destination (with ``add_self_loops``), else ``edge_index``."""
        if self.add_self_loops:
            keep = edge_index[0] != edge_index[1]
            if not bool(keep.all()):
                edge_index = edge_index[:, keep]
            edge_index, _ = add_self_loops(edge_index, num_dst)
        return BlockAdjacency(edge_index, num_src, num_dst)

    def forward(
        self, x: Tensor | tuple[Tensor, Tensor], edge_index: Tensor, size: Optional[tuple[int, int]] = None,
        adj: Optional[BlockAdjacency] = None,
    ) -> Tensor:
        """Args:
            x: ``(x_src, x_dst)`` float32 [S, in_dim], [D, in_dim] (``x_dst`` gives the
                destinations' logits; the self loop of ``i`` carries ``x_src[i]``'s features),
                or one tensor [N, in_dim] for S == D == N.
            edge_index: int64 [2, M] (row 0: sources, row 1: destinations).
            size: optional ``(S, D)``.
            adj: the layer's :meth:`adjacency` of this block when the caller built it already.

        Returns:
            float32 [D, heads * out_dim] (concat) or [D, out_dim].
        """
        x_src, x_dst = _split_input(x, size)
        num_src, num_dst = x_src.size(0), x_dst.size(0)
        heads, c = self.heads, self.out_channels
        if adj is None:
            adj = self.adjacency(edge_index, num_src, num_dst)
        xw = self.lin(x_src).view(num_src, heads, c)
        if self.in_channels <= heads * c:
            a_src = x_src @ self._folded(self.att_src)
        else:
            a_src = (xw * self.att_src).sum(-1)
        a_dst = x_dst @ self._folded(self.att_dst)
        scores = F.leaky_relu(a_src.index_select(0, adj.col) + a_dst.index_select(0, adj.row), self.negative_slope)
        out = block_matmul_heads(adj, xw, edge_softmax(adj, scores))
        out = out.reshape(num_dst, heads * c) if self.concat else out.mean(dim=1)
        if self.bias is not None:
            out = out + self.bias
        return out

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, heads={self.heads}, concat={self.concat}, "
                f"add_self_loops={self.add_self_loops}, bias={self.bias is not None}")


# --------------------------------------------------------------------------- DGL


def _import_dgl() -> Any:
    """``import dgl`` or raise :class:`LayerError` with the install hint."""
    try:
        import dgl  # noqa: PLC0415  (optional dependency, imported lazily)
        import dgl.nn  # noqa: F401,PLC0415
    except ImportError as exc:
        raise LayerError(f"{_DGL_MISSING} (import dgl failed: {exc})") from exc
    except Exception as exc:  # a broken install (wrong torch ABI, missing .so) fails with other errors
        raise LayerError(f"{_DGL_MISSING}; DGL is installed but does not load: {type(exc).__name__}: {exc}") from exc
    return dgl


class DGLLayerAdapter(nn.Module):
    """Makes a DGL block module (e.g. ``dgl.nn.SAGEConv``) follow the layer contract.

    ``forward((x_src, x_dst), edge_index)`` builds ``dgl.create_block((edge_index[0],
    edge_index[1]), num_src_nodes=S, num_dst_nodes=D)`` and returns
    ``module(block, (x_src, x_dst))``. DGL is imported lazily; without it the
    constructor raises :class:`LayerError`.

    Args:
        module: a DGL nn module called as ``module(block, (feat_src, feat_dst))``.
    """

    needs_x0 = False

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        _import_dgl()  # fail early, with the install hint
        self.module = module

    def forward(
        self, x: Tensor | tuple[Tensor, Tensor], edge_index: Tensor, size: Optional[tuple[int, int]] = None
    ) -> Tensor:
        """Args:
            x: ``(x_src, x_dst)`` float32 [S, F], [D, F]. edge_index: int64 [2, M].
            size: optional ``(S, D)``.

        Returns:
            what the DGL module returns, [D, out_dim] for the usual convs.
        """
        dgl = _import_dgl()  # cached in sys.modules after the first import
        x_src, x_dst = _split_input(x, size)
        block = dgl.create_block(
            (edge_index[0], edge_index[1]),
            num_src_nodes=x_src.size(0),
            num_dst_nodes=x_dst.size(0),
            device=x_src.device,
        )
        return self.module(block, (x_src, x_dst))


# --------------------------------------------------------------------------- loading and checking


def _describe(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}".removeprefix("builtins.")


def load_layer_class(path: str) -> type:
    """Import a layer class from ``"package.module:ClassName"``.

    ``ClassName`` may be dotted (``"pkg.mod:Outer.Inner"``).

    Args:
        path: the import path.

    Returns:
        the class, an ``nn.Module`` subclass.

    Raises:
        LayerError: no colon, module not importable, attribute missing, attribute not
            a class, or not an ``nn.Module`` subclass.
    """
    if not isinstance(path, str) or ":" not in path:
        raise LayerError(
            f"expected a layer import path 'package.module:ClassName', found {path!r} (no ':'); "
            f"write e.g. 'mypkg.layers:MyConv', or use a zoo name ({', '.join(ZOO)})"
        )
    mod_name, _, attr_path = path.partition(":")
    mod_name, attr_path = mod_name.strip(), attr_path.strip()
    if not mod_name or not attr_path:
        raise LayerError(
            f"expected a layer import path 'package.module:ClassName', found {path!r} "
            f"(empty {'module' if not mod_name else 'class'} part); write e.g. 'mypkg.layers:MyConv'"
        )
    try:
        module = importlib.import_module(mod_name)
    except ImportError as exc:
        raise LayerError(
            f"layer {path!r}: cannot import module {mod_name!r}: {type(exc).__name__}: {exc}; "
            "check the spelling, install the package, or put its folder on PYTHONPATH"
        ) from exc
    except Exception as exc:  # the module exists but fails while importing
        raise LayerError(
            f"layer {path!r}: importing module {mod_name!r} failed: {type(exc).__name__}: {exc}; fix the module"
        ) from exc

    obj: Any = module
    walked = mod_name
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("_")]
            modules = [n for n in names if inspect.isclass(getattr(obj, n, None)) and issubclass(getattr(obj, n), nn.Module)]
            close = difflib.get_close_matches(part, names, n=3)
            pool = modules or names
            shown = list(dict.fromkeys(difflib.get_close_matches(part, pool, n=5, cutoff=0.4) + pool))[:10]
            more = f" (of {len(pool)})" if len(pool) > len(shown) else ""
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise LayerError(
                f"layer {path!r}: {walked!r} has no attribute {part!r}{hint}; it has "
                f"{'nn.Module classes' if modules else 'names'}{more}: {', '.join(shown) or '(none)'}; "
                "fix the class name after the ':'"
            )
        obj = getattr(obj, part)
        walked = f"{walked}:{part}" if walked == mod_name else f"{walked}.{part}"

    if not inspect.isclass(obj):
        raise LayerError(
            f"layer {path!r}: expected a class (an nn.Module subclass), found a {_describe(obj)} ({obj!r:.60}); "
            "point the path at the layer class"
        )
    if not issubclass(obj, nn.Module):
        bases = ", ".join(b.__qualname__ for b in obj.__mro__[1:])
        raise LayerError(
            f"layer {path!r}: expected an nn.Module subclass, found class {obj.__qualname__} (bases: {bases}); "
            "a layer must derive from torch.nn.Module (e.g. torch_geometric.nn.MessagePassing)"
        )
    return obj


def check_layer(layer: nn.Module, in_dim: int, out_dim: int, spec: str) -> None:
    """Run ``layer`` once on a tiny probe block and check it follows the layer contract.

    The probe has S=4 sources, D=2 destinations and 3 edges, float32 features on the
    layer's device. The layer runs in eval mode under ``torch.no_grad``; the training
    mode of each submodule is restored afterwards. ``needs_x0`` layers also get
    ``x0`` float32 [D, out_dim].

    Args:
        layer: the layer. in_dim / out_dim: the sizes it was built for.
        spec: how the user named it (for messages).

    Raises:
        LayerError: the call raised (TypeError: wrong signature; anything else: the
            exception text), or the output is not a Tensor [D, out_dim].
    """
    param = next(iter(layer.parameters()), None)
    device = param.device if param is not None else torch.device("cpu")
    gen = torch.Generator().manual_seed(0)
    num_src, num_dst = 4, 2
    x_src = torch.randn(num_src, in_dim, generator=gen).to(device)
    x_dst = x_src[:num_dst]
    edge_index = torch.tensor([[2, 3, 1], [0, 1, 0]], dtype=torch.long, device=device)
    needs_x0 = bool(getattr(layer, "needs_x0", False))
    kwargs: dict[str, Tensor] = {}
    if needs_x0:
        kwargs["x0"] = torch.randn(num_dst, out_dim, generator=gen).to(device)
    call = "layer((x_src, x_dst), edge_index" + (", x0=x0_dst)" if needs_x0 else ")")
    expected = _SIGNATURE if not needs_x0 else _SIGNATURE.replace("edge_index: Tensor)", "edge_index: Tensor, x0: Tensor)")
    probe = f"probe block S={num_src}, D={num_dst}, 3 edges, in_dim={in_dim}"

    modes = [(m, m.training) for m in layer.modules()]
    layer.eval()
    try:
        with torch.no_grad():
            out = layer((x_src, x_dst), edge_index, **kwargs)
    except LayerError:
        raise
    except TypeError as exc:
        raise LayerError(
            f"layer {spec!r} ({type(layer).__qualname__}) cannot be called as {call}: TypeError: {exc}; "
            f"a layer must have {expected} returning [D, out_dim]"
        ) from exc
    except Exception as exc:
        raise LayerError(
            f"layer {spec!r} ({type(layer).__qualname__}) failed on a {probe}: {type(exc).__name__}: {exc}; "
            f"a layer must have {expected} and accept bipartite input (x_src [S, in_dim], x_dst [D, in_dim])"
        ) from exc
    finally:
        for module, training in modes:
            module.training = training

    if not isinstance(out, Tensor):
        raise LayerError(
            f"layer {spec!r} ({type(layer).__qualname__}) returned a {_describe(out)}, expected a Tensor "
            f"[D, out_dim]; {expected}"
        )
    if tuple(out.shape) != (num_dst, out_dim):
        raise LayerError(
            f"layer {spec!r} ({type(layer).__qualname__}) returned shape {tuple(out.shape)} on a {probe}, "
            f"expected [D, out_dim] = [{num_dst}, {out_dim}]; it must return one row per destination"
        )


# --------------------------------------------------------------------------- build_conv


def _construct(spec: str, what: str, factory: Any, *args: Any, **kwargs: Any) -> nn.Module:
    """Call ``factory(*args, **kwargs)``, turning a bad-argument TypeError into a LayerError."""
    try:
        return factory(*args, **kwargs)
    except LayerError:
        raise
    except TypeError as exc:
        raise LayerError(
            f"layer {spec!r}: could not build {what}({', '.join(map(repr, args))}"
            f"{', ' if args and kwargs else ''}{', '.join(f'{k}={v!r}' for k, v in kwargs.items())}): "
            f"TypeError: {exc}; check the layer options (an import-path class must take (in_dim, out_dim, **kwargs))"
        ) from exc


def build_conv(spec: str, in_dim: int, out_dim: int, *, index: int, num_layers: int, **kwargs: Any) -> nn.Module:
    """Build one message-passing layer that follows the layer contract.

    Args:
        spec: a zoo name (:data:`ZOO`), an import path ``"package.module:ClassName"``
            or ``"dgl:ClassName"``.
        in_dim: input feature size. out_dim: output feature size.
        index: 0-based position of the layer. num_layers: number of layers. GAT's
            last layer (``index == num_layers - 1``) averages its heads; GCNII's beta
            uses ``layer = index + 1``.
        **kwargs: layer options: ``heads`` (gat, gat-pyg; default 4), ``alpha``/``theta``/
            ``shared_weights`` (gcnii), ``train_eps`` (gin), any option of the
            underlying PyG conv; for an import path, passed as
            ``ClassName(in_dim, out_dim, **kwargs)``.

    Returns:
        the layer, called as ``layer((x_src, x_dst), edge_index)`` (plus ``x0=`` when
        its ``needs_x0`` is True) -> float32 [D, out_dim].

    Raises:
        LayerError: unknown spec, bad sizes or options, or a layer that breaks the contract.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise LayerError(f"expected a layer spec: {SPEC_HELP}; found {spec!r}")
    spec = spec.strip()
    for name, value in (("in_dim", in_dim), ("out_dim", out_dim), ("num_layers", num_layers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LayerError(f"layer {spec!r}: {name} must be a positive int, found {value!r}")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < num_layers:
        raise LayerError(f"layer {spec!r}: index must be in 0..{num_layers - 1} (num_layers={num_layers}), found {index!r}")
    last = index == num_layers - 1
    name = spec.lower()

    if name == "sage" and set(kwargs) <= {"bias"} and kwargs.get("aggr", "mean") == "mean":
        return _construct(spec, "BlockSAGEConv", BlockSAGEConv, in_dim, out_dim, **kwargs)
    if name in ("sage", "sage-pyg"):  # PyG's options (aggr, normalize, project, ...) need PyG's layer
        from torch_geometric.nn import SAGEConv

        return _construct(spec, "SAGEConv", SAGEConv, in_dim, out_dim, **kwargs)
    if name == "gcn":
        return _construct(spec, "BlockGCNConv", BlockGCNConv, in_dim, out_dim, **kwargs)
    if name in ("gat", "gat-pyg"):
        heads = kwargs.pop("heads", 4)
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise LayerError(f"layer {name!r}: heads must be a positive int, found {heads!r}")
        # Ours unless PyG's layer is asked for or needs to be (attention dropout, edge features, ...).
        ours = name == "gat" and set(kwargs) <= _BLOCK_GAT_OPTIONS and not kwargs.get("dropout", 0.0)
        if ours:
            cls, what = BlockGATConv, "BlockGATConv"
        else:
            from torch_geometric.nn import GATConv

            cls, what = GATConv, "GATConv"
        if last:
            return _construct(spec, what, cls, in_dim, out_dim, heads=heads, concat=False, **kwargs)
        if out_dim % heads != 0:
            raise LayerError(
                f"layer {name!r} (hidden layer {index}): out_dim={out_dim} is not divisible by heads={heads}; hidden "
                f"GAT layers concatenate heads of out_dim // heads features each; choose a hidden size that is a "
                f"multiple of {heads} (e.g. {(out_dim // heads + 1) * heads}) or change heads"
            )
        return _construct(spec, what, cls, in_dim, out_dim // heads, heads=heads, concat=True, **kwargs)
    if name == "gin":
        from torch_geometric.nn import GINConv

        kwargs.setdefault("train_eps", True)
        mlp = nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))
        return _construct(spec, "GINConv", GINConv, mlp, **kwargs)
    if name == "gcnii":
        if in_dim != out_dim:
            raise LayerError(
                f"layer 'gcnii' (layer {index}): in_dim ({in_dim}) must equal out_dim ({out_dim}); a GCNII layer keeps "
                "the feature size, so the GCNII model maps inputs to the hidden size with a linear layer first "
                "(and to the classes with one after)"
            )
        return _construct(spec, "BlockGCN2Conv", BlockGCN2Conv, in_dim, layer=index + 1, **kwargs)

    if name.startswith("dgl:"):
        cls_name = spec.split(":", 1)[1].strip()
        dgl = _import_dgl()
        cls = getattr(dgl.nn, cls_name, None)
        if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
            known = [n for n in dir(dgl.nn) if n.endswith("Conv")][:12]
            raise LayerError(f"layer {spec!r}: dgl.nn has no module class {cls_name!r}; it has: {', '.join(known)}, ...")
        if cls_name == "SAGEConv":
            kwargs.setdefault("aggregator_type", "mean")
        layer = DGLLayerAdapter(_construct(spec, f"dgl.nn.{cls_name}", cls, in_dim, out_dim, **kwargs))
        check_layer(layer, in_dim, out_dim, spec)
        return layer

    if ":" in spec:
        cls = load_layer_class(spec)
        layer = _construct(spec, cls.__qualname__, cls, in_dim, out_dim, **kwargs)
        check_layer(layer, in_dim, out_dim, spec)
        return layer

    close = difflib.get_close_matches(name, list(ZOO), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise LayerError(f"unknown layer {spec!r}{hint}; expected {SPEC_HELP}")
