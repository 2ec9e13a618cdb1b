"""PyG ``HeteroData`` to and from the typed ``Data`` of docs/typed_graphs.md section 1.

Both functions are re-exported by :mod:`gnnscale.datasets.typed`.
"""

from __future__ import annotations

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
    return make_typed_data(
        num_nodes=counts, edges=edges, target_type=target_type, y=getattr(store, "y", None), x_dict=x_dict,
        train=getattr(store, "train_mask", None), val=getattr(store, "val_mask", None),
        test=getattr(store, "test_mask", None), name=name, num_classes=num_classes,
        drop_self_loops=drop_self_loops, where=name,
    )


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
