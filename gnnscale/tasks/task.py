"""What a run trains: node classification, link prediction or edge classification / regression,
as the one step and loop see it.

A task says which ids an epoch's steps are cut from (training nodes, or positions of the part's
training edges), what turns a batch of them into a sampled :class:`~gnnscale.samplers.block.MiniBatch`
(the node sampler itself, or a :class:`~gnnscale.samplers.link.LinkSampler` around it), how the
model is called on it, its loss and its counts. Data parallelism composes it with everything
else unchanged: the seed schedule, the loader's sample/fetch/copy, DDP, checkpoints, metrics.
"""
from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable

import torch
import torch.nn.functional as F

from gnnscale.tasks.temporal_task import TemporalLinkTask


@runtime_checkable
class Task(Protocol):
    """What a run trains, as the axes see it.

    Attributes:
        name: ``node``, ``link`` or ``edge`` (the metrics' ``task``; never branched on).
        metric: the evaluation's primary metric (``accuracy``, ``rmse``, ``auc``, ``mrr`` ...).
        out_dim: the model's outputs per node (a node target's C, 1 or D) or per edge (an edge
            head's C or D); None: the model's embedding width (a link decoder scores pairs).
        keyed_dropout: whether the step's dropout masks are keyed by each row's node (the loader
            then fills ``MiniBatch.node_keys``; masks equal on any number of workers).
        seed_mean: whether the loss is a mean over the step's seeds of every rank (each rank
            then scales its own mean by its share of them, DDP averaging the ranks').
        splits: the splits an offline evaluation of a saved model reports.
        own_edge_features: whether the task gives the blocks their edge features itself (the
            temporal task: each edge's age) instead of the sampler reading the part's.
    """

    name: str
    metric: str
    out_dim: int | None
    keyed_dropout: bool
    seed_mean: bool
    splits: tuple[str, ...]
    own_edge_features: bool

    def train_ids(self) -> torch.Tensor:
        """int64 [n]: what an epoch's steps are cut from (global node ids, or edge positions)."""

    def batch_sampler(self, node_sampler, comm):
        """``sample(ids, epoch, step) -> MiniBatch`` over ``node_sampler``."""

    def labels(self) -> Callable | None:
        """``ids -> targets`` the loader gathers into ``MiniBatch.y`` (None: the batch brings them)."""

    def forward(self, model, x, blocks, mb, **kw) -> torch.Tensor:
        """The model's outputs for ``mb`` (per seed, or per scored pair)."""

    def loss(self, out: torch.Tensor, mb) -> torch.Tensor:
        """The mean loss of the batch (a scalar)."""

    def correct(self, out: torch.Tensor, mb) -> tuple[float, int]:
        """(right, counted) of the step's outputs, for the training metric."""

    @staticmethod
    def model_misfit(meta: dict, blob: dict) -> str | None:
        """Why a saved model (``blob``, a model file's record) cannot be evaluated on a partition of
        ``meta`` (its meta.json), as "what the partition holds"; None where it fits."""

    def evaluator(self, data, comm, layerwise: bool = False, tables=None, inputs: Callable | None = None):
        """The evaluator of the splits over ``data`` (a :class:`~gnnscale.data.open.WorkerData`):
        ``splits(net, model, names, step) -> {split: value}`` and ``last`` (collective)."""


class NodeTask:
    """Node targets of any kind (``docs/targets_and_edge_features.md`` section 5): seeds are the
    part's training nodes, labels their targets (int64 class ids or 0/1, float32 [n, C] multi-hot,
    float32 [n] / [n, D] values); the model's output width, the loss and the training counts are
    the kind's (:class:`~gnnscale.tasks.node_metrics.NodeTarget`), the evaluation's metric
    ``--metric`` or the kind's default. ``comm``: the ranks whose training labels
    ``--pos-weight auto`` counts (one all-reduce; None: this part's alone)."""

    own_edge_features = False  # the sampler reads the part's edge features

    name = "node"
    keyed_dropout = True  # masks keyed by each row's node: the same on any number of workers
    seed_mean = True  # the loss: the mean over every rank's seeds of the step
    splits = ("train", "val", "test")

    def __init__(self, part, cfg, comm=None) -> None:
        from gnnscale.tasks.node_metrics import NodeTarget, label_counts

        self.part, self.cfg = part, cfg
        self.target = target = NodeTarget.of(part.meta)
        self.out_dim = target.outputs  # the model's outputs: C, 1 (binary), C (multilabel) or D
        self.metric = cfg.metric or target.default_metric()
        counts = None
        if cfg.pos_weight is not None and target.kind in ("binary", "multilabel"):
            counts = label_counts(part.y[part.train_mask], target.kind)
            if comm is not None:
                counts = comm.all_reduce(counts)
        target.weigh(cfg.pos_weight, counts)

    @staticmethod
    def model_misfit(meta: dict, blob: dict) -> str | None:
        """The features and the outputs per node (1 for a binary target) must be the model's."""
        outputs = int((meta.get("target") or {}).get("num_outputs") or meta["num_classes"])
        if int(meta["feature_dim"]) != int(blob["num_features"]) or outputs != int(blob["num_classes"]):
            return f"{meta['feature_dim']} features, {outputs} outputs per node"
        return None

    def train_ids(self) -> torch.Tensor:
        """int64 [n] global ids of this part's training nodes."""
        return torch.nonzero(self.part.train_mask).flatten() + self.part.offset

    def batch_sampler(self, node_sampler, comm):
        return node_sampler

    def labels(self) -> Callable | None:
        part = self.part
        return lambda seeds: part.y[seeds - part.offset]

    def forward(self, model, x, blocks, mb, **kw) -> torch.Tensor:
        return model(x, blocks, **kw)

    def loss(self, out: torch.Tensor, mb) -> torch.Tensor:
        """The kind's mean loss over the batch's seeds (cross-entropy, BCE with logits, MSE)."""
        return self.target.loss(out, mb.y)

    def correct(self, out: torch.Tensor, mb) -> tuple[float, int]:
        """(right, counted) of the step's outputs (:meth:`NodeTarget.correct`)."""
        return self.target.correct(out, mb.y)

    def evaluator(self, data, comm, layerwise: bool = False, tables=None, inputs: Callable | None = None):
        """The nodes' metric over the splits (:class:`~gnnscale.tasks.evaluation.Evaluator`): the
        evaluation sampler's draws, or layer-wise (``layerwise``); ``tables``: historical mode's
        stale-row tables."""
        from gnnscale.tasks.evaluation import Evaluator

        cfg = data.cfg
        return Evaluator(data.part, comm, data.features, data.degrees, data.eval_sampler, cfg.eval_batch_size,
                         layerwise, tables=tables, backend=cfg.sampler_backend, dataset=data.part.meta.get("dataset"),
                         inputs=inputs, metric=self.metric)


class PairSeeds:
    """What the tasks that score pairs share (link prediction, edge targets): their seeds are
    positions of the part's training edges (``self.pos``, int64 [2, E_r]), and a saved model
    fits a partition with its features and a link split."""

    own_edge_features = False  # the sampler reads the part's edge features

    pos: torch.Tensor

    @staticmethod
    def model_misfit(meta: dict, blob: dict) -> str | None:
        """The features must be the model's (its outputs are an embedding or an edge head's, not
        the nodes' classes) and the partition must hold the pairs to score (a link split)."""
        if int(meta["feature_dim"]) != int(blob["num_features"]):
            return f"{meta['feature_dim']} features"
        if not meta.get("link"):
            return "no link split; evaluate it on a partition written with --edge-split (or an ogbl-* dataset)"
        return None

    def train_ids(self) -> torch.Tensor:
        """int64 [E_r]: positions of this part's training edges."""
        return torch.arange(self.pos.shape[1], dtype=torch.int64)


class LinkTask(PairSeeds):
    """Link prediction (``docs/link_prediction.md``): seeds are positions of this part's training
    edges (``part.link["train"]``, int64 [2, E_r], sources owned here); a batch's pairs are its
    positive edges and their negatives (``--neg-sampling``, ``--num-negatives``,
    ``--filter-negatives``), scored by the model's decoder; loss ``--link-loss``."""

    name = "link"
    keyed_dropout = False
    seed_mean = False
    splits = ("val", "test")  # the split's held-out pairs and their negatives

    def __init__(self, part, cfg) -> None:
        from gnnscale.config import parse_link_metric
        from gnnscale.samplers.link import NegativeSampler

        self.part, self.cfg = part, cfg
        self.pos = part.link["train"]
        info = part.meta["link"].get("info") or {}
        # a typed graph's split is of one relation: negatives take their ends from its node types,
        # and a DistMult decoder scores with its diagonal
        self.relation = info.get("relation") if part.typed is not None else None
        draw_src = draw_dst = None
        if self.relation is not None:
            from gnnscale.samplers.link import typed_drawer

            names, counts = list(part.typed.meta["node_types"]), part.typed.meta["num_nodes_per_type"]
            s, d = names.index(info["src_type"]), names.index(info["dst_type"])
            draw_src = typed_drawer(part.typed.book, s, int(counts[s]))
            draw_dst = typed_drawer(part.typed.book, d, int(counts[d]))
        self.negatives = NegativeSampler(part.book.num_nodes, cfg.neg_sampling, cfg.num_negatives, seed=cfg.seed,
                                         draw_src=draw_src, draw_dst=draw_dst)
        self.metric = cfg.link_metric or part.meta["link"]["metric"]
        parse_link_metric(self.metric)
        self.out_dim = part.meta["num_classes"]  # the encoder's width as a node classifier's (the decoder scores)

    def batch_sampler(self, node_sampler, comm):
        """A :class:`~gnnscale.samplers.link.LinkSampler` of this part's training edges around the
        node sampler (the owners sample the endpoints' neighbourhoods, as for nodes)."""
        from gnnscale.samplers.link import EdgeFilter, LinkSampler

        part = self.part
        edge_filter = None
        if self.cfg.filter_negatives:
            edge_filter = EdgeFilter(part.indptr, part.indices, part.book, comm=comm, rank=comm.rank,
                                     num_nodes=part.book.num_nodes)
        return LinkSampler(node_sampler, self.pos, self.negatives, comm.rank, edge_filter=edge_filter,
                           exclude=self.cfg.exclude_seed_edges)

    def labels(self) -> Callable | None:
        return None  # the pairs' labels come with the batch (edge_label)

    def forward(self, model, x, blocks, mb, **kw) -> torch.Tensor:
        return model(x, blocks, mb.edge_label_index, relation=self.relation, **kw)

    def loss(self, out: torch.Tensor, mb) -> torch.Tensor:
        from gnnscale.nn.link import link_loss

        return link_loss(out, mb.edge_label, mb.neg_of_pos, self.cfg.link_loss)

    def correct(self, out: torch.Tensor, mb) -> tuple[int, int]:
        """(pairs on the right side of 0, pairs) of the step's scores."""
        from gnnscale.nn.link import pair_correct

        return pair_correct(out, mb.edge_label)

    def evaluator(self, data, comm, layerwise: bool = False, tables=None, inputs: Callable | None = None):
        """The split's ranking metric over the positive and negative pairs
        (:class:`~gnnscale.tasks.link_evaluation.LinkEvaluator`; embeddings layer-wise, or
        sampled: :func:`pair_sampling`)."""
        from gnnscale.tasks.link_evaluation import LinkEvaluator

        return LinkEvaluator(data.part, comm, data.features, data.degrees, self.metric,
                             backend=data.cfg.sampler_backend, inputs=inputs, relation=self.relation,
                             **pair_sampling(data))


class EdgeTask(PairSeeds):
    """Edge classification / regression (``--task edge``; ``docs/link_prediction.md`` section 6):
    seeds are positions of this part's training edges (``part.link["train"]``) as for links, but
    a batch holds the positives only (no negatives), each labelled by ``part.link["train_label"]``
    (int64 class ids, or float32 [n] / [n, D] targets; the loader gathers them by the batch's
    positions into ``mb.y``); the model's :class:`~gnnscale.nn.link.EdgeHead` gives C logits or D
    values per edge. Loss: cross-entropy (classes) or mean squared error (regression); the
    evaluation's primary metric ``accuracy`` or ``rmse`` (lower is better)."""

    name = "edge"
    keyed_dropout = False
    seed_mean = False
    splits = ("val", "test")

    def __init__(self, part, cfg) -> None:
        self.part, self.cfg = part, cfg
        self.pos = part.link["train"]
        self.y = part.link["train_label"]
        label = part.meta["link"]["label"]
        self.regression = label["kind"] == "regression"
        self.out_dim = int(label["dim"] if self.regression else label["num_classes"])  # the head's outputs
        self.metric = edge_metric(label)

    def batch_sampler(self, node_sampler, comm):
        """A :class:`~gnnscale.samplers.link.LinkSampler` of this part's training edges without
        negatives (each batch edge, either direction, left out of its own blocks)."""
        from gnnscale.samplers.link import LinkSampler

        return LinkSampler(node_sampler, self.pos, None, comm.rank, num_nodes=self.part.book.num_nodes,
                           exclude=self.cfg.exclude_seed_edges)

    def labels(self) -> Callable | None:
        y = self.y
        return lambda edge_ids: y[edge_ids]  # the loader's "seeds" are the batch's edge positions

    def forward(self, model, x, blocks, mb, **kw) -> torch.Tensor:
        return model(x, blocks, mb.edge_label_index, **kw)

    def loss(self, out: torch.Tensor, mb) -> torch.Tensor:
        y = mb.y
        if self.regression:
            return F.mse_loss(out.reshape(y.shape), y)
        return F.cross_entropy(out, y)

    def correct(self, out: torch.Tensor, mb) -> tuple[int, int]:
        """(edges of the right class, edges); regression: (0, edges)."""
        n = int(mb.y.shape[0])
        if self.regression or n == 0:
            return 0, n
        return int((out.argmax(1) == mb.y).sum()), n

    def evaluator(self, data, comm, layerwise: bool = False, tables=None, inputs: Callable | None = None):
        """The labelled pairs' accuracy or RMSE, scored by the same path as links
        (:class:`~gnnscale.tasks.link_evaluation.LinkEvaluator`)."""
        from gnnscale.tasks.link_evaluation import LinkEvaluator

        return LinkEvaluator(data.part, comm, data.features, data.degrees, self.metric,
                             backend=data.cfg.sampler_backend, inputs=inputs, **pair_sampling(data))


def pair_sampling(data) -> dict:
    """The pair tasks' embeddings: layer by layer unless ``--eval-method sampled`` (a user's
    ``--model`` evaluates so: it has no layers to stream); ``auto`` is layer-wise for them
    whatever the eval fan-outs. Sampled: ``{"sampler", "batch_size"}`` of the evaluation."""
    if data.cfg.eval_method != "sampled":
        return {}
    return {"sampler": data.eval_sampler, "batch_size": data.cfg.eval_batch_size}


def edge_metric(label: dict) -> str:
    """The primary metric of edge labels (``meta["link"]["label"]``): ``accuracy`` for classes,
    ``rmse`` for regression targets."""
    return "rmse" if label["kind"] == "regression" else "accuracy"


TASKS = {"node": NodeTask, "link": LinkTask, "edge": EdgeTask, "temporal_link": TemporalLinkTask}


def make_task(part, cfg, comm=None) -> Task:
    """The :class:`Task` of ``cfg.task`` on ``part`` (``comm``: a node task's ``--pos-weight auto``
    counts). A saved model's: ``cfg`` the run's options its file keeps (``config``, which holds
    its ``task``), on the partition it is evaluated or embedded on."""
    kind = TASKS[cfg.task]
    return kind(part, cfg, comm) if kind in (NodeTask, TemporalLinkTask) else kind(part, cfg)
