"""The one model builder: a :class:`ModelSpec` (what the model is) builds the :class:`~gnnscale.nn.models.GNN`.

Every mode builds its model here (data-parallel workers, pipeline stages, chunk stages,
evaluation, ``--save-model`` files and :func:`gnnscale.load_model`), so that the same spec and
seed give the same initial weights on every rank and in every process.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from gnnscale.nn.models import GNN, ModelError, layer_name

#: The typed fields of a spec (None on an untyped graph, and then left out of :meth:`ModelSpec.record`).
TYPED_FIELDS = ("node_types", "relations", "feature_dims", "num_nodes_per_type")


def typed_from_meta(typed: dict) -> dict:
    """The typed fields of a spec from a typed partition's ``meta['typed']`` (docs/typed_graphs.md,
    section 2: ``node_types``, ``edge_types`` as ``(src, relation, dst)`` name triples,
    ``feature_dims``, ``num_nodes_per_type``): relation k becomes the index triple
    ``(node_types.index(src), k, node_types.index(dst))``.

    Raises:
        ModelError: a key missing, or a relation naming an unknown node type.
    """
    missing = [k for k in ("node_types", "edge_types", "feature_dims", "num_nodes_per_type") if k not in typed]
    if missing:
        raise ModelError(f"typed graph info lacks {', '.join(missing)}; expected the partition's meta['typed'] "
                         "(node_types, edge_types, feature_dims, num_nodes_per_type)")
    names = [str(n) for n in typed["node_types"]]
    index = {n: i for i, n in enumerate(names)}
    relations = []
    for k, triple in enumerate(typed["edge_types"]):
        src, _, dst = (str(v) for v in triple)
        if src not in index or dst not in index:
            raise ModelError(f"relation {k} {tuple(triple)} names a node type that is not among node_types {names}")
        relations.append((index[src], k, index[dst]))
    return {"node_types": tuple(names), "relations": tuple(relations),
            "feature_dims": tuple(int(f) for f in typed["feature_dims"]),
            "num_nodes_per_type": tuple(int(n) for n in typed["num_nodes_per_type"])}


@dataclass(frozen=True)
class ModelSpec:
    """Everything that builds a model.

    Attributes:
        in_dim: input features F. hidden: H. out_dim: classes C. num_layers: L.
        layer: a zoo name, ``module:Class`` or a layer class. layer_kwargs: the layers' options.
        dropout, norm, residual, jk: as :class:`~gnnscale.nn.models.GNN`.
        node_types, relations, feature_dims, num_nodes_per_type: a typed graph's types (all None:
            untyped): T names, R ``(src type, relation, dst type)`` index triples, T feature sizes
            (0: a learned embedding), T node counts; as :class:`~gnnscale.nn.models.GNN`
            (``in_dim`` is then unused). Kept as tuples (lists are converted).
        decoder: link prediction: the decoder scoring node pairs (``dot``, ``mlp``,
            ``distmult``; :mod:`gnnscale.nn.link`), the encoder's ``out_dim`` being the
            embedding size; edge classification / regression: ``edge:<C or D>`` (an
            :class:`~gnnscale.nn.link.EdgeHead` of C logits or D targets); None: node classification.
        edge_dim: De, the edge features per edge the layers read (0: none; see
            :mod:`gnnscale.nn.edge_features`); left out of :meth:`record` when 0.
        model, model_kwargs: a user's whole model (``module:Class`` or a class) instead of the
            layer stack, and its extra constructor arguments (:mod:`gnnscale.nn.user_model`);
            ``layer`` and the stack's options are then unused. Left out of :meth:`record` when None.
    """

    in_dim: int
    hidden: int
    out_dim: int
    num_layers: int
    layer: object = "sage"
    layer_kwargs: dict = field(default_factory=dict)
    dropout: float = 0.5
    norm: str = "none"
    residual: bool = False
    jk: str = "none"
    node_types: tuple | None = None
    relations: tuple | None = None
    feature_dims: tuple | None = None
    num_nodes_per_type: tuple | None = None
    decoder: str | None = None
    edge_dim: int = 0
    model: object = None
    model_kwargs: dict = field(default_factory=dict)
    head_dropout: float = 0.0
    pair_dim: int = 0

    def __post_init__(self) -> None:
        for name in TYPED_FIELDS:
            value = getattr(self, name)
            if value is not None:
                value = tuple(tuple(int(v) for v in rel) for rel in value) if name == "relations" else \
                    tuple(str(v) for v in value) if name == "node_types" else tuple(int(v) for v in value)
                object.__setattr__(self, name, value)

    @property
    def typed(self) -> bool:
        """Whether the spec is of a typed graph's model."""
        return any(getattr(self, name) is not None for name in TYPED_FIELDS)

    @staticmethod
    def of(cfg, feature_dim: int | None, num_classes: int, num_layers: int | None = None,
           typed: dict | None = None, edge_dim: int = 0) -> "ModelSpec":
        """The spec of a run's :class:`~gnnscale.config.TrainConfig` on data of ``feature_dim``
        features and ``num_classes`` classes (``num_layers``: default ``cfg.model_layers()``).

        ``typed``: a typed partition's ``meta['typed']`` (see :func:`typed_from_meta`); then
        ``feature_dim`` is not used by the model (None is taken as 0). With ``cfg.task == "edge"``,
        ``num_classes`` is the edge head's outputs (C classes or D regression targets). ``edge_dim``:
        the edge features per edge the run's layers read (:func:`~gnnscale.nn.edge_features.resolve_edge_dim`)."""
        extra = typed_from_meta(typed) if typed is not None else {}
        task = getattr(cfg, "task", "node")
        link = task in ("link", "edge", "temporal_link")  # the encoder's output is the embedding (--hidden)
        if task in ("link", "temporal_link"):
            extra["decoder"] = cfg.decoder
        if task == "temporal_link" and getattr(cfg, "pair_features", False):
            from gnnscale.nn.link import PAIR_FEATURES

            extra["pair_dim"] = PAIR_FEATURES  # the pair's own history before t, scored beside the decoder
        elif task == "edge":
            extra["decoder"] = f"edge:{int(num_classes)}"
        model = getattr(cfg, "model", None)
        if model is not None and link and typed is not None:
            raise ModelError(f"--model {layer_name(model)} with --task {task} does not run on a typed graph yet (a "
                             "whole model made relation-wise returns one node type's rows); use --layer rgcn, hgt "
                             "or rel:<layer>")
        if model is not None:
            extra |= {"model": model, "model_kwargs": dict(getattr(cfg, "model_kwargs", {}) or {})}
        return ModelSpec(int(feature_dim or 0) if typed is not None else int(feature_dim), int(cfg.hidden),
                         int(cfg.hidden) if link else int(num_classes),
                         int(num_layers if num_layers is not None else cfg.model_layers()),
                         cfg.layer, dict(cfg.layer_kwargs), float(cfg.dropout), cfg.norm, bool(cfg.residual), cfg.jk,
                         edge_dim=int(edge_dim), head_dropout=float(getattr(cfg, "head_dropout", 0.0)), **extra)

    def build(self, seed: int | None = None, external_embeddings: bool = False) -> GNN:
        """The model; with ``seed``, torch's generator is seeded first (identical weights everywhere).
        ``external_embeddings``: a typed model without the featureless types' tables (a
        data-parallel run shards them by owner; the model file holds them whole)."""
        if seed is not None:
            torch.manual_seed(seed)
        gnn = self._gnn(external_embeddings)
        if self.decoder is None:
            return gnn
        from gnnscale.nn.link import LinkModel, build_decoder

        relations = len(self.relations) if self.relations else 1
        return LinkModel(gnn, build_decoder(self.decoder, self.out_dim, relations, self.dropout), self.pair_dim)

    def _gnn(self, external_embeddings: bool) -> GNN:
        if self.model is not None:
            from gnnscale.nn.user_model import build_user_model

            typed = {k: getattr(self, k) for k in TYPED_FIELDS} if self.typed else None
            return build_user_model(self.model, self.in_dim, self.hidden, self.out_dim, self.num_layers, self.dropout,
                                    self.model_kwargs, self.edge_dim, typed, external_embeddings)
        common = dict(num_layers=self.num_layers, layer=self.layer, layer_kwargs=dict(self.layer_kwargs),
                      dropout=self.dropout, norm=self.norm, residual=self.residual, jk=self.jk, edge_dim=self.edge_dim,
                      head_dropout=self.head_dropout)
        if self.typed:
            from gnnscale.nn.typed_model import TypedGNN

            return TypedGNN(self.hidden, self.out_dim, relations=self.relations, feature_dims=self.feature_dims,
                            num_nodes_per_type=self.num_nodes_per_type, node_types=self.node_types,
                            external_embeddings=external_embeddings, **common)
        return GNN(self.in_dim, self.hidden, self.out_dim, **common)

    def record(self) -> dict:
        """Plain data (the layer as a printable spec, the types as lists; an untyped spec without
        the typed fields): what a model file keeps. ``ModelSpec(**spec.record())`` rebuilds it."""
        out = asdict(self) | {"layer": layer_name(self.layer), "layer_kwargs": dict(self.layer_kwargs)}
        for name in TYPED_FIELDS:
            if out[name] is None:
                del out[name]
            else:
                out[name] = [list(rel) for rel in out[name]] if name == "relations" else list(out[name])
        if out["decoder"] is None:  # node classification: the record it always had
            del out["decoder"]
        if not out["edge_dim"]:  # without edge features: the record it always had
            del out["edge_dim"]
        if not out["pair_dim"]:  # no pair features: the record it always had
            del out["pair_dim"]
        if not out["head_dropout"]:  # training-only; the record it always had
            del out["head_dropout"]
        if out["model"] is None:  # the layer stack: the record it always had
            del out["model"], out["model_kwargs"]
        else:
            out["model"], out["model_kwargs"] = layer_name(self.model), dict(self.model_kwargs)
        return out
