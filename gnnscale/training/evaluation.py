"""The one evaluation: accuracy of a whole model on a part's nodes, as every mode computes it.

Each rank evaluates the nodes it owns; the counts (or, for ``ogbn-*`` datasets, the
predictions, for OGB's own ``Evaluator``) are reduced over the evaluating ranks.

- **layer-wise** (``--eval-method layerwise``, or ``auto`` when every eval fanout is -1 or in
  historical mode): exact full-graph inference, over historical mode's halo tables when
  there are some (:func:`~gnnscale.nn.inference.halo_inference`), else streamed slice by
  slice (:func:`~gnnscale.nn.inference.streamed_inference`, memory that follows the part; a
  typed part's too: inputs per node type, featureless types' rows through ``inputs``, every
  in-edge's relation from ``part.typed.etype``; equal to sampled evaluation with fanouts -1);
- **sampled**: the eval fanouts' blocks for every val/test node, in batches of
  ``--eval-batch-size`` (the same number of collective rounds on every rank).

Data-parallel workers evaluate their replica; pipeline stages gather the stages' weights
onto each pipeline's stage 0, whose ranks evaluate over the first stages' group; chunk
pipelining's rank 0 evaluates the whole graph it holds (:func:`mask_accuracy`).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from gnnscale.samplers.seeds import cut_batches

SPLITS = ("train", "val", "test")


def use_layerwise(eval_method: str, eval_fanouts: Sequence[int], historical: bool) -> bool:
    """Whether evaluation is layer-wise (see the module docstring)."""
    return eval_method == "layerwise" or (eval_method == "auto" and (historical or all(f == -1 for f in eval_fanouts)))


def mask_accuracy(pred: torch.Tensor, y: torch.Tensor, masks: dict) -> dict:
    """Accuracy of ``pred`` (int64 [N]) against ``y`` over each mask (None for an empty one)."""
    return {k: int((pred[m] == y[m]).sum()) / int(m.sum()) if bool(m.any()) else None for k, m in masks.items()}


class Evaluator:
    """Accuracy over sets of this rank's nodes (collective over ``comm``).

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
    """

    def __init__(self, part, comm, features, degrees, sampler, batch_size: int, layerwise: bool,
                 tables: Callable | None = None, backend: str = "auto", dataset: str | None = None,
                 inputs: Callable | None = None) -> None:
        self.part, self.comm, self.features, self.degrees, self.sampler = part, comm, features, degrees, sampler
        self.batch_size, self.layerwise, self.tables, self.backend = int(batch_size), layerwise, tables, backend
        self.dataset = str(dataset or "")
        self.inputs = inputs
        self.offset = int(part.offset)
        self.num_classes = int(part.meta.get("num_classes", 0))
        self.last: dict = {}  # how the last evaluation ran: method, sampled fanouts, batches

    def ids(self, split: str) -> torch.Tensor:
        """int64 global ids of this rank's nodes in ``split`` (train, val or test)."""
        return torch.nonzero(getattr(self.part, f"{split}_mask")).flatten() + self.offset

    @torch.no_grad()
    def splits(self, net, forward, splits: Sequence[str], step: int) -> dict[str, float]:
        """{split: accuracy} of model ``net`` (``forward``: how the sampled evaluation calls it,
        e.g. DDP's wrapper; ``step``: the halo tables' stamp)."""
        ids = [self.ids(s) for s in splits]
        self.last = {"method": "layerwise" if self.layerwise else "sampled", "batches": 0,
                     "fanouts": None if self.layerwise else list(self.sampler.fanouts), "macro_f1": {}}
        if not self.layerwise:
            return {s: self._record(s, *self.sampled(forward, i)) for s, i in zip(splits, ids)}
        net.eval()
        pred_all = self.full_logits(net, step).argmax(1)
        return {s: self._record(s, pred_all[i - self.offset], self.labels(i)) for s, i in zip(splits, ids)}

    def _record(self, split: str, pred: torch.Tensor, true: torch.Tensor) -> float:
        """Accuracy of ``split`` over every rank (returned) and its macro-F1 (in ``self.last``)."""
        acc, f1 = self.scores(pred, true)
        self.last["macro_f1"][split] = f1
        return acc

    def full_logits(self, net, step: int) -> torch.Tensor:
        """float32 [n_owned, C] logits of the owned nodes, layer-wise (collective)."""
        if self.tables is not None:
            return self.tables(step)
        from gnnscale.nn.inference import streamed_inference

        typed = getattr(self.part, "typed", None)
        return streamed_inference(net, self.part.indptr, self.part.indices, self.features,
                                  node_degree=self.degrees, backend=self.backend,
                                  edge_type=typed.etype if typed is not None else None, inputs=self.inputs)

    def labels(self, ids: torch.Tensor) -> torch.Tensor:
        return self.part.y[ids - self.offset]

    def sampled(self, forward, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(predictions, labels) of this rank's nodes ``ids`` (int64 [n] each), with the sampled
        evaluation blocks (collective: the same number of batches on every rank)."""
        forward.eval()
        t = torch.tensor([(ids.numel() + self.batch_size - 1) // self.batch_size], dtype=torch.int64)
        steps = int(self.comm.all_reduce(t, "max")[0])
        self.last["batches"] += steps
        preds, labels = [], []
        device = self.features.device
        for step, seeds in enumerate(cut_batches(ids, self.batch_size, steps, wrap=False)):
            mb = self.sampler.sample(seeds, epoch=0, step=step)
            x = self.features.fetch(mb.input_ids)
            if self.inputs is not None:
                x = self.inputs(x)
            degrees = None
            if self.degrees is not None:
                degrees = self.degrees.lookup(torch.unique(torch.cat([b.src_ids for b in mb.blocks] + [mb.seeds])))
                degrees = degrees.to(device)
            blocks = mb.blocks if device.type == "cpu" else [b.to(device, non_blocking=True) for b in mb.blocks]
            out = forward(x, blocks, node_degree=degrees)
            preds.append(out.argmax(1).cpu())
            labels.append(self.labels(seeds))
        pred = torch.cat(preds) if preds else torch.empty(0, dtype=torch.int64)
        true = torch.cat(labels) if labels else torch.empty(0, dtype=torch.int64)
        return pred, true

    def accuracy(self, pred: torch.Tensor, true: torch.Tensor) -> float:
        """Accuracy of this rank's predictions together with every other rank's (collective)."""
        return self.scores(pred, true)[0]

    def scores(self, pred: torch.Tensor, true: torch.Tensor) -> tuple[float, float | None]:
        """(accuracy, macro-F1) of this rank's predictions together with every other rank's
        (collective: one reduction of per-class counts). Macro-F1 averages each class's F1 over
        the classes that occur among the labels or the predictions, as scikit-learn's
        ``f1_score(average="macro")``; ``ogbn-*`` datasets: OGB's Evaluator's accuracy, no F1."""
        if self.dataset.startswith("ogbn-"):
            return self._ogb_accuracy(pred, true), None
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


def shared(comm, values: dict | None, source: int = 0) -> dict:
    """``values`` of rank ``source`` (None elsewhere) on every rank of ``comm`` (one all-gather)."""
    every = comm.all_gather_object(values)
    return dict(every[source] or {})


def evaluate_worker(parts_dir: str, cfg, model_path: str) -> dict:
    """One process of ``gnnscale evaluate`` (one per part): the saved model's train/val/test
    accuracy over the parts, computed as data-parallel training evaluates (same method and
    draws). Builds what evaluation reads and nothing else: no DDP, optimizer or cache."""
    import os

    from gnnscale.data.degrees import DegreeStore
    from gnnscale.data.typed_store import open_features
    from gnnscale.history.modes import exchange_mode
    from gnnscale.logs import setup_logging
    from gnnscale.nn.spec import ModelSpec
    from gnnscale.parallel.plan import plan_run
    from gnnscale.partitioning import load_meta, load_part
    from gnnscale.process.dims import ParallelDims
    from gnnscale.data.loader import build_samplers
    from gnnscale.samplers import check_fanouts
    from gnnscale.training.model_io import read_model_file

    setup_logging(rank=int(os.environ.get("RANK", "0")))
    meta = load_meta(parts_dir)
    plan = plan_run(cfg, int(meta["num_parts"]), int(os.environ.get("WORLD_SIZE", "1")), where=str(parts_dir),
                    typed=meta.get("typed"), link=meta.get("link"))
    dims = ParallelDims.build(plan, cfg.timeout, embedding=cfg.exchange == "historical")
    try:
        part = load_part(parts_dir, dims.rank, verify=cfg.verify)
        blob = read_model_file(model_path)
        net = ModelSpec(**blob["spec"]).build()
        net.load_state_dict(blob["state"])
        if part.typed is not None:  # the file's learned tables are in the dataset's order: the partition's
            from gnnscale.training.model_io import embedding_order, tables_to_dataset_order

            tables_to_dataset_order(net, embedding_order(parts_dir, meta["typed"]), inverse=True)
        features = open_features(part, dims.data)
        degrees = DegreeStore(part.indptr, part.book, dims.data) if net.uses_degree else None
        if blob["spec"].get("decoder"):  # a link model: the split's metric, layer-wise
            from gnnscale.training.link_evaluation import LinkEvaluator

            metric = cfg.link_metric or meta["link"]["metric"]
            if str(blob["spec"]["decoder"]).startswith("edge:"):  # an edge head: accuracy or rmse of the labels
                from gnnscale.training.tasks import edge_metric

                metric = edge_metric(meta["link"]["label"])
            evaluator = LinkEvaluator(part, dims.comm, features, degrees, metric, backend=cfg.sampler_backend)
            got = evaluator.splits(net, net, ("val", "test"), step=-1)
            return {"metric": metric, **{f"{k}_{metric}": v for k, v in got.items()},
                    "metrics": evaluator.last["metrics"]}
        sampler, eval_sampler, eval_fanouts = build_samplers(part, dims.data, cfg, check_fanouts(cfg.fanouts),
                                                             cfg.exchange)
        mode = exchange_mode(net, part, sampler, features, degrees, dims.embedding, dims.comm, cfg, torch.device("cpu"))
        historical = mode.halo is not None
        evaluator = Evaluator(part, dims.comm, features, degrees, eval_sampler, cfg.eval_batch_size,
                              use_layerwise(cfg.eval_method, eval_fanouts, historical),
                              tables=mode.full_logits if historical else None, backend=cfg.sampler_backend,
                              dataset=meta.get("dataset"))
        acc = evaluator.splits(net, net, SPLITS, step=-1)
        return {f"{k}_acc": v for k, v in acc.items()}
    finally:
        dims.stop()
