"""GAT: attention softmax and multi-head aggregation on the block's CSR, or PyG's GATConv."""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnscale.nn.layers.contract import LayerError, construct, split_input
from gnnscale.nn.layers.registry import register
from gnnscale.nn.sparse_ops import BlockAdjacency, add_self_loops, block_matmul_heads, edge_softmax

#: GATConv options BlockGATConv takes too (dropout only as 0.0): with others, "gat" builds GATConv.
_BLOCK_GAT_OPTIONS = frozenset({"negative_slope", "add_self_loops", "bias", "dropout"})


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
        x_src, x_dst = split_input(x, size)
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



_GAT = ("GAT, attention and aggregation on the block's CSR (BlockGATConv; equal to torch_geometric.nn.GATConv, "
        "which attention dropout, other GATConv --layer-kwargs or edge features select); heads=4, hidden layers "
        "concatenate heads, the last averages them")


@register("gat", _GAT, edges=True)
def _gat(spec, in_dim, out_dim, *, index, num_layers, **kwargs):
    return _build_gat(spec, "gat", in_dim, out_dim, index, num_layers, **kwargs)


@register("gat-pyg", "GAT as torch_geometric.nn.GATConv (scatter-based; any GATConv option; edge features in "
          "the attention); heads as gat", edges=True)
def _gat_pyg(spec, in_dim, out_dim, *, index, num_layers, **kwargs):
    return _build_gat(spec, "gat-pyg", in_dim, out_dim, index, num_layers, **kwargs)


def _build_gat(spec, name, in_dim, out_dim, index, num_layers, **kwargs):
    last = index == num_layers - 1
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
        return construct(spec, what, cls, in_dim, out_dim, heads=heads, concat=False, **kwargs)
    if out_dim % heads != 0:
        raise LayerError(
            f"layer {name!r} (hidden layer {index}): out_dim={out_dim} is not divisible by heads={heads}; hidden "
            f"GAT layers concatenate heads of out_dim // heads features each; choose a hidden size that is a "
            f"multiple of {heads} (e.g. {(out_dim // heads + 1) * heads}) or change heads"
        )
    return construct(spec, what, cls, in_dim, out_dim // heads, heads=heads, concat=True, **kwargs)
