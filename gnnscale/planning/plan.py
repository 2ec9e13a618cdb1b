"""The parallel plan of a run: what its workers do, resolved once from the options.

``gnnscale train``, :func:`gnnscale.train` and every worker resolve the same
:class:`ParallelPlan` from a :class:`~gnnscale.config.TrainConfig`, the partition's part count
and the worker count (:func:`plan_run`), before anything is built:

- **data parallel** (the default): D = W workers, one per part, each the whole model (DDP);
- **layer pipeline** (``--pipeline-stages K``): D = parts pipelines of K stages, W = D x K;
  rank r is stage r % K of pipeline r // K; each step feeds M sampled micro-batches;
- **chunk pipeline** (``--chunks``): one pipeline of K stages over the whole graph, W = K,
  the parts are the micro-batches (chunks), one step per epoch.

Every option is honoured in every mode or rejected here, before any worker starts, with an
error that names the option and the mode (:func:`check_options`; the tables ``APPLIES`` and
``REQUIRES``, read from each option's row of :data:`gnnscale.config.OPTIONS`, say where each option
applies and what it needs). Torch-free: the launcher runs it without importing torch.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from gnnscale.config import (CHUNK_PIPELINE, DATA_PARALLEL, LAYER_PIPELINE, OPTIONS, SAMPLED_MODES, TrainConfig,
                             cli_flag)
from gnnscale.errors import GnnscaleError

MODE_NAMES = {
    DATA_PARALLEL: "data-parallel training",
    LAYER_PIPELINE: "the layer pipeline (--pipeline-stages > 1)",
    CHUNK_PIPELINE: "chunk pipelining (--chunks)",
}
_DEFAULTS = TrainConfig()


class PlanError(GnnscaleError):
    """An option that does not apply to the run's mode, or a worker count that does not fit it."""


@dataclass(frozen=True)
class ParallelPlan:
    """How the W = dp x pp workers of a run split the work.

    Attributes:
        mode: ``data_parallel``, ``layer_pipeline`` or ``chunk_pipeline``.
        dp: D, the data-parallel degree (pipelines; 1 in chunk mode, whose one pipeline holds
            the whole graph). pp: K, the pipeline stages (1: every worker holds the whole model).
        micro_batches: M, micro-batches per optimizer step (1 in plain data parallelism; the
            chunks in chunk mode). schedule: ``gpipe`` or ``1f1b``.
        stage_layers: layers per stage as given (None: balanced by measured costs).
        num_layers: L, the model's depth. num_parts: the partition's parts.
    """

    mode: str
    dp: int
    pp: int
    micro_batches: int
    schedule: str
    stage_layers: tuple[int, ...] | None
    num_layers: int
    num_parts: int

    @property
    def world(self) -> int:
        return self.dp * self.pp

    @property
    def pipelined(self) -> bool:
        return self.mode != DATA_PARALLEL

    def coords(self, rank: int) -> tuple[int, int]:
        """(d, s): the pipeline and the stage of ``rank``."""
        return divmod(rank, self.pp)

    def stage_ranks(self, d: int) -> list[int]:
        """The global rank of each stage of pipeline ``d``."""
        return [d * self.pp + t for t in range(self.pp)]

    def replica_ranks(self, s: int) -> list[int]:
        """The global rank of stage ``s`` in every pipeline (the stage's data-parallel group)."""
        return [j * self.pp + s for j in range(self.dp)]

    def describe(self) -> str:
        if self.mode == DATA_PARALLEL:
            return f"data parallel over {self.dp} worker(s)"
        if self.mode == LAYER_PIPELINE:
            return (f"{self.dp} pipeline(s) x {self.pp} stages, {self.micro_batches} micro-batches per step, "
                    f"{self.schedule}")
        return f"chunk pipeline of {self.pp} stages over {self.micro_batches} chunks, {self.schedule}"

    def record(self) -> dict:
        out = asdict(self)
        out["stage_layers"] = list(self.stage_layers) if self.stage_layers is not None else None
        out["world"] = self.world
        return out


# options whose default is auto (None) and whose False (off) applies in every mode
_OFF_ANYWHERE = tuple(name for name, spec in OPTIONS.items() if spec.off_everywhere)


def _given(cfg: TrainConfig, name: str) -> bool:
    """Whether ``name`` differs from its default (what a user set). An auto option's off is not
    checked: it applies everywhere."""
    value, default = getattr(cfg, name), getattr(_DEFAULTS, name)
    if name in _OFF_ANYWHERE and value is False:
        return False
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) != list(default)
    return value != default


DP, LP, CP = DATA_PARALLEL, LAYER_PIPELINE, CHUNK_PIPELINE
# Where each option applies (every field of TrainConfig), and why not elsewhere; the options that
# depend on another option: (the option it needs, a predicate on the config, what it needs in words).
# Both are read from the options' rows (gnnscale.config.option): edit them there. What depends on
# an option's value rather than on its being set is checked by check_options below (--exchange,
# --jk, --device), check_link_options (--task), check_edge_options (--edge-features on) and
# check_target_options (--metric, --pos-weight against the partition's target kind); --model by
# gnnscale.config.check_model_options.
APPLIES: dict[str, tuple[frozenset, str]] = {name: (spec.applies, spec.why) for name, spec in OPTIONS.items()}
REQUIRES = {name: spec.requires for name, spec in OPTIONS.items() if spec.requires is not None}


def _mode_of(cfg: TrainConfig) -> str:
    if cfg.chunks:
        return CHUNK_PIPELINE
    return LAYER_PIPELINE if cfg.pipeline_stages > 1 else DATA_PARALLEL


def check_options(cfg: TrainConfig, mode: str | None = None) -> None:
    """Reject every option set (different from its default) that ``mode`` would not honour.

    Raises:
        PlanError: naming the option, its value, the mode, why and what to do instead.
    """
    mode = mode or _mode_of(cfg)
    where = MODE_NAMES[mode]
    outside: list[tuple[str, object, str]] = []  # every option set that the mode does not take
    for f in fields(TrainConfig):
        name = f.name
        if not _given(cfg, name):
            continue
        value = getattr(cfg, name)
        modes, why = APPLIES[name]
        if mode not in modes and not (name == "fanouts" and all(int(v) == -1 for v in value)):
            outside.append((name, value, why))
    if outside:
        named = " and ".join(f"{cli_flag(n)} ({n}={v!r})" for n, v, _ in outside)
        reasons = "; ".join(dict.fromkeys(w for _, _, w in outside))
        verb, them = ("does", "it") if len(outside) == 1 else ("do", "them")
        raise PlanError(f"{named} {verb} not apply to {where}: {reasons}. Leave {them} out.")
    for name, (_, ok, needs) in REQUIRES.items():
        if _given(cfg, name) and not ok(cfg):
            raise PlanError(f"{cli_flag(name)} ({name}={getattr(cfg, name)!r}) applies only with {needs}, which this run "
                            f"does not set; add {needs} or leave {cli_flag(name)} out.")
    if mode == DP and cfg.exchange == "historical" and cfg.halo_features == "hold" and cfg.cache_policy != "none":
        raise PlanError(f"--cache-policy {cfg.cache_policy} does not apply to --exchange historical with "
                        "--halo-features hold: every halo feature row is held, so there is nothing left to cache. "
                        "Leave --cache-policy out, or add --halo-features fetch to cache per-step fetches.")
    if mode == LAYER_PIPELINE and cfg.exchange == "historical":
        raise PlanError("--exchange historical does not apply to the layer pipeline (--pipeline-stages > 1): its "
                        "halo tables are data-parallel; use --exchange exact or local with stages.")
    if mode == CHUNK_PIPELINE and cfg.exchange != "exact":
        raise PlanError(f"--exchange {cfg.exchange} does not apply to chunk pipelining (--chunks): its stages keep "
                        "their own tables of neighbour rows (bounded by --staleness). Leave --exchange out.")
    if cfg.jk != "none" and cfg.pipeline_stages > 1:
        raise PlanError(f"--jk {cfg.jk} does not apply to pipeline stages (--pipeline-stages {cfg.pipeline_stages}): "
                        "jumping knowledge reads every layer's output at the seeds, so its layers cannot be split; "
                        "use --jk none with stages.")
    if cfg.device == "cuda" and mode != DP:
        raise PlanError(f"--device cuda does not apply to {where} yet: its stages exchange activations over gloo "
                        "and train on the CPU. Use --device cpu (or auto) with stages.")


def check_link_options(cfg: TrainConfig, mode: str, where: str, link: dict | str | None) -> None:
    """Reject, before any worker starts, what link prediction (``--task link``) does not run:
    the pipelines, historical and local exchange, sampled evaluation (its evaluation is exact,
    layer-wise), a partition without a link split, and a split with one on ``--task node``.
    ``--task edge`` (edge classification / regression) likewise, and needs a split with edge
    labels (``meta["link"]["label"]``); ``--task link`` on a labelled split ignores the labels.
    ``link``: the partition's ``meta["link"]`` (:data:`UNKNOWN` before a dataset is cut)."""
    if cfg.task == "temporal_link":  # check_temporal_options: the events are the partition's edges
        return
    if cfg.task not in ("link", "edge"):
        if link and link != UNKNOWN:
            raise PlanError(f"{where} holds a link-prediction split (no node labels to classify): add --task link (or "
                            "--task edge for its edge labels), or partition the dataset without --edge-split for node "
                            "classification.")
        return
    task = f"--task {cfg.task}"
    what = "link prediction trains" if cfg.task == "link" else "edge classification and regression train"
    if mode != DP:
        raise PlanError(f"{task} does not apply to {MODE_NAMES[mode]} yet: {what} data parallel "
                        "(leave --pipeline-stages and --chunks out).")
    if cfg.exchange != "exact":
        raise PlanError(f"--exchange {cfg.exchange} does not apply to {task}: a seed edge's endpoints are sampled "
                        "exactly by their owners. Use --exchange exact.")
    if cfg.task == "edge":
        if not link or (link != UNKNOWN and not link.get("label")):
            has = "has no link split" if not link else "has a link split without edge labels"
            raise PlanError(f"--task edge needs a split with edge labels, and {where} {has}: split with "
                            "random_link_split(data, edge_label=...) and partition that.")
        return
    if not link:
        raise PlanError(f"--task link needs a link-prediction split, and {where} has none: partition with "
                        "`gnnscale partition --edge-split 0.85,0.05,0.10 ...` (or an ogbl-* dataset), or give "
                        "--dataset, which splits it.")
    if link == UNKNOWN:
        return
    from gnnscale.config import parse_link_metric

    metric = cfg.link_metric or link.get("metric", "auc")
    kind, _ = parse_link_metric(metric)
    arrays = set(link.get("arrays", ()))
    if kind == "mrr" and "val_neg_dst" not in arrays:
        raise PlanError(f"--link-metric {metric} ranks each source's positive among its own negatives, and the split "
                        f"of {where} has none per source (it has fixed negative pairs): use --link-metric auc or "
                        "hits@K.")
    if kind != "mrr" and "val_neg" not in arrays:
        raise PlanError(f"--link-metric {metric} scores the split's negative pairs, and the split of {where} has only "
                        "per-source negatives (ogbl-citation2's): use --link-metric mrr.")


def check_target_options(cfg: TrainConfig, where: str, target: dict | str | None) -> None:
    """Reject, before any worker starts, a ``--metric`` that does not fit the partition's target
    kind and ``--pos-weight`` on targets that are not binary or multilabel
    (``docs/targets_and_edge_features.md`` section 5). ``target``: the partition's
    ``meta["target"]`` (None: a folder of class ids; :data:`UNKNOWN` before a dataset is cut).
    Every mode trains every kind (one loss, one evaluation), so nothing is refused by mode."""
    if target == UNKNOWN or cfg.task != "node":
        return
    from gnnscale.config import KIND_METRICS, default_node_metric, parse_pos_weight

    kind = str((target or {}).get("kind", "class"))
    fits = KIND_METRICS.get(kind, KIND_METRICS["class"])
    if cfg.metric is not None and cfg.metric not in fits:
        raise PlanError(f"--metric {cfg.metric} does not fit the {kind} targets of {where}: {kind} targets are "
                        f"measured by {', '.join(fits)}; pass one of them or leave --metric out (default "
                        f"{default_node_metric(kind)}).")
    if parse_pos_weight(cfg.pos_weight) is not None and kind not in ("binary", "multilabel"):
        raise PlanError(f"--pos-weight {cfg.pos_weight} does not apply to the {kind} targets of {where}: it weighs "
                        "the positives of binary and multilabel targets in their binary cross-entropy. Leave "
                        "--pos-weight out.")


def edge_features_blocker(cfg: TrainConfig, mode: str, typed: dict | str | None = None) -> str | None:
    """Why a run of ``cfg`` in ``mode`` cannot give its layers edge features (None: it can).
    Edge features train data parallel (every exchange mode: historical mode's halo fill and
    refresh read them too), on node targets of an untyped graph (docs/targets_and_edge_features.md,
    section 5)."""
    if mode != DATA_PARALLEL:
        return f"{MODE_NAMES[mode]} does not pass edge features to its layers yet (they train data parallel)"
    if cfg.task != "node":
        return f"--task {cfg.task} does not pass edge features to its encoder yet (node classification does)"
    if typed and typed != UNKNOWN:
        return "typed graphs do not pass edge features to their relation-wise layers yet"
    return None


def host_reads(cfg: TrainConfig, mode: str, typed: dict | str | None = None) -> tuple[bool, bool]:
    """(read other parts' feature rows, sample other parts' nodes) from the partition folder, for
    the ranks on this host (``--host-features``, ``--host-graph``; docs/training.md).

    Given (True / False), as given: :func:`check_options` and :func:`check_typed_options` have
    rejected them where they do not apply. Unset (None, the default: auto), on where they
    apply: the sampled modes (data parallel, layer pipeline) on an untyped graph, the graph's
    reads only with ``--exchange exact``; off when ``--net-bandwidth-gbps`` models a network
    (the run then stands for workers on several hosts). As DistDGL's trainers read their
    machine's partitions from shared memory: rows and samples a worker can read on its host are
    never sent through the communicator, and an owner on another host still answers there. The
    same rows and draws either way (tests/test_distributed.py), so results are unchanged."""
    auto = mode in SAMPLED_MODES and not (typed and typed != UNKNOWN) and not cfg.net_bandwidth_gbps
    features = cfg.host_features if cfg.host_features is not None else auto
    graph = cfg.host_graph if cfg.host_graph is not None else auto and cfg.exchange == "exact"
    return bool(features), bool(graph)


def check_edge_options(cfg: TrainConfig, mode: str, where: str, typed: dict | str | None = None,
                       edges: int | str | None = None) -> None:
    """Reject ``--edge-features on`` where it cannot be honoured, before any worker starts: a mode
    or option that does not pass edge features (:func:`edge_features_blocker`), or a partition
    without them (``edges``: its ``meta["edge_feature_dim"]``; None or :data:`UNKNOWN`: not known
    yet). ``auto`` and ``off`` apply everywhere (auto resolves to off where ``on`` is refused)."""
    if getattr(cfg, "edge_features", "auto") != "on" or cfg.task == "temporal_link":
        return  # temporal_link: the edge features are the edges' ages (gnnscale.nn.edge_features.resolve_edge_dim)
    why = edge_features_blocker(cfg, mode, typed)
    if why:
        raise PlanError(f"--edge-features on does not apply here: {why}. Use --edge-features auto (on where it "
                        "applies) or off.")
    if edges not in (None, UNKNOWN) and not int(edges):
        raise PlanError(f"--edge-features on does not apply to {MODE_NAMES[mode]} on {where}: it has no edge "
                        "features (meta edge_feature_dim 0). Partition a dataset with edge_attr (humloc:PATH, "
                        "ogbn-proteins, a dir: folder with edge_attr.npy), or use --edge-features auto or off.")


TYPED_LAYERS = ("rgcn", "hgt", "rel:")


def check_typed_options(cfg: TrainConfig, mode: str, where: str) -> None:
    """Reject what typed (heterogeneous) graphs do not run yet, before any worker starts: the
    two pipelines, local exchange, and a layer that does not read relations (``rgcn``, ``hgt``
    and ``rel:<layer>`` do). Layer-wise evaluation runs (streamed; over the halo tables with
    ``--exchange historical``, whose tables hold one row per halo node of any type)."""
    if mode != DP:
        raise PlanError(f"{where} is a typed graph, and {MODE_NAMES[mode]} does not run typed graphs yet: train it "
                        "data parallel (leave --pipeline-stages and --chunks out).")
    if cfg.exchange == "local":
        raise PlanError(f"--exchange local does not apply to typed graphs ({where}) yet: their sampler drops no "
                        "relation's cross-partition edges. Use --exchange exact or historical.")
    if cfg.host_features:  # None (auto) is off for typed graphs
        raise PlanError(f"--host-features does not apply to typed graphs ({where}) yet: their rows are read per node "
                        "type through the communicator. Leave --host-features out (or give --no-host-features).")
    if cfg.host_graph:
        raise PlanError(f"--host-graph does not apply to typed graphs ({where}) yet: their owners sample by relation. "
                        "Leave --host-graph out (or give --no-host-graph).")
    if getattr(cfg, "model", None) is not None and cfg.task != "node":
        raise PlanError(f"--model with --task {cfg.task} does not apply to typed graphs ({where}) yet: a whole model "
                        "made relation-wise returns the rows of one node type, and a pair's ends may differ in type. "
                        f"Use --layer rgcn, hgt or rel:<layer> for --task {cfg.task} on a typed graph.")
    layer = cfg.layer if isinstance(cfg.layer, str) else ""
    if getattr(cfg, "model", None) is None and not (layer in TYPED_LAYERS or layer.startswith("rel:")
                                                     or ":" in layer.replace("rel:", "", 1)):  # --model: to_hetero
        raise PlanError(f"--layer {cfg.layer} does not read relations, and {where} is a typed graph: use --layer "
                        f"rgcn, hgt, or rel:{cfg.layer} (one {cfg.layer} layer per relation, summed per node type).")


#: a fact of a dataset not cut yet (whether it is typed, its target, split, edge features: known after)
UNKNOWN = "unknown"


def check_temporal_options(cfg: TrainConfig, mode: str, where: str, temporal, typed) -> None:
    """Reject, before any worker starts, what ``--task temporal_link`` does not honour (each
    option by name, one line), and the task on a partition without edge times; ``temporal``: the
    partition's ``meta["temporal"]`` (:data:`UNKNOWN` before a dataset is cut)."""
    if cfg.task != "temporal_link":
        return
    head = "does not apply to --task temporal_link"
    if mode != DP:
        raise PlanError(f"--task temporal_link does not apply to {MODE_NAMES[mode]} yet: temporal link prediction "
                        "trains data parallel (leave --pipeline-stages and --chunks out).")
    if temporal and typed not in (None, UNKNOWN) and typed:
        raise PlanError(f"--task temporal_link trains on an untyped event graph, and {where} is a typed temporal "
                        "graph (times per relation): the engine's typed training does not sample in time yet; sample "
                        "it with gnnscale.pyg.start_run's loaders (docs/temporal.md, section 4), or partition one "
                        "relation's events as events:PATH")
    if not temporal:
        raise PlanError(f"--task temporal_link needs timed events, and {where} has no edge times: partition an "
                        "events:PATH, jodie:PATH or dir:PATH with edge_time.npy (docs/temporal.md)")
    refused = [
        (cfg.exchange != "exact", f"--exchange {cfg.exchange} {head}: the endpoints' past is sampled by their owners "
         "at each event's time; use --exchange exact"),
        (cfg.model is not None, f"--model {head}: the task reads the ages of the layer stack's edges; use --layer "
         "(e.g. tgat)"),
        (cfg.sampler != "neighbor", f"--sampler {cfg.sampler} {head}: temporal draws are --temporal-strategy uniform "
         "or last; leave --sampler out"),
        (cfg.eval_method == "layerwise", f"--eval-method layerwise {head}: an event's embeddings depend on its time, "
         "so evaluation samples each one's past; use --eval-method auto or sampled"),
        (cfg.cache_policy != "none", f"--cache-policy {cfg.cache_policy} {head} yet: its rows are chosen from untimed "
         "draws; leave --cache-policy out"),
        (cfg.host_graph is True, f"--host-graph {head}: owners draw their nodes' past (the T-CSR); leave it out"),
        (cfg.decoder == "distmult", f"--decoder distmult {head}: it scores one relation of a typed graph; use dot or "
         "mlp"),
        (cfg.neg_sampling == "in_batch", f"--neg-sampling in_batch {head}: negatives keep the event's source and time "
         "and draw the destination uniformly (uniform and per_source both mean that)"),
        (cfg.filter_negatives, f"--filter-negatives {head}: a pair may be an event at another time; leave it out"),
        (cfg.link_metric is not None and str(cfg.link_metric).lower() not in ("auc", "mrr"),
         f"--link-metric {cfg.link_metric} {head}: it reports AP/AUC (one negative) and MRR (--eval-negatives); "
         "use auc or mrr"),
    ]
    for bad, message in refused:
        if bad:
            raise PlanError(message)


def plan_run(cfg: TrainConfig, meta: "Mapping | int", workers: int | None = None,
             where: str = "the partition") -> ParallelPlan:
    """The plan of a run of ``cfg`` on a partition with ``workers`` workers (None: as the mode
    wants: a worker per part, D x K for pipelines, K in chunk mode).

    ``meta``: the partition's ``meta.json``, whose facts the checks read: ``num_parts``, ``typed``
    (a typed graph: :func:`check_typed_options`; absent: untyped), ``link`` (the link-prediction
    split: :func:`check_link_options`), ``target`` (:func:`check_target_options`) and
    ``edge_feature_dim`` (:func:`check_edge_options`; absent: 0). An int: the parts a dataset not
    cut yet will be cut into (those facts are :data:`UNKNOWN`: their checks wait for the cut).

    Raises:
        PlanError: an option the mode does not honour, or a worker count that does not fit.
        PipelineError: stages, stage sizes, micro-batches or schedule that do not fit the model.
    """
    from gnnscale.planning.schedules import check_pipeline

    if isinstance(meta, Mapping):
        num_parts, typed, link = int(meta["num_parts"]), meta.get("typed"), meta.get("link")
        target, edges = meta.get("target"), meta.get("edge_feature_dim", 0)
    else:
        num_parts, typed = int(meta), UNKNOWN
        link = target = edges = UNKNOWN
    mode = _mode_of(cfg)
    check_options(cfg, mode)
    check_link_options(cfg, mode, where, link)
    check_temporal_options(cfg, mode, where, meta.get("temporal") if isinstance(meta, Mapping) else UNKNOWN, typed)
    check_target_options(cfg, where, target)
    check_edge_options(cfg, mode, where, typed, edges)
    if typed == UNKNOWN:
        pass
    elif typed:
        check_typed_options(cfg, mode, where)
        from gnnscale.samplers.fanouts import typed_fanouts

        typed_fanouts(cfg.fanouts, [r for _, r, _ in typed["edge_types"]], len(cfg.fanouts), cfg.relation_fanouts)
    elif cfg.relation_fanouts:
        raise PlanError(f"--relation-fanouts ({cfg.relation_fanouts!r}) does not apply to {MODE_NAMES[mode]} on "
                        f"{where}: it is not a typed graph (one relation); leave --relation-fanouts out, or give "
                        "--fanouts.")
    k = int(cfg.pipeline_stages)
    layers = cfg.model_layers()
    if mode == CHUNK_PIPELINE and cfg.num_layers is None and all(int(v) == -1 for v in cfg.fanouts):
        layers = len(cfg.fanouts)
    if mode == CHUNK_PIPELINE:
        w = k if workers is None else int(workers)
        if w != k:
            raise PlanError(f"--chunks runs one pipeline of {k} stages over the whole graph (the {num_parts} parts of "
                            f"{where} are its chunks): use --workers {k}, found {w}")
        if _given(cfg, "micro_batches") and cfg.micro_batches != num_parts:
            raise PlanError(f"--micro-batches {cfg.micro_batches} does not fit chunk pipelining over {where}: its "
                            f"{num_parts} parts are the chunks (the micro-batches). Leave --micro-batches out, or "
                            f"re-partition into {cfg.micro_batches} parts.")
        check_pipeline(k, cfg.stage_layers, 1, cfg.schedule, layers, k)
        return ParallelPlan(mode, 1, k, num_parts, cfg.schedule, _tuple(cfg.stage_layers), layers, num_parts)
    if cfg.num_layers is not None and int(cfg.num_layers) != len(cfg.fanouts):
        raise PlanError(f"--num-layers {cfg.num_layers} does not fit {MODE_NAMES[mode]}: a sampled model has one layer "
                        f"per fanout, and --fanouts gives {len(cfg.fanouts)}; give {cfg.num_layers} fanouts or leave "
                        "--num-layers out.")
    w = num_parts * k if workers is None else int(workers)
    if w < 1:
        raise PlanError(f"--workers must be at least 1, found {w}")
    if mode == LAYER_PIPELINE:
        check_pipeline(k, cfg.stage_layers, cfg.micro_batches, cfg.schedule, layers, w)
    if w != num_parts * k:
        per = "one worker trains one part" if k == 1 else f"the {k} stages of one pipeline train one part"
        raise PlanError(f"--workers {w} does not match the {num_parts} parts in {where}: {per}. Use "
                        f"--workers {num_parts * k}, or re-partition with `gnnscale partition --parts {max(1, w // k)} ...`")
    micro = cfg.micro_batches if mode == LAYER_PIPELINE else 1
    return ParallelPlan(mode, num_parts, k, micro, cfg.schedule, _tuple(cfg.stage_layers), layers, num_parts)


def parts_for(cfg: TrainConfig, workers: int | None) -> tuple[int, int]:
    """(parts to cut a ``--dataset`` into, workers) when no partition is given: a part per worker
    (default 2 workers), a part per pipeline (default one pipeline), or in chunk mode
    ``--micro-batches`` chunks for K workers."""
    mode = _mode_of(cfg)
    k = int(cfg.pipeline_stages)
    if mode == CHUNK_PIPELINE:
        return int(cfg.micro_batches), k if workers is None else int(workers)
    w = (2 if k == 1 else k) if workers is None else int(workers)
    if w < 1:
        raise PlanError(f"--workers must be at least 1, found {w}")
    return max(1, w // k), w


def _tuple(v) -> tuple[int, ...] | None:
    return None if v is None else tuple(int(x) for x in v)
