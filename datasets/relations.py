"""The relations of a typed graph (docs/typed_graphs.md section 1): the per-type edges of every
relation (:func:`relation_edges`) and the reverse relations (:func:`add_reverse`).

Both are re-exported by :mod:`gnnscale.datasets.typed`.
"""

from __future__ import annotations

import copy
import logging

import torch
from torch_geometric.data import Data

from gnnscale.datasets.typed import EdgeType, _by_relation, _fmt_type, check_typed
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)


def relation_edges(data: Data) -> dict[EdgeType, torch.Tensor]:
    """The edges of every relation in per-type ids.

    Returns:
        ``{(src, rel, dst): int64 [2, E_r]}`` in ``edge_types`` order; row 0 per-type source ids,
        row 1 per-type target ids, in the order the edges appear in ``data.edge_index``.
    """
    tid = {t: i for i, t in enumerate(data.node_types)}
    out = {}
    for et, ei in zip(data.edge_types, _by_relation(data.edge_index, data.edge_type, len(data.edge_types))):
        off = torch.tensor([[int(data.type_ptr[tid[et[0]]])], [int(data.type_ptr[tid[et[2]]])]])
        out[tuple(et)] = ei - off
    return out


def add_reverse(data: Data, prefix: str = "rev_") -> Data:
    """Add a relation ``(dst, prefix + rel, src)`` for each relation ``(src, rel, dst)`` without a reverse.

    A relation has a reverse when some relation of types ``(dst, ., src)`` (itself, for a
    symmetric same-type relation) holds exactly its transposed edges, or when a relation named
    ``(dst, prefix + rel, src)`` exists (a relation name may repeat across type pairs, as in PyG).
    The new relations are appended (ids R, R+1, ...) in the order of the relations they reverse,
    their edges after the existing ones.

    Returns:
        A new ``Data`` (the input is not modified; unchanged tensors are shared).
    """
    check_typed(data, getattr(data, "name", "typed graph"), check_duplicates=False)
    n = data.num_nodes
    edge_types = [tuple(et) for et in data.edge_types]
    R = len(edge_types)
    triples = set(edge_types)
    segs = _by_relation(data.edge_index, data.edge_type, R)
    sums = [(int(ei[0].sum()), int(ei[1].sum())) for ei in segs]  # cheap necessary condition for a reverse
    cache: dict[tuple[int, bool], torch.Tensor] = {}

    def keys(r: int, transposed: bool) -> torch.Tensor:
        if (r, transposed) not in cache:
            a, b = (segs[r][1], segs[r][0]) if transposed else (segs[r][0], segs[r][1])
            cache[r, transposed] = torch.sort(a * n + b).values
        return cache[r, transposed]

    rev_of = torch.full((R,), -1, dtype=torch.int64)
    new_types: list[EdgeType] = []
    for r, (s, rel, d) in enumerate(edge_types):  # loop over relations
        if (d, prefix + rel, s) in triples:  # the reverse is there already, under its name
            continue
        count = segs[r].shape[1]
        found = False
        for c, (s2, _, d2) in enumerate(edge_types):  # candidates: relations of types (d, ., s)
            if ((s2, d2) == (d, s) and segs[c].shape[1] == count and (c != r or s == d)
                    and sums[c] == sums[r][::-1]):
                if torch.equal(keys(r, True), keys(c, False)):
                    found = True
                    break
        if found:
            continue
        rev_of[r] = R + len(new_types)
        new_types.append((d, prefix + rel, s))
    out = copy.copy(data)
    if not new_types:
        out.edge_types = edge_types
        return out
    need = [r for r in range(R) if int(rev_of[r]) >= 0]
    rev_ei = [segs[r].flip(0) for r in need]
    out.edge_index = torch.cat([data.edge_index] + rev_ei, dim=1)
    out.edge_type = torch.cat([data.edge_type] + [torch.full((e.shape[1],), int(rev_of[r]), dtype=torch.int64)
                                                  for r, e in zip(need, rev_ei)])
    out.edge_types = edge_types + new_types
    logger.debug("add_reverse(%s): added %s (%d edges)", data.name, [et[1] for et in new_types],
                 sum(e.shape[1] for e in rev_ei))
    return out
