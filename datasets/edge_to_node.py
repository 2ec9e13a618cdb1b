"""``--edge-to-node mean|sum``: each node's in-edge features aggregated into extra node features
(ogbn-proteins' baselines, docs/targets_and_edge_features.md section 4).

:func:`edge_to_node` appends to ``x`` float32 [N, F] the mean or sum of ``edge_attr`` [E, De] over
the edges into each node (``edge_index[1]``), zeros for a node without any, before partitioning:
``x`` becomes float32 [N, F + De]; ``edge_attr`` stays (the layers may read it too).
"""
from __future__ import annotations

import copy

import torch
from torch_geometric.data import Data

from gnnscale.errors import DatasetError

#: how the in-edge features of a node are aggregated
AGGREGATIONS = ("mean", "sum")


def aggregate_in_edges(edge_index: torch.Tensor, edge_attr: torch.Tensor, num_nodes: int, how: str) -> torch.Tensor:
    """float32 [num_nodes, De]: per node the ``how`` (mean or sum) of the rows of ``edge_attr``
    (float [E, De]) of the edges into it (``edge_index`` int64 [2, E], row 1 the target); zeros for
    a node without in-edges. One scatter-add (and one bincount for the mean), no loop over nodes."""
    dst = edge_index[1].to(torch.int64)
    attr = edge_attr.to(torch.float32)
    out = torch.zeros(num_nodes, attr.shape[1], dtype=torch.float32)
    out.index_add_(0, dst, attr)
    if how == "mean":
        count = torch.bincount(dst, minlength=num_nodes).clamp_(min=1).to(torch.float32)
        out /= count[:, None]
    return out


def edge_to_node(data: Data, how: str) -> Data:
    """``data`` with each node's aggregated in-edge features appended to ``x`` (a shallow copy; the
    input is not changed): ``x`` float32 [N, F] -> [N, F + De] (``x`` None or [N, 0] -> [N, De]).

    Raises:
        DatasetError: ``how`` not ``mean``/``sum``, no ``edge_attr``, edge rows that do not match
            the edges, or a typed graph (features per node type).
    """
    name = getattr(data, "name", None) or "the dataset"
    if how not in AGGREGATIONS:
        raise DatasetError(f"--edge-to-node must be one of {', '.join(AGGREGATIONS)}; found {how!r}")
    attr = getattr(data, "edge_attr", None)
    if attr is None:
        raise DatasetError(f"--edge-to-node {how} aggregates edge features into node features, and {name} has no "
                           "edge features (edge_attr); leave --edge-to-node out, or use a dataset with them "
                           "(humloc:PATH, ogbn-proteins, a dir: folder with edge_attr.npy)")
    if getattr(data, "x_dict", None) is not None:
        raise DatasetError(f"--edge-to-node does not apply to typed graphs ({name}: features per node type) yet; "
                           "leave it out")
    attr = torch.as_tensor(attr)
    num_edges = int(data.edge_index.shape[1])
    if attr.dim() != 2 or attr.shape[0] != num_edges:
        raise DatasetError(f"{name}: expected edge_attr [{num_edges}, De] (one row per edge), found shape "
                           f"{tuple(attr.shape)}; fix the dataset's edge features")
    n = int(data.num_nodes)
    agg = aggregate_in_edges(data.edge_index, attr, n, how)
    x = getattr(data, "x", None)
    x = torch.zeros(n, 0, dtype=torch.float32) if x is None else x.to(torch.float32)
    out = copy.copy(data)  # shallow: the edges and their features are shared, not copied
    out.x = torch.cat([x, agg], dim=1)
    return out
