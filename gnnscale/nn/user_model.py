"""A user's whole PyG model in the engine: ``gnnscale train --model pkg.module:Class`` (issue 46 item 4).

The engine's own model is a layer stack that consumes one sampled block per layer
(:class:`~gnnscale.nn.models.GNN`). A PyG model instead takes a subgraph in PyG's layout,
``model(x, edge_index)`` (``edge_attr=`` too where its ``forward`` names it and the run has edge
features), as PyG's ``NeighborLoader`` gives it, and returns a row per node of the subgraph.
:class:`UserModel` wraps such a module so that every engine path that calls a model with
``(x, blocks)`` (data-parallel steps, sampled evaluation, ``gnnscale evaluate``, ``--save-model``
files, :func:`gnnscale.load_model`) runs it unchanged.

**Construction** (:func:`build_user_model`): ``Class(in_channels=F, hidden_channels=H,
out_channels=C, num_layers=L, **model_kwargs)`` with F the partition's features, H ``--hidden``,
C the outputs (classes), L ``--num-layers`` (default: one per fanout); ``dropout=--dropout`` is
added when the constructor takes ``dropout`` and ``model_kwargs`` does not name it. This is the
signature of PyG's ``torch_geometric.nn.models`` (``GraphSAGE``, ``GCN``, ``GAT``, ``GIN``,
``EdgeCNN``, ``PNA``); a class of another signature can take ``**kwargs``.

**The sampled subgraph in PyG's layout** (:func:`subgraph_edges`): the blocks' sources are
prefix-nested (``blocks[i].src_ids[:D_i] == blocks[i].dst_ids == blocks[i + 1].src_ids``), so
block-local ids are already positions in ``blocks[0].src_ids``, the subgraph's nodes (seeds
first). Each node keeps the in-edges drawn where it was first expanded: the seeds' of the last
block, the new destinations of each earlier block (those past the next block's
destinations), as PyG's ``NeighborLoader`` samples each node once. One mask per block, no loop
over edges. The output rows of the seeds (the first ``blocks[-1].num_dst``) are the logits.

**Dropout**: a module's own dropout draws from torch's generator; in training it is reseeded
before every step from the engine's step key (``rng_key``: seed, epoch, step) and the first
seed's original id, so that a resumed run draws what the uninterrupted one drew.

**Typed graphs**: each type's inputs are encoded to H as the built-in typed models do (a linear
map of its features, or a learned table for a featureless type, sharded by owner in training);
the class is built with ``in_channels=H`` and made relation-wise by PyG's ``to_hetero``
(``aggr="sum"``); it is called as ``module(x_dict, edge_index_dict)`` with the node types' names
and relation ``k`` named ``rel<k>`` (positions within each type, PyG's ``HeteroData`` layout),
and the seeds' rows of their type are the outputs.

What needs the engine's own layer stack is refused before any worker starts
(:func:`gnnscale.config.check_model_options`): historical exchange, layer and chunk pipelines,
layer-wise evaluation, ``--layer``/``--norm``/``--residual``/``--jk``. With ``--task link|edge``
the module is the encoder of a :class:`~gnnscale.nn.link.LinkModel` (its output: the embedding);
evaluation embeds every node by its sampled subgraph
(:meth:`gnnscale.tasks.link_evaluation.LinkEvaluator.embeddings`); not on typed graphs yet.
"""
from __future__ import annotations

import inspect
from typing import Sequence

import torch
from torch import nn

from gnnscale.nn.models import ModelError, layer_name
from gnnscale.samplers.block import Block

#: the keyword arguments the run passes to a model class (PyG's ``BasicGNN`` names)
CONVENTION = ("in_channels", "hidden_channels", "out_channels", "num_layers")


def load_model_class(spec: str | type) -> type:
    """The ``nn.Module`` subclass named by ``spec`` (``"pkg.module:Class"``, ``Class`` dotted for
    a nested one) or given as a class.

    Raises:
        ModelError: one line naming ``--model``: not importable, no such attribute, not an
            ``nn.Module`` subclass.
    """
    if isinstance(spec, type):
        cls = spec
    else:
        from gnnscale.nn.layers.contract import LayerError, load_layer_class

        try:
            cls = load_layer_class(str(spec))
        except LayerError as err:
            raise ModelError(f"--model {spec}: {err}") from None
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ModelError(f"--model must name a torch.nn.Module subclass (e.g. torch_geometric.nn.models:GraphSAGE); "
                         f"found {layer_name(spec)}")
    return cls


def model_arguments(cls: type, in_dim: int, hidden: int, out_dim: int, num_layers: int, dropout: float,
                    model_kwargs: dict, label: str | None = None) -> dict:
    """The keyword arguments ``cls`` is built with (the module docstring's convention).

    Raises:
        ModelError: ``model_kwargs`` naming one of :data:`CONVENTION` (the run sets them), or a
            constructor that takes neither them nor ``**kwargs``.
    """
    clash = sorted(set(model_kwargs) & set(CONVENTION))
    if clash:
        raise ModelError(f"--model-kwargs {clash} are set by the run (--hidden, --num-layers, the data's features and "
                         "classes); leave them out of --model-kwargs")
    args = {"in_channels": int(in_dim), "hidden_channels": int(hidden), "out_channels": int(out_dim),
            "num_layers": int(num_layers)}
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        params = {}
    open_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    missing = [k for k in CONVENTION if k not in params]
    if params and missing and not open_kwargs:
        raise ModelError(f"--model {label or layer_name(cls)} is built as Class(in_channels=F, hidden_channels=H, "
                         f"out_channels=C, num_layers=L, **model_kwargs), but its constructor takes no "
                         f"{', '.join(missing)}; give it those parameters (or **kwargs), as PyG's "
                         "torch_geometric.nn.models classes have")
    if "dropout" in params and "dropout" not in model_kwargs:
        args["dropout"] = float(dropout)
    return args | dict(model_kwargs)


def subgraph_edges(blocks: Sequence[Block], with_types: bool = False):
    """The sampled subgraph of ``blocks`` in PyG's layout (see the module docstring):
    ``edge_index`` int64 [2, M] of positions in ``blocks[0].src_ids`` (row 0 source, row 1
    target; the seeds' in-edges first, then each hop's), and ``edge_attr`` [M, De] aligned with
    it (None when the blocks carry none); ``with_types``: and ``edge_type`` int64 [M] (typed
    blocks) as a third item."""
    pieces, attrs, types = [], [], []
    last = len(blocks) - 1
    for i in range(last, -1, -1):  # loop over blocks (L of them): seeds' edges first
        b = blocks[i]
        if b.num_hist:
            raise ModelError("a user's --model reads a subgraph, not historical leaves; use --exchange exact")
        ei, attr, et = b.edge_index, b.edge_attr, b.edge_type
        if i < last:
            keep = ei[1] >= blocks[i + 1].num_dst  # the destinations first expanded here
            ei = ei[:, keep]
            attr = attr[keep] if attr is not None else None
            et = et[keep] if et is not None else None
        pieces.append(ei)
        attrs.append(attr)
        types.append(et)
    edge_index = torch.cat(pieces, 1) if len(pieces) > 1 else pieces[0]
    edge_attr = None if any(a is None for a in attrs) else (torch.cat(attrs) if len(attrs) > 1 else attrs[0])
    if not with_types:
        return edge_index, edge_attr
    edge_type = None if any(t is None for t in types) else (torch.cat(types) if len(types) > 1 else types[0])
    return edge_index, edge_attr, edge_type


class UserModel(nn.Module):
    """A user's module ``module(x, edge_index[, edge_attr])`` behind the engine's model interface
    ``forward(x, blocks, ...)`` -> float32 [blocks[-1].num_dst, C] (the seeds' rows).

    Args:
        module: the user's ``nn.Module``. num_layers: L, the blocks per batch.
        edge_dim: De, the edge features the run gives it (0: none; passed as ``edge_attr=`` only
            when its ``forward`` names ``edge_attr``).
        spec: how the user named it (messages, model files).
    """

    #: what the engine asks of a model (the layer stack's attributes): none of its own machinery
    uses_degree = False
    uses_x0 = False
    typed = None
    node_types = None
    jk = "none"
    encoder = None

    def __init__(self, module: nn.Module, num_layers: int, edge_dim: int = 0, spec: str = "",
                 typed: dict | None = None, hidden: int = 0, external_embeddings: bool = False) -> None:
        super().__init__()
        self.module = module
        self.num_layers = int(num_layers)
        self.spec = spec or layer_name(type(module))
        from gnnscale.nn.layers.contract import forward_takes_edge_attr

        self.edge_dim = int(edge_dim)
        self.uses_edge_attr = self.edge_dim > 0 and forward_takes_edge_attr(module) and typed is None
        self.typed_encoder = None
        if typed is not None:  # the inputs of each type encoded to H, as the built-in typed models do
            from gnnscale.nn.typed_encoder import TypedEncoder

            self.typed_encoder = TypedEncoder(typed["feature_dims"], typed["num_nodes_per_type"], hidden,
                                              external=bool(external_embeddings))
            self.node_types = list(typed["node_types"])
            self.edge_types = typed_edge_types(typed)

    def reseed(self, rng_key: int | None, row_keys: Sequence[torch.Tensor] | None) -> None:
        """Reseed torch's generator for the module's own dropout from the step's key (and the
        first seed's original id, so that ranks draw differently); nothing outside training."""
        if rng_key is None or not self.training:
            return
        first = int(row_keys[0][0]) if row_keys is not None and len(row_keys) and row_keys[0].numel() else 0
        seed = (int(rng_key) * 1_000_003 + first * 7_919 + 17) % (1 << 63)
        torch.default_generator.manual_seed(seed)
        if torch.cuda.is_initialized():
            torch.cuda.manual_seed_all(seed)

    def forward(self, x: torch.Tensor, blocks: Sequence[Block], hist=None, emit=None,
                node_degree: torch.Tensor | None = None, rng_key: int | None = None,
                row_keys: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        """Outputs float32 [blocks[-1].num_dst, C] of the seeds from input rows x float32
        [blocks[0].num_src, F] (``node_degree`` is not used; ``hist``/``emit`` are refused)."""
        if hist is not None or emit is not None:
            raise ModelError("a user's --model has no per-layer embeddings to read or emit; use --exchange exact")
        if len(blocks) != self.num_layers:
            raise ModelError(f"model has {self.num_layers} layers but the batch has {len(blocks)} blocks")
        if self.typed_encoder is not None:
            self.reseed(rng_key, row_keys)
            return self._typed(x, blocks)
        device = next(self.parameters()).device if any(True for _ in self.parameters()) else x.device
        edge_index, edge_attr = subgraph_edges(blocks)
        self.reseed(rng_key, row_keys)
        x, edge_index = x.to(device), edge_index.to(device)
        if self.uses_edge_attr:
            if edge_attr is None:
                raise ModelError(f"--model {self.spec} reads {self.edge_dim} edge features but the batch has none")
            out = self.module(x, edge_index, edge_attr=edge_attr.to(device))
        else:
            out = self.module(x, edge_index)
        if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.size(0) != x.size(0):
            found = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ModelError(f"--model {self.spec} must return a tensor [nodes, outputs] (a row per node of the "
                             f"subgraph, {x.size(0)} here); found {found}")
        return out[:blocks[-1].num_dst]


    def _typed(self, x, blocks: Sequence[Block]) -> torch.Tensor:
        """A typed batch: the TypedInput encoded (float32 [S, H]), split into ``x_dict`` by node
        type and the subgraph's edges into ``edge_index_dict`` by relation (positions within each
        type, PyG's HeteroData layout); the module (``to_hetero``'d) gives ``{type: [n_t, C]}``,
        of which the seeds' rows (of the seeds' type) are returned."""
        edge_index, _, edge_type = subgraph_edges(blocks, with_types=True)
        node_type = blocks[0].node_type
        if node_type is None or edge_type is None:
            raise ModelError(f"--model {self.spec} on a typed graph needs typed blocks (node_type, edge_type)")
        h = self.typed_encoder(x)
        device = h.device
        node_type, edge_index, edge_type = node_type.to(device), edge_index.to(device), edge_type.to(device)
        counts = torch.bincount(node_type, minlength=len(self.node_types))
        order = torch.argsort(node_type, stable=True)
        starts = torch.cumsum(counts, 0) - counts
        pos = torch.empty_like(node_type)  # each node's row within its type
        pos[order] = torch.arange(node_type.numel(), device=device) - torch.repeat_interleave(starts, counts)
        x_dict = {name: h[idx] for name, idx in zip(self.node_types, order.split(counts.tolist()))}
        local = pos[edge_index]
        edge_index_dict = {et: local[:, edge_type == k] for k, et in enumerate(self.edge_types)}  # loop over R
        out = self.module(x_dict, edge_index_dict)
        d = blocks[-1].num_dst
        target = self.node_types[int(node_type[0])] if d else self.node_types[0]
        return out[target][pos[:d]]

    @property
    def dims(self) -> list[int]:
        """Not a layer stack: what reads a stack's widths (historical tables, layer-wise inference) is
        refused before a run starts; reaching it is a bug named here."""
        raise ModelError(f"--model {self.spec} is a whole model, not the engine's layer stack (no per-layer widths)")

    @torch.no_grad()
    def full_graph(self, x: torch.Tensor, edge_index: torch.Tensor,
                   edge_attr: torch.Tensor | None = None) -> torch.Tensor:
        """Outputs float32 [N, C] of every node of a whole graph (``x`` [N, F], ``edge_index``
        int64 [2, E]): the module once over the graph (``gnnscale predict``)."""
        self.eval()
        if self.uses_edge_attr:
            return self.module(x, edge_index, edge_attr=edge_attr)
        return self.module(x, edge_index)


def typed_edge_types(typed: dict) -> list[tuple[str, str, str]]:
    """The ``(src type, relation, dst type)`` names of a typed spec's relations: the relation
    ``k`` is named ``rel<k>`` (the keys of ``edge_index_dict``)."""
    names = list(typed["node_types"])
    return [(names[int(s)], f"rel{int(k)}", names[int(d)]) for s, k, d in typed["relations"]]


def build_user_model(spec: str | type, in_dim: int, hidden: int, out_dim: int, num_layers: int,
                     dropout: float = 0.0, model_kwargs: dict | None = None, edge_dim: int = 0,
                     typed: dict | None = None, external_embeddings: bool = False) -> UserModel:
    """The :class:`UserModel` of ``spec`` built by the convention (:func:`model_arguments`).

    ``typed`` (``node_types`` names, ``relations`` index triples, ``feature_dims``,
    ``num_nodes_per_type``): a typed graph's model: the inputs encoded to ``hidden`` per type
    (:class:`~gnnscale.nn.typed_encoder.TypedEncoder`; ``external_embeddings``: the featureless
    types' rows come with the input), the class built with ``in_channels=hidden`` and made
    relation-wise by PyG's ``to_hetero`` (``aggr="sum"``) over :func:`typed_edge_types`.

    Raises:
        ModelError: a class that cannot be loaded or built (the constructor's error, in one line).
    """
    cls = load_model_class(spec)
    label = spec if isinstance(spec, str) else layer_name(spec)
    width = hidden if typed is not None else in_dim
    kwargs = model_arguments(cls, width, hidden, out_dim, num_layers, dropout, dict(model_kwargs or {}), label)
    try:
        module = cls(**kwargs)
        if typed is not None:
            from torch_geometric.nn import to_hetero

            module = to_hetero(module, (list(typed["node_types"]), typed_edge_types(typed)), aggr="sum")
    except Exception as err:  # noqa: BLE001 - the user's constructor: its error in one line
        text = " ".join(str(err).split())
        raise ModelError(f"--model {label} could not be built with {kwargs}{' and to_hetero' if typed else ''}: "
                         f"{type(err).__name__}: {text}; adjust --model-kwargs") from None
    return UserModel(module, num_layers, edge_dim, label, typed, hidden, external_embeddings)
