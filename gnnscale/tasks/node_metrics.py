"""Node targets in the engine (``docs/targets_and_edge_features.md`` section 5): a target kind's
output width, loss, training counts and evaluation metrics.

:class:`NodeTarget` is what a run's node task knows of its targets: the kind (``class``,
``binary``, ``multilabel``, ``regression``) from the partition's ``meta["target"]`` (absent:
``class``), the model's output width (C, 1, C or D) and ``--pos-weight``'s weights. Every mode
takes its loss and its training counts from it, so the loss lives in one place.

:func:`node_metric` computes one metric of a split from the model's outputs and the targets
(every rank's, gathered by the evaluation), vectorized:

- ``accuracy``: class: argmax; binary: logit > 0;
- ``macro_f1`` / ``micro_f1``: scikit-learn's ``f1_score`` (class: macro over the classes among
  the labels or the predictions, micro = accuracy; binary: predictions logit > 0, macro over
  classes 0 and 1; multilabel: per label with logit > 0, macro over every label, an undefined
  F1 counting 0, micro over every (node, label) entry);
- ``roc_auc`` / ``ap``: :func:`~gnnscale.tasks.scores.roc_auc` and
  :func:`~gnnscale.tasks.scores.average_precision` (binary), and for multilabel targets
  the mean over the labels that have both classes (:func:`~gnnscale.tasks.scores.multilabel_roc_auc`,
  OGB's ogbn-proteins ROC-AUC; AP likewise, as OGB's ``eval_ap``);
- ``mae`` / ``rmse``: over every target value.

:func:`ogb_metric` gives OGB's own ``Evaluator`` figure for ``ogbn-*`` datasets when ``ogb`` is
importable and the Evaluator measures the chosen metric.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from gnnscale.config import default_node_metric, parse_pos_weight
from gnnscale.tasks.scores import average_precision, multilabel_roc_auc, roc_auc

__all__ = ["NodeTarget", "target_of", "node_metric", "ogb_metric", "label_counts"]


def target_of(meta: dict) -> tuple[str, int, int]:
    """(kind, num_classes, outputs) of a partition's ``meta``: its ``target`` entry, or for a
    folder written before it existed class ids of ``meta["num_classes"]`` classes."""
    target = meta.get("target")
    if isinstance(target, dict):
        classes = int(target.get("num_classes") or 0)
        kind = str(target.get("kind", "class"))
        outputs = int(target.get("num_outputs") or (1 if kind == "binary" else classes))
        return kind, classes, outputs
    classes = int(meta.get("num_classes") or 0)
    return "class", classes, classes


def label_counts(y: Tensor, kind: str) -> Tensor:
    """float64 [W + 1] of labelled rows ``y`` (a binary int64 [n] or multilabel float [n, C]):
    the positives per label (W = 1 or C), then the row count; summed over ranks these give
    ``--pos-weight auto``."""
    if kind == "binary":
        pos = (y == 1).sum().reshape(1)
    else:
        pos = (y > 0.5).sum(0)
    return torch.cat([pos.to(torch.float64), torch.tensor([float(y.shape[0])], dtype=torch.float64)])


@dataclass
class NodeTarget:
    """A run's node targets.

    Attributes:
        kind: ``class``, ``binary``, ``multilabel`` or ``regression``.
        num_classes: C (class, multilabel), 2 (binary), D (regression).
        outputs: the model's output width: C, 1, C or D.
        pos_weight: float32 [outputs] weights of the positives in the binary cross-entropy
            (binary, multilabel with ``--pos-weight``), else None.
    """

    kind: str = "class"
    num_classes: int = 0
    outputs: int = 0
    pos_weight: Tensor | None = None

    @classmethod
    def of(cls, meta: dict) -> "NodeTarget":
        kind, classes, outputs = target_of(meta)
        return cls(kind, classes, outputs)

    def weigh(self, option, counts: Tensor | None = None) -> "NodeTarget":
        """Set :attr:`pos_weight` from ``--pos-weight`` (``None``, ``auto`` or a number);
        ``counts``: :func:`label_counts` of every rank's training labels, summed (``auto``:
        negatives / positives per label, 1 for a label without positives). Returns self."""
        value = parse_pos_weight(option)
        if value is None or self.kind not in ("binary", "multilabel"):
            self.pos_weight = None
            return self
        if value == "auto":
            pos, n = counts[:-1], counts[-1]
            self.pos_weight = torch.where(pos > 0, (n - pos) / pos.clamp(min=1), torch.ones_like(pos)).float()
        else:
            self.pos_weight = torch.full((self.outputs,), float(value), dtype=torch.float32)
        return self

    def loss(self, out: Tensor, y: Tensor, reduction: str = "mean") -> Tensor:
        """The kind's loss of outputs ``out`` (float [n, outputs]) against targets ``y`` (int64 [n]
        for class/binary, float32 [n, C] multilabel, [n] or [n, D] regression): cross-entropy,
        binary cross-entropy with logits (on the one logit, or per label, averaged over the labels),
        or mean squared error (averaged over the D values). ``reduction``: ``mean`` or ``sum``
        over the n nodes."""
        if self.kind == "class":
            return F.cross_entropy(out, y, reduction=reduction)
        if self.kind == "regression":
            err = F.mse_loss(out.reshape(y.shape), y.to(out.dtype), reduction="none")
            per = err.reshape(err.shape[0], -1).mean(1)
        else:
            w = None if self.pos_weight is None else self.pos_weight.to(out.device)
            logits = out.reshape(-1) if self.kind == "binary" else out
            per = F.binary_cross_entropy_with_logits(logits, y.to(out.dtype), pos_weight=w, reduction="none")
            if per.dim() == 2:
                per = per.mean(1)
        return per.sum() if reduction == "sum" else per.mean()

    def correct(self, out: Tensor, y: Tensor) -> tuple[float, int]:
        """(right, nodes) of a step's outputs: the class (class: argmax, binary: logit > 0), the
        fraction of labels right per node summed (multilabel: logit > 0), 0 for regression."""
        n = int(y.shape[0])
        if n == 0 or self.kind == "regression":
            return 0, n
        with torch.no_grad():
            if self.kind == "class":
                return int((out.argmax(1) == y).sum()), n
            if self.kind == "binary":
                return int(((out.reshape(-1) > 0) == (y == 1)).sum()), n
            return float(((out > 0) == (y > 0.5)).to(torch.float64).mean(1).sum()), n

    def reduce(self, out: Tensor) -> Tensor:
        """What evaluation keeps of outputs ``out`` (float [n, outputs]): class ids (int64 [n])
        for class targets, else the outputs themselves (float32 [n, outputs], on the CPU)."""
        if self.kind == "class":
            return out.argmax(1).cpu()
        return out.detach().to(torch.float32).cpu()

    def default_metric(self) -> str:
        return default_node_metric(self.kind)


def _f1(tp: Tensor, npred: Tensor, ntrue: Tensor) -> Tensor:
    """float64 F1 per column from true positives, predicted and true positives (0 where undefined)."""
    den = (npred + ntrue).to(torch.float64)
    return torch.where(den > 0, 2 * tp.to(torch.float64) / den.clamp(min=1), torch.zeros_like(den))


def _class_scores(pred: Tensor, y: Tensor, metric: str) -> float | None:
    n = int(y.numel())
    if n == 0:
        return None
    if metric in ("accuracy", "micro_f1"):
        return int((pred == y).sum()) / n
    c = int(max(int(pred.max()), int(y.max()))) + 1
    hit = pred == y
    tp, npred, ntrue = (torch.bincount(y[hit], minlength=c), torch.bincount(pred, minlength=c),
                        torch.bincount(y, minlength=c))
    present = (npred + ntrue) > 0
    return float(_f1(tp, npred, ntrue)[present].mean())


def node_metric(metric: str, kind: str, out: Tensor, y: Tensor) -> float | None:
    """``metric`` of one split (see the module docstring).

    Args:
        metric: one of ``accuracy``, ``macro_f1``, ``micro_f1``, ``roc_auc``, ``ap``, ``mae``, ``rmse``.
        kind: the target kind. out: what :meth:`NodeTarget.reduce` kept of every node's
            outputs (class: int64 [n] class ids; else float [n, W] outputs). y: the nodes' targets.

    Returns:
        The figure, or None where it is undefined (no nodes; ROC-AUC without both classes).
    """
    n = int(y.shape[0])
    if n == 0:
        return None
    if kind == "class":
        return _class_scores(out, y, metric)
    if kind == "regression":
        err = out.to(torch.float64).reshape(y.shape) - y.to(torch.float64)
        if metric == "mae":
            return float(err.abs().mean())
        return math.sqrt(float((err * err).mean()))
    if kind == "binary":
        s, truth = out.reshape(-1), y == 1
        if metric == "roc_auc":
            return roc_auc(s[truth], s[~truth]) if bool(truth.any()) and not bool(truth.all()) else None
        if metric == "ap":
            return average_precision(s[truth], s[~truth]) if bool(truth.any()) else None
        pred = s > 0
        if metric == "accuracy":
            return int((pred == truth).sum()) / n
        return float(_f1(*_binary_counts(pred, truth)).mean())  # macro_f1
    # multilabel
    truth = y > 0.5
    if metric in ("roc_auc", "ap"):
        both = truth.any(0) & ~truth.all(0)  # labels with a positive and a negative
        if not bool(both.any()):
            return None
        if metric == "roc_auc":
            return multilabel_roc_auc(truth[:, both].to(torch.int64), out[:, both])
        cols = torch.nonzero(both).reshape(-1).tolist()
        return sum(average_precision(out[truth[:, c], c], out[~truth[:, c], c]) for c in cols) / len(cols)
    pred = out > 0
    tp, npred, ntrue = (pred & truth).sum(0), pred.sum(0), truth.sum(0)
    if metric == "micro_f1":
        return float(_f1(tp.sum(), npred.sum(), ntrue.sum()))
    return float(_f1(tp, npred, ntrue).mean())


def _binary_counts(pred: Tensor, truth: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(true positives, predicted, true) of classes 0 and 1 (int64 [2] each) of bool [n]
    predictions and truths; classes with
    neither a label nor a prediction are left out, as scikit-learn's macro average does."""
    p1, t1 = pred, truth
    tp = torch.stack([(~p1 & ~t1).sum(), (p1 & t1).sum()])
    npred = torch.stack([(~p1).sum(), p1.sum()])
    ntrue = torch.stack([(~t1).sum(), t1.sum()])
    present = (npred + ntrue) > 0
    return tp[present], npred[present], ntrue[present]


#: OGB's Evaluator figures that are one of ours
_OGB_NAMES = {"acc": "accuracy", "rocauc": "roc_auc", "ap": "ap", "rmse": "rmse", "mae": "mae", "F1": "micro_f1"}


def ogb_metric(dataset: str, metric: str, out: Tensor, y: Tensor) -> float | None:
    """OGB's ``Evaluator(dataset)`` figure of ``metric`` (None: not an ``ogbn-*`` dataset, ``ogb``
    not importable, an Evaluator that does not know the dataset, or one that measures another
    metric). ``out``/``y`` as :func:`node_metric`'s (class ids for class targets)."""
    if not str(dataset).startswith("ogbn-") or int(y.shape[0]) == 0:
        return None
    try:
        from ogb.nodeproppred import Evaluator
    except ImportError:
        return None
    try:
        ev = Evaluator(name=str(dataset))
    except (ValueError, KeyError):
        return None
    if _OGB_NAMES.get(ev.eval_metric) != metric:
        return None
    y_true = y.reshape(y.shape[0], -1).numpy()
    y_pred = out.reshape(out.shape[0], -1).numpy()
    got = ev.eval({"y_true": y_true, "y_pred": y_pred})
    return float(got[ev.eval_metric])
