"""Typed (heterogeneous) graphs on the partitioning side (``docs/typed_graphs.md``).

A typed ``Data`` is partitioned as its homogeneous view (one id space, ``edge_index`` of all
relations together); what depends on types is here:

* :func:`is_typed` / :func:`typed_spec`: detect and check the typed attributes the writer
  needs (section 1 of the contract), with one :class:`PartitionError` line per problem;
* :func:`type_columns`: one vertex-weight column per node type (the METIS ``nodes``
  constraint of a typed graph);
* :func:`type_tables`: ``type_starts [P][T+1]`` and ``type_offsets [T][P+1]`` of a relabeling;
* :class:`TypedPart`: the typed side of a loaded format-2 part (``LocalPart.typed``).

Memory: nothing here holds an array per edge beyond a slice of a few million edges; per node,
at most one int64 column per type (METIS weights) or a bool column (checks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnnscale.errors import PartitionError

if TYPE_CHECKING:  # torch_geometric costs 2 s to import; workers never need it
    from torch_geometric.data import Data

    from gnnscale.partitioning.book import TypedPartitionBook

_CHUNK = 1 << 20  # edges checked per slice
_FIX = "fix the typed dataset (datasets.typed.check_typed names every problem)"


def is_typed(data: Any) -> bool:
    """True when ``data`` is a typed graph: it has ``node_types`` and ``edge_type``."""
    return getattr(data, "node_types", None) is not None and getattr(data, "edge_type", None) is not None


def _numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


@dataclass
class TypedSpec:
    """The typed attributes of a graph, checked (what the format-2 writer needs).

    Attributes:
        node_types: T names; edge_types: R ``(src type, relation, dst type)`` triples.
        target_type: the classified node type.
        type_ptr: int64 ``[T+1]``: type t is the original ids ``type_ptr[t] .. type_ptr[t+1]-1``.
        edge_type: int64 ``[E]``, aligned with ``data.edge_index``.
        features: ``{t: float Tensor [N_t, F_t]}`` for the types with features (F_t > 0).
        feature_dims: ``[T]`` ints, 0 for the types without features.
    """

    node_types: list[str]
    edge_types: list[tuple[str, str, str]]
    target_type: str
    type_ptr: np.ndarray
    edge_type: np.ndarray = field(repr=False)
    features: dict[int, torch.Tensor] = field(repr=False)
    feature_dims: list[int]

    @property
    def num_types(self) -> int:
        return len(self.node_types)

    @property
    def num_relations(self) -> int:
        return len(self.edge_types)

    def counts(self) -> np.ndarray:
        """int64 ``[T]``: nodes of every type."""
        return np.diff(self.type_ptr)

    def meta_header(self) -> dict[str, Any]:
        """The type names of meta.json's ``typed`` entry (JSON-ready)."""
        return {
            "node_types": list(self.node_types),
            "edge_types": [list(e) for e in self.edge_types],
            "target_type": self.target_type,
        }


def typed_spec(data: Data, where: str = "data") -> TypedSpec:
    """Check the typed attributes of ``data`` (contract section 1) and return them.

    Checks the names, ``type_ptr`` (from 0 to N, rising), ``node_type`` (equal to what
    ``type_ptr`` says), ``edge_type`` (shape [E], values in [0, R)), that every edge's
    endpoints have its relation's types (in slices of a few million edges), the feature
    tables of ``x_dict`` (rows = the type's count) and ``target_type``.

    Raises:
        PartitionError: one line naming the attribute, what was expected and what was found.
    """
    n = int(data.num_nodes)
    node_types = getattr(data, "node_types", None)
    if not isinstance(node_types, (list, tuple)) or not node_types or not all(isinstance(t, str) for t in node_types):
        raise PartitionError(f"expected {where}.node_types as a non-empty list of names, found {node_types!r:.120}; {_FIX}")
    node_types = list(node_types)
    if len(set(node_types)) != len(node_types):
        raise PartitionError(f"expected distinct names in {where}.node_types, found {node_types!r:.160}; {_FIX}")
    index = {t: i for i, t in enumerate(node_types)}
    edge_types = getattr(data, "edge_types", None)
    if not isinstance(edge_types, (list, tuple)) or not edge_types:
        raise PartitionError(f"expected {where}.edge_types as a non-empty list of (src, relation, dst), found "
                             f"{edge_types!r:.120}; {_FIX}")
    triples = []
    for e in edge_types:  # loop over relations
        if not (isinstance(e, (list, tuple)) and len(e) == 3 and all(isinstance(s, str) for s in e)) \
                or e[0] not in index or e[2] not in index:
            raise PartitionError(f"expected {where}.edge_types as (src type, relation, dst type) of the node types "
                                 f"{node_types}, found {e!r:.120}; {_FIX}")
        triples.append((e[0], e[1], e[2]))
    if len(set(triples)) != len(triples):
        raise PartitionError(f"expected distinct (src, relation, dst) triples in {where}.edge_types, found one twice in "
                             f"{triples!r:.200}; {_FIX}")
    if len(triples) > np.iinfo(np.int16).max + 1:
        raise PartitionError(f"expected at most {np.iinfo(np.int16).max + 1} relations (etype.npy is int16), "
                             f"found {len(triples)}; merge relations")
    target = getattr(data, "target_type", None)
    if target not in index:
        raise PartitionError(f"expected {where}.target_type among {node_types}, found {target!r}; {_FIX}")

    num_t = len(node_types)
    ptr = _numpy(getattr(data, "type_ptr", None))
    if ptr.shape != (num_t + 1,) or not np.issubdtype(ptr.dtype, np.integer):
        raise PartitionError(f"expected {where}.type_ptr as integers of shape [{num_t + 1}], found dtype {ptr.dtype} "
                             f"and shape {tuple(ptr.shape)}; {_FIX}")
    ptr = ptr.astype(np.int64)
    if ptr[0] != 0 or ptr[-1] != n or bool(np.any(np.diff(ptr) < 0)):
        raise PartitionError(f"expected {where}.type_ptr rising from 0 to num_nodes={n}, found {ptr.tolist()!r:.160}; {_FIX}")
    node_type = getattr(data, "node_type", None)
    if node_type is not None:
        nt = _numpy(node_type)
        ok = nt.shape == (n,) and np.issubdtype(nt.dtype, np.integer)
        if ok and n:
            ok = bool(np.all(nt[1:] >= nt[:-1])) and int(nt[0]) >= 0 and int(nt[-1]) < num_t and \
                np.array_equal(np.bincount(nt, minlength=num_t), np.diff(ptr))
        if not ok:
            raise PartitionError(f"expected {where}.node_type int64 [{n}] equal to what type_ptr {ptr.tolist()!r:.80} "
                                 f"says (type t on ids type_ptr[t] .. type_ptr[t+1]-1), found another; {_FIX}")

    ei = getattr(data, "edge_index", None)
    num_e = int(ei.shape[1])
    et = _numpy(getattr(data, "edge_type"))
    if et.shape != (num_e,) or (et.size and not np.issubdtype(et.dtype, np.integer)):
        raise PartitionError(f"expected {where}.edge_type as integers of shape [{num_e}], found dtype {et.dtype} and "
                             f"shape {tuple(et.shape)}; {_FIX}")
    et = et.astype(np.int64, copy=False)
    if et.size and (int(et.min()) < 0 or int(et.max()) >= len(triples)):
        raise PartitionError(f"expected {where}.edge_type in [0, {len(triples)}), found values in "
                             f"[{int(et.min())}, {int(et.max())}]; {_FIX}")
    _check_endpoints(_numpy(ei), et, ptr, triples, index, where)

    x_dict = getattr(data, "x_dict", None) or {}
    if not isinstance(x_dict, dict):
        raise PartitionError(f"expected {where}.x_dict as {{node type: float [N_t, F_t]}}, found "
                             f"{type(x_dict).__name__}; {_FIX}")
    unknown = sorted(set(x_dict) - set(index))
    if unknown:
        raise PartitionError(f"expected {where}.x_dict keys among {node_types}, found {unknown}; {_FIX}")
    features: dict[int, torch.Tensor] = {}
    dims = [0] * num_t
    for name, x in x_dict.items():  # loop over node types
        t = index[name]
        x = torch.as_tensor(x).detach().cpu()
        rows = int(ptr[t + 1] - ptr[t])
        if x.dim() != 2 or x.shape[0] != rows or not x.dtype.is_floating_point:
            raise PartitionError(f"expected {where}.x_dict[{name!r}] as float [{rows}, F] (one row per node of the "
                                 f"type), found dtype {x.dtype} and shape {tuple(x.shape)}; {_FIX}")
        if x.shape[1] > 0:
            features[t], dims[t] = x, int(x.shape[1])
    return TypedSpec(node_types, triples, target, ptr, et, features, dims)


def _check_endpoints(ei: np.ndarray, et: np.ndarray, ptr: np.ndarray, triples: list, index: dict, where: str) -> None:
    """Every edge's source and target have its relation's node types (in slices of edges)."""
    want_src = np.array([index[e[0]] for e in triples], dtype=np.int64)
    want_dst = np.array([index[e[2]] for e in triples], dtype=np.int64)
    bounds = ptr[1:-1]
    for a in range(0, et.shape[0], _CHUNK):  # loop over slices of a few million edges
        rel = et[a : a + _CHUNK]
        for row, want, end in ((0, want_src, "source"), (1, want_dst, "target")):
            got = np.searchsorted(bounds, ei[row, a : a + _CHUNK], side="right")
            bad = np.flatnonzero(got != want[rel])
            if bad.size:
                i = int(bad[0])
                r = int(rel[i])
                names = list(index)
                found = names[int(got[i])] if 0 <= int(got[i]) < len(names) else "?"
                raise PartitionError(
                    f"expected the {end} of every edge of relation {triples[r]} to be of type "
                    f"{triples[r][0 if row == 0 else 2]!r}, found edge {a + i} with {end} node "
                    f"{int(ei[row, a + i])} of type {found!r} ({bad.size} such edges among edges "
                    f"{a}..{a + rel.shape[0] - 1}); {_FIX}"
                )


def type_columns(data: Data, out: np.ndarray | None = None) -> np.ndarray:
    """int64 ``[N, T]``: column t is 1 on the nodes of type t (one METIS constraint per type).

    ``out``: an int64 ``[N, T]`` view to fill (e.g. columns of the weight matrix) instead of
    a new array.
    """
    ptr = _numpy(data.type_ptr).astype(np.int64)
    n, num_t = int(data.num_nodes), ptr.shape[0] - 1
    if out is None:
        out = np.empty((n, num_t), dtype=np.int64)
    out[...] = 0
    for t in range(num_t):  # loop over node types
        out[ptr[t] : ptr[t + 1], t] = 1
    return out


def type_tables(old_of_new: np.ndarray, offsets: np.ndarray, type_ptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where every type sits in every part of a relabeling.

    Args:
        old_of_new: int64 ``[N]`` from :func:`~gnnscale.partitioning.relabel.contiguous_relabel`
            (original ids ascending inside each part, hence grouped by type).
        offsets: int64 ``[P+1]``.
        type_ptr: int64 ``[T+1]``.

    Returns:
        ``(type_starts, type_offsets)``: int64 ``[P, T+1]`` (local start of each type in each
        part) and int64 ``[T, P+1]`` (per-type new id where each part starts).
    """
    num_p = offsets.shape[0] - 1
    starts = np.empty((num_p, type_ptr.shape[0]), dtype=np.int64)
    for p in range(num_p):  # loop over parts
        ids = old_of_new[offsets[p] : offsets[p + 1]]
        if ids.size > 1 and bool(np.any(ids[1:] < ids[:-1])):
            raise PartitionError(
                f"expected the original ids of part {p} in ascending order (contiguous_relabel is "
                "stable), found them unordered; relabel with contiguous_relabel"
            )
        starts[p] = np.searchsorted(ids, type_ptr)
    counts = np.diff(starts, axis=1)  # [P, T]
    type_offsets = np.zeros((counts.shape[1], num_p + 1), dtype=np.int64)
    np.cumsum(counts.T, axis=1, out=type_offsets[:, 1:])
    return starts, type_offsets


@dataclass
class TypedPart:
    """The typed side of one loaded format-2 part (``LocalPart.typed``).

    Attributes:
        meta: meta.json's ``typed`` entry (node_types, edge_types, target_type, type_starts,
            type_offsets, num_nodes_per_type, feature_dims, edges_per_relation,
            cut_per_relation, balance_per_type).
        etype: int16 ``[E_p]`` relation of each in-edge, aligned with ``LocalPart.indices``
            (a tensor over the copy-on-write mapped file); in-edges of each local node are
            sorted by (relation, original source id).
        x_by_type: ``{t: read-only float32 memmap [n_{p,t}, F_t]}``, the features of the part's
            nodes of type t (local order), for the types with features.
        type_starts: int64 ``[T+1]``: local nodes ``type_starts[t] .. type_starts[t+1]-1`` are
            of type t.
        book: the :class:`~gnnscale.partitioning.book.TypedPartitionBook` of the folder.
    """

    meta: dict[str, Any] = field(repr=False)
    etype: torch.Tensor = field(repr=False)
    x_by_type: dict[int, np.ndarray] = field(repr=False)
    type_starts: torch.Tensor
    book: TypedPartitionBook
    _relation_indptr: torch.Tensor | None = field(default=None, repr=False, compare=False)

    @property
    def node_types(self) -> list[str]:
        return list(self.meta["node_types"])

    @property
    def edge_types(self) -> list[tuple[str, str, str]]:
        return [tuple(e) for e in self.meta["edge_types"]]

    @property
    def target_type(self) -> str:
        return self.meta["target_type"]

    @property
    def num_types(self) -> int:
        return len(self.meta["node_types"])

    @property
    def num_relations(self) -> int:
        return len(self.meta["edge_types"])

    @property
    def feature_dims(self) -> list[int]:
        return [int(d) for d in self.meta["feature_dims"]]

    def node_type(self) -> torch.Tensor:
        """int64 ``[n_p]``: the type of every local node."""
        counts = self.type_starts[1:] - self.type_starts[:-1]
        return torch.repeat_interleave(torch.arange(self.num_types, dtype=torch.int64), counts)

    def features(self, t: int, idx: torch.Tensor) -> torch.Tensor:
        """float32 ``[k, F_t]`` (a copy): rows of the part's nodes of type ``t``.

        Args:
            t: node type with features.
            idx: int64 ``[k]`` indices among the part's nodes of type t, in
                ``[0, type_starts[t+1] - type_starts[t])`` (local id - ``type_starts[t]``).
        """
        t = int(t)
        if t not in self.x_by_type:
            raise PartitionError(
                f"expected a node type with features {sorted(self.x_by_type)}, found type {t} "
                f"({self.node_types[t] if 0 <= t < self.num_types else '?'}) without; types "
                "without features use a learned embedding indexed by per-type id"
            )
        x = self.x_by_type[t]
        i = torch.as_tensor(idx).detach().cpu().to(torch.int64).numpy()
        if i.size and (int(i.min()) < 0 or int(i.max()) >= x.shape[0]):
            raise PartitionError(
                f"expected indices in [0, {x.shape[0]}) among the part's nodes of type {t}, found "
                f"[{int(i.min())}, {int(i.max())}]; subtract type_starts[t] from local ids"
            )
        return torch.from_numpy(np.ascontiguousarray(x[i], dtype=np.float32))
