"""The format-2 (typed) writer's own pieces beside format 1's (:mod:`gnnscale.partitioning.format`):
a typed temporal graph's T-CSR per relation, and what a typed part writes and meta.json records.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gnnscale.partitioning.metrics import ratio
from gnnscale.partitioning.typed import TypedSpec


def typed_tcsr(indptr: np.ndarray, cols: np.ndarray, etype: np.ndarray, edge_time: np.ndarray,
               spec: TypedSpec) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """A typed temporal graph's T-CSR per relation: ((perm, column) int64 [E]: the CSC's edges reordered
    by (target, relation, time, input column), and each one's input column; int64 [E] each one's column
    among its relation's columns of ``edge_index`` in order: a ``HeteroData``'s ``data[relation]`` column,
    PyG's ``e_id``). ``cols``: each CSC edge's column of the typed ``edge_index``. Two sorts, no loop."""
    row = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    perm = np.lexsort((cols, edge_time[cols], etype, row))
    del row
    col = cols[perm]
    # each input column's place among its relation's columns (one stable sort of the relations)
    rel = np.asarray(spec.edge_type, dtype=np.int64)
    order = np.argsort(rel, kind="stable")
    rel_ptr = np.zeros(spec.num_relations + 1, dtype=np.int64)
    np.cumsum(np.bincount(rel, minlength=spec.num_relations), out=rel_ptr[1:])
    local = np.empty(rel.shape[0], dtype=np.int64)
    local[order] = np.arange(rel.shape[0], dtype=np.int64) - rel_ptr[rel[order]]
    return (perm, col), local[col]


class TypedWrite:
    """What the format-2 writer keeps beside format 1's: the typed spec, the relation of
    every stored edge (int16, aligned with the global CSC), the type tables and the running
    per-relation counts."""

    def __init__(self, spec: TypedSpec, etype_g: np.ndarray, type_starts: np.ndarray,
                 type_offsets: np.ndarray) -> None:
        self.spec, self.etype_g = spec, etype_g
        self.type_starts, self.type_offsets = type_starts, type_offsets
        r = spec.num_relations
        self.edges = np.zeros(r, dtype=np.int64)
        self.cut = np.zeros(r, dtype=np.int64)

    def part_arrays(self, part: int, ids_np: np.ndarray, e_lo: int, e_hi: int,
                    remote_mask: np.ndarray) -> dict[str, np.ndarray]:
        etype = self.etype_g[e_lo:e_hi]
        r = self.spec.num_relations
        self.edges += np.bincount(etype, minlength=r)
        self.cut += np.bincount(etype[remote_mask], minlength=r)
        out = {"etype.npy": etype}
        starts, ptr = self.type_starts[part], self.spec.type_ptr
        for t, x in self.spec.features.items():  # loop over the node types with features
            rows = ids_np[starts[t] : starts[t + 1]] - ptr[t]  # per-type original ids
            out[f"x_t{t}.npy"] = x[torch.from_numpy(rows)].numpy().astype(np.float32, copy=False)
        return out

    def meta(self, counts: np.ndarray) -> dict[str, Any]:
        """meta.json's ``typed`` entry (``counts``: int64 [P, T] nodes of type t in part p)."""
        return {
            **self.spec.meta_header(),
            "type_starts": self.type_starts.tolist(),
            "type_offsets": self.type_offsets.tolist(),
            "num_nodes_per_type": self.spec.counts().tolist(),
            "feature_dims": list(self.spec.feature_dims),
            "edges_per_relation": self.edges.tolist(),
            "cut_per_relation": self.cut.tolist(),
            "balance_per_type": [ratio(counts[:, t]) for t in range(counts.shape[1])],
        }
