"""Link prediction metrics, equal to OGB's ``Evaluator`` and scikit-learn on the same scores
(``docs/link_prediction.md`` section 5).

One-shot functions (vectorized torch, no Python loop over scores):

- :func:`roc_auc`, :func:`average_precision`: positive vs negative scores, exactly
  scikit-learn's ``roc_auc_score`` / ``average_precision_score`` with labels 1 / 0;
- :func:`hits_at_k`: OGB's Hits@K (ogbl-collab, -ppa, -ddi): the fraction of positives scoring
  strictly above the K-th highest negative (1.0 when there are fewer than K negatives);
- :func:`mrr`, :func:`mrr_values`: OGB's MRR (ogbl-citation2, per-source negatives):
  rank = 1 + 0.5 * (#neg > pos + #neg >= pos), the mean of 1 / rank;
- :func:`multilabel_roc_auc`: OGB's ogbn-proteins ROC-AUC, averaged over the labels that have
  both classes.

:class:`LinkMetrics` accumulates scores slice by slice on each rank, with bounded memory, and
reduces them over the ranks in :meth:`LinkMetrics.result` (its only collective calls):

- ``auc`` (reports ``auc`` and ``ap``): every score is kept and gathered on every rank; that
  is bounded by the split's pair count (positives plus negatives), not by the graph;
- ``hits@K``: the positives' scores (bounded by the split's positive pairs) and only the running
  top K negatives; each rank contributes its top K and counts its own positives above the
  global threshold;
- ``mrr``: a count per rank value (int64 [2 Kn + 1], Kn negatives per source) and the number
  of sources; nothing per score.

Every result is independent of how the pairs are split over ranks and slices: the reductions
are integer counts or exact gathers, so a distributed run gives the single process's figure
bit for bit.
"""
from __future__ import annotations

import math
import re
from typing import Any

import torch
from torch import Tensor

from gnnscale.config import OptionError, parse_link_metric  # noqa: F401 - OptionError re-exported

__all__ = [
    "roc_auc", "average_precision", "hits_at_k", "mrr", "mrr_values", "multilabel_roc_auc",
    "parse_metric", "LinkMetrics", "EdgeMetrics",
]



parse_metric = parse_link_metric  # the one parser of --link-metric (torch-free, in gnnscale.config)


# -- one-shot functions ------------------------------------------------------------------------

def _scores(x: Tensor, name: str, dim: int = 1) -> Tensor:
    """``x`` detached, as a ``dim``-D floating tensor (integer/bool scores become float64)."""
    x = torch.as_tensor(x).detach()
    if x.dim() != dim:
        if dim == 1 and x.dim() == 2 and x.shape[1] == 1:
            x = x.reshape(-1)
        else:
            raise ValueError(f"{name} scores must be a {dim}-D tensor; found shape {tuple(x.shape)}")
    if not x.is_floating_point():
        x = x.to(torch.float64)
    return x


def _no_nan(*xs: Tensor) -> None:
    for x in xs:
        if x.numel() and bool(torch.isnan(x).any()):
            raise ValueError("scores contain NaN; ROC-AUC and average precision need comparable scores")


def _twice_ranks(x: Tensor) -> Tensor:
    """Twice the average rank (1-based, ties share their mean rank) of each entry of each column.

    Args:
        x: [N, C] scores (any real dtype, no NaN).

    Returns:
        int64 [N, C]: 2 * rank (an integer: ranks of tied groups are half-integers).
    """
    n = x.shape[0]
    vals, order = torch.sort(x, dim=0)
    pos = torch.arange(n, device=x.device).unsqueeze(1).expand_as(vals)
    new = torch.ones_like(vals, dtype=torch.bool)
    new[1:] = vals[1:] != vals[:-1]  # first of its tie group
    last = torch.ones_like(vals, dtype=torch.bool)
    last[:-1] = new[1:]  # last of its tie group
    start = torch.cummax(torch.where(new, pos, torch.zeros_like(pos)), dim=0).values
    end = torch.flip(torch.cummin(torch.flip(torch.where(last, pos, torch.full_like(pos, n)), [0]), dim=0).values, [0])
    twice = start + end + 2  # 2 * ((start + 1 + end + 1) / 2)
    out = torch.empty_like(twice)
    out.scatter_(0, order, twice)
    return out


def roc_auc(pos: Tensor, neg: Tensor) -> float:
    """ROC-AUC of positive vs negative scores (scikit-learn's ``roc_auc_score`` with labels 1/0).

    The Mann-Whitney U statistic from average ranks (ties count 1/2), in exact integer
    arithmetic, divided once in float64.

    Args:
        pos: float [n] scores of positive pairs. neg: float [m] scores of negative pairs.

    Raises:
        ValueError: no positive or no negative score (ROC-AUC is undefined), or a NaN score.
    """
    pos, neg = _scores(pos, "positive"), _scores(neg, "negative")
    n, m = pos.numel(), neg.numel()
    if n == 0 or m == 0:
        raise ValueError(f"ROC-AUC needs positive and negative scores; found {n} positive and {m} negative")
    _no_nan(pos, neg)
    dtype = torch.promote_types(pos.dtype, neg.dtype)
    twice = _twice_ranks(torch.cat([pos.to(dtype), neg.to(dtype)]).unsqueeze(1))[:, 0]
    u2 = int(twice[:n].sum()) - n * (n + 1)  # 2 U
    return u2 / (2.0 * n * m)


def average_precision(pos: Tensor, neg: Tensor) -> float:
    """Average precision of positive vs negative scores: scikit-learn's
    ``average_precision_score`` with labels 1/0 (the step-wise sum over thresholds at the
    distinct scores, tied scores entering together: sum (R_i - R_{i-1}) P_i).

    Args:
        pos: float [n] scores of positive pairs. neg: float [m] scores of negative pairs
            (none: 1.0, as scikit-learn).

    Raises:
        ValueError: no positive score (undefined), or a NaN score.
    """
    pos, neg = _scores(pos, "positive"), _scores(neg, "negative")
    n, m = pos.numel(), neg.numel()
    if n == 0:
        raise ValueError(f"average precision needs positive scores; found none (and {m} negative)")
    _no_nan(pos, neg)
    dtype = torch.promote_types(pos.dtype, neg.dtype)
    s = torch.cat([pos.to(dtype), neg.to(dtype)])
    y = torch.cat([torch.ones(n, dtype=torch.int64, device=s.device), torch.zeros(m, dtype=torch.int64, device=s.device)])
    s, order = torch.sort(s, descending=True)
    tps = torch.cumsum(y[order], 0)
    last = torch.ones_like(s, dtype=torch.bool)
    last[:-1] = s[:-1] != s[1:]  # thresholds: the last entry of each distinct score
    idx = torch.nonzero(last).reshape(-1)
    tp = tps[idx].to(torch.float64)
    precision = tp / (idx + 1).to(torch.float64)
    recall = tp / tp[-1]
    step = torch.diff(recall, prepend=recall.new_zeros(1))
    return float((step * precision).sum())


def hits_at_k(pos: Tensor, neg: Tensor, k: int) -> float:
    """OGB's Hits@K (ogbl-collab/-ppa/-ddi ``Evaluator``): the fraction of positives scoring
    strictly above the K-th highest negative score; 1.0 when there are fewer than K negatives.

    Args:
        pos: float [n] positive scores. neg: float [m] negative scores (shared by every
            positive). k: K, at least 1.

    Raises:
        ValueError: k < 1, or no positive score (with at least K negatives).
    """
    if isinstance(k, bool) or int(k) != k or int(k) < 1:
        raise ValueError(f"hits@K needs K a positive integer; found {k!r}")
    k = int(k)
    pos, neg = _scores(pos, "positive"), _scores(neg, "negative")
    if neg.numel() < k:
        return 1.0
    if pos.numel() == 0:
        raise ValueError("hits@K needs positive scores; found none")
    kth = torch.topk(neg, k).values[-1]
    return float(torch.sum(pos > kth)) / pos.numel()


def _rank_counts(pos: Tensor, neg: Tensor) -> Tensor:
    """(#neg > pos) + (#neg >= pos) per source, i.e. 2 * rank - 2: int64 [n]."""
    pos = _scores(pos, "positive")
    neg = _scores(neg, "negative", dim=2)
    if neg.shape[0] != pos.shape[0]:
        raise ValueError(f"MRR needs one row of negatives per positive: found {pos.shape[0]} positives and "
                         f"negatives of shape {tuple(neg.shape)}")
    p = pos.unsqueeze(1)
    return (neg > p).sum(1) + (neg >= p).sum(1)


def mrr_values(pos: Tensor, neg: Tensor) -> Tensor:
    """OGB's reciprocal ranks (ogbl-citation2 ``Evaluator``'s ``mrr_list``, there float32).

    Args:
        pos: float [n] positive scores. neg: float [n, K] each positive's negatives.

    Returns:
        float64 [n]: 1 / rank, rank = 0.5 * (#neg > pos + #neg >= pos) + 1.
    """
    c = _rank_counts(pos, neg)
    return 2.0 / (c + 2).to(torch.float64)


def _mrr_of_counts(hist: Tensor, n: int) -> float | None:
    """Mean reciprocal rank from ``hist[c]`` = the number of sources with 2 * rank - 2 == c
    (int64 [L], trailing zeros allowed) and ``n`` sources: sum_c hist[c] * 2 / (c + 2) / n,
    the sum correctly rounded (``math.fsum``: independent of order and padding)."""
    if n == 0:
        return None
    c = torch.arange(hist.numel(), dtype=torch.float64)
    terms = hist.to(torch.float64) * (2.0 / (c + 2.0))
    return math.fsum(terms[hist > 0].tolist()) / n


def mrr(pos: Tensor, neg: Tensor) -> float:
    """OGB's MRR: the mean of :func:`mrr_values` (summed per distinct rank, in float64, so
    that any split of the sources over ranks or slices gives the same bits).

    Args:
        pos: float [n] positive scores. neg: float [n, K] each positive's negatives.

    Raises:
        ValueError: no positive, or mismatched shapes.
    """
    c = _rank_counts(pos, neg)
    if c.numel() == 0:
        raise ValueError("MRR needs positive scores; found none")
    return _mrr_of_counts(torch.bincount(c.cpu()), c.numel())


def multilabel_roc_auc(y_true: Tensor, scores: Tensor) -> float:
    """OGB's ogbn-proteins ROC-AUC: the mean over labels (columns) that have both a positive and
    a negative in ``y_true`` of that column's ROC-AUC (columns with one class are skipped).

    Args:
        y_true: [N, C] labels, 0 or 1 (any dtype). scores: float [N, C] scores.

    Raises:
        ValueError: shapes differ, a label is not 0/1, or no column has both classes.
    """
    y = torch.as_tensor(y_true).detach()
    s = _scores(scores, "label", dim=2)
    if y.dim() == 1:
        y = y.unsqueeze(1)
    if tuple(y.shape) != tuple(s.shape):
        raise ValueError(f"labels and scores must have the same [N, C] shape; found {tuple(y.shape)} and {tuple(s.shape)}")
    ones, zeros = y == 1, y == 0
    if not bool((ones | zeros).all()):
        raise ValueError("multilabel ROC-AUC needs labels 0 or 1; found other values")
    _no_nan(s)
    n1 = ones.sum(0)
    n0 = zeros.sum(0)
    ok = (n1 > 0) & (n0 > 0)
    if not bool(ok.any()):
        raise ValueError(f"no label of the {y.shape[1]} has both a positive and a negative; ROC-AUC is undefined")
    twice = _twice_ranks(s)
    u2 = (twice * ones).sum(0) - n1 * (n1 + 1)
    auc = u2[ok].to(torch.float64) / (2.0 * n1[ok].to(torch.float64) * n0[ok].to(torch.float64))
    return float(auc.sum()) / int(ok.sum())


# -- distributed accumulator ------------------------------------------------------------------

def _cpu(x: Tensor, name: str, dim: int = 1) -> Tensor:
    """``x`` on the CPU in storage of its own (a view of a larger tensor, e.g. one column of a
    slice's score matrix, would keep, and pickle, all of it)."""
    x = _scores(x, name, dim).to("cpu")
    if x.untyped_storage().nbytes() != x.numel() * x.element_size() or not x.is_contiguous():
        x = x.clone(memory_format=torch.contiguous_format)
    return x


class LinkMetrics:
    """A link metric accumulated slice by slice, reduced over the ranks in :meth:`result`.

    Args:
        metric: ``"auc"`` (reports ROC-AUC ``auc`` and average precision ``ap``), ``"hits@K"``
            or ``"mrr"`` (see :func:`parse_metric`).

    Feed shared-negative splits with :meth:`add_pos` / :meth:`add_neg` (auc, hits@K) and
    per-source-negative splits with :meth:`add_ranked` (mrr); :meth:`add` does either. Scores
    are detached and kept on the CPU. Memory: auc keeps every score (float [n] + [m], bounded
    by the split's pair count; :meth:`result` gathers them on every rank); hits@K keeps the
    positives' scores and the top K negatives; mrr keeps int64 [2 K + 1] counts.
    """

    def __init__(self, metric: str) -> None:
        self.kind, self.k = parse_metric(metric)
        self.metric = f"hits@{self.k}" if self.kind == "hits" else self.kind
        self._pos: list[Tensor] = []  # auc, hits
        self._neg: list[Tensor] = []  # auc
        self._top = torch.zeros(0, dtype=torch.float32)  # hits: the top K negatives so far
        self._n_neg = 0  # hits: negatives seen
        self._hist = torch.zeros(0, dtype=torch.int64)  # mrr: sources per 2 * rank - 2
        self._n_ranked = 0  # mrr: sources seen

    def add_pos(self, scores: Tensor) -> None:
        """Positive pairs' scores, float [n] (auc, hits@K)."""
        self._shared("add_pos")
        self._pos.append(_cpu(scores, "positive"))

    def add_neg(self, scores: Tensor) -> None:
        """Negative pairs' scores, float [m] (auc, hits@K; negatives shared by every positive)."""
        self._shared("add_neg")
        s = _cpu(scores, "negative")
        if self.kind == "auc":
            self._neg.append(s)
            return
        self._n_neg += s.numel()
        both = torch.cat([self._top, s]) if self._top.numel() else s
        self._top = torch.topk(both, min(self.k, both.numel())).values if both.numel() else both

    def add_ranked(self, pos: Tensor, neg: Tensor) -> None:
        """Positives' scores float [n] and each one's negatives float [n, K] (mrr)."""
        if self.kind != "mrr":
            raise ValueError(f"add_ranked is for mrr (per-source negatives); this accumulator is {self.metric}: "
                             "use add_pos and add_neg")
        ranks = _rank_counts(pos, neg).cpu()
        c = torch.bincount(ranks)
        if c.numel() > self._hist.numel():
            c[: self._hist.numel()] += self._hist
            self._hist = c
        else:
            self._hist[: c.numel()] += c
        self._n_ranked += ranks.numel()

    def add(self, pos: Tensor | None = None, neg: Tensor | None = None) -> None:
        """One slice: :meth:`add_ranked` for mrr (both given), else :meth:`add_pos` /
        :meth:`add_neg` for whichever is given."""
        if self.kind == "mrr":
            if pos is None or neg is None:
                raise ValueError("mrr needs each slice's positives and their negatives together")
            self.add_ranked(pos, neg)
            return
        if pos is not None:
            self.add_pos(pos)
        if neg is not None:
            self.add_neg(neg)

    def _shared(self, what: str) -> None:
        if self.kind == "mrr":
            raise ValueError(f"{what} is for auc and hits@K (shared negatives); for mrr use add_ranked")

    def result(self, comm: Any = None) -> dict[str, float | None]:
        """The metric over every rank's pairs; collective over ``comm`` (None: this process alone).

        ``comm`` offers ``all_reduce(tensor, op)`` (in place, returns the tensor; op "sum" or
        "max"), ``all_gather_object(obj) -> list`` and ``world_size`` (a
        :class:`~gnnscale.process.comm.Communicator`). Every rank gets the same dict; a rank
        with no pairs still takes part. A figure that is undefined (no pairs anywhere; AUC
        without negatives) is None.

        Returns:
            auc: ``{"auc": float | None, "ap": float | None}``; hits@K: ``{"hits@K": ...}``;
            mrr: ``{"mrr": ...}``.
        """
        many = comm is not None and int(getattr(comm, "world_size", 1)) > 1
        if self.kind == "auc":
            pos, neg = _cat(self._pos), _cat(self._neg)
            if many:
                got = comm.all_gather_object((pos, neg))
                pos, neg = _cat([g[0] for g in got]), _cat([g[1] for g in got])
            auc = roc_auc(pos, neg) if pos.numel() and neg.numel() else None
            ap = average_precision(pos, neg) if pos.numel() else None
            return {"auc": auc, "ap": ap}
        if self.kind == "hits":
            pos = _cat(self._pos)
            top, n_neg, n_pos = self._top, self._n_neg, pos.numel()
            if many:
                got = comm.all_gather_object((top, n_neg, n_pos))
                top = _cat([g[0] for g in got])
                n_neg, n_pos = sum(g[1] for g in got), sum(g[2] for g in got)
            if n_neg < self.k:  # OGB: fewer than K negatives -> 1
                return {self.metric: 1.0 if n_neg + n_pos else None}
            if n_pos == 0:
                return {self.metric: None}
            kth = torch.topk(top, self.k).values[-1]
            above = torch.tensor([float(torch.sum(pos > kth))], dtype=torch.float64)
            if many:
                above = comm.all_reduce(above, op="sum")
            return {self.metric: float(above[0]) / n_pos}
        hist, n = self._hist, self._n_ranked
        if many:
            size = comm.all_reduce(torch.tensor([hist.numel()], dtype=torch.int64), op="max")
            both = torch.zeros(int(size[0]) + 1, dtype=torch.int64)
            both[0] = n
            both[1: 1 + hist.numel()] = hist
            both = comm.all_reduce(both, op="sum")
            n, hist = int(both[0]), both[1:]
        return {"mrr": _mrr_of_counts(hist, n)}


class EdgeMetrics:
    """Edge classification / regression metrics (``--task edge``), accumulated slice by slice
    and reduced over the ranks exactly in :meth:`result` (sums and counts; one all-reduce).

    Args:
        kind: ``"class"`` (reports ``accuracy`` and ``macro_f1``, scikit-learn's
            ``f1_score(average="macro")``: the mean F1 over the classes present among the
            labels or the predictions) or ``"regression"`` (``mae``: the mean absolute error
            over every target value, ``rmse``: the root mean squared error).
        num_classes: C (classes), the width of the per-class counts.

    Memory: int64 [3 C + 2] counts, or float64 [3] sums; nothing per edge.
    """

    def __init__(self, kind: str, num_classes: int = 0) -> None:
        if kind not in ("class", "regression"):
            raise ValueError(f"edge metrics are of kind 'class' or 'regression'; found {kind!r}")
        self.kind, self.num_classes = kind, int(num_classes)
        # class: [correct, edges, true positives per class, labels per class, predictions per class]
        self._counts = torch.zeros(2 + 3 * self.num_classes, dtype=torch.int64)
        self._sums = torch.zeros(3, dtype=torch.float64)  # regression: [sum |err|, sum err^2, values]

    def add(self, out: Tensor, label: Tensor) -> None:
        """A slice's outputs (float [s, C] logits, or [s, D] / [s] values) and labels (int64 [s]
        classes, or float [s, D] / [s] targets)."""
        out, label = out.detach().cpu(), torch.as_tensor(label).detach().cpu()
        if label.numel() == 0:
            return
        if self.kind == "regression":
            err = out.to(torch.float64).reshape(label.shape) - label.to(torch.float64)
            self._sums += torch.stack([err.abs().sum(), (err * err).sum(),
                                       torch.tensor(float(err.numel()), dtype=torch.float64)])
            return
        C = self.num_classes
        pred = out.argmax(1)
        hit = pred == label
        self._counts[0] += int(hit.sum())
        self._counts[1] += int(label.numel())
        self._counts[2:2 + C] += torch.bincount(label[hit], minlength=C)[:C]
        self._counts[2 + C:2 + 2 * C] += torch.bincount(label, minlength=C)[:C]
        self._counts[2 + 2 * C:] += torch.bincount(pred, minlength=C)[:C]

    def result(self, comm: Any = None) -> dict[str, float | None]:
        """``{"accuracy", "macro_f1"}`` or ``{"rmse", "mae"}`` over every rank (collective when
        ``comm`` has more than one rank); None where no edge was scored."""
        many = comm is not None and int(getattr(comm, "world_size", 1)) > 1
        if self.kind == "regression":
            sums = comm.all_reduce(self._sums.clone(), op="sum") if many else self._sums
            n = float(sums[2])
            if n == 0:
                return {"rmse": None, "mae": None}
            return {"rmse": math.sqrt(float(sums[1]) / n), "mae": float(sums[0]) / n}
        counts = comm.all_reduce(self._counts.clone(), op="sum") if many else self._counts
        C, n = self.num_classes, int(counts[1])
        if n == 0:
            return {"accuracy": None, "macro_f1": None}
        tp, true, pred = counts[2:2 + C], counts[2 + C:2 + 2 * C], counts[2 + 2 * C:]
        present = (true + pred) > 0
        f1 = (2 * tp[present]).to(torch.float64) / (true[present] + pred[present]).to(torch.float64)
        return {"accuracy": int(counts[0]) / n, "macro_f1": float(f1.mean())}


def _cat(parts: list[Tensor]) -> Tensor:
    parts = [p for p in parts if p.numel()]
    if not parts:
        return torch.zeros(0, dtype=torch.float32)
    return torch.cat(parts) if len(parts) > 1 else parts[0]
