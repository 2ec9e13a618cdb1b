"""Time in the model (docs/temporal.md): TGAT's time encoding of each sampled edge's age and a
temporal attention layer over a :class:`~gnnscale.samplers.temporal.TemporalBlock`.

- :class:`TimeEncoding`: ``cos(w * dt + b)`` (Xu et al., TGAT, 2020), ``w`` initialised to
  ``1 / 10 ** linspace(0, 9, d)`` (GraphMixer's fixed frequencies, learnable here), ``dt`` the
  edge's age relative to its seed (``TemporalBlock.edge_age()``, >= 1 under the strict cut); the
  result is an edge feature, so a PyG layer that takes ``edge_attr`` reads it through the same path
  (``edge_dim = d``).
- :class:`TemporalAttention`: TGAT's layer: each destination attends over its earlier neighbours,
  query ``[h_dst || enc(0)]``, keys and values ``[h_src || enc(dt)]``, multi-head, softmax per
  destination, then ``W [h_dst || message]`` and a ReLU (a destination without a neighbour keeps
  ``W [h_dst || 0]``).
- :class:`TGAT`: a stack of them over a temporal mini-batch's blocks, node inputs from features
  and optionally a learned embedding per node.

Memory-based models (TGN's per-node memory) are not here: see docs/temporal.md.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from gnnscale.nn.sparse_ops import softmax_by


class TimeEncoding(nn.Module):
    """``cos(w * dt + b)``: float [M] ages -> float32 [M, dim]."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = int(dim)
        self.w = nn.Parameter(torch.from_numpy(1.0 / 10 ** np.linspace(0, 9, self.dim)).float())
        self.b = nn.Parameter(torch.zeros(self.dim))

    def forward(self, dt: torch.Tensor) -> torch.Tensor:
        return torch.cos(dt.to(torch.float32).unsqueeze(-1) * self.w + self.b)


class TemporalAttention(nn.Module):
    """TGAT's temporal graph attention over one block (see the module docstring)."""

    def __init__(self, in_dim: int, out_dim: int, time_dim: int, heads: int = 2, dropout: float = 0.1,
                 activate: bool = True) -> None:
        super().__init__()
        self.activate = activate  # the ReLU after W [h_dst || message] (the zoo's tgat leaves it to the stack)
        if out_dim % heads:
            raise ValueError(f"out_dim {out_dim} must be a multiple of heads {heads}")
        self.heads, self.head_dim = heads, out_dim // heads
        self.q = nn.Linear(in_dim + time_dim, out_dim)
        self.kv = nn.Linear(in_dim + time_dim, 2 * out_dim)
        self.out = nn.Linear(in_dim + out_dim, out_dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, h_src: torch.Tensor, enc_edge: torch.Tensor, enc_zero: torch.Tensor, edge_index: torch.Tensor,
                num_dst: int) -> torch.Tensor:
        src, dst = edge_index
        h_dst = h_src[:num_dst]
        q = self.q(torch.cat([h_dst, enc_zero.expand(num_dst, -1)], 1)).view(num_dst, self.heads, self.head_dim)
        k, v = self.kv(torch.cat([h_src[src], enc_edge], 1)).view(-1, 2, self.heads, self.head_dim).unbind(1)
        score = (q[dst] * k).sum(-1) / math.sqrt(self.head_dim)  # [M, heads]
        alpha = self.drop(softmax_by(score, dst, num_dst))
        msg = torch.zeros(num_dst, self.heads, self.head_dim, dtype=v.dtype)
        msg.index_add_(0, dst, alpha.unsqueeze(-1) * v)
        out = self.out(torch.cat([h_dst, msg.view(num_dst, -1)], 1))
        return torch.relu(out) if self.activate else out


class TGAT(nn.Module):
    """TGAT over a temporal mini-batch: ``forward(x, blocks) -> [seeds, hidden]``.

    Args: ``in_dim`` (node features, 0 for none), ``hidden``, ``layers`` (one per block), ``time_dim``,
    ``heads``, ``num_nodes`` with ``embed_dim`` > 0: a learned embedding per node (original id
    ``node_ids``) added to the inputs (a transductive graph without features, such as CollegeMsg).
    ``time_blind``: every age is 0 (the ablation: the same model without time)."""

    def __init__(self, in_dim: int, hidden: int, layers: int, time_dim: int = 32, heads: int = 2,
                 num_nodes: int = 0, embed_dim: int = 0, dropout: float = 0.1, time_blind: bool = False) -> None:
        super().__init__()
        self.enc = TimeEncoding(time_dim)
        self.embed = nn.Embedding(num_nodes, embed_dim) if embed_dim and num_nodes else None
        first = in_dim + (embed_dim if self.embed is not None else 0)
        self.inp = nn.Linear(max(first, 1), hidden)
        self.layers = nn.ModuleList(TemporalAttention(hidden, hidden, time_dim, heads, dropout) for _ in range(layers))
        self.time_blind = time_blind

    def forward(self, x: torch.Tensor | None, blocks, node_ids: torch.Tensor) -> torch.Tensor:
        parts = [] if x is None else [x]
        if self.embed is not None:
            parts.append(self.embed(node_ids))
        h = torch.cat(parts, 1) if parts else torch.ones(node_ids.numel(), 1)
        h = self.inp(h)
        zero = self.enc(torch.zeros(1))
        for layer, b in zip(self.layers, blocks):
            age = b.edge_age()
            if self.time_blind:
                age = torch.zeros_like(age)
            h = layer(h, self.enc(age), zero, b.edge_index, b.dst_ids.numel())
        return h
