"""Link prediction models: an encoder of the zoo and a decoder scoring node pairs
(``docs/link_prediction.md`` section 4).

:class:`LinkModel` runs the encoder (a :class:`~gnnscale.nn.models.GNN` whose output size is
the embedding size) on a seed-edge mini-batch's blocks and scores the batch's pairs
(``edge_label_index``: positions into the blocks' last destinations) with its decoder:

- ``dot``: ``<h_u, h_v>`` (the graph auto-encoder of Kipf & Welling, 2016);
- ``mlp``: an MLP over the Hadamard product ``h_u * h_v`` (OGB's link baselines);
- ``distmult``: ``<h_u, r, h_v>`` with a learned diagonal ``r`` per relation (typed graphs);
- ``edge:<out>`` (:class:`EdgeHead`, ``--task edge``): an MLP over ``concat(h_u, h_v)`` giving
  ``out`` values per pair (class logits, or regression targets).

Scores are logits; :func:`link_loss` is binary cross-entropy with logits or a margin loss.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from gnnscale.errors import GnnscaleError

#: --task temporal_link's numbers per pair (gnnscale.tasks.temporal_link.pair_features): events
#: src->dst and dst->src before t (log), whether any, log time since the latest
PAIR_FEATURES = 6

DECODERS = ("dot", "mlp", "distmult")
LOSSES = ("bce", "margin")


class DotDecoder(nn.Module):
    """``score[i] = <h_src[i], h_dst[i]>``: float32 [P] from float32 [P, H] twice."""

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor, relation: torch.Tensor | None = None) -> torch.Tensor:
        return (h_src * h_dst).sum(-1)


class MLPDecoder(nn.Module):
    """``score[i] = MLP(h_src[i] * h_dst[i])`` (Linear(H, H), ReLU, dropout, Linear(H, 1))."""

    def __init__(self, hidden: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.lin1, self.lin2, self.dropout = nn.Linear(hidden, hidden), nn.Linear(hidden, 1), float(dropout)

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor, relation: torch.Tensor | None = None) -> torch.Tensor:
        h = F.relu(self.lin1(h_src * h_dst))
        return self.lin2(F.dropout(h, self.dropout, self.training)).squeeze(-1)


class DistMultDecoder(nn.Module):
    """``score[i] = sum(h_src[i] * r[relation[i]] * h_dst[i])`` with a learned float32 [R, H]
    diagonal per relation (``relation`` int64 [P]; None: relation 0)."""

    def __init__(self, hidden: int, num_relations: int) -> None:
        super().__init__()
        self.rel = nn.Parameter(torch.ones(int(num_relations), hidden))

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor, relation: torch.Tensor | None = None) -> torch.Tensor:
        r = self.rel[relation] if relation is not None else self.rel[0]
        return (h_src * r * h_dst).sum(-1)


class EdgeHead(nn.Module):
    """Edge classification / regression: ``out[i] = MLP(concat(h_src[i], h_dst[i]))``
    (Linear(2H, H), ReLU, dropout, Linear(H, out)): float32 [P, out] (class logits or targets).

    The concatenation (GraphStorm's edge decoders' input) keeps the direction of an edge and
    each endpoint's own embedding (a target such as a degree difference needs both); a
    relation, if given, is not read."""

    def __init__(self, hidden: int, out: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.lin1, self.lin2, self.dropout = nn.Linear(2 * hidden, hidden), nn.Linear(hidden, int(out)), float(dropout)

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor, relation: torch.Tensor | None = None) -> torch.Tensor:
        h = F.relu(self.lin1(torch.cat([h_src, h_dst], -1)))
        return self.lin2(F.dropout(h, self.dropout, self.training))


def build_decoder(name: str, hidden: int, num_relations: int = 1, dropout: float = 0.0) -> nn.Module:
    """The decoder ``name`` (one of :data:`DECODERS`, or ``edge:<out>``: an :class:`EdgeHead` of
    ``out`` outputs) for embeddings of size ``hidden``."""
    if name.startswith("edge:") and name[5:].isdigit() and int(name[5:]) > 0:
        return EdgeHead(hidden, int(name[5:]), dropout)
    if name == "dot":
        return DotDecoder()
    if name == "mlp":
        return MLPDecoder(hidden, dropout)
    if name == "distmult":
        return DistMultDecoder(hidden, num_relations)
    raise GnnscaleError(f"--decoder must be one of {', '.join(DECODERS)}; found {name!r}")


class LinkModel(nn.Module):
    """An encoder and a decoder (see the module docstring).

    Args:
        encoder: a :class:`~gnnscale.nn.models.GNN` (output size H: the embedding size).
        decoder: a module ``(h_src [P, H], h_dst [P, H], relation [P] | None) -> [P]``.
    """

    def __init__(self, encoder: nn.Module, decoder: nn.Module, pair_dim: int = 0) -> None:
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        # --task temporal_link: each pair's own history (pair_dim numbers) scored beside the decoder
        self.pair = nn.Sequential(nn.Linear(pair_dim, 32), nn.ReLU(), nn.Linear(32, 1)) if pair_dim else None

    @property
    def uses_degree(self) -> bool:
        return bool(getattr(self.encoder, "uses_degree", False))

    def forward(self, x, blocks: Sequence, edge_label_index: torch.Tensor, node_degree=None,
                relation: torch.Tensor | None = None, pair_features: torch.Tensor | None = None) -> torch.Tensor:
        """Scores float32 [P] of the pairs ``edge_label_index`` (int64 [2, P], positions into
        ``blocks[-1].dst_ids``) from input rows ``x`` [blocks[0].num_src, F]; ``pair_features``
        float32 [P, pair_dim]: a model built with pair_dim > 0 adds their score."""
        h = self.encoder(x, blocks, node_degree=node_degree)
        return self.score(h[edge_label_index[0]], h[edge_label_index[1]], relation, pair_features)

    def score(self, h_src: torch.Tensor, h_dst: torch.Tensor, relation: torch.Tensor | None = None,
              pair_features: torch.Tensor | None = None) -> torch.Tensor:
        """Scores float32 [P] of embeddings computed elsewhere (layer-wise evaluation)."""
        out = self.decoder(h_src, h_dst, relation)
        if self.pair is None:
            return out
        if pair_features is None:
            raise GnnscaleError("this link model scores each pair's history beside its embeddings (pair_dim > 0) and "
                                "was given none; pass pair_features (gnnscale.tasks.temporal_link.pair_features)")
        return out + self.pair(pair_features.to(out.dtype)).squeeze(-1)


def gnn_of(model: nn.Module) -> nn.Module:
    """The GNN of a model: a :class:`LinkModel`'s encoder, or the model itself (a node classifier,
    whose own ``encoder`` attribute is its input projection, not this)."""
    return model.encoder if isinstance(model, LinkModel) else model


def pair_correct(out: torch.Tensor, label: torch.Tensor) -> tuple[int, int]:
    """(pairs on the right side of 0, pairs): ``out`` float [P] scores, ``label`` float [P] in {0, 1}."""
    return int(((out > 0) == (label > 0.5)).sum()), int(label.numel())


def link_loss(scores: torch.Tensor, label: torch.Tensor, neg_of_pos: torch.Tensor | None, kind: str = "bce",
              margin: float = 1.0) -> torch.Tensor:
    """The loss of a batch's scores (float32 [B + Q], positives first) with ``label`` (float32
    [B + Q], 1 positive / 0 negative).

    ``bce``: mean binary cross-entropy with logits over every pair. ``margin``: mean of
    ``relu(margin - s_pos[neg_of_pos] + s_neg)`` over the negatives (``neg_of_pos`` int64 [Q]:
    the positive each negative belongs to)."""
    if kind == "bce":
        return F.binary_cross_entropy_with_logits(scores, label)
    if kind == "margin":
        num_pos = int((label > 0.5).sum())
        neg = scores[num_pos:]
        if neg.numel() == 0:
            return scores.sum() * 0.0
        return F.relu(margin - scores[:num_pos][neg_of_pos] + neg).mean()
    raise GnnscaleError(f"--link-loss must be one of {', '.join(LOSSES)}; found {kind!r}")
