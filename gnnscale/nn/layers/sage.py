"""GraphSAGE (mean): BlockSAGEConv as a CSR product, or PyG's SAGEConv for its other options."""
from __future__ import annotations

from typing import Optional

import torch.nn.functional as F
from torch import Tensor, nn

from gnnscale.nn.layers.contract import construct, split_input
from gnnscale.nn.layers.registry import register
from gnnscale.nn.sparse_ops import BlockAdjacency, block_matmul


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
        x_src, x_dst = split_input(x, size)
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



_SAGE = ("GraphSAGE, mean aggregation as a CSR product, linear map first when it narrows (BlockSAGEConv; "
         "equal to torch_geometric.nn.SAGEConv, which other --layer-kwargs select)")


@register("sage", _SAGE)
def _sage(spec, in_dim, out_dim, *, index, num_layers, **kwargs):
    if set(kwargs) <= {"bias"} and kwargs.get("aggr", "mean") == "mean":
        return construct(spec, "BlockSAGEConv", BlockSAGEConv, in_dim, out_dim, **kwargs)
    return _sage_pyg(spec, in_dim, out_dim, index=index, num_layers=num_layers, **kwargs)


@register("sage-pyg", "GraphSAGE as torch_geometric.nn.SAGEConv (scatter-based; any SAGEConv option)")
def _sage_pyg(spec, in_dim, out_dim, *, index, num_layers, **kwargs):
    from torch_geometric.nn import SAGEConv  # PyG's options (aggr, normalize, project, ...) need PyG's layer

    return construct(spec, "SAGEConv", SAGEConv, in_dim, out_dim, **kwargs)
