"""``gnnscale evaluate``: the metrics of a saved model over a partition, one worker per part (beside
``gnnscale embed``, :mod:`gnnscale.training.embed`): the model file read, the part's data opened
(:func:`~gnnscale.data.open.open_data`), then the one evaluation as training computes it: the
task's evaluator (:meth:`~gnnscale.tasks.task.Task.evaluator`), the task being the model's (its
run's options, which the file keeps)."""
from __future__ import annotations

import os

import torch

from gnnscale.data.embeddings import embedding_order
from gnnscale.data.open import open_data
from gnnscale.history.modes import exchange_mode
from gnnscale.logs import setup_logging
from gnnscale.nn.link import gnn_of
from gnnscale.nn.spec import ModelSpec
from gnnscale.nn.typed_encoder import tables_to_dataset_order
from gnnscale.partitioning import load_meta, load_part
from gnnscale.planning.plan import plan_run
from gnnscale.process.dims import ParallelDims
from gnnscale.tasks.evaluation import use_layerwise
from gnnscale.tasks.task import make_task
from gnnscale.training.model_io import read_model_file


def evaluate_config(blob: dict, timeout: float, eval_method: str | None = None):
    """The :class:`~gnnscale.config.TrainConfig` that ``gnnscale evaluate`` gives its workers for the
    model file ``blob`` (:func:`~gnnscale.training.model_io.read_model_file`): its run's options
    (they hold its task and evaluation: ``--eval-fanouts``, ``--eval-method``), run in one data-parallel
    worker per part without outputs. A model trained by chunk pipelining (full neighbourhoods) is
    evaluated layer-wise, exactly as it was. ``eval_method``: ``"layerwise"`` (every neighbour, layer by
    layer: what ``gnnscale predict`` computes, equal logits) or ``"sampled"`` instead of the run's."""
    from gnnscale.config import TrainConfig

    known = set(TrainConfig.__dataclass_fields__)
    saved = {k: v for k, v in (blob.get("config") or {}).items() if k in known}
    run = dict(timeout=timeout, metrics=None, checkpoint_dir=None, resume=False, save_model=None, verify=False,
               progress=False, device="cpu", tensorboard=None, log_every=None, pipeline=False)
    run |= {k: getattr(TrainConfig, k) for k in ("pipeline_stages", "stage_layers", "micro_batches", "schedule",
                                                   "chunks", "halo_gradients", "checkpoint_every", "keep_checkpoints",
                                                   "pipeline_depth", "net_bandwidth_gbps", "net_latency_ms")}
    if saved.get("chunks"):
        run |= dict(fanouts=[-1] * int(blob["spec"]["num_layers"]), eval_fanouts=None, eval_method="layerwise",
                    num_layers=None, batch_size=TrainConfig.batch_size, eval_batch_size=TrainConfig.eval_batch_size,
                    max_steps=None, staleness=TrainConfig.staleness, exchange="exact")
    if eval_method is not None:
        run["eval_method"] = eval_method
    return TrainConfig(**(saved | run))


def sampled_evaluation(blob: dict) -> list[int] | None:
    """The fan-outs with which ``gnnscale evaluate`` evaluates the model file ``blob`` by default (its
    run's sampled evaluation: its logits differ from ``gnnscale predict``'s by the draws), or None where
    it evaluates layer-wise over every neighbour, as ``gnnscale predict`` does (equal logits)."""
    if not blob.get("config"):  # a file without its run's options: nothing known of its evaluation
        return None
    cfg = evaluate_config(blob, 1.0)
    fanouts = list(cfg.eval_fanouts or cfg.fanouts)
    return None if use_layerwise(cfg.eval_method, fanouts, cfg.exchange == "historical") else fanouts


def evaluate_worker(parts_dir: str, cfg, model_path: str) -> dict:
    """One process of ``gnnscale evaluate`` (one per part): the saved model's metric over its
    task's splits (``--metric`` / ``--link-metric`` of its run, else the task's default),
    computed as data-parallel training evaluates (same method and draws; ``cfg``: :func:`evaluate_config`): ``{"metric": m,
    "<split>_<m>": value, "metrics": every figure}`` (accuracy: ``<split>_acc`` too). ``cfg``:
    the model's run's options (they hold its task). Builds what evaluation reads and nothing
    else: no DDP, optimizer or cache."""
    setup_logging(rank=int(os.environ.get("RANK", "0")))
    meta = load_meta(parts_dir)
    plan = plan_run(cfg, meta, int(os.environ.get("WORLD_SIZE", "1")), where=str(parts_dir))
    dims = ParallelDims.build(plan, cfg.timeout, embedding=cfg.exchange == "historical")
    try:
        part = load_part(parts_dir, dims.rank, verify=cfg.verify)
        blob = read_model_file(model_path)
        net = ModelSpec(**blob["spec"]).build()
        net.load_state_dict(blob["state"])
        if part.typed is not None:  # the file's learned tables are in the dataset's order: the partition's
            tables_to_dataset_order(net, embedding_order(parts_dir, meta["typed"]), inverse=True)
        task = make_task(part, cfg, dims.comm)  # the model's task (node, link, edge, temporal), from its run's options
        encoder = gnn_of(net)  # a link or edge model's encoder reads the features, degrees and edge features
        data = open_data(part, cfg, dims.data, mode=plan.mode, parts_dir=parts_dir,
                         edge_attr=encoder.uses_edge_attr and not task.own_edge_features, degrees=encoder.uses_degree)
        mode = exchange_mode(net, part, data.sampler, data.features, data.degrees, dims.embedding, dims.comm, cfg,
                             torch.device("cpu"))
        historical = mode.halo is not None
        evaluator = task.evaluator(data, dims.comm, use_layerwise(cfg.eval_method, data.eval_fanouts, historical),
                                   tables=mode.full_logits if historical else None)
        got = evaluator.splits(net, net, task.splits, step=-1)
        metric = evaluator.metric
        out = {"metric": metric, **{f"{k}_{metric}": v for k, v in got.items()},
               "metrics": evaluator.last.get("metrics", {})}
        if metric == "accuracy":  # the keys it always had
            out |= {f"{k}_acc": v for k, v in got.items()}
        return out
    finally:
        dims.stop()
