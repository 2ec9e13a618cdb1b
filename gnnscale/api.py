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

:func:`prepare_run` holds every check made before a worker starts; ``gnnscale train`` calls it
too, so the command line and the API refuse the same things with the same line. Torch-free up to
the workers' start (a layer given by import path or with ``layer_kwargs`` is built once to check it;
a layer's name is checked against a torch-free copy of the zoo's names).
"""
from __future__ import annotations

import importlib.util
import inspect
import json
import logging
import os
from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence

from gnnscale.errors import GnnscaleError, RuntimeSetupError

log = logging.getLogger("gnnscale")

TARGET = "gnnscale.training.trainer:train_worker"


@dataclass
class Source:
    """Where a run's graph comes from: a partition folder, or a dataset cut (and cached) first.

    The fields after ``parts_dir`` say how a ``dataset`` is loaded and cut; with ``parts_dir``
    they must keep their defaults (a partition folder keeps the cut it was written with).
    ``partition_seed`` None: the run's training ``seed`` (the command line's one ``--seed``).
    """

    dataset: str | None = None
    parts_dir: str | None = None
    root: str | None = None
    cache_dir: str | None = None
    method: str = "metis"
    method_opt: Sequence[tuple[str, Any]] | Mapping[str, Any] = ()
    balance: Sequence[str] = ("nodes", "train")
    imbalance: float = 0.05
    partition_seed: int | None = None
    edge_split: str | None = None
    disjoint_train_ratio: float = 0.0
    link_relation: str | None = None
    edge_to_node: str | None = None
    feature_dtype: str = "float32"


@dataclass
class PreparedRun:
    """A run that passed every check: its partition folder, plan, checked config and device."""

    parts_dir: str
    plan: Any  # gnnscale.planning.plan.ParallelPlan
    cfg: Any  # gnnscale.config.TrainConfig
    device: str
    torchrun: bool = False
    typed: bool = False  # a typed graph: its workers' idle OpenMP threads sleep (process.launch.thread_env)


def _shown(name: str, value: Any) -> str:
    if name == "balance":
        return ",".join(map(str, value))
    if name == "method_opt":
        return " ".join(f"{k}={v}" for k, v in value)
    return str(value)


def _check_source(src: Source, cfg) -> None:
    """The dataset / partition-folder options: what would be ignored is refused, naming it."""
    if src.dataset is not None and not isinstance(src.dataset, str) and not is_inmemory(src.dataset):
        raise RuntimeSetupError(
            f"expected a dataset name string such as 'planetoid:cora' (`gnnscale datasets` lists them) or an in-memory "
            f"torch_geometric Data, HeteroData or RandomLinkSplit's (train, val, test), found a "
            f"{type(src.dataset).__name__}; pass one of those")
    if isinstance(src.dataset, (tuple, list)) and is_inmemory(src.dataset) and cfg.task != "link":
        raise RuntimeSetupError("RandomLinkSplit's (train, val, test) is a link-prediction split: add task='link', "
                                "or pass the one Data it split")
    if is_inmemory(src.dataset) and src.root is not None:
        raise RuntimeSetupError(f"root={src.root!r} does not apply to an in-memory graph (it says where a named "
                                "dataset's files are); leave it out")
    if src.parts_dir is not None and not isinstance(src.parts_dir, (str, os.PathLike)):
        raise RuntimeSetupError(f"expected --parts-dir (parts_dir=) to be a folder path, found a "
                                f"{type(src.parts_dir).__name__}")
    if src.parts_dir is not None and src.dataset is not None:
        raise RuntimeSetupError("give either --parts-dir or --dataset (parts_dir= or a dataset name in Python), "
                                "not both")
    defaults = Source()
    src.method_opt = list(src.method_opt.items()) if isinstance(src.method_opt, Mapping) else \
        [tuple(kv) for kv in src.method_opt]
    if src.parts_dir is not None:
        given = [(f"--{n.replace('_', '-')} {_shown(n, getattr(src, n))}" if n != "partition_seed" else
                  f"partition_seed={src.partition_seed}")
                 for n in ("method", "method_opt", "balance", "imbalance", "root", "cache_dir", "partition_seed",
                           "feature_dtype")
                 if n != "partition_seed" and _differs(getattr(src, n), getattr(defaults, n))
                 or n == "partition_seed" and src.partition_seed not in (None, 0)]
        if given:
            verb, them = ("does", "it") if len(given) == 1 else ("do", "them")
            raise RuntimeSetupError(
                f"{' and '.join(given)} {verb} not apply to --parts-dir {src.parts_dir}: these options load and cut a "
                f"--dataset, and a partition folder keeps the cut it was written with; leave {them} out, or give "
                f"{them} to `gnnscale partition`")
    if (src.edge_split is not None or src.disjoint_train_ratio or src.link_relation) and \
            (src.parts_dir is not None or cfg.task != "link"):
        raise RuntimeSetupError("--edge-split, --disjoint-train-ratio and --link-relation split a --dataset for --task "
                                "link; "
                                + ("a partition folder keeps the split it was written with (give them to `gnnscale "
                                   "partition`)" if src.parts_dir is not None else "add --task link, or leave them out"))
    if src.parts_dir is not None and src.edge_to_node is not None:
        raise RuntimeSetupError("--edge-to-node transforms a --dataset before it is cut; a partition folder keeps the "
                                "features it was written with (give it to `gnnscale partition --edge-to-node`)")


def is_inmemory(obj: Any) -> bool:
    """Whether ``obj`` is an in-memory PyG graph (a ``Data``, a ``HeteroData``, or a triple of
    ``Data`` as RandomLinkSplit returns), by its class's names: torch-free."""
    def pyg(o: Any) -> bool:
        return any(c.__module__.startswith("torch_geometric.data") and c.__name__ in ("Data", "HeteroData")
                   for c in type(o).__mro__)

    return pyg(obj) or isinstance(obj, (tuple, list)) and len(obj) == 3 and all(pyg(o) for o in obj)


def dataset_label(dataset: Any) -> str:
    """How messages name a run's dataset: its name, or ``an in-memory graph``."""
    return f"--dataset {dataset}" if isinstance(dataset, str) else f"the in-memory {type(dataset).__name__}"


def _differs(value: Any, default: Any) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) != list(default)
    return value != default


def _check_layer(cfg) -> None:
    """``--layer`` and ``--layer-kwargs`` resolved before any worker, in one line: a name must be one of
    the zoo's (torch-free: :mod:`gnnscale.planning.layer_names`, or the registry itself where it is
    loaded already, with a user's ``register``-ed layers); a ``dgl:`` layer without DGL is refused
    with what works instead; a layer given by import path, or given options, is built once here
    (torch is imported for it: what those take is known only to their constructor)."""
    import sys

    from gnnscale.config import DGL_ADVICE, OptionError
    from gnnscale.planning.layer_names import check_layer_name

    if not isinstance(cfg.layer, str):
        return
    spec = cfg.layer.strip()
    inner = spec[4:] if spec.lower().startswith("rel:") else spec
    if inner.lower().startswith("dgl:") and importlib.util.find_spec("dgl") is None:
        try:
            from importlib.metadata import version

            torch_version = f"torch {version('torch')}"
        except Exception:  # noqa: BLE001  (not installed as a distribution: say nothing of its version)
            torch_version = "this torch"
        raise OptionError(f"--layer {spec} needs DGL, which is not installed here (with {torch_version}): "
                          f"{DGL_ADVICE}")
    registry = sys.modules.get("gnnscale.nn.layers.registry")
    if registry is not None:
        check_layer_name(spec, registry.ZOO, registry.TYPED_ZOO)
    else:
        check_layer_name(spec)
    if ":" in spec or cfg.layer_kwargs:
        from gnnscale.nn.layers import LayerError, build_conv
        from gnnscale.nn.layers.registry import EDGE_ZOO

        edge_dim = 4 if inner.lower() in EDGE_ZOO else 0  # gine reads edge features: built with some
        try:
            build_conv(spec, 8, 8, index=0, num_layers=2, edge_dim=edge_dim, **cfg.layer_kwargs)
        except LayerError as err:  # one line (a layer's repr in it may span several)
            given = f"--layer-kwargs {json.dumps(cfg.layer_kwargs, default=str)} with " if cfg.layer_kwargs else ""
            raise LayerError(given + " ".join(str(err).split())) from None


def _check_outputs(cfg, source: Source) -> None:
    """Every output path of the run writable, before anything is cut or trained (:mod:`gnnscale.outputs`).
    Under torchrun rank 0 alone writes the model, the metrics and TensorBoard's files: the other
    ranks check the checkpoint folder only (which every rank writes). A partition cache folder given
    (``--cache-dir``, ``$GNNSCALE_CACHE``) that does not exist yet will be written: checked too (an
    existing one may be read-only and hold the cut)."""
    from gnnscale.outputs import check_output

    cache = source.cache_dir or os.environ.get("GNNSCALE_CACHE")
    if source.parts_dir is None and cache and not os.path.isdir(cache):
        check_output(cache, "--cache-dir" if source.cache_dir else "$GNNSCALE_CACHE", folder=True)

    if os.environ.get("RANK", "0") == "0":
        check_output(cfg.save_model, "--save-model")
        check_output(cfg.metrics, "--metrics")
        check_output(cfg.tensorboard, "--tensorboard", folder=True)
    check_output(cfg.checkpoint_dir, "--checkpoint-dir", folder=True)


def _check_fanouts(cfg) -> None:
    from gnnscale.config import OptionError, given
    from gnnscale.errors import SamplerError
    from gnnscale.samplers import check_fanouts

    for name, values, layers in (("fanouts", cfg.fanouts, None if cfg.chunks else cfg.num_layers),
                                 ("eval_fanouts", cfg.eval_fanouts, len(cfg.fanouts))):
        if values is None:
            continue
        try:
            check_fanouts(values, num_layers=layers)
        except SamplerError as err:
            raise OptionError(f"{given(name, ','.join(map(str, values)), list(values))}: {err}") from None


def prepare_run(cfg, source: Source, workers: int | None = None) -> PreparedRun:
    """Every check made before a worker starts, for ``gnnscale train`` and :func:`train` alike:
    the source options (what a partition folder would ignore is refused), the option ranges
    (``cfg.check()``), the device, the layer, the fanouts, the plan of the mode over the
    partition (``plan_run``); then the partition: a folder's meta.json and, with ``cfg.verify``,
    its parts' checksums and contents (``cfg.verify`` is then cleared: the workers need not hash
    them again), or the ``dataset`` cut into the plan's parts (cached). Under torchrun only
    the checks and the plan (``WORLD_SIZE`` workers) run.

    Raises:
        GnnscaleError: one line naming the option, what it may be and what was found.
    """
    from gnnscale.planning.plan import parts_for, plan_run
    from gnnscale.process.launch import in_torchrun, launch_device

    _check_source(source, cfg)
    if cfg.tensorboard and importlib.util.find_spec("tensorboard") is None:
        raise RuntimeSetupError("--tensorboard needs the tensorboard package: pip install tensorboard (from a "
                                "checkout: pip install -e '.[tensorboard]')")
    cfg.check()
    _check_outputs(cfg, source)
    launch_device(cfg.device, 1)  # --device cuda without CUDA: an error before partitioning or launching
    _check_layer(cfg)
    if cfg.model is not None:  # a user's whole model: built once here (torch is imported for it)
        from gnnscale.nn.user_model import build_user_model

        build_user_model(cfg.model, 8, 8, 2, cfg.model_layers(), cfg.dropout, cfg.model_kwargs)
    _check_fanouts(cfg)
    parts_dir = None if source.parts_dir is None else os.fspath(source.parts_dir)
    if in_torchrun():
        if parts_dir is None:
            raise RuntimeSetupError("under torchrun, give --parts-dir (parts_dir=): partition first with "
                                    "`gnnscale partition`")
        from gnnscale.partitioning import load_meta

        meta = load_meta(parts_dir)
        plan = plan_run(cfg, meta, int(os.environ["WORLD_SIZE"]), where=parts_dir)
        if os.environ.get("RANK", "0") == "0":
            _note_unused_times(cfg, meta)
        return PreparedRun(parts_dir, plan, cfg, "cpu", torchrun=True, typed=meta.get("typed") is not None)
    if parts_dir is not None:
        from gnnscale.partitioning.validate import check_folder, check_meta

        meta = check_meta(parts_dir)  # every field a worker relies on, typed and consistent
        plan = plan_run(cfg, meta, workers, where=parts_dir)
        if cfg.verify:  # fail fast, before any worker starts, on a corrupt part (parts hash in parallel)
            from gnnscale.partitioning import verify_parts

            verify_parts(parts_dir)
            check_folder(parts_dir)  # and what the files hold: dtypes, shapes, ids, finite features, labels
            cfg.verify = False
    else:
        from gnnscale.data.partition_cache import prepare_parts
        from gnnscale.partitioning import load_meta

        parts, workers = parts_for(cfg, workers)
        plan_run(cfg, parts, workers, where=f"{dataset_label(source.dataset)} cut into {parts} parts")  # before cutting
        seed = cfg.seed if source.partition_seed is None else source.partition_seed
        link = (source.edge_split, source.disjoint_train_ratio, source.link_relation) if cfg.task == "link" else None
        parts_dir = prepare_parts(source.dataset, parts, root=source.root, cache_dir=source.cache_dir,
                                  method=source.method, seed=seed, balance=source.balance, imbalance=source.imbalance,
                                  method_opt=source.method_opt, link=link, edge_to_node=source.edge_to_node,
                                  feature_dtype=source.feature_dtype)
        meta = load_meta(parts_dir)  # typed or not is known once it is cut: the typed checks now
        plan = plan_run(cfg, meta, workers, where=dataset_label(source.dataset))
    _note_unused_times(cfg, meta)
    device = launch_device(cfg.device, plan.world) if not plan.pipelined else "cpu"  # no CUDA, or too few GPUs
    return PreparedRun(str(parts_dir), plan, cfg, device, typed=meta.get("typed") is not None)


def _note_unused_times(cfg: Any, meta: Mapping) -> None:
    """One line where a static task trains on a temporal partition: its edge times are not used."""
    if meta.get("temporal") and cfg.task != "temporal_link":
        log.info("the partition's edge times are not used by --task %s: every edge is a candidate whatever its "
                 "time (--task temporal_link samples in time)", cfg.task)


def launch(run: PreparedRun, port: int | None = None, threads: int | None = None) -> dict:
    """Start ``run``'s local workers; log the start and the ``done:`` summary; rank 0's result."""
    from gnnscale.process.launch import check_port, launch_local

    check_port(port)  # before the line that says the workers start
    log.info("starting %d local worker(s) on %s (%s, device %s)", run.plan.world, run.parts_dir,
             run.plan.describe(), run.device)
    r0 = launch_local(TARGET, run.plan.world, args=(run.parts_dir, run.cfg), port=port, threads_per_worker=threads,
                      typed=run.typed)[0]
    log_summary(r0, run.plan)
    return finished(r0)


def finished(r0: dict | None) -> dict | None:
    """Rank 0's result, or where an output written at the end failed (``--save-model``, ``--metrics``: a
    full disk, a folder removed during training), the one line saying where what was trained is kept.

    Raises:
        OutputError: ``r0["unwritten"]``'s lines, joined.
    """
    if r0 and r0.get("unwritten"):
        from gnnscale.errors import OutputError

        raise OutputError("; ".join(r0["unwritten"]))
    return r0


def epoch_rate(r0: dict) -> str:
    """The ``done:`` line's seconds per epoch: the steady epoch (the median after the first) and
    the first apart, which pays numba's compilation (``0.15 s/epoch (first 6.4 s)``)."""
    steady, first = r0.get("steady_epoch_seconds"), r0.get("first_epoch_seconds")
    if steady is None or first is None:  # a result without them: the mean
        return f"{r0['epoch_seconds']:.2f} s/epoch"
    return f"{steady:.2f} s/epoch" + (f" (first {first:.1f} s)" if len(r0["epochs"]) > 1 else "")


def log_summary(r0: dict, plan) -> None:
    """The ``done:`` line of a run: epochs, mode, loss, seconds, bytes, the evaluation."""
    stages = "" if not r0.get("stages") or len(r0["stages"]) < 2 else \
        " (layers " + " ".join(f"{a}-{b - 1}" for a, b in r0["stages"]) + ")"
    last = r0["epochs"][-1]
    epochs = len(r0["epochs"])
    summary = (f"done: {epochs} epoch{'' if epochs == 1 else 's'}, {plan.describe()}{stages}, "
               f"final loss {last['loss']:.4f}, "
               f"{epoch_rate(r0)}, {r0['bytes_sent'] / 1e6:.1f} MB sent, "
               f"{r0['bytes_received'] / 1e6:.1f} MB received in all")
    if r0.get("val_acc") is None:
        log.info("%s (no evaluation)", summary)
    else:
        name = "acc" if r0.get("metric", "accuracy") == "accuracy" else r0["metric"]
        log.info("%s; val_%s %.4f test_%s %.4f (best val %.4f at epoch %d, test there %.4f)", summary, name,
                 r0["val_acc"], name, r0["test_acc"], r0["best_val_acc"], r0["best_epoch"], r0["test_acc_at_best_val"])


def train(
    dataset: Any = None,
    *,
    parts_dir: str | None = None,
    workers: int | None = None,
    root: str | None = None,
    cache_dir: str | None = None,
    method: str = "metis",
    method_opt: Mapping[str, Any] | Sequence[tuple[str, Any]] = (),
    balance: Sequence[str] = ("nodes", "train"),
    imbalance: float = 0.05,
    partition_seed: int = 0,
    threads: int | None = None,
    edge_split: str | None = None,
    disjoint_train_ratio: float = 0.0,
    link_relation: str | None = None,
    edge_to_node: str | None = None,
    feature_dtype: str = "float32",
    **config,
) -> dict:
    """Train a GNN on a partitioned graph; returns the metrics of rank 0 (see ``gnnscale train --metrics``).

    Args:
        dataset: a dataset spec (``gnnscale datasets`` lists them) or an in-memory PyG graph: a
            ``Data``, a ``HeteroData`` (its target type: the one type with ``y``, or
            ``data.target_type``) or RandomLinkSplit's ``(train, val, test)`` with ``task="link"``
            (:mod:`gnnscale.datasets.inmemory` says what is read; it is cached by its content
            digest); partitioned in the cache
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
        method, method_opt, balance, imbalance: how ``dataset`` is cut (``--method``,
            ``--method-opt`` as a mapping such as ``{"slack": 0.1}``, ``--balance``, ``--imbalance``).
        partition_seed: its seed (apart from the training ``seed``, so that runs over several
            seeds share one cached partition).
        threads: torch threads per worker (default: cores / workers).
        edge_split, disjoint_train_ratio, link_relation: with ``task="link"`` and a ``dataset``:
            its random link split (``"0.85,0.05,0.10"`` by default; ``ogbl-*`` datasets bring their
            own; a typed graph's of the relation ``link_relation``), split with ``partition_seed``.
        edge_to_node: with a ``dataset``: ``"mean"`` or ``"sum"`` of each node's in-edge features
            appended to its features before the cut (``--edge-to-node``; recorded in the partition).
        feature_dtype: with a ``dataset``: ``"float16"`` or ``"bfloat16"`` stores the feature rows at that
            precision (``--feature-dtype``: half the bytes on disk and fetched; cast to float32 at the model).
        **config: any :class:`gnnscale.config.TrainConfig` field: ``epochs``, ``fanouts``,
            ``batch_size``, ``hidden``, ``lr``, ``layer`` (a zoo name, ``module:Class`` or a
            layer class), ``layer_kwargs``, ``exchange``, ``cache_policy``, ``pipeline``,
            ``pipeline_stages``, ``chunks`` ...

    Every check of ``gnnscale train`` runs first (:func:`prepare_run`, the same function), so the
    two refuse the same things with the same line; ``fanouts`` may be ``[10, 10]`` or ``"10,10"``.
    The launcher logs what the command line logs (the partition, the workers, the ``done:``
    summary) through the ``gnnscale`` logger, to stderr unless logging is configured already.

    Raises:
        RuntimeSetupError: an unknown option, both or neither of ``dataset`` and ``parts_dir``, a
            ``dataset`` that is not a name, or a partitioning option given with ``parts_dir``.
        OptionError: an option out of its range.
        PlanError: an option the run's mode would not honour, or a worker count that does not fit.
    """
    from gnnscale.config import TrainConfig, did_you_mean, python_face

    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(config) - known)
    if unknown:
        own = [p for p in inspect.signature(train).parameters if p != "config"]
        hint = did_you_mean(unknown[0], sorted(known) + own)
        listed = "gnnscale.config.TrainConfig's fields and train()'s own keywords" if hint else \
            ", ".join(sorted(known))
        raise RuntimeSetupError(f"unknown training option(s) {', '.join(map(repr, unknown))}{hint}; valid ones: "
                                f"{listed}")
    with python_face():  # errors name the keywords (fanouts), not the command line's flags (--fanouts)
        return _train(dataset, parts_dir, workers, threads, config,
                      Source(dataset, parts_dir, root, cache_dir, method, method_opt, balance, imbalance,
                             partition_seed, edge_split, disjoint_train_ratio, link_relation, edge_to_node,
                             feature_dtype))


def _train(dataset, parts_dir, workers, threads, config, source) -> dict:
    from gnnscale.config import TrainConfig

    if dataset is None and parts_dir is None:
        raise RuntimeSetupError("give a dataset name (partitioned and cached for you; `gnnscale datasets` lists them) "
                                "or parts_dir=... (a folder written by `gnnscale partition`)")
    if not logging.getLogger().handlers:  # nothing configured: the command line's lines, to stderr
        from gnnscale.logs import setup_logging

        setup_logging()
    try:
        cfg = TrainConfig(**config)
    except TypeError as err:  # a dataclass refuses nothing else
        raise RuntimeSetupError(f"training options: {err}") from None
    run = prepare_run(cfg, source, workers)
    if run.torchrun:
        from gnnscale.training.trainer import train_worker

        return finished(train_worker(run.parts_dir, run.cfg))
    return launch(run, threads=threads)
