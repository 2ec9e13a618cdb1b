"""What PyG's loader arguments may be: each check returns the argument in the form the samplers take,
or raises one line (what was expected, what was found, how to fix it; a
:class:`~gnnscale.errors.SamplerValueError` where PyG raises ``ValueError``). Shared by the in-memory
loaders (:mod:`gnnscale.pyg.loaders`), a run's rank loaders (:mod:`gnnscale.pyg.run`) and the drop-in
(:mod:`gnnscale.pyg.distributed`).
"""
from __future__ import annotations

from typing import Any

import torch
from torch_geometric.data import Data
from torch_geometric.sampler.base import NumNeighbors, SubgraphType

from gnnscale.errors import DatasetError, SamplerError, SamplerValueError
from gnnscale.pyg.layout import SUBGRAPH_TYPES, shown
from gnnscale.pyg.typed_inputs import relation_of

_NODE_FIX = "Pass a torch_geometric.data.Data with edge_index int64 [2, E] and node attributes of num_nodes rows."


def check_data(data: Any) -> tuple[torch.Tensor, int]:
    """(edge_index int64 [2, E], num_nodes) of an in-memory homogeneous ``Data``, or a one-line error."""
    if not isinstance(data, Data):
        raise DatasetError(f"gnnscale.pyg loaders take a torch_geometric Data, a HeteroData or (FeatureStore, "
                           f"GraphStore); found {type(data).__name__}. {_NODE_FIX}")
    ei = getattr(data, "edge_index", None)
    if ei is None:  # a graph without edges: its seeds come back alone
        ei = torch.empty(2, 0, dtype=torch.int64)
    if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2 or ei.dtype.is_floating_point \
            or ei.dtype == torch.bool:
        shape = tuple(ei.shape) if isinstance(ei, torch.Tensor) else type(ei).__name__
        raise DatasetError(f"data.edge_index must be an integer tensor of shape [2, E]; found "
                           f"{getattr(ei, 'dtype', None)}, shape {shape}. Use edge_index.long() of shape [2, E].")
    n = data.num_nodes
    if n is None:
        raise DatasetError(f"data has no num_nodes and no x to count nodes by. Set data.num_nodes. {_NODE_FIX}")
    x = getattr(data, "x", None)
    if isinstance(x, torch.Tensor) and x.size(0) != n:
        raise DatasetError(f"data.x has {x.size(0)} rows but the graph has num_nodes = {n}; x needs one row per "
                           "node: fix data.num_nodes or data.x.")
    ei = ei.to(torch.int64)
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
        raise DatasetError(f"data.edge_index ids must lie in [0, {n}) (num_nodes = {n}); found range "
                           f"[{int(ei.min())}, {int(ei.max())}]. Fix edge_index or set data.num_nodes.")
    return ei, int(n)


def check_num_neighbors(num_neighbors: Any) -> list[int]:
    """Fan-outs per hop: a list or tuple of ints (or PyG's ``NumNeighbors`` of one), each >= 0 (0:
    no neighbours at that hop) or -1 (all); empty: no hops (the seeds alone)."""
    fix = "Pass num_neighbors as a list of ints, one per hop from the seeds, e.g. num_neighbors=[10, 5] (-1: all)."
    if isinstance(num_neighbors, NumNeighbors):
        num_neighbors = num_neighbors.values
    if isinstance(num_neighbors, dict):
        raise SamplerValueError(f"num_neighbors as a dict (per edge type) needs a HeteroData; found a dict with a "
                                f"homogeneous graph. {fix}")
    if not isinstance(num_neighbors, (list, tuple)):
        raise SamplerValueError(f"num_neighbors must be a list of ints; found {shown(num_neighbors)}. {fix}")
    bad = [f for f in num_neighbors if isinstance(f, bool) or not isinstance(f, int) or f < -1]
    if bad:
        raise SamplerValueError(f"num_neighbors must hold ints >= 0 or -1; found {shown(list(num_neighbors))}. {fix}")
    return [int(f) for f in num_neighbors]


def check_subgraph_type(subgraph_type: Any, directed: bool = True) -> str:
    """PyG's ``subgraph_type`` (its ``SubgraphType`` or the name) as a name; ``directed=False``
    (PyG's deprecated spelling) is ``"induced"``."""
    if not directed:
        return "induced"
    name = subgraph_type.value if isinstance(subgraph_type, SubgraphType) else subgraph_type
    if name not in SUBGRAPH_TYPES:
        raise SamplerValueError(f"subgraph_type must be one of {list(SUBGRAPH_TYPES)} (or PyG's SubgraphType); "
                                f"found {shown(subgraph_type)}.")
    return name


def check_input_nodes(input_nodes: Any, num_nodes: int, distinct: bool = True) -> torch.Tensor | None:
    """``input_nodes`` as int64 ids in ``[0, num_nodes)`` (a bool mask of num_nodes entries, or ids: a
    tensor, a list, a range), or None (all nodes); ``distinct``: repeated ids refused (the rank
    loaders' steps; PyG's loaders take repeats)."""
    if input_nodes is None:
        return None
    if isinstance(input_nodes, tuple) or isinstance(input_nodes, str):
        raise SamplerValueError(f"input_nodes by node type ({shown(input_nodes)}) needs a HeteroData; pass a "
                                "bool mask [num_nodes] or int64 node ids.")
    t = input_nodes if isinstance(input_nodes, torch.Tensor) else \
        torch.as_tensor(list(input_nodes), dtype=torch.int64)
    if t.dtype == torch.bool:
        if t.dim() != 1 or t.numel() != num_nodes:
            raise SamplerValueError(f"input_nodes as a mask must be bool [{num_nodes}]; found shape {tuple(t.shape)}. "
                                    "Pass a mask of num_nodes entries or int64 node ids.")
        return torch.nonzero(t).flatten()
    if t.dtype.is_floating_point or t.dim() != 1:
        raise SamplerValueError(f"input_nodes must be a 1-D int64 tensor of node ids or a bool mask; found {t.dtype}, "
                                f"shape {tuple(t.shape)}. Pass ids as int64 (ids.long()) or a mask as bool "
                                "(mask.bool()).")
    t = t.to(torch.int64)
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= num_nodes):
        raise SamplerValueError(f"input_nodes ids must lie in [0, {num_nodes}); found range [{int(t.min())}, "
                                f"{int(t.max())}]. Pass ids of this graph's nodes.")
    if distinct and torch.unique(t).numel() != t.numel():
        raise SamplerValueError(f"input_nodes must be distinct (each is one seed row of a batch); found "
                                f"{t.numel() - torch.unique(t).numel()} repeated id(s). Use torch.unique(input_nodes).")
    return t


def given_as_mask(input_nodes: Any) -> bool:
    """Whether ``input_nodes`` is a bool mask (or ``(node type, bool mask)``): PyG then gives each
    batch's ``input_id`` as the seeds' node ids, not their positions among ``input_nodes``."""
    if isinstance(input_nodes, tuple) and len(input_nodes) == 2:
        input_nodes = input_nodes[1]
    return isinstance(input_nodes, torch.Tensor) and input_nodes.dtype == torch.bool


def check_seeds(input_nodes: Any, num_nodes: int | dict) -> Any:
    """``input_nodes`` as node ids: int64 ids (``num_nodes`` an int; repeats allowed, as PyG's loaders
    take them: each copy a seed row of its own) or ``(node type, ids)`` (``num_nodes`` per type), given
    as ids or a bool mask (typed: a type, or ``(type, ids or mask or None)``)."""
    if isinstance(num_nodes, dict):
        return check_typed_input_nodes(input_nodes, num_nodes, distinct=False)
    if input_nodes is None:
        return torch.arange(num_nodes)
    return check_input_nodes(input_nodes, num_nodes, distinct=False)


class MaskInputId:
    """PyG's ``input_id`` for seeds given as a bool mask: a batch's ``input_id`` holds its seeds' node
    ids (PyG's ``get_input_nodes``: ``mask.nonzero()``), not their positions among the mask's nodes.

    The sampler still gets the positions (its draws are keyed by the first one, on 1 or N
    processes alike: the id and mask forms give the same batches); ``filter_fn`` maps them to
    node ids as each batch is made. ``_mask_ids``: whether ``input_nodes`` was a mask."""

    _mask_ids: bool = False

    def filter_fn(self, out: Any) -> Any:
        if self._mask_ids:
            out.metadata = (self.input_data.node[out.metadata[0]], *out.metadata[1:])  # type: ignore[attr-defined]
        return super().filter_fn(out)  # type: ignore[misc]


def edge_weight_of(data: Data, weight_attr: str | None) -> torch.Tensor | None:
    """PyG's ``weight_attr``: ``data[weight_attr]``, float [E] (checked by the sampler), or None."""
    if weight_attr is None:
        return None
    if not isinstance(weight_attr, str) or weight_attr not in data:
        raise SamplerValueError(f"weight_attr={shown(weight_attr)} names no attribute of data (its attributes: "
                                f"{data.keys()}); store one float weight per edge, e.g. data.edge_weight, and pass "
                                "weight_attr='edge_weight'.")
    return torch.as_tensor(data[weight_attr])


def check_typed_input_nodes(input_nodes: Any, num_nodes: dict, distinct: bool = True) -> tuple:
    """``(node type, int64 ids)`` of a HeteroData's ``input_nodes`` (``type`` or ``(type, ids/mask)``)."""
    if isinstance(input_nodes, str):
        input_nodes = (input_nodes, None)
    if not isinstance(input_nodes, tuple) or len(input_nodes) != 2 or input_nodes[0] not in num_nodes:
        raise SamplerValueError(f"a HeteroData loader needs input_nodes as a node type or (node type, ids or mask), "
                                f"the type among {list(num_nodes)}; found {shown(input_nodes)}. "
                                "E.g. input_nodes=('paper', mask).")
    t, ids = input_nodes
    ids = torch.arange(num_nodes[t]) if ids is None else check_input_nodes(ids, num_nodes[t], distinct)
    return t, ids


def check_edge_label_index(edge_label_index: Any, num_nodes: int) -> torch.Tensor | None:
    """``edge_label_index`` as int64 [2, B] ids in ``[0, num_nodes)``, or None (every edge)."""
    if edge_label_index is None:
        return None
    if isinstance(edge_label_index, tuple):
        raise SamplerValueError("edge_label_index by edge type needs a HeteroData; found a tuple with a Data. "
                                "Pass an int64 tensor [2, B].")
    t = torch.as_tensor(edge_label_index)
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.dim() != 2 or t.size(0) != 2:
        raise SamplerValueError(f"edge_label_index must be an int64 tensor [2, B]; found {t.dtype}, shape "
                                f"{tuple(t.shape)}. Pass pairs as columns (row 0 sources, row 1 targets).")
    t = t.to(torch.int64)
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= num_nodes):
        raise SamplerValueError(f"edge_label_index ids must lie in [0, {num_nodes}); found range [{int(t.min())}, "
                                f"{int(t.max())}]. Pass pairs of this graph's nodes.")
    return t


def check_edge_label(edge_label: Any, pairs: torch.Tensor | None) -> None:
    """One line when ``edge_label`` has not one entry per pair of ``edge_label_index``."""
    if edge_label is not None and pairs is not None and torch.as_tensor(edge_label).size(0) != pairs.size(1):
        raise SamplerValueError(f"edge_label must have one entry per pair of edge_label_index ({pairs.size(1)}); "
                                f"found {torch.as_tensor(edge_label).size(0)}. Give one label per column.")


def check_typed_edge_label_index(edge_label_index: Any, edge_index: dict, num_nodes: dict) -> tuple:
    """``(relation, int64 [2, B] pairs)`` of a HeteroData's ``edge_label_index``: a relation, or
    ``(relation, pairs or None)`` (None: the relation's edges), the relation spelt as PyG takes it
    (``(src, rel, dst)``, ``(src, dst)``; one without edges too), ids in their types' ranges."""
    fix = "Pass edge_label_index=((src, rel, dst), pairs int64 [2, B]) or a relation of the graph."
    rel, pairs = edge_label_index, None
    if isinstance(edge_label_index, tuple) and len(edge_label_index) == 2 and \
            not all(isinstance(v, str) for v in edge_label_index):
        rel, pairs = edge_label_index
    if isinstance(rel, list):
        rel = tuple(rel)
    et = relation_of(rel, list(edge_index), list(num_nodes))
    if pairs is None:
        if et not in edge_index:
            raise SamplerValueError(f"edge_label_index names relation {et!r}, which has no edges to take as pairs; "
                                    f"{fix}")
        return et, edge_index[et]
    t = torch.as_tensor(pairs)
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.dim() != 2 or t.size(0) != 2:
        raise SamplerValueError(f"edge_label_index pairs must be an int64 tensor [2, B]; found {shown(t)}. {fix}")
    t = t.to(torch.int64)
    for row, typ in ((0, et[0]), (1, et[2])):
        if t.numel() and (int(t[row].min()) < 0 or int(t[row].max()) >= num_nodes[typ]):
            raise SamplerValueError(f"edge_label_index row {row} ids must lie in [0, {num_nodes[typ]}) (the {typ!r} "
                                    f"nodes); found range [{int(t[row].min())}, {int(t[row].max())}]. {fix}")
    return et, t


def refuse_unsupported(given: dict) -> None:
    """One line for a PyG option this sampler does not honour (set to a value other than PyG's default):
    the seeds' times without ``time_attr`` (``input_time``, ``edge_label_time``, ``temporal_strategy``)
    and a sampler of the user's own (``neighbor_sampler``)."""
    defaults = {"input_time": None, "edge_label_time": None, "temporal_strategy": "uniform", "time_attr": None,
                "neighbor_sampler": None}
    for name, value in given.items():
        if name in defaults and value is not defaults[name] and not (
                isinstance(value, str) and value == defaults[name]):
            raise SamplerError(f"gnnscale.pyg loaders do not support {name}={shown(value)} yet (PyG's default "
                               f"{defaults[name]!r} only); leave {name} out, or use PyG's loader with pyg-lib.")
