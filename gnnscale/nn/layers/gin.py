"""GIN: PyG's GINConv with a 2-layer MLP and a trainable eps; GINE: PyG's GINEConv (edge features)."""
from __future__ import annotations

from torch import nn

from gnnscale.nn.layers.contract import LayerError, construct
from gnnscale.nn.layers.registry import register


@register("gin", "GIN with a 2-layer MLP and trainable eps (torch_geometric.nn.GINConv)")
def _gin(spec, in_dim, out_dim, *, index, num_layers, **kwargs):
    from torch_geometric.nn import GINConv

    kwargs.setdefault("train_eps", True)
    mlp = nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))
    return construct(spec, "GINConv", GINConv, mlp, **kwargs)


@register("gine", "GINE: GIN whose messages add each edge's features mapped to the input size, relu(x_u + W e_uv); "
          "a 2-layer MLP and trainable eps (torch_geometric.nn.GINEConv; needs edge features)", edges=True)
def _gine(spec, in_dim, out_dim, *, index, num_layers, edge_dim: int = 0, **kwargs):
    """``GINEConv(MLP(in_dim -> out_dim -> out_dim), train_eps=True, edge_dim=De)``: ``out[v] =
    MLP((1 + eps) x_v + sum_{u -> v} relu(x_u + lin(e_uv)))``; ``edge_attr`` float32 [M, De] is required."""
    from torch_geometric.nn import GINEConv

    if not edge_dim:
        raise LayerError(f"layer {spec!r} (GINEConv) adds each edge's features to its messages, and this model has "
                         "none (edge_dim 0); train on a partition with edge features (e.g. humloc:PATH, a dir: folder "
                         "with edge_attr.npy) with --edge-features auto or on, or use --layer gin")
    kwargs.setdefault("train_eps", True)
    mlp = nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))
    return construct(spec, "GINEConv", GINEConv, mlp, edge_dim=edge_dim, **kwargs)
