"""``rel:<spec>``: any homogeneous layer made relation-wise (PyG's ``to_hetero`` / ``HeteroConv(aggr="sum")``)."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor, nn

from gnnscale.nn.layers.contract import LayerError, check_layer, construct, split_input
from gnnscale.nn.layers.registry import build_conv, is_typed_spec, register_prefix
from gnnscale.nn.layers.typed import (TypeGroups, check_edge_type, check_relations, group_relations,
                                      split_node_type)


class TypeModuleDict(nn.ModuleDict):
    """A ``ModuleDict`` keyed by node type index: ``d[t]`` and ``t in d`` take ints (stored as ``str(t)``)."""

    def __getitem__(self, key) -> nn.Module:
        return super().__getitem__(str(key))

    def __contains__(self, key) -> bool:
        return super().__contains__(str(key))


class RelationWise(nn.Module):
    """One homogeneous layer per relation, summed per destination type (PyG ``to_hetero`` semantics).

    For relation ``r = (s, r, d)`` the layer ``convs[r]`` runs on the block's edges of relation r
    only, relabelled to a small bipartite block of its own: its destinations are the block's
    destinations of type d (``D_r`` rows, no work on other types' destinations) and its sources
    are those destinations followed (``s != d``) or merged (``s == d``) with the sources of type s
    that relation r's edges use, so the layer contract holds (``x_dst == x_src[:D_r]``; GCN's and
    GAT's self loop of a destination reads its own row). A destination type's output is the sum
    of its relations' outputs (``HeteroConv(..., aggr="sum")``); a destination of a reached
    type without in-edges gets what each layer gives without edges (e.g. SAGE's root term).

    A destination type that **no relation reaches** (PyG leaves it out of the output) gets a
    learned self transform ``self_lins[t]``: ``Linear(in_dim, out_dim)`` of its own input, so
    that its rows stay informative for the next layer. These linears exist only for unreached
    types (none when every type is reached, e.g. after ``datasets.typed.add_reverse``).

    Per-relation layers get no whole-graph degrees (``needs_degree`` layers such as ``gcn``
    normalize with the relation's degrees within the block); layers that set ``needs_x0`` get
    ``x0`` at the relation's destinations. The grouping is one sort of the sources by type and
    one of the edges by relation; the loop is over relations.

    Args:
        spec: the homogeneous layer: a zoo name, ``module:Class``, ``dgl:Class`` or an
            ``nn.Module`` subclass (built as ``spec(in_dim, out_dim, **layer_kwargs)``).
        in_dim, out_dim: feature sizes. num_relations: R. num_node_types: T.
        relations: R index triples ``(src type, relation, dst type)``.
        index, num_layers: the layer's position (for specs that depend on it, e.g. GAT's heads).
        **layer_kwargs: options of every per-relation layer.
    """

    needs_edge_type = True
    needs_degree = False

    def __init__(
        self, spec, in_dim: int, out_dim: int, num_relations: int = 1, num_node_types: int = 1,
        relations: Optional[Sequence[Sequence[int]]] = None, index: int = 0, num_layers: int = 1,
        **layer_kwargs,
    ) -> None:
        super().__init__()
        name = spec if isinstance(spec, str) else f"{getattr(spec, '__module__', '?')}:{getattr(spec, '__qualname__', spec)}"
        self.where = f"rel:{name}"
        self.relations = check_relations(num_relations, num_node_types, relations, self.where)
        if isinstance(spec, str):
            if not spec.strip():
                raise LayerError("rel:<spec>: expected a homogeneous layer spec after 'rel:' (e.g. 'rel:sage', "
                                 "'rel:gat', 'rel:mypkg.layers:MyConv'), found nothing")
            if is_typed_spec(spec):
                raise LayerError(f"{self.where}: {spec!r} is already relation-aware; use it directly (without "
                                 "'rel:') or wrap a homogeneous layer (rel:sage, rel:gcn, rel:gat, ...)")
            convs = [build_conv(spec, in_dim, out_dim, index=index, num_layers=num_layers, **layer_kwargs)
                     for _ in self.relations]
        elif isinstance(spec, type) and issubclass(spec, nn.Module):
            if getattr(spec, "needs_edge_type", False):
                raise LayerError(f"{self.where}: the class is already relation-aware; use it directly")
            convs = [construct(self.where, spec.__qualname__, spec, in_dim, out_dim, **layer_kwargs)
                     for _ in self.relations]
            check_layer(convs[0], in_dim, out_dim, name)
        else:
            raise LayerError(f"rel:<spec>: expected a layer spec string or an nn.Module subclass, found {spec!r}")
        self.spec, self.in_dim, self.out_dim = name, in_dim, out_dim
        self.num_relations, self.num_node_types = num_relations, num_node_types
        self.convs = nn.ModuleList(convs)
        self.needs_x0 = any(bool(getattr(c, "needs_x0", False)) for c in convs)
        reached = {d for _, _, d in self.relations}
        self.unreached = [t for t in range(num_node_types) if t not in reached]
        self.self_lins = TypeModuleDict({str(t): nn.Linear(in_dim, out_dim) for t in self.unreached})

    def forward(
        self, x: Tensor | tuple[Tensor, Tensor], edge_index: Tensor, edge_type: Optional[Tensor] = None,
        node_type=None, size: Optional[tuple[int, int]] = None, x0: Optional[Tensor] = None,
    ) -> Tensor:
        """Args:
            x: ``(x_src, x_dst)`` float32 [S, in_dim], [D, in_dim] (``x_dst == x_src[:D]``).
            edge_index: int64 [2, M] (row 0: sources, row 1: destinations).
            edge_type: int64 [M] relation of each edge; its endpoints' types must match the
                relation's triple (the samplers' contract; not checked per edge).
            node_type: ``(src_type int64 [S], dst_type int64 [D])`` with ``dst_type == src_type[:D]``.
            size: optional ``(S, D)``. x0: float32 [D, out_dim] for layers that need it.

        Returns:
            float32 [D, out_dim].
        """
        x_src, x_dst = split_input(x, size)
        num_src, num_dst = x_src.size(0), x_dst.size(0)
        edge_type = check_edge_type(edge_type, edge_index.size(1), self.where)
        src_type, _ = split_node_type(node_type, num_src, num_dst, self.where)
        if self.needs_x0 and (x0 is None or x0.size(0) != num_dst):
            raise LayerError(f"{self.where}: its layers need x0 [D={num_dst}, dim]; found "
                             f"{None if x0 is None else tuple(x0.shape)}")
        groups = TypeGroups(src_type, num_dst, self.num_node_types, self.where)
        order, counts = group_relations(edge_type, self.num_relations, self.where)
        ei = edge_index if order is None else edge_index.index_select(1, order)
        src_parts, dst_parts = ei[0].split(counts), ei[1].split(counts)
        acc: list[Optional[Tensor]] = [None] * self.num_node_types
        for (s, r, d), conv in zip(self.relations, self.convs):
            n_dst = groups.num_dst[d]
            if n_dst == 0:
                continue
            pos = groups.pos[src_parts[r]]  # rank of each edge's source among the type-s sources
            used = torch.zeros(groups.src_counts[s], dtype=torch.bool, device=pos.device)
            used[pos] = True
            if s == d:
                used[:n_dst] = True  # the type-d destinations are the first type-d sources
            rank = used.cumsum(0) - 1
            x_used = x_src.index_select(0, groups.src[s][used])
            if s == d:
                xs, src_local = x_used, rank[pos]
            else:
                xs, src_local = torch.cat([x_dst.index_select(0, groups.dst[d]), x_used]), rank[pos] + n_dst
            local = torch.stack([src_local, groups.pos[dst_parts[r]]])
            kw = {"x0": x0.index_select(0, groups.dst[d])} if getattr(conv, "needs_x0", False) else {}
            y = conv((xs, xs[:n_dst]), local, **kw)
            acc[d] = y if acc[d] is None else acc[d] + y
        parts = []
        for t in range(self.num_node_types):
            if groups.num_dst[t] and acc[t] is None:  # a type no relation reaches: its self transform
                acc[t] = self.self_lins[t](x_dst.index_select(0, groups.dst[t]))
            parts.append(acc[t])
        return groups.assemble_dst(parts, x_dst, self.out_dim)

    def extra_repr(self) -> str:
        return (f"{self.spec!r}, {self.in_dim}, {self.out_dim}, num_relations={self.num_relations}, "
                f"unreached_types={self.unreached}")


@register_prefix("rel", positional=True, typed=True)
def _rel(spec, inner, in_dim, out_dim, *, index, num_layers, **kwargs):
    return RelationWise(inner, in_dim, out_dim, index=index, num_layers=num_layers, **kwargs)
