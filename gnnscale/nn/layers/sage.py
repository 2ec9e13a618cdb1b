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
    graph, with the products autograd would run, so the values are the same bit for bit:
    forward ``addmm(b_l, agg, W_l^T)`` plus ``x_src[:D] @ W_r^T``; backward the weight products
    ``g^T @ agg``, ``g^T @ x_src[:D]``, ``g.sum(0)``, and the input gradient
    ``A^T @ (g @ W_l)`` with ``g @ W_r`` added into its first D rows in place. Each product is
    computed on its own and then added, as autograd does: an ``addmm_`` into the sum (beta 1)
    is not bit-identical on every CPU (an AMD EPYC differed in the last bit). Autograd's
    own graph would slice ``x_src`` (a zero-filled [S, F] gradient, then a sum of two [S, F]
    gradients) and add the two products in a pass of their own.

    ``relu_scale``: x_src came from a ReLU-dropout whose backward this node claimed
    (:func:`gnnscale.nn.dropout.claim_relu_dropout`): it is applied to the input gradient in
    the buffer the aggregation's backward writes, to rows D.. in that same pass over each row
    and to rows ..D once ``g @ W_r`` is added to them (the same values as the ReLU-dropout's
    own backward, without its [S, F] output buffer or a pass of its own)."""

    @staticmethod
    def forward(ctx, x_src: Tensor, adj: BlockAdjacency, num_dst: int, w_l: Tensor, b_l: Tensor | None,
                w_r: Tensor, relu_scale=None) -> Tensor:  # type: ignore[override]
        agg = adj.mm(x_src)
        out = torch.addmm(b_l, agg, w_l.t()) if b_l is not None else agg.mm(w_l.t())
        out += x_src[:num_dst].mm(w_r.t())  # a product of its own, then the sum: autograd's order
        ctx.adj, ctx.num_dst, ctx.relu_scale = adj, num_dst, relu_scale
        ctx.save_for_backward(x_src, agg, w_l, w_r)
        return out

    @staticmethod
    def backward(ctx, g: Tensor):  # type: ignore[override]
        x_src, agg, w_l, w_r = ctx.saved_tensors
        d = ctx.num_dst
        need_x, _, _, need_wl, need_bl, need_wr, _ = ctx.needs_input_grad
        grad_x = None
        if need_x:
            scale = ctx.relu_scale
            # rows d.. get the claimed ReLU-dropout's backward in the aggregation's own pass; rows
            # ..d after g @ W_r is added to them
            grad_x = ctx.adj.mm(g.mm(w_l), transpose=True,
                                scale_where_positive=None if scale is None else (x_src, scale, d))
            # g @ W_r as a product of its own, then added, as autograd sums its two gradients: an
            # addmm_ into grad_x (beta 1) adds C inside the BLAS kernel, between its blocks of the
            # inner dimension on some CPUs (AMD EPYC, k = 256: a last-bit difference)
            grad_x[:d] += g.mm(w_r)
            if scale is not None:
                relu_dropout_backward_(grad_x[:d], x_src[:d], scale)
        return (grad_x, None, None, g.t().mm(agg) if need_wl else None, g.sum(0) if need_bl else None,
                g.t().mm(x_src[:d]) if need_wr else None, None)


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
