"""GraphSAGE (mean): BlockSAGEConv as a CSR product, or PyG's SAGEConv for its other options."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnscale.nn.dropout import claim_relu_dropout, relu_dropout_backward_
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
    # forward reads x_src once, in one autograd node: a ReLU-dropout before it with no other
    # reader (the model's fused hidden layers) may leave its backward to that node
    reads_input_once = True

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
        if self.out_dim >= self.in_dim and _is_head(x_dst, x_src):
            x_src = x_src.contiguous()
            # x_src is read by this node only: it may apply the ReLU-dropout's backward that made x_src
            claim = claim_relu_dropout(x_src) if x_src.requires_grad and torch.is_grad_enabled() else None
            return _SageMean.apply(x_src, adj, x_dst.size(0), self.lin_l.weight, self.lin_l.bias, self.lin_r.weight,
                                   claim)
        if self.out_dim < self.in_dim:
            nbr = block_matmul(adj, F.linear(x_src, self.lin_l.weight))
            if self.lin_l.bias is not None:
                nbr = nbr + self.lin_l.bias
        else:
            nbr = self.lin_l(block_matmul(adj, x_src))
        return nbr + self.lin_r(x_dst)

    def extra_repr(self) -> str:
        return f"{self.in_dim}, {self.out_dim}, aggr=mean"



def _is_head(x_dst: Tensor, x_src: Tensor) -> bool:
    """Whether ``x_dst`` is ``x_src[:D]`` (a CPU float32 view of its first rows, in the same
    autograd history): the layer then reads those rows from ``x_src`` itself."""
    if x_src.device.type != "cpu" or x_src.dtype != torch.float32 or x_dst.dim() != 2 or x_src.dim() != 2:
        return False
    if (x_dst.data_ptr() != x_src.data_ptr() or x_dst.stride() != x_src.stride()
            or x_dst.shape[1] != x_src.shape[1] or x_dst.shape[0] > x_src.shape[0]):
        return False
    if x_dst.requires_grad != x_src.requires_grad:
        return False
    return not x_src.requires_grad or x_dst._base is (x_src if x_src._base is None else x_src._base)


class _SageMean(torch.autograd.Function):
    """``lin_l(A @ x_src) + lin_r(x_src[:D])`` (aggregation first) as one node of the autograd
    graph, in one product: the aggregation is written into the left half of a [D, 2F] buffer,
    ``x_src[:D]`` copied into its right half, and the forward is ``addmm(b_l, [agg | x_D],
    [W_l | W_r]^T)``; the backward ``g^T @ [agg | x_D]`` (both weight gradients, split),
    ``g.sum(0)``, and the input gradient ``A^T @ (g @ [W_l | W_r])[:, :F]`` with the right half
    added into its first D rows in place. The values are autograd's up to float summation
    order (the two products' sums are one sum over 2F here). Against two products and a sum
    of their outputs (autograd's graph, and this node before): no [D, out] temporary and no
    pass to add it, one product of twice the inner dimension; the forward products of layer 1
    on R-MAT 100k (D 23.6k, 128 -> 256, 1 thread) 58.6 -> 39.1 ms. Autograd's own graph would
    also slice ``x_src`` (a zero-filled [S, F] gradient, then a sum of two [S, F] gradients).

    ``relu_scale``: x_src came from a ReLU-dropout whose backward this node claimed
    (:func:`gnnscale.nn.dropout.claim_relu_dropout`): it is applied to the input gradient in
    the buffer the aggregation's backward writes, to rows D.. in that same pass over each row
    and to rows ..D once the self term's gradient is added to them (the same values as the
    ReLU-dropout's own backward, without its [S, F] output buffer or a pass of its own)."""

    @staticmethod
    def forward(ctx, x_src: Tensor, adj: BlockAdjacency, num_dst: int, w_l: Tensor, b_l: Tensor | None,
                w_r: Tensor, relu_scale=None) -> Tensor:  # type: ignore[override]
        f = x_src.shape[1]
        both = torch.empty(num_dst, 2 * f, dtype=x_src.dtype)  # [A @ x_src | x_src[:D]]
        adj.mm(x_src, out=both)
        both[:, f:].copy_(x_src[:num_dst])
        w = torch.cat([w_l, w_r], 1)  # [out, 2F]
        out = torch.addmm(b_l, both, w.t()) if b_l is not None else both.mm(w.t())
        ctx.adj, ctx.num_dst, ctx.relu_scale = adj, num_dst, relu_scale
        ctx.save_for_backward(x_src, both, w)
        return out

    @staticmethod
    def backward(ctx, g: Tensor):  # type: ignore[override]
        x_src, both, w = ctx.saved_tensors
        d, f = ctx.num_dst, x_src.shape[1]
        need_x, _, _, need_wl, need_bl, need_wr, _ = ctx.needs_input_grad
        grad_x = None
        if need_x:
            scale = ctx.relu_scale
            gx = g.mm(w)  # [D, 2F]: the aggregation's gradient | the self term's
            # rows d.. get the claimed ReLU-dropout's backward in the aggregation's own pass; rows
            # ..d after the self term's gradient is added to them
            grad_x = ctx.adj.mm(gx, transpose=True, width=f,
                                scale_where_positive=None if scale is None else (x_src, scale, d))
            grad_x[:d] += gx[:, f:]
            if scale is not None:
                relu_dropout_backward_(grad_x[:d], x_src[:d], scale)
        gw = g.t().mm(both) if need_wl or need_wr else None  # [out, 2F]
        return (grad_x, None, None, gw[:, :f] if need_wl else None, g.sum(0) if need_bl else None,
                gw[:, f:] if need_wr else None, None)


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
