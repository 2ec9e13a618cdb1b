"""The typed input encoder: each node type's features (or a learned embedding) mapped to the hidden size."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

from gnnscale.errors import ModelError
from gnnscale.nn.layers.relational import TypeModuleDict
from gnnscale.nn.link import gnn_of
from gnnscale.process.threads import backward_threads, intra_op_threads, op_threads
from gnnscale.samplers.block import TypedInput


class TypedEncoder(nn.Module):
    """Maps a typed mini-batch's inputs (:class:`~gnnscale.samplers.block.TypedInput`) to h^0 [S, hidden].

    Per node type t:

    * with features (``feature_dims[t] = F_t > 0``): ``linears[t] = Linear(F_t, hidden)`` applied to
      ``x.rows[t]`` [n_t, F_t] (the rows of the type's inputs, in the order of
      ``nonzero(x.node_type == t)``);
    * without (``feature_dims[t] == 0``): a learned table ``embeddings[t] = nn.Embedding(N_t, hidden)``
      (N_t = ``num_nodes_per_type[t]``) indexed by ``x.type_index`` (the per-type id). The tables
      are kept apart (``encoder.embeddings[t]``, ``encoder.embedding_types``) so that they can be
      sharded by owner and trained with a sparse optimizer; ``sparse=True`` makes their gradients
      sparse.

    A type without features may instead take its rows from the input: when ``x.emb_rows`` holds
    ``t`` (float32 [n_t, hidden], the rows of its inputs in the order of ``nonzero(x.node_type == t)``,
    e.g. pulled from a :class:`gnnscale.data.embeddings.TypedEmbeddings` sharded by owner), they are
    used instead of ``embeddings[t]``. Types named in ``external`` get no local table at all (so a
    data-parallel model neither holds nor all-reduces it); their rows must come that way.

    No activation follows (the model's dropout and first layer do). The rows of each type are
    written with one ``index_copy`` (a loop over types, none over rows). Inside a serial step
    (:func:`gnnscale.process.threads.serial_step`) a type's linear, forward and backward, takes
    the step's threads when its product is large enough (:func:`~gnnscale.process.threads.op_threads`).

    Args:
        feature_dims: T ints, F_t (0 = no features). num_nodes_per_type: T ints, N_t.
        hidden: the output size. sparse: sparse gradients for the embedding tables.
        external: types without features whose table lives outside the model (no
            ``embeddings[t]``; ``x.emb_rows[t]`` required), or True for all of them. Default: none
            (the parameters, and their creation order, are those of earlier versions).
    """

    def __init__(self, feature_dims: Sequence[int], num_nodes_per_type: Sequence[int], hidden: int,
                 sparse: bool = False, external: bool | Sequence[int] = ()) -> None:
        super().__init__()
        feature_dims, num_nodes = [int(f) for f in feature_dims], [int(n) for n in num_nodes_per_type]
        if len(feature_dims) != len(num_nodes) or not feature_dims:
            raise ModelError(f"TypedEncoder: expected feature_dims and num_nodes_per_type with one entry per node "
                             f"type (T >= 1), found {len(feature_dims)} and {len(num_nodes)} entries")
        if any(f < 0 for f in feature_dims) or any(n < 0 for n in num_nodes):
            raise ModelError(f"TypedEncoder: feature_dims and num_nodes_per_type must be >= 0, found {feature_dims} "
                             f"and {num_nodes}")
        featureless = [t for t, f in enumerate(feature_dims) if f == 0]
        if external is True:
            external = featureless
        elif external is False or external is None:
            external = []
        external = sorted({int(t) for t in external})
        if any(t not in featureless for t in external):
            raise ModelError(f"TypedEncoder: external tables are for node types without features {featureless}, "
                             f"found external={external}; a type with features is encoded by its linear layer")
        self.feature_dims, self.num_nodes_per_type, self.hidden = feature_dims, num_nodes, int(hidden)
        self.linears = TypeModuleDict()
        self.embeddings = TypeModuleDict()
        for t, (f, n) in enumerate(zip(feature_dims, num_nodes)):
            if f > 0:
                self.linears[str(t)] = nn.Linear(f, hidden)
            elif t not in external:
                self.embeddings[str(t)] = nn.Embedding(n, hidden, sparse=sparse)
        self.embedding_types = [t for t in featureless if t not in external]  # types with a local table
        self.external_types = external  # types whose rows come in x.emb_rows

    @property
    def num_types(self) -> int:
        return len(self.feature_dims)

    def forward(self, x: TypedInput) -> Tensor:
        """``x``: node_type int64 [S], type_index int64 [S], rows {t: float32 [n_t, F_t]} (and
        optionally emb_rows {t: float32 [n_t, hidden]} for types without features) -> float32
        [S, hidden] (row i: the encoding of input i)."""
        if not isinstance(x, TypedInput):
            raise ModelError(f"TypedEncoder: expected a TypedInput (node_type, type_index, rows), found "
                             f"{type(x).__qualname__}; a typed graph's mini-batch carries its inputs as TypedInput")
        node_type, type_index = x.node_type, x.type_index
        emb_rows = x.emb_rows or {}
        num = node_type.numel()
        if type_index.shape != (num,):
            raise ModelError(f"TypedEncoder: expected type_index [S={num}] like node_type, found {tuple(type_index.shape)}")
        counts = torch.bincount(node_type, minlength=self.num_types).tolist() if num else [0] * self.num_types
        if len(counts) > self.num_types:
            raise ModelError(f"TypedEncoder: node types must be in 0..{self.num_types - 1}, found {len(counts) - 1}")
        order = torch.argsort(node_type, stable=True)
        out = None
        for t, idx in enumerate(order.split(counts)):
            if not counts[t]:
                continue
            if t in self.linears:
                rows = x.rows.get(t)
                if rows is None or tuple(rows.shape) != (counts[t], self.feature_dims[t]):
                    found = None if rows is None else tuple(rows.shape)
                    raise ModelError(f"TypedEncoder: type {t} has {counts[t]} inputs and {self.feature_dims[t]} "
                                     f"features, so rows[{t}] must be [{counts[t]}, {self.feature_dims[t]}]; found "
                                     f"{found}")
                # a wide product (thousands of feature columns): the step's threads, forward and
                # backward, where the rest of a serial step runs on one (gnnscale.process.threads)
                n = op_threads(2.0 * counts[t] * self.feature_dims[t] * self.hidden)
                with intra_op_threads(n):
                    h = backward_threads(self.linears[t](rows), n)
            elif t in emb_rows:
                h = emb_rows[t]
                if tuple(h.shape) != (counts[t], self.hidden):
                    raise ModelError(f"TypedEncoder: type {t} has {counts[t]} inputs, so emb_rows[{t}] must be "
                                     f"[{counts[t]}, {self.hidden}] (the rows of nonzero(node_type == {t}), in that "
                                     f"order); found {tuple(h.shape)}")
            elif t in self.external_types:
                raise ModelError(f"TypedEncoder: type {t}'s embedding table is external (not in the model), so the "
                                 f"input must carry its {counts[t]} rows in emb_rows[{t}]; found "
                                 f"{'no emb_rows' if x.emb_rows is None else 'emb_rows of types ' + str(sorted(emb_rows))}"
                                 f". Pull them before the forward: x.emb_rows = TypedEmbeddings.pull(x)")
            else:
                ids = type_index.index_select(0, idx)
                if int(ids.min()) < 0 or int(ids.max()) >= self.num_nodes_per_type[t]:
                    raise ModelError(f"TypedEncoder: type {t} has {self.num_nodes_per_type[t]} nodes, so its type_index "
                                     f"must be in 0..{self.num_nodes_per_type[t] - 1}; found {int(ids.min())}.."
                                     f"{int(ids.max())}")
                h = self.embeddings[t](ids)
            if out is None:  # every row belongs to one type, so every row is written
                out = h.new_empty(num, self.hidden)
            out.index_copy_(0, idx, h)
        if out is None:
            ref = next(self.parameters(), None)
            out = (torch.zeros(num, self.hidden, device=node_type.device) if ref is None
                   else ref.new_zeros(num, self.hidden))
        return out

    def extra_repr(self) -> str:
        ext = f", external={self.external_types}" if self.external_types else ""
        return (f"feature_dims={self.feature_dims}, num_nodes_per_type={self.num_nodes_per_type}, "
                f"hidden={self.hidden}{ext}")


def tables_to_dataset_order(net: nn.Module, order: dict[int, torch.Tensor], inverse: bool = False) -> None:
    """Permute ``net``'s learned embedding tables in place from the partition's per-type order to
    the dataset's (``inverse``: back), by :func:`~gnnscale.data.embeddings.embedding_order`'s
    ``order`` (per featureless type t: int64 [N_t])."""
    enc = getattr(gnn_of(net), "typed_encoder", None)  # a link model: its encoder's
    for t, idx in order.items():
        if enc is None or str(t) not in enc.embeddings:
            continue
        w = enc.embeddings[t].weight
        with torch.no_grad():
            if inverse:
                w.copy_(w[idx])
            else:
                moved = torch.empty_like(w)
                moved[idx] = w
                w.copy_(moved)
