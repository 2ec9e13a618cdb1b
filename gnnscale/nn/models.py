"""Models that run on sampled blocks (layer i consumes ``blocks[i]``).

:class:`GNN` stacks layers built from a spec (a zoo name or ``module:Class``, see
:mod:`gnnscale.nn.layers`); it never looks inside a layer. Between layers it applies the
options a user expects: normalization, activation, residual connection and dropout; after
the last one, an optional jumping-knowledge readout.

Historical embeddings (``historical`` exchange mode): a block may end with ``num_hist``
leaves whose input embedding comes from a halo table instead of the previous layer; the
caller passes those rows as ``hist[i]`` and they are appended below the previous layer's
output. ``emit`` collects each hidden layer's output (the embedding a halo table holds).

Typed graphs (docs/typed_graphs.md) have their own model, :class:`~gnnscale.nn.typed_model.TypedGNN`:
this stack with the typed input encoder in front and relation-aware layers, which get each
block's ``edge_type`` and ``node_type``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from gnnscale.errors import ModelError
from gnnscale.nn.edge_features import construct_kwargs, edge_layers, refuse_edge_dim_kwarg
from gnnscale.nn.dropout import dropout, layer_seed, relu_dropout
from gnnscale.samplers.block import Block, TypedInput

NORMS = ("none", "batch", "layer")
JK = ("none", "cat", "max")


@dataclass
class LayerHooks:
    """What a caller hands the layers besides the rows and the blocks (:meth:`GNN.forward_layers`);
    every field is optional and each axis fills the ones it uses.

    Attributes:
        hist: per block, float32 [blocks[i].num_hist, dims[i]]: the historical rows of its leaves
            (historical exchange; None where ``num_hist == 0``).
        emit: a list: each hidden layer's output h^l (rows = ``blocks[l-1].dst_ids``) is appended,
            detached (halo tables and chunk tables read them).
        node_degree: int64 [N]: the in-degree of every node by global id, for layers that set
            ``needs_degree`` (without it they normalize with degrees within the block).
        rng_key: the dropout's key: layer i's mask draws from a generator reseeded with
            ``(rng_key, i)``, so it does not depend on which process runs the layer or in what
            order (pipelined runs equal unpipelined ones).
        row_keys: with ``rng_key``, int64 [blocks[i].num_src] per block, each source row's key (its
            node's original id): the dropout is then keyed by (``rng_key``, i, row key, column), so a
            node's mask is the same whichever process holds it (1, 2 or 4 data-parallel workers drop
            the same elements).
        grad_hooks: ``{i: hook}``: registered on h^i, the output of layer i - 1 (start < i < end),
            as on any tensor (``grad -> grad or None``); chunk mode adds there the gradients that
            halo reads of these rows collected.
    """

    hist: Sequence[torch.Tensor | None] | None = None
    emit: list | None = None
    node_degree: torch.Tensor | None = None
    rng_key: int | None = None
    row_keys: Sequence[torch.Tensor] | None = None
    grad_hooks: dict | None = None


NO_HOOKS = LayerHooks()


def layer_name(layer) -> str:
    """A printable spec of a layer given by name, import path or class."""
    if isinstance(layer, str):
        return layer
    return f"{getattr(layer, '__module__', '?')}:{getattr(layer, '__qualname__', repr(layer))}"


def layer_needs_x0(spec) -> bool:
    """Whether the layers of ``spec`` (a spec string or a layer class) take an initial representation x0."""
    if isinstance(spec, type):
        return bool(getattr(spec, "needs_x0", False))
    if spec == "gcnii":
        return True
    if spec.lower().startswith("rel:"):
        return layer_needs_x0(spec[4:].strip())
    if ":" in spec and not spec.startswith("dgl:"):
        from gnnscale.nn.layers import load_layer_class

        return bool(getattr(load_layer_class(spec), "needs_x0", False))
    return False


def layer_needs_edge_type(spec) -> bool:
    """Whether the layers of ``spec`` (a spec string or a layer class) are relation-aware (typed graphs)."""
    if isinstance(spec, type):
        return bool(getattr(spec, "needs_edge_type", False))
    from gnnscale.nn.layers import is_typed_spec

    return is_typed_spec(spec)


class GNN(nn.Module):
    """A stack of message-passing layers on bipartite blocks.

    Args:
        in_dim: input feature size F. hidden: hidden size H. out_dim: number of classes C.
        num_layers: number of message-passing layers L (= blocks per batch).
        layer: a zoo name (``sage``, ``gcn``, ``gat``, ``gin``, ``gcnii``), ``module:Class``, or
            a layer class (built as ``layer(in_dim, out_dim, **layer_kwargs)``).
        layer_kwargs: extra keyword arguments of every layer (e.g. ``{"heads": 4}``).
        dropout: dropout on every hidden representation (and on the input of encoder models).
        norm: ``none``, ``batch`` or ``layer`` normalization after each hidden layer.
        residual: add the layer's input to its output where the shapes agree.
        jk: jumping knowledge over the layers' outputs at the seeds: ``none``, ``cat`` or ``max``.

    Layers whose class sets ``needs_x0`` (GCNII) get a linear encoder F -> H in front (its
    output is ``x0``), hidden-to-hidden layers and a linear head H -> C; so do models with
    ``jk``. Otherwise the last layer maps to C directly.

    The stack is homogeneous: a typed graph's model is a
    :class:`~gnnscale.nn.typed_model.TypedGNN`, which adds the typed input encoder and builds
    relation-aware layers with the graph's types; a relation-aware layer here raises
    :class:`ModelError`.

    Edge features (:mod:`gnnscale.nn.edge_features`): ``edge_dim`` De > 0 builds layers whose
    constructor takes ``edge_dim`` with it, and every layer whose forward takes ``edge_attr`` is
    called with its block's ``edge_attr`` float32 [M, De] (``edge_layers``, decided once here).

    ``forward(x, blocks, hist=None, emit=None)``: x float32 [blocks[0].num_src, F] -> logits
    float32 [blocks[-1].num_dst, C].
    """

    #: A typed graph's facts (set by TypedGNN; None here: the stack is homogeneous).
    typed: dict | None = None
    node_types: list[str] | None = None

    def __init__(
        self,
        in_dim: int,
        hidden: int,
        out_dim: int,
        num_layers: int = 2,
        layer: str | type = "sage",
        layer_kwargs: dict | None = None,
        dropout: float = 0.5,
        norm: str = "none",
        residual: bool = False,
        jk: str = "none",
        edge_dim: int = 0,
        head_dropout: float = 0.0,
    ) -> None:
        """The stack: input encoder, layers, norms, head, in the order their parameters are drawn.
        A subclass changes three steps (:meth:`_layer_kwargs`, :meth:`_make_input`,
        :meth:`_check_conv`) and may set its facts before calling this."""
        super().__init__()
        from gnnscale.nn.layers import build_conv

        if num_layers < 1:
            raise ModelError(f"num_layers must be >= 1; found {num_layers}")
        if norm not in NORMS:
            raise ModelError(f"norm must be one of {', '.join(NORMS)}; found {norm!r}")
        if jk not in JK:
            raise ModelError(f"jk must be one of {', '.join(JK)}; found {jk!r}")
        self.num_layers = num_layers
        self.dropout = float(dropout)
        self.head_dropout = float(head_dropout)
        self.residual = bool(residual)
        self.jk = jk
        self.spec = layer_name(layer)
        kwargs = self._layer_kwargs(layer, dict(layer_kwargs or {}))
        encoder = layer_needs_x0(layer)
        first = self._make_input(in_dim, hidden, encoder)
        with_head = encoder or jk != "none"
        dims = [first] + [hidden] * (num_layers - 1) + [hidden if with_head else out_dim]
        self.dims = dims
        refuse_edge_dim_kwarg(kwargs)

        def make(i: int) -> nn.Module:
            if isinstance(layer, str):
                return build_conv(layer, dims[i], dims[i + 1], index=i, num_layers=num_layers, edge_dim=edge_dim,
                                  **kwargs)
            if not (isinstance(layer, type) and issubclass(layer, nn.Module)):
                raise ModelError(f"layer must be a spec string or an nn.Module subclass; found {layer!r}")
            conv = layer(dims[i], dims[i + 1], **construct_kwargs(layer, edge_dim, kwargs))
            self._check_conv(conv, dims[i], dims[i + 1], edge_dim)
            return conv

        self.convs = nn.ModuleList(make(i) for i in range(num_layers))
        self.needs_x0 = [bool(getattr(c, "needs_x0", False)) for c in self.convs]
        self.needs_degree = [bool(getattr(c, "needs_degree", False)) for c in self.convs]
        self.needs_edge_type = [bool(getattr(c, "needs_edge_type", False)) for c in self.convs]
        self.edge_dim = int(edge_dim)
        self.edge_layers = edge_layers(self.convs, self.edge_dim, self.spec)  # called with edge_attr=
        self.uses_edge_attr = any(self.edge_layers)
        self.uses_degree = any(self.needs_degree)
        self.uses_x0 = any(self.needs_x0)
        if self.uses_x0 and not self.encodes_input:
            raise ModelError(f"layer {layer!r} needs x0 (an initial representation of the hidden size); "
                             "such layers are used with the encoder of the 'gcnii' spec")
        n_post = num_layers if with_head else num_layers - 1
        if norm == "batch":
            self.norms = nn.ModuleList(nn.BatchNorm1d(dims[i + 1]) for i in range(n_post))
        elif norm == "layer":
            self.norms = nn.ModuleList(nn.LayerNorm(dims[i + 1]) for i in range(n_post))
        else:
            self.norms = None
        self.n_post = n_post
        if with_head:
            self.head = nn.Linear(hidden * (num_layers if jk == "cat" else 1), out_dim)
        else:
            self.head = None
        if self.head_dropout > 0 and self.head is None:
            raise ModelError(f"head_dropout drops the input of the model's linear head, found a stack whose output "
                             f"layer is a convolution ({layer_name(layer)} without jk); use an encoder layer (gcnii) "
                             "or jk='cat'|'max', or head_dropout=0")

    # -- the three steps a subclass changes -------------------------------------------------
    def _layer_kwargs(self, layer, kwargs: dict) -> dict:
        """The keyword arguments every layer is built with (a homogeneous stack refuses
        relation-aware layers)."""
        if layer_needs_edge_type(layer):
            raise ModelError(f"layer {self.spec!r} is relation-aware and needs a typed graph: give the model the "
                             "graph's relations, feature_dims and num_nodes_per_type (ModelSpec.of(cfg, ..., "
                             "typed=meta['typed']) for a typed partition), or use a homogeneous layer")
        return kwargs

    def _make_input(self, in_dim: int, hidden: int, encoder: bool) -> int:
        """Build the input encoder (``self.encoder``: Linear F -> H, for layers that need x0) and
        return the first layer's input width."""
        self.encoder = nn.Linear(in_dim, hidden) if encoder else None
        return hidden if encoder else in_dim

    def _check_conv(self, conv: nn.Module, in_dim: int, out_dim: int, edge_dim: int) -> None:
        """A user's layer class, built: does it keep the layer contract?"""
        from gnnscale.nn.layers import check_layer

        check_layer(conv, in_dim, out_dim, self.spec, edge_dim=edge_dim)

    @property
    def encodes_input(self) -> bool:
        """Whether the input passes an encoder (then it is dropped out before layer 0, and h^0 is x0)."""
        return self.encoder is not None

    # -- pieces shared by mini-batch forward and layer-wise inference ------------------------
    def _dev(self, t: torch.Tensor | TypedInput | None) -> torch.Tensor | TypedInput | None:
        """``t`` (a tensor or a TypedInput) on the model's device (the callers' tensors may live on the host)."""
        if t is None:
            return None
        device = next(self.parameters()).device
        if isinstance(t, TypedInput):
            return t if t.node_type.device == device else t.to(device, non_blocking=True)
        return t if t.device == device else t.to(device, non_blocking=True)

    def encode(self, x: torch.Tensor | TypedInput, keys: torch.Tensor | None = None,
               seed: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Input features [n, F] -> (h^0 [n, dims[0]],
        x0 or None), on the model's device. ``keys`` int64 [n], ``seed``: the encoder's input
        dropout keyed by row (:func:`~gnnscale.nn.dropout.dropout`)."""
        x = self._dev(x)
        if isinstance(x, TypedInput):
            raise ModelError("the input is a TypedInput (a typed graph) but the model is untyped; build it with the "
                             "graph's types (ModelSpec.of(cfg, ..., typed=meta['typed']))")
        if self.encoder is None:
            return x, None
        h = F.relu(self.encoder(dropout(x, self.dropout, self.training, keys, seed)))
        return h, h

    def layer_step(
        self, i: int, h_src: torch.Tensor, h_dst: torch.Tensor, edge_index: torch.Tensor,
        x0_dst: torch.Tensor | None = None,
        deg_src: torch.Tensor | None = None,
        activate: bool = True,
        edge_type: torch.Tensor | None = None,
        node_type: torch.Tensor | None = None,
        edge_attr: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Layer i on one block: h^i of sources [S, dims[i]] -> h^{i+1} of destinations [D, dims[i+1]].

        ``h_dst`` must be ``h_src[:D]``; dropout is the caller's (applied to ``h_src``).
        ``deg_src``: int64 [S] in-degrees of the sources in the graph, for layers that set
        ``needs_degree`` (GCN-style normalization). ``activate=False`` leaves out the ReLU
        (the caller fuses it with the next layer's dropout; only without norm and residual).
        ``edge_type`` int64 [M], ``node_type`` int64 [S]: the block's (typed graphs), required by
        layers that set ``needs_edge_type`` (called with ``node_type=(node_type, node_type[:D])``).
        ``edge_attr`` float32 [M, De]: the block's edge features, required by the layers of
        ``edge_layers`` (and passed to them only).
        """
        conv = self.convs[i]
        h_src, h_dst, edge_index = self._dev(h_src), self._dev(h_dst), self._dev(edge_index)
        kw = {}
        if self.needs_edge_type[i]:
            if edge_type is None or node_type is None:
                raise ModelError(f"layer {i} ({self.spec}) is relation-aware and needs the block's edge_type and "
                                 "node_type; found a block without them (sample the typed partition with the typed "
                                 "sampler, which fills Block.edge_type and Block.node_type)")
            node_type = self._dev(node_type)
            kw["edge_type"] = self._dev(edge_type)
            kw["node_type"] = (node_type, node_type[:h_dst.size(0)])
        if self.needs_x0[i]:
            kw["x0"] = self._dev(x0_dst)
        if self.needs_degree[i] and deg_src is not None:
            kw["deg"] = self._dev(deg_src)
        if self.edge_layers[i]:
            if edge_attr is None:
                raise ModelError(f"layer {i} ({self.spec}) reads edge features (the model's edge_dim is "
                                 f"{self.edge_dim}) but the block has none; sample with the part's edge_attr "
                                 "(DistNeighborSampler(edge_attr=...)) or build the model with edge_dim=0")
            kw["edge_attr"] = self._dev(edge_attr)
        out = conv((h_src, h_dst), edge_index, **kw)
        if i < self.n_post and activate:
            if self.norms is not None:
                out = self.norms[i](out)
            out = F.relu(out)
            if self.residual and out.shape == h_dst.shape:
                out = out + h_dst
        return out

    def readout(self, h_last: torch.Tensor, outs: Sequence[torch.Tensor], keys: torch.Tensor | None = None,
                seed: int | None = None) -> torch.Tensor:
        """Logits from the last layer's output (and every layer's, for jumping knowledge); the
        head's input dropped out at ``head_dropout`` in training (``keys`` int64 [rows], ``seed``:
        keyed by row as :func:`~gnnscale.nn.dropout.dropout`)."""
        if self.head is None:
            return h_last
        h_last, outs = self._dev(h_last), [self._dev(o) for o in outs]
        if self.jk == "cat":
            z = torch.cat(list(outs), 1)
        elif self.jk == "max":
            z = torch.stack(list(outs)).max(0).values
        else:
            z = h_last
        if self.head_dropout > 0:
            z = dropout(z, self.head_dropout, self.training, keys, seed)
        return self.head(z)

    def input_dropout(self, i: int, h: torch.Tensor, keys: torch.Tensor | None = None,
                      seed: int | None = None) -> torch.Tensor:
        if i == 0 and not self.encodes_input:
            return h  # raw input features are not dropped (GraphSAGE's recipe)
        return dropout(h, self.dropout, self.training, keys, seed) if self.dropout > 0 else h

    def _keyed(self, rng_key: int | None, row_keys, i: int, block_index: int) -> tuple:
        """(keys, seed) of the dropout of layer ``i`` (0: the encoder's input) on the rows of
        ``blocks[block_index]``'s sources: (None, None) unless both ``rng_key`` and ``row_keys`` are
        given and the model drops in training."""
        if rng_key is None or row_keys is None or not self.training or self.dropout <= 0:
            return None, None
        keys = row_keys[block_index]
        if keys is None:
            raise ModelError(f"keyed dropout: block {block_index} has no row keys (row_keys must give one int64 "
                             "tensor per block, the original ids of its sources)")
        return keys, layer_seed(rng_key, i)

    def forward(
        self,
        x: torch.Tensor,
        blocks: Sequence[Block],
        hist: Sequence[torch.Tensor | None] | None = None,
        emit: list | None = None,
        node_degree: torch.Tensor | None = None,
        rng_key: int | None = None,
        row_keys: Sequence[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Logits [blocks[-1].num_dst, C] from input rows x [blocks[0].num_src, F] (a typed
        model: a TypedInput of blocks[0].num_src rows, and blocks with edge_type and node_type).

        hist: per block, float32 [blocks[i].num_hist, dims[i]] historical embeddings of the
            block's leaves (None or absent where ``num_hist == 0``).
        emit: if a list, each hidden layer's output h^{l} (l = 1..L-1, rows =
            ``blocks[l-1].dst_ids``) is appended to it, detached.
        node_degree: int64 [N] in-degree of every node by global id, for layers that set
            ``needs_degree`` (without it they normalize with degrees within the block).
        rng_key, row_keys: the dropout's keys (:meth:`forward_layers`).
        """
        if len(blocks) != self.num_layers:
            raise ModelError(f"model has {self.num_layers} layers but the batch has {len(blocks)} blocks")
        hooks = LayerHooks(hist=hist, emit=emit, node_degree=node_degree, rng_key=rng_key, row_keys=row_keys)
        return self.forward_layers(x, None, blocks, 0, self.num_layers, hooks)[0]

    def reseed(self, rng_key: int | None, i: int) -> None:
        """Reseed torch's generator for the dropout of layer ``i`` (``i = 0``: the encoder's input)
        under ``rng_key`` (nothing without a key, in eval mode or without dropout)."""
        if rng_key is not None and self.training and (self.dropout > 0 or self.head_dropout > 0):
            seed = (int(rng_key) * 1_000_003 + i) % (1 << 63)
            # What torch.manual_seed does, without its lazy CUDA call: that one formats a stack
            # trace each time while CUDA is not initialized (0.7 ms a call, every layer).
            torch.default_generator.manual_seed(seed)
            if torch.cuda.is_initialized():
                torch.cuda.manual_seed_all(seed)

    def forward_layers(
        self,
        h: torch.Tensor,
        x0: torch.Tensor | None,
        blocks: Sequence[Block],
        start: int,
        end: int,
        hooks: LayerHooks = NO_HOOKS,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Layers ``[start, end)`` of the stack: a pipeline stage's share of :meth:`forward`.

        Args:
            h: at ``start == 0`` the input rows x float32 [blocks[0].num_src, F] or a
                TypedInput (encoded here); otherwise h^{start}, the previous stage's output, float32
                [blocks[start - 1].num_dst, dims[start]] (activated).
            x0: GCNII's initial representation at the rows of ``h`` (None at ``start == 0``
                and for models without it).
            blocks: all L blocks of the batch (only ``blocks[start:end]`` are read).
            hooks: the rest (historical rows, emitted outputs, degrees, dropout keys, gradient
                hooks): :class:`LayerHooks`.

        Returns:
            (h, x0): at ``end == L`` the logits float32 [blocks[-1].num_dst, C] and None;
            otherwise h^{end} float32 [blocks[end - 1].num_dst, dims[end]] (activated) and x0
            at its rows (None without x0).
        """
        if not 0 <= start < end <= self.num_layers:
            raise ModelError(f"layers [{start}, {end}) are not a non-empty range of the model's {self.num_layers}")
        if self.jk != "none" and (start, end) != (0, self.num_layers):
            raise ModelError(f"jumping knowledge (jk={self.jk!r}) reads every layer's output at the seeds, so its "
                             "layers cannot be split into pipeline stages; use jk='none' with --pipeline-stages")

        hist, emit, node_degree, grad_hooks = hooks.hist, hooks.emit, hooks.node_degree, hooks.grad_hooks
        rng_key, row_keys = hooks.rng_key, hooks.row_keys
        keyed = rng_key is not None and row_keys is not None
        if keyed and len(row_keys) != len(blocks):
            raise ModelError(f"row_keys must give one tensor per block ({len(blocks)}), found {len(row_keys)}")
        if start == 0:
            if not keyed:
                self.reseed(rng_key, 0)
            h, x0 = self.encode(h, *self._keyed(rng_key, row_keys, 0, 0))
        else:
            h, x0 = self._dev(h), self._dev(x0)
        num_seeds = blocks[-1].num_dst
        outs = []
        # A hidden layer's ReLU and the next layer's dropout in one pass, where nothing reads
        # the activation in between (no norm, residual, jumping knowledge, emitted rows or hooks).
        fuse = self.norms is None and not self.residual and self.jk == "none" and emit is None and not grad_hooks
        pending_relu = False
        for i in range(start, end):
            block = blocks[i]
            if block.num_hist:
                if hist is None or hist[i] is None or hist[i].shape[0] != block.num_hist:
                    raise ModelError(f"block {i} has {block.num_hist} historical leaves but no matching hist rows "
                                     "were given (historical mode needs the halo tables' rows)")
                h = torch.cat([h, self._dev(hist[i]).to(h.dtype)])  # rows >= 0: the ReLU keeps them
            if not keyed:
                self.reseed(rng_key, i + 1)
            keys, seed = self._keyed(rng_key, row_keys, i + 1, i)
            if pending_relu:  # layer i alone reads h: a layer that reads it once may take its backward
                h = relu_dropout(h, self.dropout, self.training,
                                 sole_consumer="reads_input_once" in type(self.convs[i]).__dict__,
                                 keys=keys, seed=seed)
            else:
                h = self.input_dropout(i, h, keys, seed)
            d = block.num_dst
            deg = None
            if node_degree is not None and self.needs_degree[i]:
                deg = block.source_degrees(node_degree)
            pending_relu = fuse and i + 1 < self.num_layers and i < self.n_post
            h = self.layer_step(i, h, h[:d], block.edge_index, x0[:d] if x0 is not None else None, deg,
                                activate=not pending_relu, edge_type=block.edge_type, node_type=block.node_type,
                                edge_attr=block.edge_attr)
            if x0 is not None:
                x0 = x0[:d]
            if grad_hooks and i + 1 in grad_hooks and h.requires_grad:
                h.register_hook(grad_hooks[i + 1])
            if emit is not None and i < self.num_layers - 1:
                emit.append(h.detach())
            if self.jk != "none":
                outs.append(h[:num_seeds])
        if end < self.num_layers:
            return (F.relu(h) if pending_relu else h), x0
        keys = seed = None
        if self.head_dropout > 0 and self.training and rng_key is not None:
            if keyed:  # the seeds' keys: the first rows of the last block's sources
                keys, seed = row_keys[-1][:num_seeds], layer_seed(rng_key, self.num_layers + 1)
            else:
                self.reseed(rng_key, self.num_layers + 1)
        return self.readout(h, outs, keys, seed), None


class GraphSAGE(GNN):
    """GraphSAGE (mean aggregation, PyG's ``SAGEConv``): ``GNN`` with ``layer="sage"``."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, dropout: float = 0.5) -> None:
        super().__init__(in_dim, hidden, out_dim, num_layers, layer="sage", dropout=dropout)
