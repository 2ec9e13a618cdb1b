"""PyG's in-memory graphs as gnnscale datasets: a ``Data``, a ``HeteroData`` or the
``(train, val, test)`` triple of PyG's ``RandomLinkSplit``, checked, converted to the dataset
contract and named by their content (issue 46, item 1).

Public API (``gnnscale.train(data)``, ``partition_graph(data, ...)`` and ``gnnscale.pyg``'s
loaders share the checks, so a bad graph is the same one line everywhere):

* :func:`is_inmemory` ``(obj) -> bool``: a ``Data``, a ``HeteroData`` or a triple of ``Data``.
* :func:`check_data` ``(data) -> (edge_index int64 [2, E], N)``: a homogeneous ``Data``'s checks.
* :func:`check_hetero_data` ``(data) -> ({relation: edge_index int64 [2, E]}, {type: N})``.
* :func:`check_graph` ``(obj)``: either (and each ``Data`` of a triple).
* :func:`from_pyg` ``(obj, name=None) -> Data``: the contract ``Data`` (``docs/targets_and_edge_features.md``;
  a ``HeteroData``: the typed ``Data`` of ``docs/typed_graphs.md``; a triple: the train ``Data``'s
  message-passing graph with ``data.link_split``).
* :func:`content_digest` ``(obj) -> str``: sha256 over every attribute's name, dtype, shape and
  bytes: the partition cache's key of an in-memory graph.

What is read of a homogeneous ``Data``: ``x`` (float, [N, F]; required), ``y`` (class ids int [N],
negative = unlabelled; 0/1 multi-hot float [N, C]; float regression targets [N] / [N, D]; absent:
every node unlabelled), the split as bool masks ``train_mask`` / ``val_mask`` / ``test_mask`` [N]
or as index tensors (``train_mask`` holding ids, or ``train_idx`` / ``val_idx`` / ``test_idx``;
absent: empty), ``edge_attr`` (float [E, De] or [E], aligned with ``edge_index``), ``num_classes``
and ``name`` when set. Duplicate edges are dropped keeping the first and its attributes. A
``HeteroData`` is read by :func:`~gnnscale.datasets.hetero_data.from_hetero_data`: its target type
is the one node type with ``y`` (or ``data.target_type``). Everything is vectorized.
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData

from gnnscale.errors import DatasetError

_FIX = "PyG's layout: data.edge_index int64 [2, E] (row 0 sources, row 1 targets) and node attributes of num_nodes rows"


def is_inmemory(obj: Any) -> bool:
    """Whether ``obj`` is an in-memory PyG graph: a ``Data``, a ``HeteroData`` or a
    ``RandomLinkSplit`` triple ``(train, val, test)`` of ``Data``."""
    if isinstance(obj, (Data, HeteroData)):
        return True
    return isinstance(obj, (tuple, list)) and len(obj) == 3 and all(isinstance(d, Data) for d in obj)


def _int_edges(ei: Any, where: str) -> torch.Tensor:
    if ei is None:
        raise DatasetError(f"expected {where}.edge_index, an integer tensor [2, E] of the graph's edges, found none; "
                           f"set it ({_FIX})")
    if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2 or ei.dtype.is_floating_point \
            or ei.dtype == torch.bool or ei.is_complex():
        shape = tuple(ei.shape) if isinstance(ei, torch.Tensor) else type(ei).__name__
        raise DatasetError(f"expected {where}.edge_index an integer tensor [2, E], found {getattr(ei, 'dtype', None)} "
                           f"of shape {shape}; pass edge_index.long() of shape [2, E]")
    return ei.to(torch.int64)


def _check_range(ei: torch.Tensor, n: int, where: str, rows: str = "ids") -> None:
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
        raise DatasetError(f"expected {where} {rows} in [0, {n}) (num_nodes = {n}), found ids from {int(ei.min())} to "
                           f"{int(ei.max())}; fix the edges or set num_nodes")


def check_data(data: Any) -> tuple[torch.Tensor, int]:
    """(edge_index int64 [2, E], N) of a homogeneous ``Data``, or a one-line :class:`DatasetError`:
    no ``edge_index`` (or not an integer [2, E]), no node count, ``x`` rows that do not match
    ``num_nodes``, ids out of ``[0, N)``."""
    if not isinstance(data, Data):
        raise DatasetError(f"expected a torch_geometric Data, found {type(data).__name__}; {_FIX}")
    ei = _int_edges(getattr(data, "edge_index", None), "data")
    x = getattr(data, "x", None)
    n = data.num_nodes
    if n is None:
        raise DatasetError("expected a node count (data.num_nodes or data.x), found neither; set data.num_nodes")
    if isinstance(x, torch.Tensor) and (x.dim() == 0 or x.size(0) != n):
        rows = x.size(0) if x.dim() else 0
        raise DatasetError(f"expected data.x with one row per node (num_nodes = {n}), found {rows} rows; fix data.x "
                           "or data.num_nodes")
    _check_range(ei, int(n), "data.edge_index")
    return ei, int(n)


def check_hetero_data(data: Any) -> tuple[dict, dict]:
    """({relation: edge_index int64 [2, E]}, {node type: N}) of a ``HeteroData``, or a one-line
    :class:`DatasetError`: a relation naming a node type the graph does not have, a type without
    a node count, ``x`` rows that do not match its ``num_nodes``, no relation, a relation without
    an integer ``edge_index``, ids out of their type's range."""
    types = list(data.node_types)
    for et in data.edge_types:
        for t in (et[0], et[2]):
            if t not in types:
                raise DatasetError(f"expected relation {et!r} to join node types of the graph ({', '.join(types)}), "
                                   f"found unknown node type {t!r}; add data[{t!r}].x or .num_nodes, or fix the "
                                   "relation's name")
    num_nodes = {}
    for t in types:
        n = data[t].num_nodes
        if n is None:
            raise DatasetError(f"expected a node count for type {t!r}, found none; set data[{t!r}].num_nodes")
        x = getattr(data[t], "x", None)
        if isinstance(x, torch.Tensor) and (x.dim() == 0 or x.size(0) != n):
            raise DatasetError(f"expected data[{t!r}].x with one row per node (num_nodes = {n}), found "
                               f"{x.size(0) if x.dim() else 0} rows; fix data[{t!r}].x or data[{t!r}].num_nodes")
        num_nodes[t] = int(n)
    if not data.edge_types:
        raise DatasetError("expected at least one relation data[(src, rel, dst)].edge_index, found none; add the "
                           "graph's edges")
    edge_index = {}
    for et in data.edge_types:
        ei = _int_edges(getattr(data[et], "edge_index", None), f"data[{et!r}]")
        for row, t in ((0, et[0]), (1, et[2])):
            _check_range(ei[row], num_nodes[t], f"data[{et!r}].edge_index", f"row {row} ({t!r}) ids")
        edge_index[et] = ei
    return edge_index, num_nodes


def check_graph(obj: Any) -> None:
    """Every check of :func:`check_data` / :func:`check_hetero_data` on an in-memory graph (each
    ``Data`` of a ``RandomLinkSplit`` triple), or a one-line :class:`DatasetError`."""
    if isinstance(obj, HeteroData):
        check_hetero_data(obj)
    elif isinstance(obj, Data):
        check_data(obj)
    elif is_inmemory(obj):
        for d in obj:
            check_data(d)
    else:
        raise DatasetError(f"expected a torch_geometric Data, HeteroData or RandomLinkSplit's (train, val, test), "
                           f"found {type(obj).__name__}; {_FIX}")


# --------------------------------------------------------------------------- conversion


def _split(data: Data, label: str, n: int) -> torch.Tensor:
    """bool [n] of split ``label``: a bool mask, or ids (``<label>_mask`` holding ids, ``<label>_idx``)."""
    value = getattr(data, f"{label}_mask", None)
    name = f"{label}_mask"
    if value is None:
        value, name = getattr(data, f"{label}_idx", None), f"{label}_idx"
    if value is None:
        return torch.zeros(n, dtype=torch.bool)
    t = torch.as_tensor(value)
    if t.dtype == torch.bool:
        if t.shape != (n,):
            raise DatasetError(f"expected data.{name} a bool mask [{n}] or node ids, found shape {tuple(t.shape)}; "
                               "give one flag per node")
        return t
    if t.dtype.is_floating_point or t.dim() != 1:
        raise DatasetError(f"expected data.{name} a bool mask [{n}] or int64 node ids [k], found {t.dtype} of shape "
                           f"{tuple(t.shape)}; pass a mask or ids")
    _check_range(t, n, f"data.{name}")
    mask = torch.zeros(n, dtype=torch.bool)
    mask[t.long()] = True
    return mask


def _homogeneous(data: Data, name: str) -> Data:
    from gnnscale.datasets._data import make_data
    from gnnscale.datasets.targets import attach_targets, dedupe_edges, target_kind

    ei, n = check_data(data)
    x = getattr(data, "x", None)
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.is_complex():
        raise DatasetError(f"expected data.x node features [{n}, F], found "
                           f"{'none' if x is None else tuple(getattr(x, 'shape', ()))}; give every node a feature "
                           "row (e.g. torch.ones(num_nodes, 1) for a graph without features)")
    attr = getattr(data, "edge_attr", None)
    if attr is not None:
        attr = torch.as_tensor(attr)
        attr = attr.unsqueeze(1) if attr.dim() == 1 else attr
        if attr.dim() != 2 or attr.size(0) != ei.size(1) or not attr.dtype.is_floating_point:
            raise DatasetError(f"expected data.edge_attr floats [{ei.size(1)}, De] (a row per column of edge_index), "
                               f"found {attr.dtype} of shape {tuple(attr.shape)}; fix it or drop edge_attr")
    edge_index, attr, _ = dedupe_edges(ei[0].numpy(), ei[1].numpy(), n, attr)
    masks = [_split(data, k, n) for k in ("train", "val", "test")]
    y = getattr(data, "y", None)
    classes = getattr(data, "num_classes", None) if "num_classes" in data.keys() else None
    classes = None if classes is None else int(classes)
    if y is None:
        y = torch.full((n,), -1, dtype=torch.int64)
    y = torch.as_tensor(y)
    kind = target_kind(Data(y=y, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2], num_nodes=n,
                            **({"target_kind": data.target_kind} if "target_kind" in data.keys() else {})))
    # make_data knows class ids: other kinds get placeholder ids that keep the masks, then their targets
    ids = y if kind == "class" else torch.zeros(n, dtype=torch.int64)
    out = make_data(x=x, y=ids.reshape(-1) if kind == "class" else ids, edge_index=edge_index, train_mask=masks[0],
                    val_mask=masks[1], test_mask=masks[2], name=name,
                    num_classes=classes if kind == "class" else None, where=f"the Data {name}")
    if kind != "class" or attr is not None:
        attach_targets(out, out.y if kind == "class" else y, kind=kind, where=f"the Data {name}",
                       num_classes=out.num_classes if kind == "class" else classes, edge_attr=attr)
    return out


def _link_triple(obj, name: str) -> Data:
    """RandomLinkSplit's ``(train, val, test)``: the train graph (its ``edge_index`` is the
    message-passing graph) with ``link_split``: the positive supervision pairs of each, the
    negatives of val and test (``edge_label`` 0, or ``neg_edge_label_index``), metric AUC."""
    from gnnscale.datasets.link_split import LinkSplit

    def pairs(d: Data, which: str) -> tuple[torch.Tensor, torch.Tensor]:
        if "pos_edge_label_index" in d.keys():  # split_labels=True
            neg = getattr(d, "neg_edge_label_index", None)
            return d.pos_edge_label_index.long(), (torch.zeros(2, 0, dtype=torch.int64) if neg is None else neg.long())
        eli, lab = getattr(d, "edge_label_index", None), getattr(d, "edge_label", None)
        if eli is None or lab is None:
            raise DatasetError(f"expected the {which} Data of RandomLinkSplit's (train, val, test) to hold "
                               "edge_label_index and edge_label, found none; split with "
                               "torch_geometric.transforms.RandomLinkSplit, or pass one Data with task='link'")
        pos = lab.reshape(-1) > 0
        return eli[:, pos].long(), eli[:, ~pos].long()

    train, val, test = obj
    out = _homogeneous(train, name)
    n = int(out.num_nodes)
    (tp, _), (vp, vn), (sp, sn) = pairs(train, "train"), pairs(val, "val"), pairs(test, "test")
    for which, t in (("train", tp), ("val", vp), ("val negative", vn), ("test", sp), ("test negative", sn)):
        _check_range(t, n, f"the {which} edge_label_index")
    out.link_split = LinkSplit(tp.contiguous(), vp.contiguous(), sp.contiguous(), vn.contiguous(), sn.contiguous(),
                               None, None, "auc", {"source": "RandomLinkSplit"})
    out.link_split.check(n)
    return out


def _hetero(data: HeteroData, name: str) -> Data:
    from gnnscale.datasets.hetero_data import from_hetero_data

    check_hetero_data(data)
    target = data["target_type"] if "target_type" in data.keys() else None
    if target is None:
        labelled = [t for t in data.node_types if getattr(data[t], "y", None) is not None]
        if len(labelled) != 1:
            raise DatasetError(f"expected one node type with labels y (the classified type), found "
                               f"{len(labelled)} ({', '.join(labelled) or 'none'}); set data.target_type = "
                               "'<type>' to name it")
        target = labelled[0]
    return from_hetero_data(data, str(target), name=name)


def from_pyg(obj: Any, name: str | None = None) -> Data:
    """The dataset contract's ``Data`` of an in-memory PyG graph (see the module docstring);
    ``name`` (default ``data.name``, else ``inmemory``) is recorded as ``data.name``.

    Raises:
        DatasetError: one line, naming what was expected, what was found and how to fix it.
    """
    first = obj[0] if isinstance(obj, (tuple, list)) and obj else obj
    given = getattr(first, "name", None) if isinstance(first, (Data, HeteroData)) and "name" in first.keys() else None
    name = str(name or (given if isinstance(given, str) else None) or "inmemory")
    if isinstance(obj, HeteroData):
        return _hetero(obj, name)
    if isinstance(obj, Data):
        if "edge_time" in obj.keys() or "time" in obj.keys():  # a temporal graph: every event kept, with its time
            from gnnscale.datasets.temporal import from_pyg as temporal_from_pyg

            out = temporal_from_pyg(obj, name)
            out.name = name
            return out
        if "node_types" in obj.keys() and "type_ptr" in obj.keys():  # gnnscale's typed Data: as it is
            from gnnscale.datasets.typed import check_typed

            check_typed(obj, name)
            return obj
        return _homogeneous(obj, name)
    check_graph(obj)
    return _link_triple(obj, name)


# --------------------------------------------------------------------------- content key


def _feed(h: "hashlib._Hash", obj: Any) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy())
    elif isinstance(obj, np.ndarray):
        _feed(h, torch.from_numpy(np.ascontiguousarray(obj)))
    elif isinstance(obj, (Data, HeteroData)):
        h.update(type(obj).__name__.encode())
        for store in obj.stores:
            h.update(repr(getattr(store, "_key", None)).encode())
            for key in sorted(store.keys()):
                h.update(f"K{key}".encode())
                _feed(h, store[key])
    elif isinstance(obj, (tuple, list)):
        h.update(f"S{len(obj)}".encode())
        for o in obj:
            _feed(h, o)
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)}".encode())
        for k in sorted(obj, key=repr):
            h.update(repr(k).encode())
            _feed(h, obj[k])
    elif hasattr(obj, "__dataclass_fields__"):
        _feed(h, {k: getattr(obj, k) for k in obj.__dataclass_fields__})
    else:
        h.update(f"{type(obj).__name__}:{obj!r}".encode())


def content_digest(obj: Any) -> str:
    """sha256 (hex) of an in-memory graph's content: every store's attribute names, dtypes,
    shapes and bytes (and plain values' reprs). Two graphs with equal tensors share it; one
    changed value changes it. One pass over the graph's bytes."""
    h = hashlib.sha256()
    _feed(h, obj)
    return h.hexdigest()
