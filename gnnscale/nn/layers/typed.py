"""What relation-aware layers share: their typed arguments, grouping rows by type and edges by relation, a probe.

The typed layer contract (docs/typed_graphs.md, section 4)
---------------------------------------------------------
A relation-aware layer sets the class attribute ``needs_edge_type = True``, is built as::

    layer(in_dim, out_dim, num_relations=R, num_node_types=T, relations=[(s, r, d), ...], **options)

(``relations``: one ``(src type, relation, dst type)`` index triple per relation, relation indices
``0..R-1``) and is called as::

    layer((x_src, x_dst), edge_index, edge_type=edge_type, node_type=(src_type, dst_type)) -> [D, out_dim]

with ``edge_type`` int64 [M] (relation of each edge), ``src_type`` int64 [S] and ``dst_type`` int64
[D] the node types of the sources and destinations (a block's destinations are its first D
sources, so ``dst_type == src_type[:D]``). Without typed arguments a layer is built for one node
type and one relation (``relations=[(0, 0, 0)]``): a plain graph is a typed graph with one relation.

Everything here is vectorized: a stable sort groups rows by type and edges by relation, the
layers then loop over types or relations (never over rows or edges).
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor, nn

from gnnscale.nn.layers.contract import LayerError

#: The keyword arguments a relation-aware layer receives from the model (the graph's types).
TYPED_ARGS = ("num_relations", "num_node_types", "relations")


def check_relations(
    num_relations: int, num_node_types: int, relations: Optional[Sequence[Sequence[int]]], where: str,
) -> list[tuple[int, int, int]]:
    """The ``(src type, relation, dst type)`` triples ordered by relation index, checked.

    Args:
        num_relations: R. num_node_types: T.
        relations: R index triples ``(s, r, d)`` whose relation indices are ``0..R-1`` in some
            order; None only for R == T == 1 (then ``[(0, 0, 0)]``).
        where: the layer's name, for messages.

    Raises:
        LayerError: bad counts, a triple that is not three ints, a type or relation out of range,
            a relation index missing or given twice.
    """
    for name, value in (("num_relations", num_relations), ("num_node_types", num_node_types)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LayerError(f"{where}: {name} must be a positive int, found {value!r}")
    if relations is None:
        if num_relations == 1 and num_node_types == 1:
            return [(0, 0, 0)]
        raise LayerError(f"{where}: relations=[(src type, relation, dst type), ...] (index triples) is required with "
                         f"num_relations={num_relations}, num_node_types={num_node_types}; pass the graph's relations "
                         "(ModelSpec takes them from the partition's meta['typed'])")
    triples = []
    for item in relations:
        try:
            s, r, d = (int(v) for v in item)
        except (TypeError, ValueError):
            raise LayerError(f"{where}: each relation must be an index triple (src type, relation, dst type), "
                             f"found {item!r}") from None
        if not (0 <= s < num_node_types and 0 <= d < num_node_types and 0 <= r < num_relations):
            raise LayerError(f"{where}: relation {tuple(item)} out of range: node types must be in 0..{num_node_types - 1} "
                             f"and relations in 0..{num_relations - 1}")
        triples.append((s, r, d))
    found = sorted(r for _, r, _ in triples)
    if found != list(range(num_relations)):
        raise LayerError(f"{where}: expected one triple per relation 0..{num_relations - 1}, found relation indices "
                         f"{found}; list each relation of the graph once")
    return sorted(triples, key=lambda t: t[1])


def split_node_type(node_type, num_src: int, num_dst: int, where: str) -> tuple[Tensor, Tensor]:
    """``(src_type [S], dst_type [D])`` from ``node_type=(src_type, dst_type)`` (or one tensor [S])."""
    if node_type is None:
        raise LayerError(f"{where}: expected node_type=(src_type int64 [S], dst_type int64 [D]) (the block's "
                         "node_type and its first D entries), found None; relation-aware layers need typed blocks")
    if isinstance(node_type, Tensor):
        src_type, dst_type = node_type, node_type[:num_dst]
    else:
        src_type, dst_type = node_type
    if src_type.shape != (num_src,) or dst_type.shape != (num_dst,):
        raise LayerError(f"{where}: expected node_type=(src_type [S={num_src}], dst_type [D={num_dst}]), found shapes "
                         f"{tuple(src_type.shape)} and {tuple(dst_type.shape)}")
    return src_type, dst_type


def check_edge_type(edge_type: Optional[Tensor], num_edges: int, where: str) -> Tensor:
    if edge_type is None:
        raise LayerError(f"{where}: expected edge_type int64 [M={num_edges}] (the block's edge_type), found None; "
                         "relation-aware layers need typed blocks")
    if edge_type.shape != (num_edges,):
        raise LayerError(f"{where}: expected edge_type of shape [M={num_edges}] (one relation per edge), "
                         f"found {tuple(edge_type.shape)}")
    return edge_type


def _counts(values: Tensor, num: int, what: str, where: str) -> list[int]:
    if values.numel() and int(values.min()) < 0:
        raise LayerError(f"{where}: expected {what} in 0..{num - 1}, found {int(values.min())}")
    counts = torch.bincount(values, minlength=num)
    if counts.numel() > num:
        raise LayerError(f"{where}: expected {what} in 0..{num - 1}, found {counts.numel() - 1}; the layer was built "
                         f"for {num} (rebuild it with the graph's num_node_types / num_relations)")
    return counts.tolist()


class TypeGroups:
    """The rows of a block grouped by node type (one stable sort).

    Args:
        src_type: int64 [S] type of each source. num_dst: D (the destinations are the first D
            sources). num_types: T.

    Attributes:
        order: int64 [S] sources sorted by type, ascending positions within a type.
        src: per type t, int64 [n_t] positions of its sources (ascending; the type's
            destinations come first, as they are the sources below D).
        dst: per type t, int64 [d_t] positions of its destinations (``src[t][:d_t]``).
        pos: int64 [S] the rank of each source among the sources of its type.
        num_dst: per type, d_t.
    """

    def __init__(self, src_type: Tensor, num_dst: int, num_types: int, where: str) -> None:
        num_src = src_type.numel()
        self.src_counts = _counts(src_type, num_types, "node types", where)
        self.num_dst = _counts(src_type[:num_dst], num_types, "node types", where)
        self.order = torch.argsort(src_type, stable=True)
        self.src = list(self.order.split(self.src_counts))
        self.dst = [g[:n] for g, n in zip(self.src, self.num_dst)]
        counts = torch.tensor(self.src_counts, device=src_type.device)
        starts = (counts.cumsum(0) - counts).repeat_interleave(counts, output_size=num_src)
        self.pos = torch.empty(num_src, dtype=torch.int64, device=src_type.device)
        self.pos[self.order] = torch.arange(num_src, device=src_type.device) - starts
        self._dst_order = None

    @property
    def dst_order(self) -> Tensor:
        """int64 [D] destinations sorted by type (``cat(dst)``)."""
        if self._dst_order is None:
            self._dst_order = torch.cat(self.dst)
        return self._dst_order

    def assemble_dst(self, parts: list[Optional[Tensor]], like: Tensor, width: int) -> Tensor:
        """[D, width] from per-type rows ``parts[t]`` [d_t, width] (None where d_t == 0): one
        ``cat`` and one gather, no loop over rows. ``like``: a tensor of the output's dtype and device."""
        rows = [p for p, n in zip(parts, self.num_dst) if n]
        num_dst = sum(self.num_dst)
        if not rows:
            return like.new_zeros(num_dst, width)
        out = torch.cat(rows)
        inv = torch.empty_like(self.dst_order)
        inv[self.dst_order] = torch.arange(num_dst, device=inv.device)
        return out.index_select(0, inv)


def group_relations(edge_type: Tensor, num_relations: int, where: str) -> tuple[Optional[Tensor], list[int]]:
    """``(order, counts)``: edges sorted by relation (stably; None when already sorted), edges per relation."""
    counts = _counts(edge_type, num_relations, "edge types (relations)", where)
    if edge_type.numel() > 1 and not bool((edge_type[1:] >= edge_type[:-1]).all()):
        return torch.argsort(edge_type, stable=True), counts
    return None, counts


def relation_dst_pairs(edge_index: Tensor, edge_type: Tensor, num_dst: int, num_relations: int, where: str):
    """The (relation, destination) pairs that have edges, sorted by relation then destination.

    Returns:
        ``(row, pair_rel_counts, pair_dst)``: ``row`` int64 [M] the pair of each edge,
        ``pair_rel_counts`` list of R ints (pairs per relation: the pairs of relation r are one
        run), ``pair_dst`` int64 [P] the destination of each pair.
    """
    _counts(edge_type, num_relations, "edge types (relations)", where)
    key = edge_type * num_dst + edge_index[1]
    pairs, row = torch.unique(key, sorted=True, return_inverse=True)
    pair_rel = torch.div(pairs, num_dst, rounding_mode="floor")
    counts = torch.bincount(pair_rel, minlength=num_relations).tolist()
    return row, counts, pairs - pair_rel * num_dst


def typed_probe(num_node_types: int, relations: Sequence[tuple[int, int, int]]):
    """A probe block for a relation-aware layer: T destinations (one per type), S = 2T sources
    (the destinations, then one more node per type), one edge per relation ``(T + s) -> d``.

    Returns:
        ``(src_type [S], edge_index [2, R], edge_type [R])``, int64, on the CPU.
    """
    t = num_node_types
    src_type = torch.arange(t).repeat(2)
    edge_index = torch.tensor([[t + s for s, _, _ in relations], [d for _, _, d in relations]], dtype=torch.long)
    edge_type = torch.tensor([r for _, r, _ in relations], dtype=torch.long)
    return src_type, edge_index.view(2, -1), edge_type


def check_typed_layer(layer: nn.Module, in_dim: int, out_dim: int, spec: str, num_node_types: int = 1,
                      relations: Optional[Sequence[tuple[int, int, int]]] = None) -> None:
    """Run a relation-aware layer once on :func:`typed_probe` and check it returns [D, out_dim].

    The layer runs in eval mode under ``torch.no_grad``; its modules' modes are restored.

    Raises:
        LayerError: the call raised or the output is not a Tensor [D, out_dim].
    """
    relations = list(relations) if relations is not None else [(0, 0, 0)]
    param = next(iter(layer.parameters()), None)
    device = param.device if param is not None else torch.device("cpu")
    src_type, edge_index, edge_type = (v.to(device) for v in typed_probe(num_node_types, relations))
    num_src, num_dst = src_type.numel(), num_node_types
    x_src = torch.randn(num_src, in_dim, generator=torch.Generator().manual_seed(0)).to(device)
    call = "layer((x_src, x_dst), edge_index, edge_type=..., node_type=(src_type, dst_type))"
    kwargs = {}
    if getattr(layer, "needs_x0", False):
        kwargs["x0"] = torch.randn(num_dst, out_dim, generator=torch.Generator().manual_seed(1)).to(device)
        call = call[:-1] + ", x0=x0_dst)"
    modes = [(m, m.training) for m in layer.modules()]
    layer.eval()
    try:
        with torch.no_grad():
            out = layer((x_src, x_src[:num_dst]), edge_index, edge_type=edge_type,
                        node_type=(src_type, src_type[:num_dst]), **kwargs)
    except LayerError:
        raise
    except Exception as exc:
        raise LayerError(f"relation-aware layer {spec!r} ({type(layer).__qualname__}) cannot be called as {call} on a "
                         f"probe block (S={num_src}, D={num_dst}, {len(relations)} relations): {type(exc).__name__}: "
                         f"{exc}; a layer that sets needs_edge_type must take edge_type and node_type keywords") from exc
    finally:
        for module, training in modes:
            module.training = training
    if not isinstance(out, Tensor) or tuple(out.shape) != (num_dst, out_dim):
        found = tuple(out.shape) if isinstance(out, Tensor) else type(out).__qualname__
        raise LayerError(f"relation-aware layer {spec!r} ({type(layer).__qualname__}) returned {found} on a probe "
                         f"block, expected a Tensor [D, out_dim] = [{num_dst}, {out_dim}]")
