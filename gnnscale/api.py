"""Training from Python: one call that partitions (cached) and trains, locally or under torchrun.

    import gnnscale
    result = gnnscale.train("planetoid:cora", root="../shared/data/planetoid/raw", workers=2, epochs=20, layer=MyConv)
    print(result["test_acc"])

Every mode of ``gnnscale train`` runs here (``pipeline_stages=2``, ``chunks=True``, ...): the
options are checked and the plan resolved before any worker starts, as the command line does.
On one machine it starts the plan's local processes (gloo on 127.0.0.1). Started by
``torchrun`` (``RANK``/``WORLD_SIZE`` set) it trains this process's rank in place; then
``parts_dir`` must hold the partition (``gnnscale partition``), with this rank's part
present on this machine.
"""
from __future__ import annotations

import logging
from dataclasses import fields
from pathlib import Path

from gnnscale.errors import RuntimeSetupError

log = logging.getLogger("gnnscale.api")


def train(
    dataset: str | None = None,
    *,
    parts_dir: str | None = None,
    workers: int | None = None,
    root: str | None = None,
    cache_dir: str | None = None,
    method: str = "metis",
    partition_seed: int = 0,
    threads: int | None = None,
    edge_split: str | None = None,
    disjoint_train_ratio: float = 0.0,
    link_relation: str | None = None,
    edge_to_node: str | None = None,
    **config,
) -> dict:
    """Train a GNN on a partitioned graph; returns the metrics of rank 0 (see ``gnnscale train --metrics``).

    Args:
        dataset: a dataset spec (``gnnscale datasets`` lists them), partitioned in the cache
            folder into the plan's parts (a part per worker, per pipeline, or ``micro_batches``
            chunks) unless ``parts_dir`` is given.
        parts_dir: an existing partition (``gnnscale partition``).
        workers: local worker processes (default: what the plan needs: a worker per part, D x K
            for pipelines, K in chunk mode; 2 data-parallel workers for a ``dataset``).
        root: the folder holding the dataset's files (``gnnscale datasets`` says which, per name). Planetoid
            is never downloaded: put its eight raw ``ind.<name>.*`` files there (or in a ``raw/``
            subfolder). OGB datasets (``ogbn-*``, ``ogbl-*``) are downloaded into it by ``ogb`` when
            online; offline, the files already there are used. Default: ``$GNNSCALE_DATA``, then ``./data``.
        cache_dir: partition cache folder (default: ``$GNNSCALE_CACHE`` or ~/.cache/gnnscale).
        method: partitioning method when partitioning ``dataset``.
        partition_seed: its seed (apart from the training ``seed``, so that runs over several
            seeds share one cached partition).
        threads: torch threads per worker (default: cores / workers).
        edge_split, disjoint_train_ratio, link_relation: with ``task="link"`` and a ``dataset``:
            its random link split (``"0.85,0.05,0.10"`` by default; ``ogbl-*`` datasets bring their
            own; a typed graph's of the relation ``link_relation``), split with ``partition_seed``.
        edge_to_node: with a ``dataset``: ``"mean"`` or ``"sum"`` of each node's in-edge features
            appended to its features before the cut (``--edge-to-node``; recorded in the partition).
        **config: any :class:`gnnscale.config.TrainConfig` field: ``epochs``, ``fanouts``,
            ``batch_size``, ``hidden``, ``lr``, ``layer`` (a zoo name, ``module:Class`` or a
            layer class), ``layer_kwargs``, ``exchange``, ``cache_policy``, ``pipeline``,
            ``pipeline_stages``, ``chunks`` ...

    Raises:
        RuntimeSetupError: an unknown option, or both or neither of ``dataset`` and ``parts_dir``.
        PlanError: an option the run's mode would not honour, or a worker count that does not fit.
    """
    from gnnscale.config import TrainConfig
    from gnnscale.parallel.plan import UNKNOWN, parts_for, plan_run
    from gnnscale.partitioning import load_meta
    from gnnscale.process.launch import in_torchrun, launch_device, launch_local

    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(config) - known)
    if unknown:
        raise RuntimeSetupError(f"unknown training option(s) {unknown}; valid ones: {', '.join(sorted(known))}")
    if (dataset is None) == (parts_dir is None):
        raise RuntimeSetupError("give exactly one of dataset=... (partitioned and cached for you) or parts_dir=...")
    if edge_to_node is not None and parts_dir is not None:
        raise RuntimeSetupError("edge_to_node transforms a dataset before it is cut; a partition folder keeps the "
                                "features it was written with (give it to `gnnscale partition --edge-to-node`)")
    cfg = TrainConfig(**config).check()
    target = "gnnscale.training.trainer:train_worker"
    if in_torchrun():
        if parts_dir is None:
            raise RuntimeSetupError("under torchrun, pass parts_dir= (partition first with `gnnscale partition`)")
        from gnnscale.training.trainer import train_worker

        return train_worker(parts_dir, cfg)
    if parts_dir is None:
        from gnnscale.data.partition_cache import prepare_parts

        parts, workers = parts_for(cfg, workers)
        plan_run(cfg, parts, workers, where=f"{dataset} cut into {parts} parts", typed=UNKNOWN, link=UNKNOWN, target=UNKNOWN)  # before cutting
        link = (edge_split, disjoint_train_ratio, link_relation) if cfg.task == "link" else None
        parts_dir = prepare_parts(dataset, parts, root=root, cache_dir=cache_dir, method=method, seed=partition_seed,
                                  link=link, edge_to_node=edge_to_node)
    meta = load_meta(parts_dir)
    plan = plan_run(cfg, meta["num_parts"], workers, where=str(parts_dir), typed=meta.get("typed"), link=meta.get("link"), target=meta.get("target"),
                    edges=meta.get("edge_feature_dim", 0))
    if not plan.pipelined:
        launch_device(cfg.device, plan.world)
    log.info("starting %d local worker(s) on %s (%s)", plan.world, Path(parts_dir), plan.describe())
    return launch_local(target, plan.world, args=(parts_dir, cfg), threads_per_worker=threads)[0]
