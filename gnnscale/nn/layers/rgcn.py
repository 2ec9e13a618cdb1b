"""R-GCN: a mean over each relation's in-edges, one weight per relation (bases or blocks), a root weight."""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch
from torch import Tensor, nn

from gnnscale.nn.layers.contract import LayerError, construct, split_input
from gnnscale.nn.layers.registry import register
from gnnscale.nn.layers.typed import check_edge_type, check_relations, relation_dst_pairs, split_node_type
from gnnscale.nn.sparse_ops import BlockAdjacency, block_matmul


def _glorot(t: Optional[Tensor]) -> None:
    if t is not None:
        bound = math.sqrt(6.0 / (t.size(-2) + t.size(-1)))
        nn.init.uniform_(t, -bound, bound)


class BlockRGCNConv(nn.Module):
    """R-GCN (Schlichtkrull et al., 2018) with mean aggregation per relation, on a typed block.

    ``out[v] = x_dst[v] @ root + bias + sum_r mean_{u -r-> v} x_src[u] @ W_r``: the function of
    ``torch_geometric.nn.RGCNConv(in_dim, out_dim, R, num_bases, num_blocks, aggr="mean")`` with
    the same parameters (``weight``, ``comp``, ``root``, ``bias``, same shapes), so its state dict
    loads as is. ``W_r`` is

    * ``weight[r]`` [in, out] (no decomposition), or
    * ``sum_b comp[r, b] weight[b]`` with ``num_bases`` B (``weight`` [B, in, out], ``comp`` [R, B]), or
    * block-diagonal with ``num_blocks`` B blocks ``weight[r, b]`` [in/B, out/B] (``weight``
      [R, B, in/B, out/B]; in_dim and out_dim must be multiples of B).

    One root weight is shared by all node types (as RGCNConv): a destination type that no relation
    reaches, or a destination without in-edges, gets ``x_dst @ root + bias``.

    The aggregation is one CSR product over the (relation, destination) pairs that have edges
    (:func:`gnnscale.sparse_ops.block_matmul`: mean over each pair's edges, no per-edge message
    tensor), then one matmul per relation on its run of pairs (a segment matmul) and one
    ``index_add`` into the destinations: only ``P <= min(M, R * D)`` rows are transformed.

    Args:
        in_dim, out_dim: feature sizes. num_relations: R. num_node_types: T.
        relations: R index triples ``(src type, relation, dst type)`` (checked; the layer itself
            only reads the relation of each edge). num_bases / num_blocks: the decomposition
            (at most one). root_weight: add ``x_dst @ root``. bias: add a learnt bias.
    """

    needs_x0 = False
    needs_edge_type = True

    def __init__(
        self, in_dim: int, out_dim: int, num_relations: int = 1, num_node_types: int = 1,
        relations: Optional[Sequence[Sequence[int]]] = None, num_bases: Optional[int] = None,
        num_blocks: Optional[int] = None, root_weight: bool = True, bias: bool = True,
    ) -> None:
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.num_relations, self.num_node_types = num_relations, num_node_types
        self.num_bases, self.num_blocks = num_bases, num_blocks
        self.relations = check_relations(num_relations, num_node_types, relations, "rgcn")
        if num_bases is not None and num_blocks is not None:
            raise LayerError(f"rgcn: give num_bases or num_blocks, not both; found num_bases={num_bases}, "
                             f"num_blocks={num_blocks}")
        for name, value in (("num_bases", num_bases), ("num_blocks", num_blocks)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise LayerError(f"rgcn: {name} must be a positive int or None, found {value!r}")
        if num_blocks is not None and (in_dim % num_blocks or out_dim % num_blocks):
            raise LayerError(f"rgcn: block-diagonal weights need in_dim and out_dim divisible by num_blocks; found "
                             f"in_dim={in_dim}, out_dim={out_dim}, num_blocks={num_blocks}; pick a divisor of both "
                             "(a model's last layer maps to the classes: give it a linear head with jk='cat' or "
                             "'max', or use num_bases)")
        if num_bases is not None:
            self.weight = nn.Parameter(torch.empty(num_bases, in_dim, out_dim))
            self.comp = nn.Parameter(torch.empty(num_relations, num_bases))
        elif num_blocks is not None:
            self.weight = nn.Parameter(torch.empty(num_relations, num_blocks, in_dim // num_blocks,
                                                   out_dim // num_blocks))
            self.register_parameter("comp", None)
        else:
            self.weight = nn.Parameter(torch.empty(num_relations, in_dim, out_dim))
            self.register_parameter("comp", None)
        self.root = nn.Parameter(torch.empty(in_dim, out_dim)) if root_weight else None
        self.bias = nn.Parameter(torch.empty(out_dim)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weights, zero bias (as ``RGCNConv``)."""
        _glorot(self.weight)
        _glorot(self.comp)
        _glorot(self.root)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def relation_weight(self) -> Tensor:
        """[R, in, out] (no decomposition, bases) or [R, B, in/B, out/B] (blocks)."""
        if self.num_bases is not None:
            return (self.comp @ self.weight.view(self.num_bases, -1)).view(self.num_relations, self.in_dim,
                                                                            self.out_dim)
        return self.weight

    def _transform(self, h: Tensor, w: Tensor) -> Tensor:
        if self.num_blocks is None:
            return h @ w
        b = self.num_blocks
        return torch.einsum("abc,bcd->abd", h.view(-1, b, self.in_dim // b), w).reshape(-1, self.out_dim)

    def forward(
        self, x: Tensor | tuple[Tensor, Tensor], edge_index: Tensor, edge_type: Optional[Tensor] = None,
        node_type=None, size: Optional[tuple[int, int]] = None,
    ) -> Tensor:
        """Args:
            x: ``(x_src, x_dst)`` float32 [S, in_dim], [D, in_dim].
            edge_index: int64 [2, M] (row 0: sources, row 1: destinations).
            edge_type: int64 [M] relation of each edge, in 0..R-1.
            node_type: ``(src_type [S], dst_type [D])`` int64 (shapes checked; R-GCN does not
                read them) or None.
            size: optional ``(S, D)``.

        Returns:
            float32 [D, out_dim].
        """
        x_src, x_dst = split_input(x, size)
        num_src, num_dst = x_src.size(0), x_dst.size(0)
        edge_type = check_edge_type(edge_type, edge_index.size(1), "rgcn")
        if node_type is not None:
            split_node_type(node_type, num_src, num_dst, "rgcn")
        out = x_dst @ self.root if self.root is not None else x_dst.new_zeros(num_dst, self.out_dim)
        if edge_index.size(1):
            row, per_rel, pair_dst = relation_dst_pairs(edge_index, edge_type, num_dst, self.num_relations, "rgcn")
            adj = BlockAdjacency(torch.stack([edge_index[0], row]), num_src, pair_dst.numel())
            agg = block_matmul(adj, x_src)  # [P, in]: mean over each (relation, destination) pair's edges
            w = self.relation_weight()
            msgs = [self._transform(h, w[r]) for r, h in enumerate(agg.split(per_rel)) if per_rel[r]]
            out = out.index_add(0, pair_dst, torch.cat(msgs))
        if self.bias is not None:
            out = out + self.bias
        return out

    def extra_repr(self) -> str:
        return (f"{self.in_dim}, {self.out_dim}, num_relations={self.num_relations}, num_bases={self.num_bases}, "
                f"num_blocks={self.num_blocks}, aggr=mean")


@register("rgcn", "R-GCN: mean per relation, a weight per relation (num_bases / num_blocks), a root weight "
          "(BlockRGCNConv; equal to torch_geometric.nn.RGCNConv with aggr='mean'); typed graphs", typed=True)
def _rgcn(spec, in_dim, out_dim, *, index, num_layers, **kwargs):
    return construct(spec, "BlockRGCNConv", BlockRGCNConv, in_dim, out_dim, **kwargs)
