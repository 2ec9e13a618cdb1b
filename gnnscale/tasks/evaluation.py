"""The one evaluation: the metric of a whole model on a part's nodes, as every mode computes it.

Each rank evaluates the nodes it owns. Class targets judged by accuracy or F1: per-class counts
reduced over the evaluating ranks; every other target kind or metric
(``docs/targets_and_edge_features.md`` section 5: ROC-AUC, AP, MAE, RMSE; and ``ogbn-*``
datasets, for OGB's own ``Evaluator``): the val/test nodes' outputs gathered from every rank,
then :func:`~gnnscale.tasks.node_metrics.node_metric` (or :func:`~gnnscale.tasks.node_metrics.ogb_metric`).

- **layer-wise** (``--eval-method layerwise``, or ``auto`` when every eval fanout is -1 or in
  historical mode): exact full-graph inference, over historical mode's halo tables when
  there are some (:func:`~gnnscale.tasks.inference.halo_inference`), else streamed slice by
  slice (:func:`~gnnscale.tasks.inference.streamed_inference`, memory that follows the part; a
  typed part's too: inputs per node type, featureless types' rows through ``inputs``, every
  in-edge's relation from ``part.typed.etype``; equal to sampled evaluation with fanouts -1);
- **sampled**: the eval fanouts' blocks for every val/test node, in batches of
  ``--eval-batch-size`` (the same number of collective rounds on every rank).

Data-parallel workers evaluate their replica; pipeline stages gather the stages' weights
onto each pipeline's stage 0, whose ranks evaluate over the first stages' group; chunk
pipelining's rank 0 evaluates the whole graph it holds (:func:`mask_metric`).
"""
from __future__ import annotations

from typing import Callable, Iterator, Sequence

import torch

from gnnscale.samplers.seeds import cut_batches
from gnnscale.tasks.inference import streamed_inference
from gnnscale.tasks.node_metrics import NodeTarget, node_metric, ogb_metric

SPLITS = ("train", "val", "test")


def use_layerwise(eval_method: str, eval_fanouts: Sequence[int], historical: bool) -> bool:
    """Whether evaluation is layer-wise (see the module docstring)."""
    return eval_method == "layerwise" or (eval_method == "auto" and (historical or all(f == -1 for f in eval_fanouts)))


def mask_accuracy(pred: torch.Tensor, y: torch.Tensor, masks: dict) -> dict:
    """Accuracy of ``pred`` (int64 [N]) against ``y`` over each mask (None for an empty one)."""
    return {k: int((pred[m] == y[m]).sum()) / int(m.sum()) if bool(m.any()) else None for k, m in masks.items()}


def mask_metric(out: torch.Tensor, y: torch.Tensor, masks: dict, target: NodeTarget, metric: str,
                dataset: str = "") -> dict:
    """``metric`` of a whole graph's outputs ``out`` (float [N, W]) against its targets ``y`` over
    each mask (bool [N]; None for an empty one or an undefined figure), in one process: OGB's
    Evaluator for ``ogbn-*`` datasets where it measures ``metric``, else
    :func:`~gnnscale.tasks.node_metrics.node_metric`."""
    kept = target.reduce(out)
    got = {}
    for k, m in masks.items():  # train / val / test
        value = ogb_metric(dataset, metric, kept[m], y[m])
        got[k] = value if value is not None else node_metric(metric, target.kind, kept[m], y[m])
    return got


class Evaluator:
    """The metric over sets of this rank's nodes (collective over ``comm``).

    Args:
        part: this rank's part. comm: the evaluating ranks' communicator (reductions).
        features: their feature store. degrees: their degree store (degree-normalized layers).
        sampler: the sampled evaluation's sampler (eval fanouts). batch_size: its seeds per step.
        layerwise: evaluate layer-wise. tables: ``step -> logits`` of historical mode's
            halo-table inference (None: stream). backend: the sampler kernels of the stream.
        dataset: the dataset's name (``ogbn-*``: OGB's Evaluator).
        inputs: ``x -> x`` applied to each sampled batch's fetched rows and to the streamed
            inference's layer-0 rows of every slice (collective; a typed run's sharded embedding
            rows are attached so).
        metric: ``--metric`` (None: the target kind's default, ``part.meta["target"]``).
    """

    def __init__(self, part, comm, features, degrees, sampler, batch_size: int, layerwise: bool,
                 tables: Callable | None = None, backend: str = "auto", dataset: str | None = None,
                 inputs: Callable | None = None, metric: str | None = None) -> None:
        self.part, self.comm, self.features, self.degrees, self.sampler = part, comm, features, degrees, sampler
        self.batch_size, self.layerwise, self.tables, self.backend = int(batch_size), layerwise, tables, backend
        self.dataset = str(dataset or "")
        self.inputs = inputs
        self.offset = int(part.offset)
        self.num_classes = int(part.meta.get("num_classes", 0))
        self.target = NodeTarget.of(part.meta)
        self.metric = metric or self.target.default_metric()
        self.last: dict = {}  # how the last evaluation ran: method, sampled fanouts, batches

    def ids(self, split: str) -> torch.Tensor:
        """int64 global ids of this rank's nodes in ``split`` (train, val or test)."""
        return torch.nonzero(getattr(self.part, f"{split}_mask")).flatten() + self.offset

    @torch.no_grad()
    def splits(self, net, forward, splits: Sequence[str], step: int) -> dict[str, float]:
        """{split: the metric} of model ``net`` (``forward``: how the sampled evaluation calls it,
        e.g. DDP's wrapper; ``step``: the halo tables' stamp); in ``self.last`` how it ran, the
        metric's name and each split's figures (``metrics``; class targets: ``macro_f1`` too)."""
        ids = [self.ids(s) for s in splits]
        self.last = {"method": "layerwise" if self.layerwise else "sampled", "batches": 0,
                     "fanouts": None if self.layerwise else list(self.sampler.fanouts), "metric": self.metric,
                     "metrics": {}}
        if self.target.kind == "class":
            self.last["macro_f1"] = {}
        if not self.layerwise:
            return {s: self._record(s, *self.sampled(forward, i)) for s, i in zip(splits, ids)}
        net.eval()
        kept = self.target.reduce(self.full_logits(net, step))
        return {s: self._record(s, kept[i - self.offset], self.labels(i)) for s, i in zip(splits, ids)}

    def _record(self, split: str, pred: torch.Tensor, true: torch.Tensor) -> float | None:
        """The metric of ``split`` over every rank (returned; collective) and its figures in
        ``self.last`` (class targets: macro-F1 beside). ``pred``: :meth:`NodeTarget.reduce`'s."""
        if self.target.kind == "class" and self.metric in ("accuracy", "macro_f1", "micro_f1"):
            acc, f1 = self.scores(pred, true) if self.metric == "accuracy" else self.counts(pred, true)
            self.last["macro_f1"][split] = f1
            value = f1 if self.metric == "macro_f1" else acc  # micro-F1 of one label per node: accuracy
        else:
            value = self.gathered(pred, true)
        self.last["metrics"][split] = {self.metric: value}
        return value

    def gathered(self, out: torch.Tensor, true: torch.Tensor) -> float | None:
        """The metric of this rank's outputs (float [n, W]) and targets together with every other
        rank's (collective: one all-gather of both): OGB's Evaluator for ``ogbn-*`` datasets where
        it measures the metric, else :func:`~gnnscale.tasks.node_metrics.node_metric`."""
        every = self.comm.all_gather_object((out, true))
        out_all = torch.cat([g[0] for g in every])
        true_all = torch.cat([g[1] for g in every])
        value = ogb_metric(self.dataset, self.metric, out_all, true_all)
        return value if value is not None else node_metric(self.metric, self.target.kind, out_all, true_all)

    def full_logits(self, net, step: int) -> torch.Tensor:
        """float32 [n_owned, C] logits of the owned nodes, layer-wise (collective)."""
        if self.tables is not None:
            return self.tables(step)
        typed = getattr(self.part, "typed", None)
        return streamed_inference(net, self.part.indptr, self.part.indices, self.features,
                                  node_degree=self.degrees, backend=self.backend,
                                  edge_type=typed.etype if typed is not None else None, inputs=self.inputs,
                                  edge_attr=self.part.edge_attr if getattr(net, "uses_edge_attr", False) else None)

    def labels(self, ids: torch.Tensor) -> torch.Tensor:
        return self.part.y[ids - self.offset]

    def sampled(self, forward, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(predictions, targets) of this rank's nodes ``ids`` with the sampled evaluation blocks
        (collective: the same number of batches on every rank): :meth:`NodeTarget.reduce` of the
        outputs (class ids int64 [n], else float32 [n, W]) and the nodes' targets."""
        forward.eval()
        steps = eval_steps(self.comm, ids.numel(), self.batch_size)
        self.last["batches"] += steps
        preds, labels = [], []
        for seeds, out in sampled_outputs(forward, ids, self.sampler, self.features, self.degrees, self.batch_size,
                                          steps, self.inputs):
            preds.append(self.target.reduce(out))
            labels.append(self.labels(seeds))
        pred = torch.cat(preds) if preds else self.target.reduce(torch.zeros(0, max(1, self.target.outputs)))
        true = torch.cat(labels) if labels else self.labels(ids[:0])
        return pred, true

    def accuracy(self, pred: torch.Tensor, true: torch.Tensor) -> float:
        """Accuracy of this rank's predictions together with every other rank's (collective)."""
        return self.scores(pred, true)[0]

    def scores(self, pred: torch.Tensor, true: torch.Tensor) -> tuple[float, float | None]:
        """(accuracy, macro-F1) of this rank's predictions together with every other rank's
        (collective: one reduction of per-class counts, :meth:`counts`); ``ogbn-*`` datasets, when
        ``ogb`` is importable: OGB's Evaluator's accuracy, no F1."""
        if self.dataset.startswith("ogbn-") and _has_ogb():
            return self._ogb_accuracy(pred, true), None
        return self.counts(pred, true)

    def counts(self, pred: torch.Tensor, true: torch.Tensor) -> tuple[float, float | None]:
        """(accuracy, macro-F1) of this rank's class ids ``pred`` against ``true`` (int64 [n] each)
        together with every other rank's (collective: one reduction of per-class counts).
        Macro-F1 averages each class's F1 over the classes that occur among the labels or the
        predictions, as scikit-learn's ``f1_score(average="macro")``."""
        c = max(1, self.num_classes)  # the same on every rank: the reduction's length
        if pred.numel() and max(int(pred.max()), int(true.max())) >= c:
            raise ValueError(f"expected class ids below the partition's num_classes {c}, found "
                             f"{max(int(pred.max()), int(true.max()))}; re-partition the dataset")
        hit = pred == true
        counts = torch.cat([torch.bincount(true[hit], minlength=c), torch.bincount(pred, minlength=c),
                            torch.bincount(true, minlength=c), torch.tensor([pred.numel()])])
        tot = self.comm.all_reduce(counts.to(torch.int64))
        tp, npred, ntrue, n = tot[:c], tot[c:2 * c], tot[2 * c:3 * c], int(tot[-1])
        present = (npred + ntrue) > 0
        f1 = (2 * tp[present]).double() / (npred[present] + ntrue[present]).double()
        return float(tp.sum()) / max(n, 1), (float(f1.mean()) if present.any() else None)

    def _ogb_accuracy(self, pred: torch.Tensor, true: torch.Tensor) -> float:
        """OGB's own Evaluator on the predictions gathered from every rank."""
        import numpy as np
        from ogb.nodeproppred import Evaluator as OGBEvaluator

        gathered = self.comm.all_gather_object((pred.numpy(), true.numpy()))
        y_pred = np.concatenate([g[0] for g in gathered]).reshape(-1, 1)
        y_true = np.concatenate([g[1] for g in gathered]).reshape(-1, 1)
        if y_true.shape[0] == 0:
            return 0.0
        return float(OGBEvaluator(name=self.dataset).eval({"y_true": y_true, "y_pred": y_pred})["acc"])


def eval_steps(comm, n: int, batch_size: int) -> int:
    """The sampled evaluation's batches of ``n`` ids, ``batch_size`` at a time: the most any rank
    needs (collective: every rank samples as many, so the exchanges stay matched)."""
    t = torch.tensor([(int(n) + batch_size - 1) // batch_size], dtype=torch.int64)
    return int(comm.all_reduce(t, "max")[0])


def sampled_outputs(forward, ids: torch.Tensor, sampler, features, degrees, batch_size: int, steps: int,
                    inputs: Callable | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``(seeds int64 [b], forward's output [b, W])`` of this rank's ``ids`` in order, ``batch_size``
    at a time over ``steps`` batches (:func:`eval_steps`; empty ones past this rank's ids), each
    drawn by ``sampler`` (the evaluation's, keyed by step), its rows fetched from ``features``
    (``inputs`` applied) and the degrees of its nodes looked up in ``degrees`` (None: not read).
    Node evaluation reads class scores; link evaluation without layer-wise inference (a user's
    ``--model``) reads every owned node's embedding this way."""
    device = features.device
    for step, seeds in enumerate(cut_batches(ids, batch_size, steps, wrap=False)):
        mb = sampler.sample(seeds, epoch=0, step=step)
        x = features.fetch(mb.input_ids)
        if inputs is not None:
            x = inputs(x)
        deg = None
        if degrees is not None:
            deg = degrees.lookup(torch.unique(torch.cat([b.src_ids for b in mb.blocks] + [mb.seeds]))).to(device)
        blocks = mb.blocks if device.type == "cpu" else [b.to(device, non_blocking=True) for b in mb.blocks]
        yield seeds, forward(x, blocks, node_degree=deg)


def _has_ogb() -> bool:
    import importlib.util

    return importlib.util.find_spec("ogb") is not None


def shared(comm, values: dict | None, source: int = 0) -> dict:
    """``values`` of rank ``source`` (None elsewhere) on every rank of ``comm`` (one all-gather)."""
    every = comm.all_gather_object(values)
    return dict(every[source] or {})
