"""Link-prediction splits: :class:`LinkSplit` and :func:`random_link_split` (docs/link_prediction.md, section 1).

A dataset prepared for link prediction is the dataset contract's ``Data`` whose ``edge_index``
is the **message-passing graph**, plus ``data.link_split`` (a :class:`LinkSplit`).

Everything is vectorized: an edge ``(u, v)`` of an N-node graph is the int64 key ``u * N + v``;
sets of edges are sorted key arrays, and membership is ``torch.isin``. No Python loop runs
over edges (the negative sampler loops over a bounded number of rejection rounds).
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor
from torch_geometric.data import Data

from gnnscale.datasets._graph import _MAX_NODES
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

_METRIC = re.compile(r"^(auc|mrr|hits@[1-9][0-9]*)$")
_MAX_NEG_ROUNDS = 64


@dataclass
class LinkSplit:
    """The supervision of a link-prediction dataset (node ids are the graph's own ids).

    Attributes:
        train_pos: int64 [2, Etr] supervision edges.
        val_pos: int64 [2, Ev]; test_pos: int64 [2, Et].
        val_neg, test_neg: int64 [2, Ev'] / [2, Et'] fixed negative pairs (AUC/AP, Hits@K), or None.
        val_neg_dst, test_neg_dst: int64 [Ev, Kn] / [Et, Kn] per-source negative destinations of each
            ``val_pos`` / ``test_pos`` column (MRR), or None.
        metric: ``"auc"`` (ROC-AUC + AP), ``"hits@K"`` (K a positive int) or ``"mrr"``.
        info: JSON-able dict saying how the split was made (ratios, seed, source, ...).
        train_label, val_label, test_label: edge classification / regression (``--task edge``):
            one label per ``*_pos`` column, all three or none: int64 [n] class ids (>= 0), or
            float32 [n] / [n, D] regression targets (finite). None: no edge labels.
    """

    train_pos: Tensor
    val_pos: Tensor
    test_pos: Tensor
    val_neg: Tensor | None
    test_neg: Tensor | None
    val_neg_dst: Tensor | None
    test_neg_dst: Tensor | None
    metric: str
    info: dict = field(default_factory=dict)
    train_label: Tensor | None = None
    val_label: Tensor | None = None
    test_label: Tensor | None = None

    def __repr__(self) -> str:  # short: the tensors are large, and Data's repr prints its attributes
        c = self.counts()
        sizes = ", ".join(f"{k}={v}" for k, v in c.items() if v or k in ("train", "val", "test"))
        return f"LinkSplit(metric={self.metric!r}, {sizes}, info={self.info})"

    def counts(self) -> dict[str, int]:
        """Number of pairs per field: ``{"train": Etr, "val": Ev, "test": Et, "val_neg": Ev' or 0,
        "test_neg": Et' or 0}`` and ``"neg_per_source"`` (Kn, 0 without ``*_neg_dst``)."""
        out = {k: int(getattr(self, f"{k}_pos").shape[1]) for k in ("train", "val", "test")}
        for k in ("val", "test"):
            neg = getattr(self, f"{k}_neg")
            out[f"{k}_neg"] = 0 if neg is None else int(neg.shape[1])
        dst = self.val_neg_dst if self.val_neg_dst is not None else self.test_neg_dst
        out["neg_per_source"] = 0 if dst is None else int(dst.shape[1])
        return out

    def check(self, num_nodes: int) -> None:
        """Raise :class:`DatasetError` (one line: expected / found / fix) unless every field has the
        contract's dtype and shape, every id lies in ``[0, num_nodes)``, ``metric`` is known and
        ``info`` is JSON-able."""
        fix = "rebuild the split with random_link_split or the ogbl-* loader"
        for name in ("train_pos", "val_pos", "test_pos", "val_neg", "test_neg"):
            t = getattr(self, name)
            if t is None and name.endswith("_neg"):
                continue
            if not isinstance(t, Tensor) or t.dtype != torch.int64 or t.dim() != 2 or t.shape[0] != 2:
                raise DatasetError(f"expected link_split.{name} an int64 tensor [2, n], found {_describe(t)}; {fix}")
            _check_range(name, t, num_nodes, fix)
        for name in ("val_neg_dst", "test_neg_dst"):
            t = getattr(self, name)
            if t is None:
                continue
            rows = getattr(self, name.replace("_neg_dst", "_pos")).shape[1]
            if not isinstance(t, Tensor) or t.dtype != torch.int64 or t.dim() != 2 or t.shape[0] != rows:
                raise DatasetError(f"expected link_split.{name} an int64 tensor [{rows}, Kn] (one row per "
                                   f"{name[:-8]}_pos pair), found {_describe(t)}; {fix}")
            _check_range(name, t, num_nodes, fix)
        if not isinstance(self.metric, str) or not _METRIC.match(self.metric):
            raise DatasetError(f"expected link_split.metric 'auc', 'mrr' or 'hits@K' (K a positive int), "
                               f"found {self.metric!r}; {fix}")
        if self.metric == "mrr" and (self.val_neg_dst is None and self.val_pos.shape[1]
                                     or self.test_neg_dst is None and self.test_pos.shape[1]):
            raise DatasetError("expected val_neg_dst and test_neg_dst with metric 'mrr', found None; "
                               "give per-source negatives or use metric 'auc'")
        if self.metric != "mrr" and (self.val_neg is None or self.test_neg is None):
            raise DatasetError(f"expected val_neg and test_neg with metric {self.metric!r}, found None; {fix}")
        try:
            json.dumps(self.info)
        except (TypeError, ValueError) as exc:
            raise DatasetError(f"expected link_split.info JSON-able, found {exc}; store plain numbers, "
                               "strings, lists and dicts") from None
        self.check_labels()

    def check_labels(self) -> None:
        """Raise :class:`DatasetError` (one line) unless the edge labels are absent, or given for
        train, val and test alike: one per ``*_pos`` column, all int64 [n] class ids >= 0 or all
        float32 [n] / [n, D] (the same D) finite regression targets."""
        fix = "give one label per edge, e.g. random_link_split(data, edge_label=...)"
        given = [k for k in ("train", "val", "test") if getattr(self, f"{k}_label") is not None]
        if not given:
            return
        if len(given) != 3:
            missing = [k for k in ("train", "val", "test") if k not in given]
            raise DatasetError(f"expected edge labels for train, val and test alike, found none for "
                               f"{', '.join(missing)}; {fix}")
        kinds = set()
        for key in given:
            name, t = f"{key}_label", getattr(self, f"{key}_label")
            rows = int(getattr(self, f"{key}_pos").shape[1])
            if not isinstance(t, Tensor) or t.dtype not in (torch.int64, torch.float32) or t.dim() not in (1, 2) \
                    or (t.dtype == torch.int64 and t.dim() != 1):
                raise DatasetError(f"expected link_split.{name} int64 [{rows}] class ids or float32 [{rows}] / "
                                   f"[{rows}, D] targets, found {_describe(t)}; {fix}")
            if t.shape[0] != rows:
                raise DatasetError(f"expected link_split.{name} to hold one label per {key}_pos edge ({rows}), found "
                                   f"{t.shape[0]}; {fix}")
            if t.dtype == torch.int64 and t.numel() and int(t.min()) < 0:
                raise DatasetError(f"expected link_split.{name} class ids >= 0, found {int(t.min())}; {fix}")
            if t.dtype == torch.float32 and t.numel() and not bool(torch.isfinite(t).all()):
                bad = int((~torch.isfinite(t)).reshape(rows, -1).any(1).sum())
                raise DatasetError(f"expected link_split.{name} finite targets, found NaN or inf at {bad} edges; "
                                   "drop or impute those edges' labels first")
            kinds.add((t.dtype, tuple(t.shape[1:])))
        if len(kinds) != 1:
            found = ", ".join(f"{k} {_describe(getattr(self, f'{k}_label'))}" for k in given)
            raise DatasetError(f"expected train, val and test labels of one kind (dtype and width), found {found}; "
                               f"{fix}")

    def label_meta(self) -> dict | None:
        """``{"kind": "class" | "regression", "num_classes": C or 0, "dim": D}`` of the edge labels
        (C = the largest class id + 1 over the three; D = 1 for [n] targets, 0 for classes), None
        without labels."""
        if self.train_label is None:
            return None
        labels = (self.train_label, self.val_label, self.test_label)
        if self.train_label.dtype == torch.int64:
            top = max((int(t.max()) for t in labels if t.numel()), default=-1)
            return {"kind": "class", "num_classes": top + 1, "dim": 0}
        return {"kind": "regression", "num_classes": 0,
                "dim": int(self.train_label.shape[1]) if self.train_label.dim() == 2 else 1}


def _describe(t: Any) -> str:
    if isinstance(t, Tensor):
        return f"{t.dtype} {list(t.shape)}"
    return type(t).__name__


def _check_range(name: str, t: Tensor, num_nodes: int, fix: str) -> None:
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= num_nodes):
        raise DatasetError(f"expected link_split.{name} node ids in [0, {num_nodes}), found ids from "
                           f"{int(t.min())} to {int(t.max())}; {fix}")


def parse_edge_split(text: str) -> tuple[float, float, float]:
    """Parse the CLI ``--edge-split`` value ``"train,val,test"`` (e.g. ``"0.85,0.05,0.10"``).

    Returns ``(train, val, test)``: three floats >= 0 summing to 1 (tolerance 1e-6) with
    ``train > 0`` and ``val + test > 0``; anything else raises a one-line DatasetError.
    """
    what = "--edge-split must be three fractions train,val,test that sum to 1"
    parts = [p.strip() for p in str(text).split(",")]
    try:
        if len(parts) != 3:
            raise ValueError
        fr = tuple(float(p) for p in parts)
    except ValueError:
        raise DatasetError(f"{what}; found {text!r}; e.g. --edge-split 0.85,0.05,0.10") from None
    train, val, test = fr
    found = ",".join(f"{v:g}" for v in fr)
    if not all(math.isfinite(v) and v >= 0 for v in fr):
        raise DatasetError(f"{what}; found {found} (a fraction is negative or not finite); e.g. 0.85,0.05,0.10")
    if abs(train + val + test - 1.0) > 1e-6:
        raise DatasetError(f"{what}; found {found} (sum {train + val + test:g}); e.g. 0.85,0.05,0.10")
    if train <= 0 or val + test <= 0:
        raise DatasetError(f"{what}, with train > 0 and val + test > 0; found {found}; e.g. 0.85,0.05,0.10")
    return train, val, test


def _check_ratios(val: float, test: float, disjoint_train_ratio: float) -> None:
    for name, r in (("val", val), ("test", test), ("disjoint_train_ratio", disjoint_train_ratio)):
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (0.0 <= float(r) < 1.0):
            raise DatasetError(f"expected {name} in [0, 1), found {r!r}; pass a fraction such as 0.05")
    if val + test >= 1.0:
        raise DatasetError(f"expected val + test < 1 so that training edges remain, found val={val:g} + "
                           f"test={test:g} = {val + test:g}; lower val or test")


def _input_edges(data: Data) -> tuple[int, Tensor]:
    """``(N, sorted unique keys u*N+v of data.edge_index)``, after the dtype/shape/range checks."""
    if getattr(data, "edge_types", None) is not None or getattr(data, "edge_type", None) is not None:
        raise DatasetError("expected a homogeneous graph for random_link_split, found a typed graph "
                           "(edge_type set); split typed graphs per relation (not supported yet)")
    ei = getattr(data, "edge_index", None)
    if not isinstance(ei, Tensor) or ei.dim() != 2 or ei.shape[0] != 2 or ei.dtype != torch.int64:
        raise DatasetError(f"expected data.edge_index an int64 tensor [2, E], found {_describe(ei)}; "
                           "load the graph with gnnscale.datasets.load_dataset")
    extra = [k for k in data.keys() if k != "edge_index" and "edge" in k and isinstance(data[k], Tensor)]
    if extra:
        raise DatasetError(f"expected no per-edge attributes for random_link_split, found {extra}; "
                           "delete them first (the message-passing graph is rebuilt from unique edges)")
    n = int(data.num_nodes) if data.num_nodes is not None else 0
    if n < 2 or n > _MAX_NODES:
        raise DatasetError(f"expected between 2 and {_MAX_NODES} nodes for a link split, found {n}; "
                           "use a larger (or smaller) graph")
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
        bad = int(((ei < 0) | (ei >= n)).any(0).sum())
        raise DatasetError(f"expected edge_index node ids in [0, {n}), found ids from {int(ei.min())} to "
                           f"{int(ei.max())} ({bad} edges out of range); renumber the nodes 0..N-1 or fix num_nodes")
    return n, torch.unique(ei[0] * n + ei[1], sorted=True)


def _edge_labels(ei: Tensor, n: int, edge_label) -> Callable[[Tensor], Tensor]:
    """``keys -> labels`` of the input edges ``keys`` (sorted keys ``u * n + v`` of ``ei``'s
    edges): each key's label is ``edge_label``'s at the key's first column of ``ei``. Checks
    ``edge_label`` (one line): a tensor with one row per column of ``ei``, int64 class ids >= 0 or
    finite floats."""
    fix = "pass one label per column of data.edge_index (int64 class ids or float targets)"
    if not isinstance(edge_label, Tensor) or edge_label.dim() not in (1, 2) \
            or not (edge_label.dtype == torch.int64 and edge_label.dim() == 1 or edge_label.is_floating_point()):
        raise DatasetError(f"expected edge_label an int64 tensor [E] or a float tensor [E] / [E, D], found "
                           f"{_describe(edge_label)}; {fix}")
    if edge_label.shape[0] != ei.shape[1]:
        raise DatasetError(f"expected edge_label to hold one label per edge of data.edge_index ({ei.shape[1]}), found "
                           f"{edge_label.shape[0]}; {fix}")
    if edge_label.is_floating_point():
        finite = torch.isfinite(edge_label).reshape(edge_label.shape[0], -1).all(1)
        if not bool(finite.all()):
            raise DatasetError(f"expected edge_label finite, found NaN or inf at {int((~finite).sum())} edges; drop or "
                               "impute those edges' labels first")
        edge_label = edge_label.to(torch.float32)
    elif edge_label.numel() and int(edge_label.min()) < 0:
        raise DatasetError(f"expected edge_label class ids >= 0, found {int(edge_label.min())}; {fix}")
    all_keys = ei[0] * n + ei[1]
    order = torch.sort(all_keys, stable=True).indices  # the first column of each key leads its run
    sorted_keys = all_keys[order]

    def label_of(keys: Tensor) -> Tensor:
        at = torch.searchsorted(sorted_keys, keys)
        return edge_label[order[at]].clone()

    return label_of


def _decode(keys: Tensor, n: int) -> Tensor:
    """int64 [2, K] edges of keys ``u * n + v``."""
    return torch.stack([keys // n, keys % n])


def _draw_negatives(
    need: int, n: int, forbidden: Tensor, canonical: bool, gen: torch.Generator, where: str
) -> Tensor:
    """``need`` distinct random keys of pairs ``(u, v)``, ``u != v``, neither ``u*n+v`` nor ``v*n+u``
    in the sorted key array ``forbidden``; uniform over such pairs (unordered pairs, stored with
    ``u < v``, when ``canonical``). Vectorized rejection sampling, in at most 64 rounds."""
    if need == 0:
        return torch.empty(0, dtype=torch.int64)
    a, b = forbidden // n, forbidden % n
    pairs = int(torch.unique(torch.minimum(a, b) * n + torch.maximum(a, b)).numel()) - int((a == b).sum())
    space = n * (n - 1) // 2 - pairs if canonical else n * (n - 1) - 2 * pairs
    if need > space:
        raise DatasetError(f"expected at least {need} node pairs that are not edges to draw {where} negatives, "
                           f"found {space}; the graph is too dense for this split, lower val/test")
    found = torch.empty(0, dtype=torch.int64)
    accept = 0.5
    for _ in range(_MAX_NEG_ROUNDS):
        short = need - found.numel()
        draw = min(int(2 * short / max(accept, 1e-3)) + 16, 1 << 24)
        u = torch.randint(0, n, (draw,), generator=gen)
        v = torch.randint(0, n, (draw,), generator=gen)
        if canonical:
            u, v = torch.minimum(u, v), torch.maximum(u, v)
        keys = u * n + v
        ok = (u != v) & ~torch.isin(keys, forbidden) & ~torch.isin(v * n + u, forbidden)
        accept = max(float(ok.float().mean()), 1e-3)
        found = torch.cat([found, keys[ok]])
        uniq, inverse = torch.unique(found, return_inverse=True)  # keep the first draw of each key, in draw order
        first = torch.full((uniq.numel(),), found.numel(), dtype=torch.int64)
        first.scatter_reduce_(0, inverse, torch.arange(found.numel()), reduce="amin")
        found = found[torch.sort(first).values]
        if found.numel() >= need:
            return found[:need]
    raise DatasetError(f"expected {need} {where} negatives after {_MAX_NEG_ROUNDS} rounds of sampling, found "
                       f"{found.numel()}; the graph is too dense for uniform negatives, lower val/test")


def random_link_split(
    data: Data,
    val: float = 0.05,
    test: float = 0.10,
    seed: int = 0,
    disjoint_train_ratio: float = 0.0,
    undirected: bool | None = None,
    neg_per_source: int = 0,
    edge_label: Tensor | None = None,
) -> Data:
    """A seeded link split of ``data.edge_index`` (docs/link_prediction.md, section 1).

    Args:
        data: the dataset contract's ``Data`` (homogeneous, no per-edge attributes): ``edge_index``
            int64 [2, E] with ids in ``[0, N)``.
        val, test: fractions in [0, 1) of the candidate pairs, ``val + test < 1``. Counts are
            ``round(val * P)`` and ``round(test * P)``; a nonzero fraction that rounds to 0 pairs
            is an error (too few edges).
        seed: seed of the ``torch.Generator`` drawing the permutation and the negatives.
        disjoint_train_ratio: r in [0, 1): ``round(r * P_train)`` training pairs become
            supervision only (removed from message passing, both directions) and ``train_pos``
            is those pairs only; with r = 0, ``train_pos`` is every training pair and they stay
            in message passing.
        undirected: None = detect (every edge's reverse present).
        neg_per_source: K > 0: instead of negative pairs, each val/test edge gets K fixed
            destinations drawn uniformly over all nodes (``val_neg_dst``/``test_neg_dst`` int64
            [n, K], as ogbl-citation2's, not filtered) and the metric is ``mrr``.
        edge_label: edge classification / regression (``--task edge``): one label per column of
            ``data.edge_index`` (int64 [E] class ids, or float [E] / [E, D] targets, kept as
            float32), carried onto ``train_label``/``val_label``/``test_label`` (aligned with
            ``*_pos``). An undirected pair takes the label of its ``(u, v)``, ``u < v``, edge; a
            duplicated edge the label of its first occurrence.

    Candidate pairs P: undirected graphs, the unique pairs ``u < v``; directed graphs, the unique
    edges ``u != v`` as given. Self loops are never in ``*_pos`` and stay in message passing.
    Val/test pairs leave message passing in both directions (directed graphs: the edge and its
    reverse when present; a training edge whose reverse is a val/test edge stays in ``train_pos``
    but leaves message passing). Negatives: uniform pairs ``u != v`` that are not edges of the
    input graph in either direction, distinct (val and test negatives disjoint too), as many as
    positives, stored ``u < v`` for undirected graphs. Every ``*_pos`` / ``*_neg`` is sorted by
    ``(u, v)``.

    Returns:
        A shallow copy of ``data`` (x, y, masks, num_classes, name kept) whose ``edge_index`` is
        the message-passing graph (int64 [2, E'], sorted, unique) and with ``link_split`` set
        (``metric = "auc"``; ``info`` = the arguments, ``source``, ``undirected``, ``pairs``).

    Raises:
        DatasetError: ratios out of range or leaving no training edges, too few edges for the
        split, edge ids out of ``[0, N)``, a typed graph or per-edge attributes.
    """
    _check_ratios(val, test, disjoint_train_ratio)
    n, keys = _input_edges(data)
    label_of = _edge_labels(data.edge_index, n, edge_label) if edge_label is not None else None
    src, dst = keys // n, keys % n
    if undirected is None:
        undirected = bool(torch.isin(dst * n + src, keys).all())
    candidates = keys[src < dst] if undirected else keys[src != dst]
    p = int(candidates.numel())
    n_val, n_test = int(round(val * p)), int(round(test * p))
    n_train = p - n_val - n_test
    n_sup = int(round(disjoint_train_ratio * n_train))
    kind = "undirected pairs" if undirected else "directed edges (no self loops)"
    if (val > 0 and n_val == 0) or (test > 0 and n_test == 0) or n_train <= 0 \
            or (disjoint_train_ratio > 0 and (n_sup == 0 or n_sup == n_train)):
        raise DatasetError(f"expected enough edges for val={val:g}, test={test:g}, disjoint_train_ratio="
                           f"{disjoint_train_ratio:g}, found {p} {kind} (val {n_val}, test {n_test}, train "
                           f"{n_train}, supervision-only {n_sup}); use a larger graph or other fractions")
    gen = torch.Generator().manual_seed(int(seed))
    perm = candidates[torch.randperm(p, generator=gen)]
    val_keys = torch.sort(perm[:n_val]).values
    test_keys = torch.sort(perm[n_val:n_val + n_test]).values
    train_perm = perm[n_val + n_test:]
    sup_keys = torch.sort(train_perm[:n_sup]).values if disjoint_train_ratio > 0 else None
    train_keys = sup_keys if sup_keys is not None else torch.sort(train_perm).values

    removed = torch.cat([val_keys, test_keys] + ([sup_keys] if sup_keys is not None else []))
    removed = torch.cat([removed, (removed % n) * n + removed // n])  # both directions
    mp_keys = keys[~torch.isin(keys, removed)]

    neg_pairs = neg_dst = None
    if isinstance(neg_per_source, bool) or not isinstance(neg_per_source, int) or neg_per_source < 0:
        raise DatasetError(f"expected neg_per_source to be an integer >= 0, found {neg_per_source!r}")
    if neg_per_source:  # per-source negatives (MRR), uniform over all nodes as ogbl-citation2's
        neg_dst = torch.randint(0, n, (n_val + n_test, int(neg_per_source)), generator=gen)
    else:
        negs = _draw_negatives(n_val + n_test, n, keys, undirected, gen, "val/test")
        neg_pairs = (_decode(torch.sort(negs[:n_val]).values, n), _decode(torch.sort(negs[n_val:]).values, n))
    split = LinkSplit(
        train_pos=_decode(train_keys, n), val_pos=_decode(val_keys, n), test_pos=_decode(test_keys, n),
        val_neg=neg_pairs[0] if neg_pairs else None, test_neg=neg_pairs[1] if neg_pairs else None,
        val_neg_dst=neg_dst[:n_val] if neg_dst is not None else None,
        test_neg_dst=neg_dst[n_val:] if neg_dst is not None else None,
        metric="mrr" if neg_per_source else "auc",
        info={"source": "random_link_split", "val": float(val), "test": float(test), "seed": int(seed),
              "disjoint_train_ratio": float(disjoint_train_ratio), "undirected": bool(undirected), "pairs": p,
              "neg_per_source": int(neg_per_source)},
    )
    if label_of is not None:
        split.train_label, split.val_label, split.test_label = (label_of(k) for k in (train_keys, val_keys, test_keys))
        split.check_labels()
    out = copy.copy(data)
    out.edge_index = _decode(mp_keys, n)
    out.link_split = split
    out.name = str(getattr(data, "name", "") or "")
    logger.info("random_link_split(%s): %d %s -> train %d, val %d, test %d (supervision-only %d); message "
                "passing %d of %d edges", out.name, p, kind, split.train_pos.shape[1], n_val, n_test, n_sup,
                mp_keys.numel(), keys.numel())
    return out
