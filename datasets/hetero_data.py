"""PyG ``HeteroData`` to and from the typed ``Data`` of docs/typed_graphs.md section 1.

Both functions are re-exported by :mod:`gnnscale.datasets.typed`.
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data, HeteroData

from gnnscale.datasets.relations import relation_edges
from gnnscale.datasets.typed import check_typed, make_typed_data
from gnnscale.errors import DatasetError


def from_hetero_data(
    hd: HeteroData,
    target_type: str,
    *,
    num_classes: int | None = None,
    name: str = "hetero",
    drop_self_loops: bool = False,
) -> Data:
    """Convert a PyG ``HeteroData`` into the typed ``Data``.

    Node types keep the order of ``hd.node_types``, relations that of ``hd.edge_types``.
    Features are ``hd[t].x`` (types without ``x`` have none); labels ``hd[target_type].y``;
    the split ``hd[target_type].train_mask`` / ``val_mask`` / ``test_mask`` (absent = empty).
    ``num_classes`` defaults to ``hd.num_classes`` when set, else ``max(y) + 1``.

    A graph with times (:func:`hetero_edge_times`: ``hd[relation].edge_time`` or ``.time`` per edge,
    or ``hd[type].time`` per node) keeps every edge (each is an event, repeats too, in each
    relation's input order) and gets ``edge_time`` int64 [E] aligned with ``edge_index`` and
    ``time_source`` (docs/temporal.md section 2).
    """
    counts = {}
    for t in hd.node_types:  # loop over node types
        c = hd[t].num_nodes
        if c is None:
            raise DatasetError(f"expected a node count for type {t!r} of {name}, found none; set hd[{t!r}].num_nodes")
        counts[t] = int(c)
    if target_type not in counts:
        raise DatasetError(f"expected the target type among the node types {list(counts)} of {name}, found an unknown "
                           f"target type {target_type!r}; name the classified node type")
    store = hd[target_type]
    x_dict = {t: hd[t].x for t in hd.node_types if getattr(hd[t], "x", None) is not None}
    edges = [(tuple(et), hd[et].edge_index) for et in hd.edge_types]
    if num_classes is None and "num_classes" in hd.keys():
        num_classes = int(hd.num_classes)
    times = hetero_edge_times(hd, counts, name)
    data = make_typed_data(
        num_nodes=counts, edges=edges, target_type=target_type, y=getattr(store, "y", None), x_dict=x_dict,
        train=getattr(store, "train_mask", None), val=getattr(store, "val_mask", None),
        test=getattr(store, "test_mask", None), name=name, num_classes=num_classes,
        drop_self_loops=drop_self_loops and times is None, deduplicate=times is None, where=name,
    )
    if times is not None:  # every event kept in input order: edge_index's columns are the relations' in turn
        data.edge_time, data.time_source = times
    return data


EDGE_TIME_NAMES = ("edge_time", "time")  # a relation's per-edge times, gnnscale's name and PyG's


def hetero_edge_times(hd: HeteroData, counts: dict, name: str = "hetero") -> tuple[torch.Tensor, str] | None:
    """(int64 [E] times of every relation's edges, relation after relation in ``hd.edge_types`` order,
    each in its ``edge_index`` order; where they came from) of a ``HeteroData`` with times, or None.

    Edge times: ``hd[relation].edge_time`` (or PyG's ``.time``) on every relation; node times:
    ``hd[type].time`` on the source type of every relation (an edge takes its source's time, PyG's
    node-level rule). One line each for: times on some relations and not others (a typed temporal
    partition times every relation: give the others times, or drop them), both names on one
    relation, edge and node times together, times of another length, NaN, infinite or fractional."""
    from gnnscale.datasets.temporal import check_times as check_edge_time

    edge, node = {}, {}
    for et in hd.edge_types:  # loop over relations (a handful)
        have = [k for k in EDGE_TIME_NAMES if k in hd[et]]
        if len(have) > 1:
            raise DatasetError(f"expected one time attribute on relation {et!r} of {name}, found both edge_time and "
                               "time; keep one of them")
        if have:
            edge[et] = (have[0], hd[et][have[0]])
    for t in hd.node_types:
        if "time" in hd[t]:
            node[t] = hd[t]["time"]
    if not edge and not node:
        return None
    if edge and node:
        raise DatasetError(f"expected edge times or node times in {name}, found both (relations {sorted(edge)} and "
                           f"node types {sorted(node)}); keep one kind (PyG's time_attr is node- or edge-level)")
    parts = []
    for et in hd.edge_types:  # loop over relations
        e = int(hd[et].edge_index.size(1))
        if edge:
            if et not in edge:
                raise DatasetError(f"expected times on every relation of {name} (a typed temporal partition orders "
                                   f"every relation's in-edges by time), found none on {et!r}; give it "
                                   f"hd[{et!r}].edge_time or drop the relation")
            parts.append(check_edge_time(edge[et][1], e, f"hd[{et!r}].{edge[et][0]}"))
        else:
            if et[0] not in node:
                raise DatasetError(f"expected node times on the source type of every relation of {name}, found none "
                                   f"on {et[0]!r} (source of {et!r}); give hd[{et[0]!r}].time or drop the relation")
            nt = check_edge_time(node[et[0]], int(counts[et[0]]), f"hd[{et[0]!r}].time (one time per node)")
            parts.append(nt[hd[et].edge_index[0].to(torch.int64)])
    names = sorted({k for k, _ in edge.values()})
    source = f"per-relation {'/'.join(names)}" if edge else "node time (an edge takes its source's time)"
    return (torch.cat(parts) if parts else torch.empty(0, dtype=torch.int64)), source


def to_hetero_data(data: Data) -> HeteroData:
    """The typed ``Data`` as a PyG ``HeteroData`` (per-type ids; for references and PyG models).

    Every type gets ``num_nodes`` (and ``x`` when it has features); the target type gets ``y``
    and the three masks (per-type); every relation its ``edge_index``; ``num_classes`` and
    ``name`` are graph attributes.
    """
    check_typed(data, getattr(data, "name", "typed graph"), check_duplicates=False)
    hd = HeteroData()
    for t, name in enumerate(data.node_types):  # loop over node types
        lo, hi = int(data.type_ptr[t]), int(data.type_ptr[t + 1])
        hd[name].num_nodes = hi - lo
        if name in data.x_dict:
            hd[name].x = data.x_dict[name]
        if name == data.target_type:
            hd[name].y = data.y[lo:hi]
            for label in ("train_mask", "val_mask", "test_mask"):
                hd[name][label] = data[label][lo:hi]
    for et, ei in relation_edges(data).items():
        hd[et].edge_index = ei
    hd.num_classes = data.num_classes
    hd.name = data.name
    return hd
