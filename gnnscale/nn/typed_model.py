"""A typed graph's model: the layer stack of :class:`~gnnscale.nn.models.GNN` behind a typed input encoder.

Given the graph's types (``relations``, ``feature_dims``, ``num_nodes_per_type``; docs/typed_graphs.md)
the input is a :class:`~gnnscale.samplers.block.TypedInput`, encoded to the hidden size by a
:class:`~gnnscale.nn.typed_encoder.TypedEncoder` (``typed_encoder``), and every layer must be
relation-aware (``rgcn``, ``hgt``, ``rel:<spec>`` or a class setting ``needs_edge_type``): it is
built with ``num_relations``, ``num_node_types`` and ``relations`` and called with each block's
``edge_type`` and ``node_type``. Everything else (norms, residuals, dropout, jumping knowledge,
historical rows, pipeline stages) is the stack's own.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from gnnscale.errors import ModelError
from gnnscale.nn.models import GNN, layer_needs_edge_type
from gnnscale.nn.typed_encoder import TypedEncoder
from gnnscale.samplers.block import TypedInput


def typed_layer_args(relations, feature_dims, num_nodes_per_type, node_types=None) -> dict | None:
    """The graph's types, checked: ``{"num_relations", "num_node_types", "relations"}`` (what
    relation-aware layers are built with), or None when all are None (an untyped model).

    Raises:
        ModelError: some given and others not, lengths that disagree, a triple out of range.
    """
    given = {"relations": relations, "feature_dims": feature_dims, "num_nodes_per_type": num_nodes_per_type}
    if all(v is None for v in given.values()) and node_types is None:
        return None
    missing = [k for k, v in given.items() if v is None]
    if missing:
        raise ModelError(f"a typed model needs relations, feature_dims and num_nodes_per_type; {', '.join(missing)} "
                         "missing (take them from the partition's meta['typed']: ModelSpec.of(cfg, ..., typed=...))")
    t = len(feature_dims)
    if len(num_nodes_per_type) != t or (node_types is not None and len(node_types) != t):
        raise ModelError(f"node types disagree: {t} feature_dims, {len(num_nodes_per_type)} num_nodes_per_type"
                         + ("" if node_types is None else f", {len(node_types)} node_types")
                         + "; give one entry per node type")
    triples = [tuple(int(v) for v in rel) for rel in relations]
    if any(len(rel) != 3 for rel in triples):
        raise ModelError(f"relations must be (src type, relation, dst type) index triples, found {relations!r}")
    from gnnscale.nn.layers import LayerError
    from gnnscale.nn.layers.typed import check_relations

    try:
        check_relations(len(triples), t, triples, "typed model")
    except LayerError as exc:
        raise ModelError(str(exc)) from None
    return {"num_relations": len(triples), "num_node_types": t, "relations": triples}


class TypedGNN(GNN):
    """:class:`~gnnscale.nn.models.GNN` on a typed graph.

    Args:
        hidden, out_dim: as :class:`~gnnscale.nn.models.GNN`.
        stack: GNN's other options by keyword (``num_layers``, ``layer`` (default ``"rgcn"``;
            relation-aware), ``layer_kwargs``, ``dropout``, ``norm``, ``residual``, ``jk``).
        relations: R index triples ``(src type, relation, dst type)``. feature_dims: T ints (0:
            the type has no features and gets a learned embedding). num_nodes_per_type: T ints
            (the embedding tables' sizes). node_types: T names (for messages).
        external_embeddings: the featureless types' rows come with the input
            (``TypedInput.emb_rows``, from tables sharded by owner, ``gnnscale.data.embeddings``)
            instead of tables in the model.
        ``edge_dim`` must be 0 (edge features do not reach relation-wise layers yet).

    ``forward(x, blocks, ...)``: x a TypedInput of ``blocks[0].num_src`` rows, blocks with
    ``edge_type`` and ``node_type`` -> logits float32 [blocks[-1].num_dst, C]. The typed encoder's
    output is h^0 (and x0 for layers that need it), dropped out before layer 0. Parameters are
    drawn in the order of earlier versions (encoder, layers, norms, head): the same seed gives the
    same weights, and model files keep their keys (``typed_encoder.*``).
    """

    def __init__(self, hidden: int, out_dim: int, *, relations: Sequence[Sequence[int]] | None = None,
                 feature_dims: Sequence[int] | None = None, num_nodes_per_type: Sequence[int] | None = None,
                 node_types: Sequence[str] | None = None, external_embeddings: bool = False, **stack) -> None:
        typed = typed_layer_args(relations, feature_dims, num_nodes_per_type, node_types)
        if typed is None:
            raise ModelError("TypedGNN needs the graph's relations, feature_dims and num_nodes_per_type; for an "
                             "untyped graph use GNN")
        if stack.get("edge_dim"):
            raise ModelError("edge features (edge_dim > 0) are not passed to a typed model's relation-wise layers yet; "
                             "build it with edge_dim=0 (--edge-features off)")
        # The facts the three steps read, set before the stack is built (plain values: allowed
        # before nn.Module.__init__, which keeps them).
        self.typed = typed
        self.node_types = list(node_types) if node_types is not None else None
        self._input = (list(feature_dims), list(num_nodes_per_type), bool(external_embeddings))
        super().__init__(0, hidden, out_dim, **{"layer": "rgcn", **stack})
        del self._input

    def _layer_kwargs(self, layer, kwargs: dict) -> dict:
        """The graph's types join every layer's arguments; the layers must be relation-aware."""
        clash = sorted(set(kwargs) & {"num_relations", "num_node_types", "relations"})
        if clash:
            raise ModelError(f"layer_kwargs {clash} are the graph's types, which a typed model passes its layers "
                             "itself; leave them out of layer_kwargs (give relations to the model / ModelSpec)")
        if not layer_needs_edge_type(layer):
            name = self.spec
            raise ModelError(f"layer {name!r} is homogeneous but the graph is typed ({self.typed['num_node_types']} "
                             f"node types, {self.typed['num_relations']} relations): it would mix all relations; "
                             f"use layer='rel:{name}' (one {name!r} per relation, summed per destination type) "
                             "or a relation-aware layer ('rgcn', 'hgt')")
        return {**kwargs, **self.typed}

    def _make_input(self, in_dim: int, hidden: int, encoder: bool) -> int:
        """The typed encoder (every type to the hidden size): the first layer reads H."""
        feature_dims, num_nodes, external = self._input
        self.encoder = None
        self.typed_encoder = TypedEncoder(feature_dims, num_nodes, hidden, external=external)
        return hidden

    def _check_conv(self, conv: nn.Module, in_dim: int, out_dim: int, edge_dim: int) -> None:
        from gnnscale.nn.layers import check_typed_layer

        check_typed_layer(conv, in_dim, out_dim, self.spec, self.typed["num_node_types"], self.typed["relations"])

    @property
    def encodes_input(self) -> bool:
        return True

    def encode(self, x: TypedInput, keys: torch.Tensor | None = None,
               seed: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A TypedInput of n rows -> (h^0 float32 [n, H], x0 or None), on the model's device (the
        encoder's output is not dropped here: layer 0's input dropout does it)."""
        x = self._dev(x)
        if not isinstance(x, TypedInput):
            raise ModelError(f"a typed model's input is a TypedInput (node_type, type_index, rows), found "
                             f"{type(x).__qualname__}; typed partitions' batches carry one")
        h = self.typed_encoder(x)
        return h, (h if self.uses_x0 else None)
