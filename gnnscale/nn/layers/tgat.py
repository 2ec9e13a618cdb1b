"""TGAT's temporal attention as a zoo layer (``--layer tgat``; docs/temporal.md section 6).

:class:`TGATConv` is :class:`gnnscale.nn.temporal.TemporalAttention` under the layer contract:
``layer((x_src, x_dst), edge_index, edge_attr=...)``. ``edge_attr``'s first column is each edge's
age (the seed's time minus the edge's: what ``--task temporal_link`` gives its blocks), encoded
by its own :class:`~gnnscale.nn.temporal.TimeEncoding` (``cos(w * dt + b)``); further columns are
plain edge features beside the encoding. Without ``edge_attr`` (``edge_dim`` 0, e.g.
``--edge-features off``) every age is 0: attention without time (the time-blind ablation).
"""
from __future__ import annotations

import torch
from torch import nn

from gnnscale.nn.layers.contract import LayerError, split_input
from gnnscale.nn.layers.registry import register
from gnnscale.nn.temporal import TemporalAttention, TimeEncoding


class TGATConv(nn.Module):
    """TGAT's layer on a block: each destination attends over its (earlier) in-edges, keys and
    values ``[x_src || enc(age) || edge_attr[:, 1:]]``, query ``[x_dst || enc(0) || 0]``, ``heads``
    heads, then ``W [x_dst || message]`` (the stack adds the activation).

    Args: ``in_dim``, ``out_dim`` (a multiple of ``heads``), ``heads`` (2), ``time_dim`` (the
    encoding's width, 32), ``edge_dim`` (columns of ``edge_attr``: the age and the rest; 0: none),
    ``dropout`` (on the attention weights, 0.1)."""

    needs_x0 = False

    def __init__(self, in_dim: int, out_dim: int, heads: int = 2, time_dim: int = 32, edge_dim: int = 0,
                 dropout: float = 0.1) -> None:
        super().__init__()
        for name, v in (("heads", heads), ("time_dim", time_dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise LayerError(f"layer 'tgat': {name} must be a positive int, found {v!r}")
        if out_dim % heads:
            raise LayerError(f"layer 'tgat': the output width {out_dim} must be a multiple of heads {heads}; give "
                             "--hidden a multiple of the heads, or another heads in --layer-kwargs")
        self.edge_dim, self.extra = int(edge_dim), max(int(edge_dim) - 1, 0)
        self.enc = TimeEncoding(time_dim)
        self.att = TemporalAttention(in_dim, out_dim, time_dim + self.extra, heads, dropout, activate=False)

    def forward(self, x, edge_index: torch.Tensor, edge_attr: torch.Tensor | None = None, size=None) -> torch.Tensor:
        x_src, x_dst = split_input(x, size)
        m = edge_index.shape[1]
        age = edge_attr[:, 0] if edge_attr is not None and edge_attr.numel() else x_src.new_zeros(m)
        enc = self.enc(age)
        zero = self.enc(x_src.new_zeros(1))
        if self.extra:
            rest = edge_attr[:, 1:].to(enc.dtype) if edge_attr is not None else enc.new_zeros(m, self.extra)
            enc = torch.cat([enc, rest], 1)
            zero = torch.cat([zero, zero.new_zeros(1, self.extra)], 1)
        return self.att(x_src, enc, zero, edge_index, x_dst.shape[0])  # x_dst is x_src[:D] (the contract)


@register("tgat", "TGAT's temporal attention (Xu et al., 2020): heads over the in-edges with each edge's age "
          "encoded as cos(w dt + b) (edge_attr column 0: --task temporal_link's ages); heads=2, time_dim=32",
          edges=True)
def _tgat(spec, in_dim, out_dim, *, index, num_layers, edge_dim: int = 0, **kwargs):
    return TGATConv(in_dim, out_dim, edge_dim=edge_dim, **kwargs)
