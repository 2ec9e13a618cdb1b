"""A ``HeteroData``'s loader inputs checked, as PyG spells them: the typed graph (edges per relation,
node counts per type), a relation named ``(src, rel, dst)``, ``(src, dst)`` or ``'src__rel__dst'``,
and fan-outs per relation (a list, a dict or PyG's ``NumNeighbors``). Each bad one is a one-line
error (a :class:`~gnnscale.errors.SamplerValueError` where PyG raises ``ValueError``). The
sampler that takes them is :mod:`gnnscale.pyg.hetero`.
"""
from __future__ import annotations

from typing import Any

import torch

from gnnscale.errors import SamplerValueError
from gnnscale.pyg.layout import shown


def check_hetero_data(data) -> tuple[dict, dict]:
    """({relation: edge_index int64 [2, E]}, {type: N}) of a ``HeteroData`` (no relations: a graph
    without edges, whose seeds come back alone), or a one-line error."""
    from gnnscale.errors import DatasetError

    num_nodes = {}
    for t in data.node_types:
        n = data[t].num_nodes
        if n is None:
            raise DatasetError(f"data[{t!r}] has no num_nodes and no x to count nodes by; set data[{t!r}].num_nodes.")
        x = getattr(data[t], "x", None)
        if isinstance(x, torch.Tensor) and x.size(0) != n:
            raise DatasetError(f"data[{t!r}].x has {x.size(0)} rows but the type has num_nodes = {n}; x needs one "
                               f"row per node: fix data[{t!r}].num_nodes or data[{t!r}].x.")
        num_nodes[t] = int(n)
    edge_index = {}
    for et in data.edge_types:
        ei = getattr(data[et], "edge_index", None)
        if ei is None:
            continue  # a relation holding only labels (edge_label_index): no edges to sample
        if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2 or ei.dtype.is_floating_point:
            raise DatasetError(f"data[{et!r}] needs edge_index, an integer tensor [2, E]; found "
                               f"{getattr(ei, 'dtype', type(ei).__name__)}. Store each relation's edges there.")
        ei = ei.to(torch.int64)
        for row, t in ((0, et[0]), (1, et[2])):
            if ei.numel() and (int(ei[row].min()) < 0 or int(ei[row].max()) >= num_nodes[t]):
                raise DatasetError(f"data[{et!r}].edge_index row {row} ids must lie in [0, {num_nodes[t]}) (the "
                                   f"{t!r} nodes); found range [{int(ei[row].min())}, {int(ei[row].max())}].")
        edge_index[et] = ei
    return edge_index, num_nodes


def relation_of(name: Any, edge_types: list[tuple], node_types: list[str] | None = None) -> tuple:
    """A relation as PyG spells it: ``(src, rel, dst)``, ``(src, dst)`` (the one relation joining them;
    none and ``node_types`` given: PyG's default ``(src, 'to', dst)``) or ``'src__rel__dst'``."""
    if isinstance(name, str) and name.count("__") == 2:
        name = tuple(name.split("__"))
    if isinstance(name, tuple) and len(name) == 3 and name in edge_types:
        return name
    if isinstance(name, tuple) and len(name) == 2 and all(isinstance(v, str) for v in name):
        found = [et for et in edge_types if (et[0], et[2]) == name]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise SamplerValueError(f"the pair {name!r} names {len(found)} relations ({found}); name one as "
                                    "(src, rel, dst).")
        if node_types is not None and name[0] in node_types and name[1] in node_types:
            return (name[0], "to", name[1])
    if isinstance(name, tuple) and len(name) == 3 and node_types is not None and not edge_types and \
            name[0] in node_types and name[2] in node_types and all(isinstance(v, str) for v in name):
        return name  # a graph without edges: the relation of its types PyG's batches name
    raise SamplerValueError(f"expected a relation given as (src, rel, dst) or (src, dst), naming one of the relations "
                            f"{edge_types}; found {shown(name)}. Name one of them.")


def _fanout_list(f: Any, where: str, fix: str) -> list[int]:
    if not isinstance(f, (list, tuple)) or any(isinstance(v, bool) or not isinstance(v, int) or v < -1 for v in f):
        raise SamplerValueError(f"{where} must be a list of ints >= 0 or -1 (one per hop); found {shown(f)}. {fix}")
    return [int(v) for v in f]


def hetero_fanouts(num_neighbors, edge_types: list[tuple]) -> dict:
    """``{relation: fan-outs}`` from PyG's forms: a list (every relation), a dict per relation (keys
    ``(src, rel, dst)``, ``(src, dst)`` or ``'src__rel__dst'``), or PyG's ``NumNeighbors`` (its
    ``default`` for the relations its dict leaves out). Every relation the same number of hops, as
    PyG's (a ValueError otherwise: :class:`~gnnscale.errors.SamplerValueError`)."""
    from torch_geometric.sampler.base import NumNeighbors

    fix = ("Pass num_neighbors as a list of ints (every relation, per hop) or a dict {(src, rel, dst): [per hop]} "
           "naming every relation; 0 skips a relation at a hop, -1 takes all.")
    default = None
    if isinstance(num_neighbors, NumNeighbors):
        num_neighbors, default = num_neighbors.values, num_neighbors.default
    if isinstance(num_neighbors, (list, tuple)):
        f = _fanout_list(num_neighbors, "num_neighbors", fix)
        return {et: f for et in edge_types}
    if not isinstance(num_neighbors, dict):
        raise SamplerValueError(f"num_neighbors must be a list of ints or a dict per relation; found "
                                f"{shown(num_neighbors)}. {fix}")
    given = {}
    for key, f in num_neighbors.items():
        et = relation_of(tuple(key) if isinstance(key, tuple) else str(key), edge_types)
        given[et] = _fanout_list(f, f"num_neighbors[{et!r}]", fix)
    out = {}
    for et in edge_types:
        if et in given:
            out[et] = given[et]
        elif default is not None:
            out[et] = _fanout_list(default, "num_neighbors' default", fix)
        else:
            raise SamplerValueError(f"Missing number of neighbors for edge type {et!r}: num_neighbors names no "
                                    f"fan-outs for it. {fix}")
    if len({len(f) for f in out.values()}) > 1:
        raise SamplerValueError(f"Number of hops must be the same across all edge types (PyG's rule); found "
                                f"{sorted({len(f) for f in out.values()})} hops. {fix}")
    return out


def fanout_hops(num_neighbors) -> int:
    """The hops of a list, a dict or a ``NumNeighbors`` (0 when nothing says)."""
    from torch_geometric.sampler.base import NumNeighbors

    values = num_neighbors.values if isinstance(num_neighbors, NumNeighbors) else num_neighbors
    if isinstance(values, dict):
        values = next(iter(values.values()), [])
    return len(values) if isinstance(values, (list, tuple)) else 0
