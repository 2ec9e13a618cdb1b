"""PyG's ``FeatureStore`` / ``GraphStore`` over an in-memory graph: tensors and edges held as given.

:func:`memory_stores` fills a :class:`MemoryFeatureStore` and a :class:`MemoryGraphStore` from a
``Data`` or a ``HeteroData``; PyG's ``NodeLoader`` / ``LinkLoader`` over them, with
:func:`gnnscale.pyg.sampler_for` as their sampler, yield the batches of the graph itself. Every
index is an original node id. The partition folders' stores are :mod:`gnnscale.pyg.stores`.
"""
from __future__ import annotations

from typing import Any

import torch
from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData, TensorAttr
from torch_geometric.data.graph_store import EdgeAttr, EdgeLayout

from gnnscale.errors import SamplerError
from gnnscale.pyg.world import refuse_unjoined_world


def _key(attr: TensorAttr) -> tuple:
    return (attr.group_name if attr.is_set("group_name") else None, attr.attr_name)


def index_of(attr: TensorAttr) -> Any:
    """The rows a PyG TensorAttr asks for (its ``index``), or None for all."""
    return attr.index if attr.is_set("index") else None


class MemoryFeatureStore(FeatureStore):
    """Node tensors in memory, by (group_name (node type, or None), attr_name); rows by original id."""

    def __init__(self) -> None:
        super().__init__()
        self._tensors: dict[tuple, torch.Tensor] = {}

    def _put_tensor(self, tensor: torch.Tensor, attr: TensorAttr) -> bool:
        index = index_of(attr)
        key = _key(attr)
        if index is None:
            self._tensors[key] = tensor
        else:
            self._tensors[key][index] = tensor
        return True

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor | None:
        t = self._tensors.get(_key(attr))
        index = index_of(attr)
        return t if t is None or index is None else t[index]

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return self._tensors.pop(_key(attr), None) is not None

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        t = self._tensors.get(_key(attr))
        return None if t is None else tuple(t.size())

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [TensorAttr(group_name=g, attr_name=a) for g, a in self._tensors]


class MemoryGraphStore(GraphStore):
    """Edges in memory (COO int64 [2, E] of original ids) by edge type (None for a ``Data``)."""

    def __init__(self) -> None:
        super().__init__()
        self._edges: dict[Any, tuple[torch.Tensor, EdgeAttr]] = {}

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        if edge_attr.layout != EdgeLayout.COO:
            raise SamplerError(f"gnnscale's MemoryGraphStore holds COO edges; found layout {edge_attr.layout.value}. "
                               "Put edge_index as (row, col) with layout='coo'.")
        row, col = edge_index
        self._edges[edge_attr.edge_type] = (torch.stack([row, col]).to(torch.int64), edge_attr)
        return True

    def _get_edge_index(self, edge_attr: EdgeAttr):
        got = self._edges.get(edge_attr.edge_type)
        return None if got is None else (got[0][0], got[0][1])

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        return self._edges.pop(edge_attr.edge_type, None) is not None

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [attr for _, attr in self._edges.values()]

    def coo_of(self, edge_type: Any = None) -> torch.Tensor:
        """int64 [2, E] of ``edge_type``."""
        return self._edges[edge_type][0]


def memory_stores(data: Data | HeteroData) -> tuple[MemoryFeatureStore, MemoryGraphStore]:
    """The node attributes (``x``, ``y``, masks: tensors of ``num_nodes`` rows) and edges of ``data``."""
    refuse_unjoined_world("memory_stores")
    fs, gs = MemoryFeatureStore(), MemoryGraphStore()
    if isinstance(data, HeteroData):
        for t in data.node_types:
            n = data[t].num_nodes
            for name, value in data[t].items():
                if torch.is_tensor(value) and value.dim() and value.size(0) == n:
                    fs.put_tensor(value, group_name=t, attr_name=name, index=None)
        for et in data.edge_types:
            s, _, d = et
            gs.put_edge_index(data[et].edge_index, edge_type=et, layout="coo",
                              size=(data[s].num_nodes, data[d].num_nodes))
        return fs, gs
    n = data.num_nodes
    for name, value in data.items():
        if name != "edge_index" and torch.is_tensor(value) and value.dim() and value.size(0) == n:
            fs.put_tensor(value, group_name=None, attr_name=name, index=None)
    gs.put_edge_index(data.edge_index, edge_type=None, layout="coo", size=(n, n))
    return fs, gs
