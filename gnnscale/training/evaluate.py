"""``gnnscale evaluate``: the metrics of a saved model over a partition, one worker per part (beside
``gnnscale embed``, :mod:`gnnscale.training.embed`): the model file read, the part's stores
opened, then the one evaluation as training computes it (:class:`~gnnscale.tasks.evaluation.Evaluator`;
:class:`~gnnscale.tasks.link_evaluation.LinkEvaluator` for a link or edge model)."""
from __future__ import annotations

import os

import torch

from gnnscale.data.degrees import DegreeStore
from gnnscale.data.embeddings import embedding_order
from gnnscale.data.loader import build_samplers
from gnnscale.data.typed_store import open_features
from gnnscale.history.modes import exchange_mode
from gnnscale.logs import setup_logging
from gnnscale.nn.spec import ModelSpec
from gnnscale.nn.typed_encoder import tables_to_dataset_order
from gnnscale.partitioning import load_meta, load_part
from gnnscale.planning.plan import plan_run
from gnnscale.process.dims import ParallelDims
from gnnscale.samplers import check_fanouts
from gnnscale.tasks.evaluation import SPLITS, Evaluator, use_layerwise
from gnnscale.tasks.link_evaluation import LinkEvaluator
from gnnscale.tasks.task import edge_metric
from gnnscale.training.model_io import read_model_file


def evaluate_worker(parts_dir: str, cfg, model_path: str) -> dict:
    """One process of ``gnnscale evaluate`` (one per part): the saved model's train/val/test
    metric over the parts (``--metric`` of its run, else its target kind's default), computed
    as data-parallel training evaluates (same method and draws): ``{"metric": m, "train_<m>",
    "val_<m>", "test_<m>"}`` (accuracy: ``train_acc``/``val_acc``/``test_acc`` too). Builds what
    evaluation reads and nothing else: no DDP, optimizer or cache."""
    setup_logging(rank=int(os.environ.get("RANK", "0")))
    meta = load_meta(parts_dir)
    plan = plan_run(cfg, int(meta["num_parts"]), int(os.environ.get("WORLD_SIZE", "1")), where=str(parts_dir),
                    typed=meta.get("typed"), link=meta.get("link"), target=meta.get("target"))
    dims = ParallelDims.build(plan, cfg.timeout, embedding=cfg.exchange == "historical")
    try:
        part = load_part(parts_dir, dims.rank, verify=cfg.verify)
        blob = read_model_file(model_path)
        net = ModelSpec(**blob["spec"]).build()
        net.load_state_dict(blob["state"])
        if part.typed is not None:  # the file's learned tables are in the dataset's order: the partition's
            tables_to_dataset_order(net, embedding_order(parts_dir, meta["typed"]), inverse=True)
        features = open_features(part, dims.data)
        degrees = DegreeStore(part.indptr, part.book, dims.data) if net.uses_degree else None
        if blob["spec"].get("decoder"):  # a link model: the split's metric, layer-wise
            metric = cfg.link_metric or meta["link"]["metric"]
            if str(blob["spec"]["decoder"]).startswith("edge:"):  # an edge head: accuracy or rmse of the labels
                metric = edge_metric(meta["link"]["label"])
            evaluator = LinkEvaluator(part, dims.comm, features, degrees, metric, backend=cfg.sampler_backend)
            got = evaluator.splits(net, net, ("val", "test"), step=-1)
            return {"metric": metric, **{f"{k}_{metric}": v for k, v in got.items()},
                    "metrics": evaluator.last["metrics"]}
        sampler, eval_sampler, eval_fanouts = build_samplers(part, dims.data, cfg, check_fanouts(cfg.fanouts),
                                                             cfg.exchange, edge_attr=net.uses_edge_attr)
        mode = exchange_mode(net, part, sampler, features, degrees, dims.embedding, dims.comm, cfg, torch.device("cpu"))
        historical = mode.halo is not None
        evaluator = Evaluator(part, dims.comm, features, degrees, eval_sampler, cfg.eval_batch_size,
                              use_layerwise(cfg.eval_method, eval_fanouts, historical),
                              tables=mode.full_logits if historical else None, backend=cfg.sampler_backend,
                              dataset=meta.get("dataset"), metric=cfg.metric)
        got = evaluator.splits(net, net, SPLITS, step=-1)
        metric = evaluator.metric
        out = {"metric": metric, **{f"{k}_{metric}": v for k, v in got.items()}}
        if metric == "accuracy":  # the keys it always had
            out |= {f"{k}_acc": v for k, v in got.items()}
        return out
    finally:
        dims.stop()
