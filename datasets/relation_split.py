"""Link splits of one relation of a typed graph (docs/link_prediction.md section 1; docs/typed_graphs.md).

:func:`random_relation_split` splits the edges of one relation ``(src type, rel, dst type)`` of
a typed ``Data`` at random into training, validation and test edges, the way
:func:`~gnnscale.datasets.link_split.random_link_split` splits a plain graph: validation and test
edges leave message passing together with their reverses (the edges ``(v, u)`` of any relation,
e.g. ``rev_<rel>``), and the negatives pair a source of the source type with a destination of
the destination type that the relation does not connect. The split's ``info`` names the
relation (``relation``: its index, ``relation_name``), which the partition keeps, the samplers
draw negative destinations from (of the destination type) and a DistMult decoder scores.

Vectorized: edges are int64 keys ``u * N + v``; membership is ``torch.isin``.
"""
from __future__ import annotations

import copy
import logging

import torch
from torch import Tensor

from gnnscale.datasets.link_split import LinkSplit, _check_ratios
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)
_MAX_ROUNDS = 64


def relation_index(data, relation: str) -> int:
    """The index of ``relation`` (a relation name, or ``"src,rel,dst"``) among ``data.edge_types``."""
    names = [tuple(t) for t in data.edge_types]
    want = tuple(s.strip() for s in str(relation).split(",")) if "," in str(relation) else None
    found = [i for i, (s, r, d) in enumerate(names) if (want is None and r == relation) or want == (s, r, d)]
    if len(found) == 1:
        return found[0]
    if found:  # a name that repeats across type pairs (PyG's naming): the triple decides
        listed = ", ".join(",".join(names[i]) for i in found)
        raise DatasetError(f"relation {relation!r} names {len(found)} relations of {getattr(data, 'name', 'the graph')} "
                           f"({listed}); give --link-relation as src,rel,dst")
    listed = ", ".join(r for _, r, _ in names)
    raise DatasetError(f"relation {relation!r} does not exist in {getattr(data, 'name', 'the graph')}: its relations "
                       f"are {listed}; give --link-relation one of them")


def _draw(count: int, lo_s: int, hi_s: int, lo_d: int, hi_d: int, n: int, forbidden: Tensor,
          gen: torch.Generator) -> Tensor:
    """``count`` distinct keys ``u * n + v`` with u in [lo_s, hi_s), v in [lo_d, hi_d), u != v,
    not in ``forbidden`` (sorted keys); vectorized rejection in at most 64 rounds."""
    found = torch.empty(0, dtype=torch.int64)
    for _ in range(_MAX_ROUNDS):
        short = count - found.numel()
        if short <= 0:
            return found[:count]
        u = torch.randint(lo_s, hi_s, (2 * short + 16,), generator=gen)
        v = torch.randint(lo_d, hi_d, (2 * short + 16,), generator=gen)
        keys = u * n + v
        keys = keys[(u != v) & ~torch.isin(keys, forbidden)]
        merged = torch.cat([found, keys])
        uniq, inverse = torch.unique(merged, return_inverse=True)  # the first draw of each key, in draw order
        first = torch.full((uniq.numel(),), merged.numel(), dtype=torch.int64)
        first.scatter_reduce_(0, inverse, torch.arange(merged.numel()), reduce="amin")
        found = merged[torch.sort(first).values]
    if found.numel() < count:
        raise DatasetError(f"expected {count} negative pairs outside the relation after {_MAX_ROUNDS} rounds, found "
                           f"{found.numel()}; the relation is too dense for uniform negatives, lower val/test")
    return found[:count]


def random_relation_split(data, relation: str, val: float = 0.05, test: float = 0.10, seed: int = 0,
                          neg_per_source: int = 0):
    """A seeded link split of the edges of ``relation`` of the typed graph ``data``.

    Args:
        data: a typed ``Data`` (docs/typed_graphs.md section 1).
        relation: the relation's name (or ``"src,rel,dst"``).
        val, test: fractions in [0, 1) of the relation's edges (``val + test < 1``).
        seed: seed of the permutation and the negatives.
        neg_per_source: K > 0: each val/test edge gets K destinations of the destination type,
            uniform (``*_neg_dst``, metric ``mrr``); 0: as many negative pairs as positives
            (metric ``auc``).

    Returns:
        A shallow copy of ``data`` whose ``edge_index``/``edge_type`` are the message-passing
        graph (validation and test edges, and every edge ``(v, u)`` reversing one, removed) with
        ``link_split`` set (``train_pos`` every training edge of the relation, which stays in
        message passing).

    Raises:
        DatasetError: an unknown relation (the message lists them), ratios out of range, too few
        edges.
    """
    if getattr(data, "edge_types", None) is None or getattr(data, "edge_type", None) is None:
        raise DatasetError("expected a typed graph (edge_types, edge_type) for a relation's link split, found a plain "
                           "graph; leave --link-relation out for plain graphs")
    _check_ratios(val, test, 0.0)
    r = relation_index(data, relation)
    src_t, rel_name, dst_t = data.edge_types[r]
    names = list(data.node_types)
    ptr = data.type_ptr
    n = int(data.num_nodes)
    ei, et = data.edge_index, data.edge_type
    keys_all = ei[0] * n + ei[1]
    rel_keys = torch.unique(keys_all[et == r])
    p = int(rel_keys.numel())
    n_val, n_test = int(round(val * p)), int(round(test * p))
    if (val > 0 and n_val == 0) or (test > 0 and n_test == 0) or p - n_val - n_test <= 0:
        raise DatasetError(f"expected enough edges of relation {rel_name!r} for val={val:g}, test={test:g}, found {p}; "
                           "use other fractions")
    gen = torch.Generator().manual_seed(int(seed))
    perm = rel_keys[torch.randperm(p, generator=gen)]
    val_keys, test_keys = torch.sort(perm[:n_val]).values, torch.sort(perm[n_val:n_val + n_test]).values
    train_keys = torch.sort(perm[n_val + n_test:]).values
    held = torch.cat([val_keys, test_keys])
    held = torch.cat([held, (held % n) * n + held // n])  # and every edge reversing one
    keep = ~torch.isin(keys_all, held)
    s, d = names.index(src_t), names.index(dst_t)
    lo_s, hi_s, lo_d, hi_d = int(ptr[s]), int(ptr[s + 1]), int(ptr[d]), int(ptr[d + 1])
    neg = neg_dst = None
    if neg_per_source:
        neg_dst = torch.randint(lo_d, hi_d, (n_val + n_test, int(neg_per_source)), generator=gen)
    else:
        drawn = _draw(n_val + n_test, lo_s, hi_s, lo_d, hi_d, n, rel_keys, gen)
        neg = (torch.sort(drawn[:n_val]).values, torch.sort(drawn[n_val:]).values)

    def pairs(k: Tensor) -> Tensor:
        return torch.stack([k // n, k % n])

    split = LinkSplit(
        train_pos=pairs(train_keys), val_pos=pairs(val_keys), test_pos=pairs(test_keys),
        val_neg=pairs(neg[0]) if neg else None, test_neg=pairs(neg[1]) if neg else None,
        val_neg_dst=neg_dst[:n_val] if neg_dst is not None else None,
        test_neg_dst=neg_dst[n_val:] if neg_dst is not None else None,
        metric="mrr" if neg_per_source else "auc",
        info={"source": "random_relation_split", "relation": r, "relation_name": rel_name, "src_type": src_t,
              "dst_type": dst_t, "val": float(val), "test": float(test), "seed": int(seed),
              "neg_per_source": int(neg_per_source), "edges": p},
    )
    out = copy.copy(data)
    out.edge_index, out.edge_type = ei[:, keep], et[keep]
    out.link_split = split
    logger.info("random_relation_split(%s, %s): %d edges -> train %d, val %d, test %d; message passing %d of %d "
                "edges", getattr(data, "name", ""), rel_name, p, p - n_val - n_test, n_val, n_test, int(keep.sum()),
                keys_all.numel())
    return out
