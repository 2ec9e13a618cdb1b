"""Run options of ``gnnscale train``: one table, and the checks it drives.

Each option is one field of :class:`TrainConfig`, and each field says everything about its
option once, in its :func:`~gnnscale.options.option` metadata: the default, the help, the choices
or range, the section (:data:`~gnnscale.options.SECTIONS`: model, sampling, exchange, pipeline,
task, checkpoint, run, ...), the modes it applies to and why not the others, the option it
requires and an extra check. What is read from it (:data:`OPTIONS`, one
:class:`~gnnscale.options.OptionSpec` per field, in field order):

- :meth:`TrainConfig.check` (the choices, ranges and checks: :data:`CHOICES`, :data:`AT_LEAST`);
- the ``train`` command's flags, help and groups (:func:`gnnscale.cli.parser.add_train_options`);
- the plan's ``APPLIES`` and ``REQUIRES`` (:mod:`gnnscale.planning.plan`).

Adding an option is adding a field here (and its case in ``tests/test_options.py``). Flat
attribute names and flat YAML keys (``batch_size`` / ``batch-size``) are the contract.
Torch-free on purpose: the launcher builds and checks a :class:`TrainConfig` before it starts
any worker, without importing torch (each worker imports it anyway).
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Sequence

# The names below are this module's too (callers import them from gnnscale.config).
from gnnscale.options import (  # noqa: F401
    ALL_MODES, CHUNK_PIPELINE, DATA_PARALLEL, DEVICES, KIND_METRICS, KINDS, LAYER_PIPELINE, LOWER_IS_BETTER, MODES,
    NODE_METRICS, SAMPLED_MODES, SECTIONS, Needs, OptionError, OptionSpec, cache_size_value, check_mode,
    check_staleness, cli_flag, default_node_metric, did_you_mean, flag, given, int_list, link_metric_value, option,
    parse_cache_size, parse_link_metric, parse_pos_weight, parse_weight_decay, pos_weight_value, python_face,
    staleness_value, temporal_fractions, temporal_split_value, weight_decay_value)

#: what works instead of a ``dgl:`` layer where DGL cannot load (its wheels need an old torch)
DGL_ADVICE = ("DGL 2.1's wheels need torch <= 2.2.1, so install it in a separate environment with that torch "
              "(pip install torch==2.2.1 dgl==2.1.0, then gnnscale there), or use a built-in layer (--layer sage, gcn, "
              "gat, gin, gcnii) or a PyG layer by its import path (--layer torch_geometric.nn:SAGEConv)")


#: built-in layers whose stack ends in a convolution, not a linear head (without --jk)
_HEADLESS_LAYERS = ("sage", "gcn", "gat", "gin")

# Reasons and requirements several options share.
_WHOLE_FEATURES = "every stage holds the whole graph's features"
_SAMPLES_NOTHING = "chunk pipelining samples nothing"
_EXACT_EVAL = "chunk pipelining evaluates exactly, layer by layer over the whole graph"
_NOT_FETCHED = "nothing is sampled or fetched per step"
_LINK_DP = "link prediction trains data parallel"
_USER_MODEL_DP = "a user's whole model trains data parallel (the pipelines split the engine's layer stack)"
_STAGES = {LAYER_PIPELINE, CHUNK_PIPELINE}
_CHECKPOINT_DIR = ("checkpoint_dir", lambda c: bool(c.checkpoint_dir), "--checkpoint-dir DIR")
_HISTORICAL = ("exchange", lambda c: c.exchange == "historical", "--exchange historical")
_LINK = ("task", lambda c: c.task in ("link", "temporal_link"), "--task link or temporal_link")
_TEMPORAL_ONLY = dict(applies={DATA_PARALLEL}, why="temporal link prediction trains data parallel", requires=(
    "task", lambda c: c.task == "temporal_link", "--task temporal_link"))
_NODE = ("task", lambda c: c.task == "node", "--task node (--link-metric for links)")


@dataclass
class TrainConfig:
    """Hyperparameters and run options of ``gnnscale train`` (defaults are the CLI's): one field per
    option, whose :func:`option` metadata is the option's one table row (see the module)."""

    epochs: int = option(
        10, "training", at_least=1,
        help="training epochs")
    fanouts: Sequence[int] = option(
        (10, 10), "sampling",
        applies=SAMPLED_MODES, why="chunk pipelining trains on full neighbourhoods (every in-edge); set the depth "
        "with --num-layers L (or give --fanouts -1,-1,...)",
        help="neighbors per hop from the seeds outwards; -1 = all; one per layer")
    eval_fanouts: Sequence[int] | None = option(
        None, "sampling",
        applies=SAMPLED_MODES, why=_EXACT_EVAL,
        help="fanouts for evaluation (default: --fanouts)")
    relation_fanouts: dict = option(
        {}, "sampling", metavar="JSON",
        applies={DATA_PARALLEL}, why="typed graphs train data parallel",
        help="typed graphs: training fanouts of named relations, e.g. '{\"cites\": [5, 5]}' (a mapping in a --config "
        "file); the other relations take --fanouts, each list as many hops as --fanouts")
    batch_size: int = option(
        512, "training", at_least=1,
        applies=SAMPLED_MODES, why="a chunk (a part of the partition) is the micro-batch; re-partition into more "
        "parts for smaller ones",
        help="seed nodes per step per worker")
    eval_batch_size: int = option(
        2048, "sampling", at_least=1,
        applies=SAMPLED_MODES, why="chunk pipelining evaluates the whole graph layer by layer",
        help="seed nodes per evaluation step per worker")
    hidden: int = option(
        128, "model", at_least=1,
        help="hidden size")
    lr: float = option(
        0.003, "training", at_least=0.0,
        help="Adam learning rate")
    weight_decay: float | str | dict = option(
        0.0, "training", metavar="DECAY", parse=weight_decay_value,
        help="Adam's weight decay: one number for every parameter, or by parameter-name prefix, e.g. convs=0.01,5e-4 "
        "(GCNII's: 0.01 on the convolutions, 5e-4 on the rest: encoder and head; without a plain number the "
        "parameters no prefix names get 0); a prefix that names no parameter of the model is refused, listing "
        "the model's. The learned rows of a typed graph's featureless node types (sharded by owner, trained by "
        "a sparse Adam as DistDGL's SparseAdam) take no weight decay")
    dropout: float = option(
        0.5, "model", at_least=0.0, below=1.0,
        help="dropout between layers")
    head_dropout: float = option(
        0.0, "model", at_least=0.0, below=1.0,
        help="dropout on the input of the model's linear head (the output layer of --layer gcnii and of --jk cat|max "
        "models; GCNII's recipe drops there too), keyed like --dropout")
    seed: int = option(
        0, "training",
        help="seed of sampling, shuffling, initial weights and partitioning")
    eval_every: int = option(
        1, "training", at_least=0,
        help="evaluate on val/test every N epochs (and after the last); 0: never")
    early_stop_patience: int | None = option(
        None, "training", at_least=1,
        requires=("eval_every", lambda c: c.eval_every > 0, "--eval-every N (N >= 1)"),
        help="stop when the validation figure of the selection metric (--metric, --link-metric) has not improved in "
        "N evaluations; the best evaluation's weights are restored for the final evaluation and --save-model")
    max_steps: int | None = option(
        None, "training", at_least=1,
        applies=SAMPLED_MODES, why="an epoch is one step (every chunk once)",
        help="cap on steps per epoch (for benchmarks); default: whole epochs")
    timeout: float = option(
        300.0, "run", at_least=1e-9,
        help="seconds before a collective with a silent peer fails")
    metrics: str | None = option(
        None, "run", metavar="FILE",
        help="write per-epoch figures and final val_acc/test_acc/epoch_seconds/bytes as JSON")
    progress: bool | None = option(
        None, "run",
        help="progress bar (default: only on a terminal, never under CI)")
    verify: bool = option(
        True, "run",
        help="check each part's sha256 before training")
    sampler_backend: str = option(
        "auto", "sampling", choices=("auto", "numba", "torch"),
        applies=SAMPLED_MODES, why=_SAMPLES_NOTHING,
        help="sampling kernels: compiled numba on CPU (auto) or plain torch; identical draws")
    sampler: str = option(
        "neighbor", "sampling", choices=("neighbor", "labor"),
        applies=SAMPLED_MODES, why=_SAMPLES_NOTHING,
        help="training draws: neighbor (each seed draws its --fanouts neighbours independently) or labor "
        "(layer-neighbour sampling, LABOR-0 as GraphBolt's LayerNeighborSampler: one uniform per candidate "
        "neighbour shared by every seed of a hop, a seed of in-degree d keeps a neighbour iff it is below "
        "fanout / d: the fan-out in expectation, far fewer distinct nodes and feature rows per batch); "
        "evaluation draws neighbours")
    cache_policy: str = option(
        "none", "data",
        applies=SAMPLED_MODES, why=_WHOLE_FEATURES,
        help="remote feature rows to cache: none, degree (most-referenced halo nodes), presample (access counts over "
        "--presample-epochs sampled epochs), file (--cache-file ids)")
    cache_size: str = option(
        "10%", "data", parse=cache_size_value,
        applies=SAMPLED_MODES, why=_WHOLE_FEATURES,
        requires=("cache_policy", lambda c: c.cache_policy != "none", "--cache-policy degree|presample|file"),
        help="cache size: rows=N, bytes=64MB, fraction=0.1 or 10% of the remote rows (0 to 100%; rows or bytes "
        "beyond them are clamped)")
    cache_file: str | None = option(
        None, "data", metavar="FILE",
        applies=SAMPLED_MODES, why=_WHOLE_FEATURES,
        requires=("cache_policy", lambda c: c.cache_policy == "file", "--cache-policy file"),
        help="for --cache-policy file: .npy of int64 global ids")
    presample_epochs: int = option(
        2, "data", at_least=1,
        applies=SAMPLED_MODES, why=_WHOLE_FEATURES,
        requires=("cache_policy", lambda c: c.cache_policy == "presample", "--cache-policy presample"),
        help="epochs sampled to count accesses (presample policy)")
    host_features: bool | None = option(
        None, "data", off_everywhere=True,
        applies=SAMPLED_MODES, why=_WHOLE_FEATURES,
        help="workers on one host read each other's feature rows straight from the partition folder (memory-mapped: "
        "the host's page cache holds one copy) instead of asking their owners; owners on other hosts still "
        "answer through the communicator. Rows read so count as feature_rows_host. Default: on where it applies "
        "(sampled modes, untyped graphs, no --net-bandwidth-gbps); --no-host-features sends every remote row "
        "through the communicator")
    host_graph: bool | None = option(
        None, "data", off_everywhere=True,
        applies=SAMPLED_MODES, why=_SAMPLES_NOTHING,
        requires=("exchange", lambda c: c.exchange == "exact",
                  "--exchange exact (historical and local exchange never sample other parts' nodes)"),
        help="workers on one host sample each other's nodes themselves from the partition folder's CSCs "
        "(memory-mapped), with the same draws as the owners', instead of asking them; with every worker on one "
        "host sampling exchanges nothing. Exact exchange, untyped graphs. Default: on where it applies (as "
        "--host-features, and --exchange exact); --no-host-graph asks the owners")
    pipeline: bool = option(
        False, "data",
        applies=SAMPLED_MODES, why=_NOT_FETCHED,
        help="sample and fetch the next batches in a background thread while the current one trains")
    pipeline_depth: int = option(
        2, "data", at_least=1,
        applies=SAMPLED_MODES, why=_NOT_FETCHED,
        requires=("pipeline", lambda c: bool(c.pipeline), "--pipeline"),
        help="batches prepared ahead (queue depth)")
    net_bandwidth_gbps: float | None = option(
        None, "data", above=0.0,
        help="model a network link of this bandwidth on one machine (reported as modelled)")
    net_latency_ms: float = option(
        0.05, "data", at_least=0.0,
        requires=("net_bandwidth_gbps", lambda c: bool(c.net_bandwidth_gbps), "--net-bandwidth-gbps G"),
        help="latency per exchange of the modelled link")
    # every mode; which values each mode takes: gnnscale.planning.plan.check_options
    exchange: str = option(
        "exact", "exchange", choices=MODES,
        help="exact: sampling crosses partitions; historical: remote nodes before the last hop use their owner's "
        "recent embeddings (halo tables, no remote sampling); local: drop cross-partition edges (the cheap "
        "baseline)")
    staleness: int = option(
        4, "exchange", parse=staleness_value,
        applies={DATA_PARALLEL, CHUNK_PIPELINE},
        why="a layer pipeline reads no stale rows (--exchange historical is data-parallel)",
        requires=("exchange", lambda c: c.exchange == "historical" or c.chunks, "--exchange historical (or --chunks)"),
        help="historical: no halo embedding older than this many steps is used (>= 2)")
    embedding_dtype: str = option(
        "float32", "exchange", choices=("float32", "bfloat16", "float16"),
        applies={DATA_PARALLEL}, why="only --exchange historical keeps halo tables in this dtype",
        requires=_HISTORICAL,
        help="historical: dtype of the halo tables and of the pushed embeddings (16-bit halves both)")
    halo_features: str = option(
        "hold", "exchange", choices=("hold", "fetch"),
        applies={DATA_PARALLEL}, why="only --exchange historical holds halo features",
        requires=_HISTORICAL,
        help="historical: hold the input features of the halo (fetched once at start-up; halo rows x features x 4 B "
        "per worker), so training fetches none; or fetch them per step")
    eval_method: str = option(
        "auto", "sampling", choices=("auto", "layerwise", "sampled"),
        applies=SAMPLED_MODES, why=_EXACT_EVAL,
        help="layerwise: full-graph inference layer by layer; sampled: with --eval-fanouts; auto: layerwise in "
        "historical mode or when every eval fanout is -1")
    layer: str | type = option(
        "sage", "model",
        help="message-passing layer: sage, gcn, gat, gin, gine (edge features), gcnii, an import path module:Class "
        "(called as layer((x_src, x_dst), edge_index); e.g. a PyG layer, torch_geometric.nn:SAGEConv, or "
        "mylayers:MyConv for ./mylayers.py: the working folder is searched too; see README), or dgl:Class (needs "
        "DGL, which needs torch <= 2.2.1); typed graphs: rgcn, hgt, rel:<layer>")
    layer_kwargs: dict = option(
        {}, "model", metavar="JSON",
        help="extra keyword arguments of every layer, e.g. '{\"heads\": 4}'")
    # a user's whole model (gnnscale.nn.user_model): "pkg.module:Class" or an nn.Module class, built as
    # Class(in_channels=F, hidden_channels=H, out_channels=C, num_layers=L, **model_kwargs); None: the layer
    # stack; check_model_options names the options that need the layer stack
    model: str | type | None = option(
        None, "model", metavar="MODULE:CLASS",
        applies={DATA_PARALLEL}, why=_USER_MODEL_DP,
        help="a whole PyG model instead of the layer stack, e.g. torch_geometric.nn.models:GraphSAGE: any nn.Module "
        "called as model(x, edge_index) on each sampled subgraph, built as Class(in_channels=F, "
        "hidden_channels=--hidden, out_channels=C, num_layers=L[, dropout=--dropout], **--model-kwargs) "
        "(docs/training.md)")
    model_kwargs: dict = option(
        {}, "model", metavar="JSON",
        applies={DATA_PARALLEL}, why=_USER_MODEL_DP,
        requires=("model", lambda c: c.model is not None, "--model MODULE:CLASS"),
        help="extra keyword arguments of --model's class, e.g. '{\"jk\": \"cat\"}'")
    device: str = option(
        "auto", "run", choices=DEVICES,
        help="where the model, the batches' blocks and rows and the feature cache live: cpu, cuda (one worker per "
        "GPU, gradients over NCCL; sampling and remote fetches stay on the host over gloo) or auto (cuda when a "
        "GPU is visible, else cpu; default)")
    norm: str = option(
        "none", "model", choices=("none", "batch", "layer"),
        help="normalization after each hidden layer")
    residual: bool = option(
        False, "model",
        help="add each layer's input to its output where shapes agree")
    # every mode; not with pipeline stages (gnnscale.planning.plan.check_options)
    jk: str = option(
        "none", "model", choices=("none", "cat", "max"),
        help="jumping-knowledge readout")
    # off and auto in every mode; on where gnnscale.planning.plan.check_edge_options allows it
    edge_features: str = option(
        "auto", "model", choices=("auto", "on", "off"),
        help="give the layers each edge's features (the partition's edge_attr, sampled with every block, remote rows "
        "sent by their owners): auto = on when the partition has them and the layer reads edge_attr (gat, "
        "gat-pyg, gine, torch_geometric.nn:TransformerConv, ...) in data-parallel training of node targets, "
        "else off (logged); on (refused where it cannot be); off")
    pipeline_stages: int = option(
        1, "pipeline", metavar="K", at_least=1,
        help="split the layers into K consecutive stages, one worker each; micro-batches flow through them (1: every "
        "worker holds the whole model)")
    stage_layers: Sequence[int] | None = option(
        None, "pipeline", metavar="N,N,...",
        applies=_STAGES, why="data-parallel workers hold every layer; give --pipeline-stages K",
        help="layers per stage, e.g. 8,8 (default: balanced)")
    micro_batches: int = option(
        4, "pipeline", metavar="M", at_least=1,
        applies=_STAGES, why="a data-parallel step is one batch of --batch-size seeds per worker; give "
        "--pipeline-stages K for micro-batches",
        help="micro-batches of --batch-size seeds per optimizer step (gradients over all M are exact)")
    schedule: str = option(
        "1f1b", "pipeline", choices=("gpipe", "1f1b"),
        applies=_STAGES, why="there is no pipeline to schedule; give --pipeline-stages K",
        help="gpipe: M forwards then M backwards (holds M micro-batches); 1f1b: one forward one backward (holds at "
        "most K); both flush before the optimizer step")
    chunks: bool = option(
        False, "pipeline",
        help="chunk pipelining (GNNPipe): full-graph training of a deep model (e.g. --layer gcnii --num-layers 16), "
        "one step per epoch; the parts of --parts-dir are the chunks that flow through the K stages (--workers "
        "K; with --dataset the graph is cut into --micro-batches chunks); a neighbour in a chunk that has not "
        "yet passed a layer is read from the previous pass (within --staleness); --fanouts and --batch-size do "
        "not apply")
    halo_gradients: bool = option(
        True, "pipeline",
        applies={CHUNK_PIPELINE}, why="only chunk pipelining reads neighbour rows from stage tables",
        help="--chunks: the gradient of each neighbour row a chunk reads from a table is added to that row's own "
        "gradient when its chunk runs backward (in this pass, or in the next one for a chunk that ran before; "
        "as PipeGCN does), so no edge's gradient is dropped; each stage holds every chunk's halo gradient per "
        "layer until its owners took it. --no-halo-gradients drops them (GNNAutoScale's historical embeddings)")
    num_layers: int | None = option(
        None, "model", at_least=1,
        help="model layers (default: the number of fanouts; must match it)")
    checkpoint_dir: str | None = option(
        None, "checkpoint", metavar="DIR",
        help="write checkpoints here (model, optimizer, epoch and step, RNG states, cache ids; atomic, with a sha256 "
        "per file); under torchrun a restarted group resumes from the newest by itself")
    checkpoint_every: int | None = option(
        None, "checkpoint", metavar="N", at_least=1,
        requires=_CHECKPOINT_DIR,
        help="a checkpoint every N steps (default: after every epoch)")
    keep_checkpoints: int = option(
        3, "checkpoint", metavar="K", at_least=1,
        requires=_CHECKPOINT_DIR,
        help="keep the newest K checkpoints")
    resume: bool = option(
        False, "checkpoint", negatable=False,
        requires=_CHECKPOINT_DIR,
        help="continue from the newest valid checkpoint in --checkpoint-dir (a damaged newest one is reported and "
        "the one before it used); the run's options must match the checkpoint's")
    save_model: str | None = option(
        None, "checkpoint", metavar="FILE",
        help="write the trained model at the end (weights, layer spec, feature and class counts); read it with "
        "gnnscale.load_model(FILE), `gnnscale evaluate` or `gnnscale predict`")
    tensorboard: str | None = option(
        None, "run", metavar="DIR",
        help="write TensorBoard scalars here (rank 0): per epoch loss, accuracies, stage seconds, bytes by category, "
        "cache hit rate, embedding ages; per --log-every steps loss and step time (needs the tensorboard "
        "package: pip install 'gnnscale[tensorboard]')")
    log_every: int | None = option(
        None, "run", metavar="N", at_least=1,
        requires=("tensorboard", lambda c: bool(c.tensorboard), "--tensorboard DIR"),
        help="with --tensorboard: rank 0's loss and step time every N steps")
    # link and edge tasks train data parallel on a partition with a link split (plan.check_link_options)
    task: str = option(
        "node", "task", choices=("node", "link", "edge", "temporal_link"),
        help="node: classify nodes; link: score node pairs, trained on the partition's training edges (a split made "
        "by --edge-split or an ogbl-* dataset's own); edge: classify the split's labelled edges or regress "
        "their targets (a split with edge labels: random_link_split(edge_label=...)); temporal_link: each event of "
        "a temporal partition from its past, beside EdgeBank (docs/temporal.md)")
    decoder: str = option(
        "dot", "task", choices=("dot", "mlp", "distmult"),
        applies={DATA_PARALLEL}, why=_LINK_DP,
        requires=_LINK,
        help="how a pair (u, v) is scored from its embeddings: dot product, an MLP over their Hadamard product, or "
        "DistMult (a learned diagonal per relation)")
    link_loss: str = option(
        "bce", "task", choices=("bce", "margin"),
        applies={DATA_PARALLEL}, why=_LINK_DP,
        requires=_LINK,
        help="binary cross-entropy with logits, or a margin loss relu(1 - s_pos + s_neg)")
    neg_sampling: str = option(
        "uniform", "task", choices=("uniform", "per_source", "in_batch"),
        applies={DATA_PARALLEL}, why=_LINK_DP,
        requires=_LINK,
        help="negatives: node pairs uniform over all nodes, each positive's source with a uniform destination "
        "(ogbl-citation2), or the batch's other destinations; drawn without communication")
    num_negatives: int = option(
        1, "task", metavar="K", at_least=1,
        applies={DATA_PARALLEL}, why=_LINK_DP,
        requires=_LINK,
        help="negatives per positive edge")
    filter_negatives: bool = option(
        False, "task",
        applies={DATA_PARALLEL}, why=_LINK_DP,
        requires=_LINK,
        help="drop negatives that are edges of the graph (the destination's owner checks)")
    exclude_seed_edges: bool = option(
        True, "task",
        applies={DATA_PARALLEL}, why=_LINK_DP,
        requires=("task", lambda c: c.task in ("link", "edge"), "--task link or edge"),
        help="remove each batch's own edges (and their reverses) from its sampled neighbourhoods, so a model cannot "
        "read the edge it scores (DGL's exclude='reverse_id'); --no-exclude-seed-edges keeps them, as the "
        "full-batch graph auto-encoder does")
    link_metric: str | None = option(
        None, "task", metavar="auc|hits@K|mrr", parse=link_metric_value,
        applies={DATA_PARALLEL}, why=_LINK_DP,
        requires=_LINK,
        help="what evaluation reports and selects on (default: the split's: auc and average precision for "
        "--edge-split, OGB's Hits@K or MRR for ogbl-*)")
    # --task temporal_link (gnnscale.tasks.temporal_task; what it refuses: plan.check_temporal_options)
    temporal_split: str = option("0.70,0.15,0.15", "task", metavar="TRAIN,VAL,TEST", **_TEMPORAL_ONLY,
                                 parse=temporal_split_value,
        help="the events' chronological split by time (events at a boundary's time go to the later split)")
    temporal_strategy: str = option("last", "task", choices=("uniform", "last"), **_TEMPORAL_ONLY,
        help="each hop draws among a node's in-edges before the seed's time uniformly, or takes the most recent")
    time_window: int = option(0, "task", at_least=0, **_TEMPORAL_ONLY,
        help="only edges in [t - W, t) are sampled (the graph's time unit; 0: no window)")
    time_cut: str = option("<", "task", choices=("<", "<="), **_TEMPORAL_ONLY,
        help="edges strictly before the seed's time, or also at it ('<=': the scored event is in view, a leak)")
    pair_features: bool = option(True, "task", **_TEMPORAL_ONLY,
        help="score each pair's own history before t beside the embeddings (events both ways, time since the last)")
    eval_negatives: int = option(100, "task", metavar="K", at_least=1, **_TEMPORAL_ONLY,
        help="negatives per positive of the MRR (half historical, TGB's); AP/AUC: one random negative each")
    eval_events: int = option(0, "task", metavar="N", at_least=0, **_TEMPORAL_ONLY,
        help="score about N events of each evaluated split (each kept by its own key's draw); 0: all")
    # node targets, every mode; whether they fit the partition's target kind: plan.check_target_options
    metric: str | None = option(
        None, "targets", choices=NODE_METRICS,
        requires=_NODE,
        help="what evaluation reports and selects on (default: the partition's target kind's: accuracy for classes, "
        "ROC-AUC for binary and multilabel targets (mean over labels with both classes), RMSE for regression); "
        "one that does not fit the kind is refused")
    pos_weight: str | float | None = option(
        None, "targets", metavar="auto|FLOAT", parse=pos_weight_value,
        requires=_NODE,
        help="binary and multilabel targets: weight of the positives in the binary cross-entropy, auto (negatives / "
        "positives of the training labels, per label) or a number")

    def model_layers(self) -> int:
        """The model's depth: ``num_layers``, else one layer per fanout."""
        return int(self.num_layers or len(self.fanouts))

    def check(self) -> "TrainConfig":
        """Every option's value within its range and among its choices (:data:`OPTIONS`).

        Raises:
            OptionError: naming the option, what it may be and what was found.
        """
        for spec in OPTIONS.values():  # the kinds taken as text too: "10,10" as the command line takes it
            value = getattr(self, spec.name)
            if spec.kind == "ints":
                setattr(self, spec.name, int_list(spec.name, value))
            elif spec.kind == "mapping" and not isinstance(value, dict):
                raise OptionError(f"{flag(spec.name)} expects a mapping, e.g. {{'heads': 4}}; found {value!r}")
        for spec in OPTIONS.values():
            value = getattr(self, spec.name)
            if value is None and spec.nullable:  # unset
                continue
            if spec.choices is not None and value not in spec.choices:
                raise OptionError(f"{flag(spec.name)} must be one of {', '.join(spec.choices)}; found {value!r}")
            if spec.kind == "int" and spec.at_least is not None and (
                    isinstance(value, bool) or not isinstance(value, int) or value < spec.at_least):
                raise OptionError(f"{flag(spec.name)} must be an integer of at least {spec.at_least}; found {value!r}")
            lo, hi = spec.at_least, spec.below
            if spec.kind == "float" and (lo is not None or hi is not None) and (
                    isinstance(value, bool) or not isinstance(value, (int, float))
                    or (lo is not None and value < lo) or (hi is not None and value >= hi)):
                span = f"in [{lo:g}, {hi:g})" if hi is not None else f"at least {lo:g}"
                raise OptionError(f"{flag(spec.name)} must be a number {span}; found {value!r}")
            if spec.above is not None and not value > spec.above:
                raise OptionError(f"{flag(spec.name)} must be above {spec.above:g}; found {value!r}")
        for spec in OPTIONS.values():
            value = getattr(self, spec.name)
            if spec.parse is not None and not (value is None and spec.nullable):
                setattr(self, spec.name, spec.parse(value))
        if self.model is not None:
            check_model_options(self)
        elif self.head_dropout > 0 and self.jk == "none" and self.layer in _HEADLESS_LAYERS:
            raise OptionError(f"--head-dropout drops the input of the model's linear head, found --layer {self.layer} "
                              "without --jk, whose output layer is a convolution (--dropout already drops its input); "
                              "use --layer gcnii or --jk cat|max, or leave --head-dropout out")
        if self.relation_fanouts:  # depends on --fanouts
            from gnnscale.samplers.fanouts import typed_fanouts

            typed_fanouts(self.fanouts, list(self.relation_fanouts), len(self.fanouts), self.relation_fanouts)
        return self


def check_model_options(cfg: TrainConfig) -> None:
    """``--model`` (a user's whole model, gnnscale.nn.user_model) with the options that need the engine's own
    layer stack, refused by name; ``--eval-method auto`` becomes ``sampled`` (a whole model evaluates on
    sampled subgraphs: layer-wise inference runs one layer of the stack at a time).

    Raises:
        OptionError: one line naming the option and why it does not apply to --model.
    """
    if not (isinstance(cfg.model, type) or isinstance(cfg.model, str) and ":" in cfg.model):
        raise OptionError(f"{flag('model')} expects an import path 'pkg.module:Class' or an nn.Module class, e.g. "
                          f"torch_geometric.nn.models:GraphSAGE; found {cfg.model!r}")
    name = cfg.model if isinstance(cfg.model, str) else getattr(cfg.model, "__qualname__", repr(cfg.model))
    head = f"does not apply to --model {name}: it needs the engine's own layer stack"
    refused = [
        (cfg.exchange == "historical", f"--exchange historical {head} (its halo tables hold each layer's embeddings); "
         "use --exchange exact or local"),
        (cfg.pipeline_stages > 1, f"--pipeline-stages {cfg.pipeline_stages} {head} (it splits the layers into "
         "stages); use data parallelism (--pipeline-stages 1)"),
        (cfg.chunks, f"--chunks {head} (chunk pipelining runs its layers over the parts); leave it out"),
        (cfg.eval_method == "layerwise", f"--eval-method layerwise {head} (inference one layer at a time over every "
         "node); use --eval-method sampled or auto"),
        (cfg.layer != "sage" or bool(cfg.layer_kwargs), f"--layer/--layer-kwargs do not apply to --model {name}: they "
         "build the engine's layer stack, which --model replaces; give the model's options in --model-kwargs"),
        (cfg.head_dropout > 0, f"--head-dropout does not apply to --model {name}: it drops the input of the engine's "
         "linear head; give the model's own dropout in --model-kwargs"),
        (cfg.norm != "none" or cfg.residual or cfg.jk != "none", f"--norm/--residual/--jk do not apply to --model "
         f"{name}: they are options of the engine's layer stack; give the model's own in --model-kwargs (e.g. "
         "'{\"norm\": \"batch\", \"jk\": \"cat\"}' for PyG's GraphSAGE)"),
    ]
    for bad, message in refused:
        if bad:
            raise OptionError(message)
    if cfg.eval_method == "auto":
        cfg.eval_method = "sampled"


def _spec(f) -> OptionSpec:
    kind = KINDS.get(f.type.removesuffix(" | None"))
    if kind is None:
        raise ValueError(f"TrainConfig.{f.name}: {f.type!r} is not a kind the options know ({', '.join(KINDS)}); "
                         "give it one in gnnscale.config.KINDS")
    facts = dict(f.metadata["option"])
    if f.default is MISSING:
        facts["default"] = f.default_factory()
    return OptionSpec(name=f.name, kind=kind, **facts)


#: every option, in field order: its one row
OPTIONS: dict[str, OptionSpec] = {f.name: _spec(f) for f in fields(TrainConfig)}
#: option -> its choices
CHOICES = {name: spec.choices for name, spec in OPTIONS.items() if spec.choices is not None}
#: option -> the least integer it may take
AT_LEAST = {name: spec.at_least for name, spec in OPTIONS.items() if spec.kind == "int" and spec.at_least is not None}
#: options that hold a list of integers (None: unset, where the default is None)
INT_LISTS = tuple(name for name, spec in OPTIONS.items() if spec.kind == "ints")
