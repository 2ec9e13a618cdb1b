"""HGT: per-type keys, queries and values, per-relation attention and message matrices, on a typed block."""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnscale.nn.layers.contract import LayerError, construct, split_input
from gnnscale.nn.layers.registry import register
from gnnscale.nn.layers.typed import TypeGroups, check_edge_type, check_relations, relation_dst_pairs, split_node_type
from gnnscale.nn.sparse_ops import BlockAdjacency, block_matmul_heads, softmax_by


class BlockHGTConv(nn.Module):
    """Heterogeneous Graph Transformer (Hu et al., 2020) on a typed block, as ``torch_geometric.nn.HGTConv``.

    With H heads of C = out_dim / H features, for destination ``v`` of type ``t`` and its in-edges
    ``u -r-> v`` (all relations together)::

        k_u, q_v, v_u = split(kqv[type(u)](x_src[u]))           (per node type: Linear(in, 3 out))
        score(u -r-> v, h) = <q_v,h , k_u,h @ k_rel[h, r]> * p_rel[r, h] / sqrt(C)
        alpha = softmax of the scores over all of v's in-edges, per head
        agg_v = sum_{u -r-> v} alpha * (v_u,h @ v_rel[h, r])    (concatenated over heads)
        out_v = out_lin[t](gelu(agg_v)), mixed with x_dst[v] by sigmoid(skip[t]) when in_dim == out_dim

    Parameters (same values as HGTConv's, names differ): ``kqv[t]`` = ``kqv_lin.lins[t]``,
    ``out_lin[t]`` = ``out_lin.lins[t]``, ``k_rel`` / ``v_rel`` [H * R, C, C] = ``k_rel.weight`` /
    ``v_rel.weight`` (entry ``h * R + r``), ``p_rel`` [R, H] (row r = ``p_rel['s__rel__d']``),
    ``skip`` [T] (entry t = ``skip[t]``). A destination without in-edges, and every destination of
    a type no relation reaches (HGTConv leaves such types out), gets the same formula with
    ``agg_v = 0``: ``out_lin[t]``'s bias, mixed with its input.

    Vectorized: keys and values are computed for the S sources and queries for the D
    destinations (a loop over types); the relation matrices are applied on the query side for
    the scores (``<q, k W> = <q W^T, k>``) and after aggregating for the values, both on the
    ``P <= min(M, R * D)`` (relation, destination) pairs that have edges (a loop over
    relations), and the values are aggregated per pair by
    :func:`gnnscale.sparse_ops.block_matmul_heads` (no [M, H, C] message tensor there).

    Args:
        in_dim, out_dim: feature sizes (out_dim divisible by heads). num_relations: R.
        num_node_types: T. relations: R index triples ``(src type, relation, dst type)``.
        heads: H.
    """

    needs_x0 = False
    needs_edge_type = True

    def __init__(
        self, in_dim: int, out_dim: int, num_relations: int = 1, num_node_types: int = 1,
        relations: Optional[Sequence[Sequence[int]]] = None, heads: int = 1,
    ) -> None:
        super().__init__()
        self.in_dim, self.out_dim, self.heads = in_dim, out_dim, heads
        self.num_relations, self.num_node_types = num_relations, num_node_types
        self.relations = check_relations(num_relations, num_node_types, relations, "hgt")
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1 or out_dim % heads:
            raise LayerError(f"hgt: heads must be a positive int dividing out_dim={out_dim}, found heads={heads!r}; "
                             "choose heads among the divisors of the hidden size")
        c = out_dim // heads
        self.kqv = nn.ModuleList(nn.Linear(in_dim, 3 * out_dim) for _ in range(num_node_types))
        self.out_lin = nn.ModuleList(nn.Linear(out_dim, out_dim) for _ in range(num_node_types))
        self.k_rel = nn.Parameter(torch.empty(heads * num_relations, c, c))
        self.v_rel = nn.Parameter(torch.empty(heads * num_relations, c, c))
        self.skip = nn.Parameter(torch.empty(num_node_types))
        self.p_rel = nn.Parameter(torch.empty(num_relations, heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Linears as ``nn.Linear``; relation matrices uniform in +-1/sqrt(C) (HeteroLinear's
        default); ``skip`` and ``p_rel`` ones (as ``HGTConv``)."""
        for lin in list(self.kqv) + list(self.out_lin):
            lin.reset_parameters()
        bound = 1.0 / math.sqrt(self.out_dim // self.heads)
        nn.init.uniform_(self.k_rel, -bound, bound)
        nn.init.uniform_(self.v_rel, -bound, bound)
        nn.init.ones_(self.skip)
        nn.init.ones_(self.p_rel)

    def forward(
        self, x: Tensor | tuple[Tensor, Tensor], edge_index: Tensor, edge_type: Optional[Tensor] = None,
        node_type=None, size: Optional[tuple[int, int]] = None,
    ) -> Tensor:
        """Args:
            x: ``(x_src, x_dst)`` float32 [S, in_dim], [D, in_dim] (``x_dst == x_src[:D]``).
            edge_index: int64 [2, M] (row 0: sources, row 1: destinations).
            edge_type: int64 [M] relation of each edge.
            node_type: ``(src_type int64 [S], dst_type int64 [D])`` with ``dst_type == src_type[:D]``.
            size: optional ``(S, D)``.

        Returns:
            float32 [D, out_dim].
        """
        x_src, x_dst = split_input(x, size)
        num_src, num_dst = x_src.size(0), x_dst.size(0)
        edge_type = check_edge_type(edge_type, edge_index.size(1), "hgt")
        src_type, _ = split_node_type(node_type, num_src, num_dst, "hgt")
        h, fo, r_all = self.heads, self.out_dim, self.num_relations
        c = fo // h
        groups = TypeGroups(src_type, num_dst, self.num_node_types, "hgt")

        # Keys and values of the sources, queries of the destinations (one Linear per type).
        kv_parts, q_parts = [], []
        for t, lin in enumerate(self.kqv):
            if groups.src_counts[t]:
                w, b = lin.weight, lin.bias
                kv_w, kv_b = torch.cat([w[:fo], w[2 * fo:]]), torch.cat([b[:fo], b[2 * fo:]])
                kv_parts.append(F.linear(x_src.index_select(0, groups.src[t]), kv_w, kv_b))
            q_parts.append(F.linear(x_dst.index_select(0, groups.dst[t]), lin.weight[fo:2 * fo], lin.bias[fo:2 * fo])
                           if groups.num_dst[t] else None)
        inv = torch.empty_like(groups.order)
        inv[groups.order] = torch.arange(num_src, device=inv.device)
        kv = torch.cat(kv_parts).index_select(0, inv) if kv_parts else x_src.new_zeros(0, 2 * fo)
        q = groups.assemble_dst(q_parts, x_dst, fo).view(num_dst, h, c)
        k, v = kv[:, :fo].reshape(num_src, h, c), kv[:, fo:].reshape(num_src, h, c)

        agg = x_dst.new_zeros(num_dst, h, c)
        if edge_index.size(1):
            row, per_rel, pair_dst = relation_dst_pairs(edge_index, edge_type, num_dst, r_all, "hgt")
            adj = BlockAdjacency(torch.stack([edge_index[0], row]), num_src, pair_dst.numel())
            k_rel, v_rel = self.k_rel.view(h, r_all, c, c), self.v_rel.view(h, r_all, c, c)
            scale = self.p_rel / math.sqrt(c)  # [R, H]
            # Each pair's query through its relation's key matrix: <q, k W> = <q W^T, k>.
            q_pair = q.index_select(0, pair_dst)
            qw = torch.cat([torch.einsum("nhd,hcd->nhc", part, k_rel[:, r]) * scale[r].view(1, h, 1)
                            for r, part in enumerate(q_pair.split(per_rel)) if per_rel[r]])
            scores = (qw.index_select(0, adj.row) * k.index_select(0, adj.col)).sum(-1)  # [M, H], CSR order
            alpha = softmax_by(scores, pair_dst.index_select(0, adj.row), num_dst)
            summed = block_matmul_heads(adj, v, alpha)  # [P, H, C]: sum of alpha * v per pair
            msgs = torch.cat([torch.einsum("nhc,hcd->nhd", part, v_rel[:, r])
                              for r, part in enumerate(summed.split(per_rel)) if per_rel[r]])
            agg = agg.index_add(0, pair_dst, msgs)
        agg = F.gelu(agg.view(num_dst, fo))

        out_parts = []
        for t, lin in enumerate(self.out_lin):
            if not groups.num_dst[t]:
                out_parts.append(None)
                continue
            o = lin(agg.index_select(0, groups.dst[t]))
            if fo == self.in_dim:
                a = self.skip[t].sigmoid()
                o = a * o + (1 - a) * x_dst.index_select(0, groups.dst[t])
            out_parts.append(o)
        return groups.assemble_dst(out_parts, x_dst, fo)

    def extra_repr(self) -> str:
        return f"{self.in_dim}, {self.out_dim}, heads={self.heads}, num_relations={self.num_relations}"


@register("hgt", "HGT: per-type K/Q/V, per-relation attention and message matrices (BlockHGTConv; equal to "
          "torch_geometric.nn.HGTConv); heads=1, the last layer one head unless the classes are a multiple of "
          "heads; typed graphs", typed=True)
def _hgt(spec, in_dim, out_dim, *, index, num_layers, **kwargs):
    heads = kwargs.get("heads", 1)
    if index == num_layers - 1 and isinstance(heads, int) and heads > 1 and out_dim % heads:
        kwargs["heads"] = 1  # the output layer maps to the classes, rarely a multiple of heads
    return construct(spec, "BlockHGTConv", BlockHGTConv, in_dim, out_dim, **kwargs)
