"""Run options of ``gnnscale train`` and their checks.

Torch-free on purpose: the launcher builds and checks a :class:`TrainConfig` before it starts
any worker, without importing torch (each worker imports it anyway).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Sequence

from gnnscale.errors import ExchangeError, GnnscaleError

MODES = ("exact", "historical", "local")  # --exchange: see gnnscale.history
DEVICES = ("cpu", "cuda", "auto")  # --device: see gnnscale.process.device
CHOICES = {
    "exchange": MODES, "device": DEVICES, "halo_features": ("hold", "fetch"),
    "eval_method": ("auto", "layerwise", "sampled"), "embedding_dtype": ("float32", "bfloat16", "float16"),
    "sampler_backend": ("auto", "numba", "torch"), "norm": ("none", "batch", "layer"), "jk": ("none", "cat", "max"),
    "schedule": ("gpipe", "1f1b"), "task": ("node", "link", "edge"), "decoder": ("dot", "mlp", "distmult"),
    "link_loss": ("bce", "margin"), "neg_sampling": ("uniform", "per_source", "in_batch"),
    "edge_features": ("auto", "on", "off"),
}
# option -> the least value it may take
AT_LEAST = {
    "epochs": 1, "batch_size": 1, "eval_batch_size": 1, "hidden": 1, "eval_every": 0, "max_steps": 1,
    "presample_epochs": 1, "pipeline_depth": 1, "pipeline_stages": 1, "micro_batches": 1, "num_layers": 1,
    "checkpoint_every": 1, "keep_checkpoints": 1, "log_every": 1, "num_negatives": 1,
}

#: what works instead of a ``dgl:`` layer where DGL cannot load (its wheels need an old torch)
DGL_ADVICE = ("DGL 2.1's wheels need torch <= 2.2.1, so install it in a separate environment with that torch "
              "(pip install torch==2.2.1 dgl==2.1.0, then gnnscale there), or use a built-in layer (--layer sage, gcn, "
              "gat, gin, gcnii) or a PyG layer by its import path (--layer torch_geometric.nn:SAGEConv)")


class OptionError(GnnscaleError):
    """An option whose value is out of its range or not one of its choices."""


@dataclass
class TrainConfig:
    """Hyperparameters and run options of ``gnnscale train`` (defaults are the CLI's)."""

    epochs: int = 10
    fanouts: Sequence[int] = (10, 10)
    eval_fanouts: Sequence[int] | None = None  # None: same as fanouts
    relation_fanouts: dict = field(default_factory=dict)  # typed graphs: {relation: fanouts}, others --fanouts
    batch_size: int = 512
    eval_batch_size: int = 2048
    hidden: int = 128
    lr: float = 0.003
    # Adam's L2 decay: one number for every parameter, or by parameter-name prefix, e.g. "convs=0.01,5e-4"
    # (a mapping {"convs": 0.01, "": 5e-4} too): see parse_weight_decay
    weight_decay: float | str | dict = 0.0
    dropout: float = 0.5
    seed: int = 0
    eval_every: int = 1  # 0: never evaluate (benchmarks)
    max_steps: int | None = None  # cap on steps per epoch (benchmarks); None: the whole epoch
    timeout: float = 300.0
    metrics: str | None = None
    progress: bool | None = None  # None: a bar only when stderr is a terminal and not in CI
    verify: bool = True
    sampler_backend: str = "auto"  # "auto" | "numba" | "torch" (identical draws)
    cache_policy: str = "none"  # none | degree | presample | file | a registered name
    cache_size: str = "10%"  # rows=N, bytes=64MB, fraction=0.1 or 10% (of the remote rows)
    cache_file: str | None = None
    presample_epochs: int = 2
    # ranks on one host read each other's feature rows (sample each other's nodes) from the partition
    # folder; None (auto): where it applies (planning/plan.py host_reads), True / False as given
    host_features: bool | None = None
    host_graph: bool | None = None
    pipeline: bool = False  # sample/fetch batch i+1 in a thread while batch i trains
    pipeline_depth: int = 2
    net_bandwidth_gbps: float | None = None  # a modelled link (benchmarks on one machine)
    net_latency_ms: float = 0.05
    exchange: str = "exact"  # exact | historical | local (see gnnscale.history.halo)
    staleness: int = 4  # historical mode: no embedding older than this many steps is used
    embedding_dtype: str = "float32"  # float32 | bfloat16 | float16: halo tables and pushed rows
    halo_features: str = "hold"  # historical: hold the halo's input rows (fetched once) | fetch them per step
    eval_method: str = "auto"  # auto | layerwise | sampled (auto: layerwise when exact anyway)
    layer: str | type = "sage"  # zoo name, module:Class, or a layer class (see gnnscale.nn.layers)
    layer_kwargs: dict = field(default_factory=dict)
    # a user's whole model (gnnscale.nn.user_model): "pkg.module:Class" or an nn.Module class, built as
    # Class(in_channels=F, hidden_channels=H, out_channels=C, num_layers=L, **model_kwargs); None: the layer stack
    model: str | type | None = None
    model_kwargs: dict = field(default_factory=dict)
    device: str = "auto"  # cpu | cuda | auto (cuda when a GPU is visible): see gnnscale.process.device
    norm: str = "none"  # none | batch | layer
    residual: bool = False
    jk: str = "none"  # none | cat | max
    # edge features (docs/targets_and_edge_features.md section 5): auto = on when the partition has them,
    # a layer reads edge_attr and the mode runs them; on (refused where they cannot be); off
    edge_features: str = "auto"
    pipeline_stages: int = 1  # K > 1: the layers split into K stages, one worker each (see gnnscale.parallel.layer_pipeline)
    stage_layers: Sequence[int] | None = None  # layers per stage; None: balanced
    micro_batches: int = 4  # micro-batches of batch_size seeds per optimizer step (pipeline)
    schedule: str = "1f1b"  # gpipe | 1f1b (both flushed: exact gradients)
    chunks: bool = False  # chunk pipelining (GNNPipe): full-graph training, the parts are the micro-batches
    halo_gradients: bool = True  # chunks: a halo read's gradient goes to the row's own chunk (PipeGCN-style)
    num_layers: int | None = None  # model layers; None: one per fanout
    checkpoint_dir: str | None = None  # where checkpoints go (see gnnscale.training.checkpoint)
    checkpoint_every: int | None = None  # steps between checkpoints; None: after every epoch
    keep_checkpoints: int = 3  # the newest K are kept
    resume: bool = False  # continue from the newest valid checkpoint in checkpoint_dir
    save_model: str | None = None  # write the trained model here at the end (gnnscale.load_model)
    tensorboard: str | None = None  # TensorBoard scalars here (rank 0)
    log_every: int | None = None  # with tensorboard: loss and step time every N steps
    # link prediction (docs/link_prediction.md): seed edges of the partition's link split
    task: str = "node"  # node (classification) | link (prediction) | edge (classification or regression)
    decoder: str = "dot"  # link: dot | mlp (Hadamard product, then an MLP) | distmult
    link_loss: str = "bce"  # link: bce (binary cross-entropy with logits) | margin (hinge, margin 1)
    neg_sampling: str = "uniform"  # link: uniform | per_source (corrupt the destination) | in_batch
    num_negatives: int = 1  # link: negatives per positive edge
    filter_negatives: bool = False  # link: drop negatives that are edges of the graph (their owner checks)
    exclude_seed_edges: bool = True  # link/edge: a batch's own edges (and reverses) leave its sampled blocks
    link_metric: str | None = None  # link: auc | hits@K | mrr (None: the split's own, e.g. OGB's)
    # node targets (docs/targets_and_edge_features.md section 5): what evaluation reports and selects on
    metric: str | None = None  # accuracy | macro_f1 | micro_f1 | roc_auc | ap | mae | rmse (None: the kind's)
    pos_weight: str | float | None = None  # binary / multilabel: auto (negatives / positives per label) or a number

    def model_layers(self) -> int:
        """The model's depth: ``num_layers``, else one layer per fanout."""
        return int(self.num_layers or len(self.fanouts))

    def check(self) -> "TrainConfig":
        """Every option's value within its range and among its choices.

        Raises:
            OptionError: naming the option, what it may be and what was found.
        """
        for name in INT_LISTS:  # "10,10" as the command line takes it; anything else but integers refused
            setattr(self, name, int_list(name, getattr(self, name)))
        for name in ("layer_kwargs", "relation_fanouts", "model_kwargs"):
            if not isinstance(getattr(self, name), dict):
                raise OptionError(f"--{name.replace('_', '-')} expects a mapping, e.g. {{'heads': 4}}; found "
                                  f"{getattr(self, name)!r}")
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise OptionError(f"--{name.replace('_', '-')} must be one of {', '.join(allowed)}; found "
                                  f"{getattr(self, name)!r}")
        for name, least in AT_LEAST.items():
            value = getattr(self, name)
            if value is None and name in ("max_steps", "num_layers", "checkpoint_every", "log_every"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise OptionError(f"--{name.replace('_', '-')} must be an integer of at least {least}; found {value!r}")
        for name, lo, hi in (("lr", 0.0, None), ("dropout", 0.0, 1.0),
                             ("timeout", 1e-9, None), ("net_latency_ms", 0.0, None)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < lo or (hi is not None and value >= hi):
                span = f"in [{lo:g}, {hi:g})" if hi is not None else f"at least {lo:g}"
                raise OptionError(f"--{name.replace('_', '-')} must be a number {span}; found {value!r}")
        if self.net_bandwidth_gbps is not None and not self.net_bandwidth_gbps > 0:
            raise OptionError(f"--net-bandwidth-gbps must be above 0; found {self.net_bandwidth_gbps!r}")
        default, groups = parse_weight_decay(self.weight_decay)
        if not groups:  # one decay for all: the number, however it was given
            self.weight_decay = default
        check_staleness(self.staleness)
        if self.link_metric is not None:
            parse_link_metric(self.link_metric)
        if self.metric is not None and self.metric not in NODE_METRICS:
            raise OptionError(f"--metric must be one of {', '.join(NODE_METRICS)}; found {self.metric!r}")
        parse_pos_weight(self.pos_weight)
        if self.model is not None:
            check_model_options(self)
        if self.relation_fanouts:
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
        raise OptionError(f"--model expects an import path 'pkg.module:Class' or an nn.Module class, e.g. "
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
        (cfg.norm != "none" or cfg.residual or cfg.jk != "none", f"--norm/--residual/--jk do not apply to --model "
         f"{name}: they are options of the engine's layer stack; give the model's own in --model-kwargs (e.g. "
         "'{\"norm\": \"batch\", \"jk\": \"cat\"}' for PyG's GraphSAGE)"),
        (cfg.task != "node", f"--task {cfg.task} is not supported with --model {name} yet (a whole model trains node "
         "targets); use the built-in layers (--layer) for link and edge tasks"),
    ]
    for bad, message in refused:
        if bad:
            raise OptionError(message)
    if cfg.eval_method == "auto":
        cfg.eval_method = "sampled"


#: options that hold a list of integers (None: unset, where the default is None)
INT_LISTS = ("fanouts", "eval_fanouts", "stage_layers")


def int_list(name: str, value) -> list[int] | tuple[int, ...] | None:
    """The list option ``name``'s value: a sequence of integers as given, a comma-separated string
    (``"10,10"``, as ``--fanouts`` takes it) as a list, None where the option may be unset.

    Raises:
        OptionError: anything else, naming the option (``--fanouts``), what it takes and what was found.
    """
    if value is None and name != "fanouts":
        return None
    if isinstance(value, str):
        try:
            return [int(v) for v in value.split(",") if v.strip()]
        except ValueError:
            pass
    elif isinstance(value, (list, tuple)) and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        return value
    raise OptionError(f"--{name.replace('_', '-')} expects integers, e.g. [10, 10] or '10,10'; found {value!r}")


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ExchangeError(f"exchange mode must be one of {', '.join(MODES)}; found {mode!r}. "
                            "Use --exchange exact (default), historical or local.")
    return mode


def check_staleness(staleness: int) -> int:
    if isinstance(staleness, bool) or int(staleness) != staleness or int(staleness) < 2:
        raise ExchangeError(
            f"the staleness bound must be an integer >= 2 steps; found {staleness!r}. Pushed embeddings "
            "travel while the next step computes, so the freshest row a step can read is 2 steps old."
        )
    return int(staleness)


# Node targets' metrics (docs/targets_and_edge_features.md section 5): each kind's, its default first.
NODE_METRICS = ("accuracy", "macro_f1", "micro_f1", "roc_auc", "ap", "mae", "rmse")
KIND_METRICS = {"class": ("accuracy", "macro_f1", "micro_f1"), "binary": ("roc_auc", "ap", "accuracy", "macro_f1"),
                "multilabel": ("roc_auc", "ap", "micro_f1", "macro_f1"), "regression": ("rmse", "mae")}
#: metrics where lower is better (regression targets): the best epoch has the least
LOWER_IS_BETTER = ("rmse", "mae")


def default_node_metric(kind: str) -> str:
    """The metric a target ``kind`` is judged by without ``--metric``: accuracy, roc_auc, roc_auc, rmse."""
    return KIND_METRICS.get(kind, KIND_METRICS["class"])[0]


def parse_pos_weight(value) -> str | float | None:
    """``--pos-weight``: None, ``"auto"`` or a positive number (a numeric string too)."""
    if value is None or value == "auto":
        return value
    try:
        number = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or not number > 0 or number == float("inf"):
        raise OptionError(f"--pos-weight must be auto or a positive number; found {value!r}. Pass --pos-weight auto "
                          "(negatives / positives of the training labels) or e.g. --pos-weight 3.")
    return number


def parse_link_metric(text: str) -> tuple[str, int | None]:
    """(``auc`` | ``hits`` | ``mrr``, K) of ``--link-metric`` (``auc``, ``mrr`` or ``hits@K``)."""
    t = str(text).strip().lower()
    if t in ("auc", "mrr"):
        return t, None
    if t.startswith("hits@") and t[5:].isascii() and t[5:].isdigit() and int(t[5:]) > 0:
        return "hits", int(t[5:])
    raise OptionError(f"--link-metric must be auc, mrr or hits@K with K a positive integer; found {text!r}. "
                      "Pass e.g. --link-metric auc, --link-metric mrr or --link-metric hits@50.")


def _decay(text, item: str) -> float:
    """One decay of ``--weight-decay``: a finite number of at least 0."""
    try:
        value = float(text) if not isinstance(text, bool) else None
    except (TypeError, ValueError):
        value = None
    if value is None or not 0.0 <= value < float("inf"):
        raise OptionError(f"--weight-decay must be a number of at least 0 or PREFIX=DECAY items; found {item!r} in it. "
                          "Pass e.g. --weight-decay 5e-4 or --weight-decay convs=0.01,5e-4")
    return value


def parse_weight_decay(value) -> tuple[float, dict[str, float]]:
    """``--weight-decay``: (the decay of the parameters no prefix names, {prefix: decay}).

    ``value`` is a number (one decay for every parameter: ``(value, {})``), or items
    ``PREFIX=DECAY`` separated by commas, with at most one plain number for the parameters no
    prefix names (0 without one): ``"convs=0.01,5e-4"`` -> ``(5e-4, {"convs": 0.01})``; or the
    same as a mapping (the key ``""`` or ``"*"`` for the rest). A prefix names the parameters whose
    dotted name (``model.named_parameters()``: ``convs.3.weight1``, ``encoder.weight``,
    ``head.bias``) is the prefix or starts with it and a dot; where several name one parameter, the
    longest wins. Whether each prefix names a parameter of the model is checked where the model is
    built (:func:`gnnscale.process.eager.param_groups`).

    Raises:
        OptionError: an item that is neither a number nor ``PREFIX=DECAY``, a decay below 0, a
            prefix given twice or two plain numbers.
    """
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, str):
        items = []
        for part in value.split(","):
            key, eq, decay = part.strip().rpartition("=")
            items.append((key.strip() if eq else "", decay.strip()))
    else:
        return _decay(value, value), {}
    rest: float | None = None
    groups: dict[str, float] = {}
    for key, decay in items:
        item = f"{key}={decay}" if key else str(decay)
        number = _decay(decay, item)
        if key in ("", "*"):
            if rest is not None:
                raise OptionError(f"--weight-decay takes at most one plain number (the decay of the parameters no "
                                  f"prefix names); found two in {value!r}. Keep one, e.g. convs=0.01,5e-4")
            rest = number
            continue
        parts = key.split(".")
        if not all(p and (p.replace("_", "").isalnum()) and p.isascii() for p in parts):
            raise OptionError(f"--weight-decay prefix {key!r} is not a parameter name's leading part (names and "
                              "indices joined by dots, e.g. convs or convs.0); pass e.g. convs=0.01,5e-4")
        if key in groups:
            raise OptionError(f"--weight-decay names the prefix {key!r} twice in {value!r}; give each prefix once")
        groups[key] = number
    return (rest if rest is not None else 0.0), groups
