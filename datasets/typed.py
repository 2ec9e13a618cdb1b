"""Typed (heterogeneous) graphs as one homogeneous ``Data`` with types (docs/typed_graphs.md, section 1).

A typed graph has T node types and R relations ``(src type, relation, dst type)``. It is
stored in one id space: the nodes of type t are the contiguous ids ``type_ptr[t] ..
type_ptr[t+1] - 1`` (a node's *per-type id* is ``id - type_ptr[t]``), every edge carries its
relation in ``edge_type``. The ``Data`` every typed source returns has:

* ``node_types`` list[str] [T], ``edge_types`` list[(str, str, str)] [R] (triples distinct; a relation name may repeat across type pairs, as in PyG),
* ``type_ptr`` int64 [T + 1], ``node_type`` int64 [N],
* ``edge_index`` int64 [2, E] (row 0 source, row 1 target, homogeneous ids, no duplicate
  (src, dst, relation)), ``edge_type`` int64 [E] in ``[0, R)``,
* ``x_dict`` dict[str, float32 [N_t, F_t]] (only the types with features), ``x = None``,
* ``y`` int64 [N] (-1 off the target type and for unlabelled nodes), bool ``train_mask``,
  ``val_mask``, ``test_mask`` [N] (only labelled target-type nodes),
* ``target_type`` str, ``num_classes`` int, ``name`` str, ``num_nodes`` int N.

Functions:

* :func:`make_typed_data`: assemble and check it from per-type inputs (per-type ids).
* :func:`check_typed`: check a ``Data`` against the contract (one-line DatasetError).
* :func:`add_reverse`: add ``(dst, rev_<rel>, src)`` for each relation without a reverse.
* :func:`relation_edges`: the per-type ``edge_index`` of every relation.
* :func:`from_hetero_data` / :func:`to_hetero_data`: PyG ``HeteroData`` conversion.

The first two are defined here; :func:`add_reverse` and :func:`relation_edges` in
:mod:`gnnscale.datasets.relations`, the ``HeteroData`` conversion in
:mod:`gnnscale.datasets.hetero_data` (both import this module: their names are re-exported
here, loaded on first use, PEP 562). The per-type inputs are read and checked in
``gnnscale.datasets._typed_inputs``.

Everything is vectorized: one pass (or one sort) over the edges per relation, never a
Python loop over nodes or edges.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch
from torch_geometric.data import Data

from gnnscale.datasets._typed_inputs import (  # noqa: F401 - EdgeType, ArrayLike re-exported
    ArrayLike,
    EdgeType,
    _edge_items,
    _features,
    _fmt_type,
    _labels,
    _relation_edges_np,
    _split_mask,
)
from gnnscale.errors import DatasetError
from gnnscale.lazy import lazy_exports

logger = logging.getLogger(__name__)

# Defined in modules that import this one: loaded on first use (PEP 562), so no import cycle.
_EXPORTS = {
    "add_reverse": "gnnscale.datasets.relations",
    "relation_edges": "gnnscale.datasets.relations",
    "from_hetero_data": "gnnscale.datasets.hetero_data",
    "to_hetero_data": "gnnscale.datasets.hetero_data",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)


# --------------------------------------------------------------------------- names


def check_edge_types(node_types: Sequence[str], edge_types: Sequence[Any], where: str) -> None:
    """Raise DatasetError unless every relation is a distinct ``(src, rel, dst)`` of known types.

    A relation name may repeat across type pairs (PyG's DBLP: ``('paper', 'to', 'author')`` and
    ``('paper', 'to', 'conference')``): a relation is its triple everywhere, never its name alone."""
    known = set(node_types)
    seen: dict[Any, Any] = {}
    for et in edge_types:
        if not (isinstance(et, tuple) and len(et) == 3 and all(isinstance(s, str) and s for s in et)):
            raise DatasetError(
                f"expected each relation of {where} to be a (src type, relation, dst type) tuple of names, "
                f"found {et!r}; name relations like ('author', 'writes', 'paper')"
            )
        for end in (et[0], et[2]):
            if end not in known:
                raise DatasetError(
                    f"expected the relations of {where} to join known node types {sorted(known)}, found "
                    f"relation {_fmt_type(et)} that names an unknown node type {end!r}; add the type or fix the name"
                )
        if et in seen:
            raise DatasetError(
                f"expected each relation once in {where}, found {_fmt_type(et)} twice; merge its edges into one "
                f"relation (a relation name may repeat across other (src, dst) type pairs, as in PyG)"
            )
        seen[et] = et


def _check_node_types(node_types: Sequence[Any], where: str) -> None:
    if not node_types:
        raise DatasetError(f"expected at least one node type in {where}, found none; give each type's node count")
    for t in node_types:
        if not isinstance(t, str) or not t:
            raise DatasetError(f"expected node type names as non-empty strings in {where}, found {t!r}; name the types")
    if len(set(node_types)) != len(node_types):
        dup = sorted({t for t in node_types if list(node_types).count(t) > 1})
        raise DatasetError(f"expected unique node type names in {where}, found {dup} more than once; rename them")


# --------------------------------------------------------------------------- building


def make_typed_data(
    *,
    num_nodes: Mapping[str, int],
    edges: Mapping[EdgeType, ArrayLike] | Iterable[tuple[EdgeType, ArrayLike]],
    target_type: str,
    y: ArrayLike | None,
    x_dict: Mapping[str, ArrayLike] | None = None,
    train: ArrayLike | None = None,
    val: ArrayLike | None = None,
    test: ArrayLike | None = None,
    name: str = "typed",
    num_classes: int | None = None,
    drop_self_loops: bool = False,
    deduplicate: bool = True,
    where: str = "",
) -> Data:
    """Assemble the typed ``Data`` of docs/typed_graphs.md section 1 from per-type inputs.

    Args:
        num_nodes: ``{type: N_t}``; its order is the id order of the types (``node_types``).
        edges: ``{(src type, rel, dst type): edge_index}`` (or a list of such pairs), each an
            integer [2, E_r] array/tensor of **per-type** ids (row 0 in ``0..N_src-1``, row 1 in
            ``0..N_dst-1``). The order is the relation order (``edge_types``). Duplicate edges
            of a relation are removed (and the relation's edges sorted by (src, dst)).
        target_type: the classified node type.
        y: [N_target] (or [N_target, 1]) class ids of the target nodes, negative (or NaN) = unlabelled.
        x_dict: ``{type: [N_t, F_t] numeric}`` features (cast to float32); types absent have none.
        train, val, test: the split of the target type: bool [N_target] masks or integer
            per-type ids (``None`` = empty). Unlabelled nodes are removed from them (warning).
        name: ``data.name``.
        num_classes: default ``max(y) + 1``.
        drop_self_loops: remove ``(u, u)`` edges of relations whose ends have the same type.
        deduplicate: False when the caller guarantees no duplicate edges (skips one sort per relation).
        where: the source, for error messages.

    Returns:
        The typed ``Data`` (see the module docstring), checked with :func:`check_typed`.

    Raises:
        DatasetError: unknown node type in a relation, a relation triple given twice, edges out of
        their types' ranges, feature rows not matching a type's count, unknown target type,
        a target type without labels, a malformed split.
    """
    where = where or name
    node_types = list(num_nodes)
    _check_node_types(node_types, where)
    counts = np.array([int(num_nodes[t]) for t in node_types], dtype=np.int64)
    if (counts < 0).any():
        raise DatasetError(f"expected non-negative node counts in {where}, found {dict(zip(node_types, counts.tolist()))}; "
                           "give each type's number of nodes")
    type_ptr = np.zeros(len(node_types) + 1, dtype=np.int64)
    np.cumsum(counts, out=type_ptr[1:])
    n = int(type_ptr[-1])
    if n == 0:
        raise DatasetError(f"expected at least one node in {where}, found an empty graph; give the node counts")
    tid = {t: i for i, t in enumerate(node_types)}

    features: dict[str, torch.Tensor] = {}
    for t, x in (x_dict or {}).items():
        if t not in tid:
            raise DatasetError(f"expected features only for the node types {node_types} in {where}, found features "
                               f"for an unknown node type {t!r}; fix the type name")
        if x is None:
            continue
        features[t] = _features(t, x, int(counts[tid[t]]), where)

    if target_type not in tid:
        raise DatasetError(f"expected the target type among the node types {node_types} in {where}, found an unknown "
                           f"target type {target_type!r}; name the classified node type")
    t = tid[target_type]
    nt = int(counts[t])
    if y is None:
        raise DatasetError(f"expected labels for the target type {target_type!r} in {where}, found none; "
                           "give y (one class id per target node, -1 = unlabelled)")
    y_t = _labels(y, nt, target_type, where)
    labelled = y_t >= 0
    if not labelled.any():
        raise DatasetError(f"expected labelled nodes of the target type {target_type!r} in {where}, found the target "
                           "type has no labelled node (all labels negative); give class ids 0..C-1")
    top = int(y_t.max())
    if num_classes is None:
        num_classes = top + 1
    elif top >= int(num_classes):
        raise DatasetError(f"expected labels in [0, {num_classes}) in {where}, found {top}; fix num_classes or the labels")
    masks_t = []
    for label, m in (("train", train), ("val", val), ("test", test)):
        mt = _split_mask(m, nt, label, target_type, where)
        dropped = int((mt & ~labelled).sum())
        if dropped:
            logger.warning("%s: %d unlabelled %s nodes removed from the %s mask", where, dropped, target_type, label)
            mt &= labelled
        masks_t.append(mt)
    overlap = int(((masks_t[0] & masks_t[1]) | (masks_t[0] & masks_t[2]) | (masks_t[1] & masks_t[2])).sum())
    if overlap:
        raise DatasetError(f"expected disjoint train/val/test sets in {where}, found {overlap} {target_type!r} nodes in "
                           "more than one; fix the split")

    items = _edge_items(edges)
    edge_types = [tuple(et) if isinstance(et, (tuple, list)) else et for et, _ in items]
    check_edge_types(node_types, edge_types, where)
    parts = []
    for et, ei in zip(edge_types, (e for _, e in items)):  # loop over relations
        s, d = tid[et[0]], tid[et[2]]
        parts.append((s, d, *_relation_edges_np(s, d, ei, counts, et, where, deduplicate, drop_self_loops)))
    sizes = np.array([p[2].size for p in parts], dtype=np.int64)
    rel_ptr = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(sizes, out=rel_ptr[1:])
    out = np.empty((2, int(rel_ptr[-1])), dtype=np.int64)
    for r, (s, d, src, dst) in enumerate(parts):  # loop over relations: offset into homogeneous ids
        a, b = int(rel_ptr[r]), int(rel_ptr[r + 1])
        np.add(src, type_ptr[s], out=out[0, a:b])
        np.add(dst, type_ptr[d], out=out[1, a:b])
    del parts
    edge_index = torch.from_numpy(out)
    edge_type = torch.empty(int(rel_ptr[-1]), dtype=torch.int64)
    for r in range(len(sizes)):  # loop over relations
        edge_type[int(rel_ptr[r]):int(rel_ptr[r + 1])] = r

    lo, hi = int(type_ptr[t]), int(type_ptr[t + 1])
    y_all = torch.full((n,), -1, dtype=torch.int64)
    y_all[lo:hi] = torch.from_numpy(y_t)
    data = Data(x=None, edge_index=edge_index, num_nodes=n)
    data.node_types = node_types
    data.edge_types = [tuple(et) for et in edge_types]
    data.type_ptr = torch.from_numpy(type_ptr)
    data.node_type = torch.repeat_interleave(torch.arange(len(node_types), dtype=torch.int64), torch.from_numpy(counts))
    data.edge_type = edge_type
    data.x_dict = features
    data.y = y_all
    for label, mt in zip(("train_mask", "val_mask", "test_mask"), masks_t):
        m = torch.zeros(n, dtype=torch.bool)
        m[lo:hi] = torch.from_numpy(mt)
        data[label] = m
    data.target_type = target_type
    data.num_classes = int(num_classes)
    data.name = str(name)
    _check_typed(data, where, check_duplicates=False, check_edges=False)  # edges were checked per relation
    return data


# --------------------------------------------------------------------------- checking


def _is_tensor(v: Any, dtype: torch.dtype, shape: tuple[int, ...] | None = None) -> bool:
    return isinstance(v, torch.Tensor) and v.dtype == dtype and (shape is None or tuple(v.shape) == shape)


def _desc(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return f"{v.dtype} {tuple(v.shape)}"
    return type(v).__name__


def check_typed(data: Data, where: str = "typed graph", *, check_duplicates: bool = True) -> None:
    """Check ``data`` against the typed-graph contract (docs/typed_graphs.md section 1).

    Args:
        data: a typed ``Data``.
        where: names the graph in error messages.
        check_duplicates: also check that no (src, dst, relation) appears twice (one sort of E keys).

    Raises:
        DatasetError: one line for the first violation found: a relation naming an unknown
        node type, a relation triple given twice, feature rows that do not match a type's count,
        edges out of their relation's type ranges, an ``edge_type`` out of range, a target type
        that is unknown or has no labels, masks on other nodes, wrong dtypes or shapes.
    """
    _check_typed(data, where, check_duplicates=check_duplicates, check_edges=True)


def _check_typed(data: Data, where: str, *, check_duplicates: bool, check_edges: bool) -> None:
    def need(cond: bool, expected: str, found: str, fix: str) -> None:
        if not cond:
            raise DatasetError(f"expected {expected} in {where}, found {found}; {fix}")

    node_types = getattr(data, "node_types", None)
    edge_types = getattr(data, "edge_types", None)
    need(isinstance(node_types, list), "node_types as a list of names (a typed graph)", _desc(node_types),
         "build it with gnnscale.datasets.typed.make_typed_data")
    _check_node_types(node_types, where)
    need(isinstance(edge_types, list), "edge_types as a list of (src, rel, dst) tuples", _desc(edge_types),
         "build it with gnnscale.datasets.typed.make_typed_data")
    check_edge_types(node_types, edge_types, where)
    T, R = len(node_types), len(edge_types)
    n = data.num_nodes
    need(isinstance(n, int) and n > 0, "num_nodes a positive int", repr(n), "set data.num_nodes = N")
    ptr = getattr(data, "type_ptr", None)
    need(_is_tensor(ptr, torch.int64, (T + 1,)), f"type_ptr int64 [{T + 1}]", _desc(ptr),
         "give the first id of every type, then N")
    need(int(ptr[0]) == 0 and int(ptr[-1]) == n and bool((ptr[1:] >= ptr[:-1]).all()),
         f"type_ptr non-decreasing from 0 to N = {n}", str(ptr.tolist()[:8]), "number the types' nodes contiguously")
    counts = ptr[1:] - ptr[:-1]
    node_type = getattr(data, "node_type", None)
    need(_is_tensor(node_type, torch.int64, (n,)), f"node_type int64 [{n}]", _desc(node_type), "give every node its type")
    need(torch.equal(node_type, torch.repeat_interleave(torch.arange(T), counts)),
         "node_type equal to what type_ptr says", "a node_type that differs", "rebuild node_type from type_ptr")
    ei = data.edge_index
    need(_is_tensor(ei, torch.int64) and ei.dim() == 2 and ei.shape[0] == 2, "edge_index int64 [2, E]", _desc(ei),
         "store source ids in row 0, target ids in row 1")
    e = ei.shape[1]
    et = getattr(data, "edge_type", None)
    need(_is_tensor(et, torch.int64, (e,)), f"edge_type int64 [{e}]", _desc(et), "give every edge its relation")
    if e and check_edges:
        need(int(et.min()) >= 0 and int(et.max()) < R, f"edge_type in [0, {R}) (one per relation)",
             f"values from {int(et.min())} to {int(et.max())}", "index the relations of edge_types")
        need(int(ei.min()) >= 0 and int(ei.max()) < n, f"edge ids in [0, {n})",
             f"ids from {int(ei.min())} to {int(ei.max())}", "use homogeneous ids 0..N-1")
        tid = {t: i for i, t in enumerate(node_types)}
        rel_src = torch.tensor([tid[s] for s, _, _ in edge_types], dtype=torch.int64)
        rel_dst = torch.tensor([tid[d] for _, _, d in edge_types], dtype=torch.int64)
        if _grouped(et):  # per relation: ids within the types' contiguous ranges (min/max, no gather)
            ok = True
            for r, seg in enumerate(_by_relation(ei, et, R)):  # loop over relations
                if seg.shape[1]:
                    s, d = int(rel_src[r]), int(rel_dst[r])
                    ok &= int(seg[0].min()) >= int(ptr[s]) and int(seg[0].max()) < int(ptr[s + 1])
                    ok &= int(seg[1].min()) >= int(ptr[d]) and int(seg[1].max()) < int(ptr[d + 1])
        else:
            ok = False
        bad = None if ok else (node_type[ei[0]] != rel_src[et]) | (node_type[ei[1]] != rel_dst[et])
        if bad is not None and bool(bad.any()):
            k = int(torch.nonzero(bad)[0, 0])
            r = int(et[k])
            raise DatasetError(
                f"expected every edge of {where} within its relation's type ranges, found {int(bad.sum())} edges out "
                f"of range (the first, {int(ei[0, k])} -> {int(ei[1, k])} of relation {_fmt_type(edge_types[r])}, "
                f"joins types {node_types[int(node_type[ei[0, k]])]!r} -> {node_types[int(node_type[ei[1, k]])]!r}); "
                "offset per-type ids by type_ptr"
            )
        if check_duplicates:
            if R * n * n < 2**62:  # else the key would overflow: skip (no such graph fits in memory anyway)
                distinct = torch.unique((et * n + ei[0]) * n + ei[1]).numel()
                need(distinct == e, "no duplicate (src, dst, relation) edges", f"{e - distinct} duplicates",
                     "remove duplicate edges")
    need(getattr(data, "x", None) is None, "x = None (typed graphs keep features in x_dict)", _desc(data.x),
         "move the features into x_dict")
    x_dict = getattr(data, "x_dict", None)
    need(isinstance(x_dict, dict), "x_dict a dict {type: float32 [N_t, F_t]}", _desc(x_dict), "use {} for no features")
    for t, x in x_dict.items():
        need(t in node_types, f"x_dict keys among the node types {node_types}", f"an unknown node type {t!r}",
             "fix the type name")
        c = int(counts[node_types.index(t)])
        need(_is_tensor(x, torch.float32) and x.dim() == 2, f"x_dict[{t!r}] float32 [N_t, F]", _desc(x),
             "cast the features to float32")
        need(x.shape[0] == c, f"{c} feature rows (one per node of type {t!r})", f"{x.shape[0]}",
             f"give one row per {t} node in per-type id order")
    target = getattr(data, "target_type", None)
    need(target in node_types, f"a target type among the node types {node_types}", f"an unknown target type {target!r}",
         "name the classified node type")
    t = node_types.index(target)
    lo, hi = int(ptr[t]), int(ptr[t + 1])
    y = getattr(data, "y", None)
    need(_is_tensor(y, torch.int64, (n,)), f"y int64 [{n}]", _desc(y), "store -1 off the target type")
    need(not bool((y[:lo] != -1).any() or (y[hi:] != -1).any()), f"y = -1 outside the target type {target!r}",
         "labels on other types", "label only the target type")
    labelled = y >= 0
    need(bool(labelled[lo:hi].any()), f"labels for the target type {target!r}", "the target type has no labelled node",
         "give class ids 0..C-1 (negative = unlabelled)")
    need(bool((y >= -1).all()), "y >= -1", f"{int(y.min())}", "use -1 for unlabelled nodes")
    c = getattr(data, "num_classes", None)
    need(isinstance(c, int) and int(y.max()) < c, f"num_classes an int above every label ({int(y.max())})", repr(c),
         "set num_classes")
    need(isinstance(getattr(data, "name", None), str), "name a str", _desc(getattr(data, "name", None)), "set data.name")
    masks = []
    for label in ("train_mask", "val_mask", "test_mask"):
        m = getattr(data, label, None)
        need(_is_tensor(m, torch.bool, (n,)), f"{label} bool [{n}]", _desc(m), "store one bool per node")
        need(not bool((m & ~labelled).any()), f"{label} only on labelled {target!r} nodes",
             f"{int((m & ~labelled).sum())} other nodes", "remove them from the mask")
        masks.append(m)
    need(not bool((masks[0] & masks[1]).any() or (masks[0] & masks[2]).any() or (masks[1] & masks[2]).any()),
         "disjoint train/val/test masks", "nodes in more than one", "fix the split")


# --------------------------------------------------------------------------- edges by relation


def _grouped(edge_type: torch.Tensor) -> bool:
    """True when the edges are grouped by relation in relation order (``edge_type`` non-decreasing)."""
    return edge_type.numel() < 2 or bool((edge_type[1:] >= edge_type[:-1]).all())


def _by_relation(edge_index: torch.Tensor, edge_type: torch.Tensor, num_relations: int) -> list[torch.Tensor]:
    """The homogeneous ``edge_index`` [2, E_r] of each relation, edges in their stored order.

    Views (no copy) when the edges are grouped by relation, as every typed source stores them;
    else one stable sort of ``edge_type``.
    """
    ptr = [0] + torch.cumsum(torch.bincount(edge_type, minlength=num_relations), 0).tolist()
    if _grouped(edge_type):
        return [edge_index[:, ptr[r]:ptr[r + 1]] for r in range(num_relations)]
    order = torch.sort(edge_type, stable=True).indices
    return [edge_index[:, order[ptr[r]:ptr[r + 1]]] for r in range(num_relations)]

