"""PyG's ``FeatureStore`` / ``GraphStore`` over an in-memory graph: tensors and edges held as given.

:func:`memory_stores` fills a :class:`MemoryFeatureStore` and a :class:`MemoryGraphStore` from a
``Data`` or a ``HeteroData``; PyG's ``NodeLoader`` / ``LinkLoader`` over them, with
:func:`gnnscale.pyg.sampler_for` as their sampler, yield the batches of the graph itself. Every
index is an original node id. The partition folders' stores are :mod:`gnnscale.pyg.stores`.

PyG's three edge layouts (``EdgeLayout``: COO ``(row, col)``, CSR ``(rowptr, col)``, CSC
``(row, colptr)``) are read from any user's ``GraphStore`` by :func:`coo_of` and
:func:`graph_of_stores` (what :class:`gnnscale.pyg.NeighborLoader` samples a
``(FeatureStore, GraphStore)`` by); :class:`MemoryGraphStore` takes and gives all three.
"""
from __future__ import annotations

from typing import Any

import torch
from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData, TensorAttr
from torch_geometric.data.graph_store import EdgeAttr, EdgeLayout

from gnnscale.errors import DatasetError
from gnnscale.pyg.world import refuse_unjoined_world


def _ptr2index(ptr: torch.Tensor) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(ptr.numel() - 1), ptr[1:] - ptr[:-1])


def _index2ptr(index: torch.Tensor, size: int) -> torch.Tensor:
    ptr = torch.zeros(size + 1, dtype=torch.int64)
    ptr[1:] = torch.cumsum(torch.bincount(index, minlength=size), 0)
    return ptr


def coo_of(edges: Any, layout: EdgeLayout) -> torch.Tensor:
    """int64 [2, E] (row 0 sources, row 1 targets) of a PyG edge tensor pair in ``layout``: COO
    ``(row, col)``, CSR ``(rowptr, col)`` or CSC ``(row, colptr)``; the edges in the layout's order
    (an edge's ``e_id`` is its place there)."""
    a, b = (torch.as_tensor(v).to(torch.int64) for v in edges)
    if layout == EdgeLayout.CSR:
        a = _ptr2index(a)
    elif layout == EdgeLayout.CSC:
        b = _ptr2index(b)
    return torch.stack([a, b])


def _layout_rank(attr: EdgeAttr) -> int:
    return {EdgeLayout.COO: 0, EdgeLayout.CSC: 1, EdgeLayout.CSR: 2}[attr.layout]


def graph_of_stores(feature_store: FeatureStore, graph_store: GraphStore) -> tuple[Any, Any]:
    """The graph of a user's ``(FeatureStore, GraphStore)``, as the loaders sample it: ``(edge_index
    int64 [2, E], N)`` when its edges have no type, else ``({relation: int64 [2, E]}, {type: N})``.
    Each relation's edges are read from one layout it is stored in (COO first, else CSC, else CSR);
    a type's node count is the largest of its feature rows, the edge attributes' sizes and its ids + 1."""
    attrs: dict[Any, EdgeAttr] = {}
    for attr in graph_store.get_all_edge_attrs():
        if attr.edge_type not in attrs or _layout_rank(attr) < _layout_rank(attrs[attr.edge_type]):
            attrs[attr.edge_type] = attr
    edges = {et: coo_of(graph_store.get_edge_index(attr), attr.layout) for et, attr in attrs.items()}
    rows: dict[Any, int] = {}
    for tattr in feature_store.get_all_tensor_attrs():
        size = feature_store.get_tensor_size(tattr)
        group = tattr.group_name if tattr.is_set("group_name") else None
        if size:
            rows[group] = max(rows.get(group, 0), int(size[0]))
    typed = any(et is not None for et in edges) or any(g is not None for g in rows)
    if not typed:
        ei = edges.get(None, torch.empty(2, 0, dtype=torch.int64))
        size = attrs[None].size if None in attrs and attrs[None].size else (0, 0)
        n = max(rows.get(None, 0), *(int(s) for s in size), int(ei.max()) + 1 if ei.numel() else 0)
        return ei, n
    if None in edges:
        raise DatasetError("a (FeatureStore, GraphStore) mixes edges without an edge type and typed ones; give every "
                           "edge_index its (src, rel, dst) edge_type, or none.")
    num_nodes = {g: n for g, n in rows.items() if g is not None}
    for et, ei in edges.items():
        size = attrs[et].size
        for row, t in ((0, et[0]), (1, et[2])):
            n = max(num_nodes.get(t, 0), int(size[row]) if size else 0, int(ei[row].max()) + 1 if ei.numel() else 0)
            num_nodes[t] = n
    return edges, num_nodes


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
    """Edges in memory by edge type (None for a ``Data``): put in any of PyG's layouts (COO, CSR,
    CSC; held as COO int64 [2, E] of original ids, in the order given), got in any of them."""

    def __init__(self) -> None:
        super().__init__()
        self._edges: dict[Any, tuple[torch.Tensor, EdgeAttr]] = {}

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        coo = coo_of(edge_index, edge_attr.layout)
        self._edges[edge_attr.edge_type] = (coo, EdgeAttr(edge_attr.edge_type, EdgeLayout.COO, edge_attr.is_sorted,
                                                          edge_attr.size))
        return True

    def _get_edge_index(self, edge_attr: EdgeAttr):
        got = self._edges.get(edge_attr.edge_type)
        if got is None:
            return None
        (row, col), size = got[0], got[1].size
        if edge_attr.layout == EdgeLayout.COO:
            return row, col
        if edge_attr.layout == EdgeLayout.CSR:
            order = torch.argsort(row, stable=True)
            return _index2ptr(row, size[0] if size else int(row.max()) + 1 if row.numel() else 0), col[order]
        order = torch.argsort(col, stable=True)
        return row[order], _index2ptr(col, size[1] if size else int(col.max()) + 1 if col.numel() else 0)

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
