"""Training from Python: one call that partitions (cached) and trains, locally or under torchrun.

    import gnnscale
    result = gnnscale.train("planetoid:cora", root="data/planetoid", workers=2, epochs=20, layer=MyConv)
    print(result["test_acc"])

On one machine it starts ``workers`` local processes (gloo on 127.0.0.1). Started by
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
    **config,
) -> dict:
    """Train a GNN on a partitioned graph; returns the metrics of rank 0 (see ``gnnscale train --metrics``).

    Args:
        dataset: a dataset spec (``gnnscale datasets`` lists them), partitioned into
            ``workers`` parts in the cache folder unless ``parts_dir`` is given.
        parts_dir: an existing partition (``gnnscale partition``); one worker per part.
        workers: local worker processes (default: the number of parts, or 2).
        root: where the dataset's files are (or are downloaded to, when online).
        cache_dir: partition cache folder (default: ``$GNNSCALE_CACHE`` or ~/.cache/gnnscale).
        method: partitioning method when partitioning ``dataset``.
        partition_seed: its seed (apart from the training ``seed``, so that runs over several
            seeds share one cached partition).
        threads: torch threads per worker (default: cores / workers).
        **config: any :class:`gnnscale.config.TrainConfig` field: ``epochs``, ``fanouts``,
            ``batch_size``, ``hidden``, ``lr``, ``layer`` (a zoo name, ``module:Class`` or a
            layer class), ``layer_kwargs``, ``exchange``, ``cache_policy``, ``pipeline`` ...
    """
    from gnnscale.config import TrainConfig
    from gnnscale.process.launch import in_torchrun, launch_local
    from gnnscale.partitioning import load_meta

    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(config) - known)
    if unknown:
        raise RuntimeSetupError(f"unknown training option(s) {unknown}; valid ones: {', '.join(sorted(known))}")
    if (dataset is None) == (parts_dir is None):
        raise RuntimeSetupError("give exactly one of dataset=... (partitioned and cached for you) or parts_dir=...")
    cfg = TrainConfig(**config)
    if in_torchrun():
        if parts_dir is None:
            raise RuntimeSetupError("under torchrun, pass parts_dir= (partition first with `gnnscale partition`)")
        from gnnscale.training.trainer import train_worker

        return train_worker(parts_dir, cfg)
    if parts_dir is None:
        from gnnscale.cli.main import prepare_parts

        workers = workers if workers is not None else 2
        parts_dir = prepare_parts(dataset, workers, root=root, cache_dir=cache_dir, method=method, seed=partition_seed)
    meta = load_meta(parts_dir)
    workers = workers if workers is not None else meta["num_parts"]
    if workers != meta["num_parts"]:
        raise RuntimeSetupError(f"workers={workers} but {parts_dir} holds {meta['num_parts']} parts: one worker per part")
    log.info("starting %d local worker(s) on %s", workers, Path(parts_dir))
    return launch_local("gnnscale.training.trainer:train_worker", workers, args=(parts_dir, cfg), threads_per_worker=threads)[0]
