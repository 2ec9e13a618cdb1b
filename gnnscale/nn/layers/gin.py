"""GIN: PyG's GINConv with a 2-layer MLP and a trainable eps."""
from __future__ import annotations

from torch import nn

from gnnscale.nn.layers.contract import construct
from gnnscale.nn.layers.registry import register


@register("gin", "GIN with a 2-layer MLP and trainable eps (torch_geometric.nn.GINConv)")
def _gin(spec, in_dim, out_dim, *, index, num_layers, **kwargs):
    from torch_geometric.nn import GINConv

    kwargs.setdefault("train_eps", True)
    mlp = nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))
    return construct(spec, "GINConv", GINConv, mlp, **kwargs)
