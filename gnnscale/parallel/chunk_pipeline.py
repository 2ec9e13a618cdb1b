"""Chunk pipelining (GNNPipe): full-graph training of a deep model, the graph's chunks flowing
through K layer stages.

The parts of a partition folder are the chunks (cut by METIS or any strategy of
``gnnscale partition``, :mod:`gnnscale.parallel.chunk_graph`): chunk c owns the contiguous new
ids ``offsets[c] .. offsets[c+1]-1`` and is one micro-batch. Stage s holds layers
``[start, end)`` and runs them on every chunk in turn, one optimizer step per epoch (a flush
after the C chunks, GPipe or 1F1B order):

- a chunk's block holds its nodes' *full* in-neighborhoods: its own nodes first, then its halo
  (in-neighbors in other chunks). At layer 0 the halo's input rows are computed fresh from the
  features (stage 0); at a later layer i a halo node's h^i is read from this stage's table of
  layer i (:class:`~gnnscale.parallel.chunk_tables.StageTables`): computed in this pass if its
  chunk has already passed layer i-1 (an earlier chunk), else the previous pass's (one step
  old). Every read checks the age of each row against the staleness bound;
- the gradient of those reads is not dropped (:class:`~gnnscale.parallel.chunk_tables.HaloGradients`):
  it is added to the row's own gradient when its chunk runs backward, in this pass or (a chunk
  that ran before) in the next, as PipeGCN passes stale feature gradients; with
  ``halo_gradients=False`` the reads carry no gradient, as GNNAutoScale's historical
  embeddings do;
- between stages only the chunk's own h^{start} moves (forward) and its gradient (backward):
  every node crosses each stage boundary once per pass, whatever the number of chunks;
- GCNII's initial representation x0 is not sent: every stage keeps a copy of the encoder and
  rebuilds x0 from the input features (same dropout keys, so the copies agree); after the
  flush the copies' gradients are summed across the stages (one all-reduce of the encoder's
  F x H weights, counted as ``encoder_gradient``), so they stay equal.

With one chunk there is no halo and no table: a step equals one step of full-graph training.
Before the first step (with more than one chunk) every stage fills its tables with the initial
weights' embeddings (stamped -1, so the first step's reads are one step old) by layer-wise
inference of the whole model on the whole graph it holds (no messages); evaluation is the
same exact inference on rank 0, with the stages' weights gathered there.
"""
from __future__ import annotations

import logging
from typing import Iterator, Sequence

import torch

from gnnscale.history.table import StalenessError  # noqa: F401 - re-exported: what a too-old read raises
from gnnscale.nn.inference import graph_inference
from gnnscale.nn.models import GNN, LayerHooks
from gnnscale.nn.spec import ModelSpec
from gnnscale.parallel.axis import Axis, RunContext, StepResult, merge_states, resumed_bounds
from gnnscale.parallel.chunk_graph import ChunkGraph, load_chunk_graph
from gnnscale.samplers.block import Block
from gnnscale.parallel.chunk_tables import TAP_ROOT, HaloGradients, HaloTap, StageTables
from gnnscale.parallel.costs import chunk_layer_costs, mean_over_ranks
from gnnscale.planning.schedules import plan_stages
from gnnscale.parallel.stage import PipelineStage, StepStats, all_reduce_gradients, epoch_summary, rng_key
from gnnscale.process.comm import Communicator
from gnnscale.tasks.evaluation import mask_metric, shared
from gnnscale.tasks.node_metrics import NodeTarget
from gnnscale.tasks.task import make_task

log = logging.getLogger("gnnscale.pipeline")

__all__ = ["ChunkStage", "ChunkPipeline", "StalenessError"]


class ChunkStage(PipelineStage):
    """Stage ``stage`` of a chunk pipeline: its layers on every chunk of ``graph``, the tables of
    the layer inputs it reads historically, and (GCNII) its copy of the encoder.

    ``model`` is the whole model (initial weights): with more than one chunk, this stage's
    tables are filled from it (layers ``0 .. end - 1`` over the whole graph, stamped -1) before
    it is pruned to the stage's layers. ``target``: the last stage's loss and counts (None:
    class ids, cross-entropy).
    """

    def __init__(self, model: GNN, bounds, stage: int, ranks: Sequence[int], comm: Communicator, graph: ChunkGraph,
                 staleness: int = 4, lr: float = 0.003, weight_decay: float = 0.0,
                 halo_gradients: bool = True, health=None, target: NodeTarget | None = None) -> None:
        start, end = bounds[stage]
        layers = [i for i in range(max(start, 1), end)]
        self.graph = graph
        self.tables = StageTables(layers, graph.num_nodes, model.dims, staleness, what=f"chunk stage {stage}") \
            if graph.num_chunks > 1 and layers else None
        if self.tables is not None:
            self.fill(model, end, version=-1)
        super().__init__(model, bounds, stage, ranks, comm, lr=lr, weight_decay=weight_decay,
                         keep_encoder=model.uses_x0, health=health)
        self.num_train = max(1, int(graph.masks["train"].sum()))
        self.halo_grads = HaloGradients(layers, graph.offsets, [b.hist_ids for b in graph.blocks], staleness) \
            if self.tables is not None and halo_gradients else None
        self.encoder_params = list(self.model.encoder.parameters()) \
            if self.model.encoder is not None and self.num_stages > 1 else []
        self.correct = 0
        self.target = target if target is not None else NodeTarget("class")

    def fill(self, model: GNN, end: int, version: int) -> None:
        """Write every row of this stage's tables: h^i of the whole graph for each table layer i,
        by layer-wise inference of ``model`` (eval mode), stamped ``version``."""
        g, n, tables = self.graph, self.graph.num_nodes, self.tables
        model.eval()

        def write(i: int, h: torch.Tensor) -> None:
            if i in tables.rows:
                tables.write(i, 0, n, h, version)

        graph_inference(model, g.blocks, g.x, g.degree, end=end, after_layer=write)

    def before_optimizer(self) -> None:
        """Sum the encoder copies' gradients across the stages (each saw its own layers' share)."""
        super().before_optimizer()
        if self.encoder_params:
            all_reduce_gradients(self.encoder_params, self.comm, "encoder_gradient", mean=False)

    def _x0(self, rows: torch.Tensor, key: int | None) -> torch.Tensor | None:
        """x0 of a chunk from its input rows, with the encoder's dropout keyed as on stage 0."""
        if not self.uses_x0 or self.first:
            return None
        self.model.reseed(key, 0)
        return self.model.encode(rows)[0]

    def _halo_inputs(self, blk: Block, key: int | None) -> torch.Tensor:
        """Layer 0's input rows of the chunk's halo, fresh from the features (encoded, with a
        gradient into the encoder, where the model has one)."""
        rows = self.graph.x[blk.hist_ids]
        if self.model.encoder is None:
            return rows
        self.model.reseed(key, self.model.num_layers + 1)  # a key of its own: the chunk's rows keep theirs
        return self.model.encode(rows)[0]

    def _add_hook(self, i: int, c: int, step: int):
        def hook(grad: torch.Tensor) -> None:
            self.halo_grads.add(i, c, grad, step)
        return hook

    def _take_hook(self, i: int, c: int, step: int):
        def hook(grad: torch.Tensor) -> torch.Tensor | None:
            waiting = self.halo_grads.take(i, c, step)  # a fresh tensor: summed into in place
            return None if waiting is None else waiting.add_(grad)
        return hook

    def forward_chunk(self, c: int, inp: list[torch.Tensor], step: int, key: int):
        """Chunk c through this stage's layers at ``step``: the tensors for the next stage, or on
        the last stage the chunk's share of the step's loss (the target kind's loss summed over its
        training nodes / all training nodes)."""
        g, model = self.graph, self.model
        lo, hi = g.bounds(c)
        blk = g.blocks[c]
        hist = [None] * model.num_layers
        if self.first and blk.num_hist:
            hist[0] = self._halo_inputs(blk, key)
        emit, hooks = None, None
        if self.tables is not None:
            for i in self.tables.rows:
                hist[i] = self.tables.read(i, blk.hist_ids, step)
                if self.halo_grads is not None:  # d loss / d (halo rows) goes to their chunk's backward
                    hist[i] = HaloTap.apply(TAP_ROOT, hist[i], self._add_hook(i, c, step))
            emit = []
            if self.halo_grads is not None:
                hooks = {i: self._take_hook(i, c, step) for i in self.tables.rows}
        h, x0 = inp[0], None  # stage 0: the chunk's input rows; later: h^{start} of its nodes
        if not self.first:
            if self.tables is not None and self.start in self.tables.rows:
                self.tables.write(self.start, lo, hi, h, step)
                if hooks and h.requires_grad:  # its gradient goes back to the previous stage
                    h.register_hook(hooks[self.start])
            x0 = self._x0(g.x[lo:hi], key)
        out, _ = model.forward_layers(h, x0, [blk] * model.num_layers, self.start, self.end,
                                      LayerHooks(hist=hist, emit=emit, node_degree=g.degree, rng_key=key,
                                                 grad_hooks=hooks))
        for j, e in enumerate(emit or []):  # h^{i} of this chunk for this stage's later layers
            if self.start + j + 1 in self.tables.rows:
                self.tables.write(self.start + j + 1, lo, hi, e, step)
        if not self.last:
            return [out]
        train = g.masks["train"][lo:hi]
        if not bool(train.any()):
            return out.sum() * 0.0
        y = g.y[lo:hi][train]
        self.correct += self.target.correct(out[train], y)[0]
        return self.target.loss(out[train], y, reduction="sum") / self.num_train

    def step(self, step: int, keys: Sequence[int], schedule_name: str) -> StepStats:
        """One pass over every chunk (one optimizer step); ``keys`` the C dropout keys."""
        g = self.graph
        self.correct = 0
        stats = self.run(
            g.num_chunks, schedule_name, 2 * step + 2,
            lambda c: [(g.bounds(c)[1] - g.bounds(c)[0], self.model.dims[self.start])],
            lambda c: [g.x[g.bounds(c)[0]:g.bounds(c)[1]]],
            lambda c, inp: self.forward_chunk(c, inp, step, keys[c]),
        )
        if self.last:
            stats.correct, stats.count = self.correct, int(g.masks["train"].sum())
        return stats


    def state(self) -> dict:
        """Model, optimizer, tables and the halo gradients still waiting (an exact resume)."""
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "tables": self.tables.state() if self.tables is not None else None,
                "halo_gradients": self.halo_grads.state() if self.halo_grads is not None else None}

    def load_state(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        if self.tables is not None:
            self.tables.load_state(state["tables"])
        if self.halo_grads is not None:
            self.halo_grads.load_state(state["halo_gradients"])

    def figures(self) -> dict:
        t, h = self.tables, self.halo_grads
        return dict(reads=t.reads if t else 0, stale_reads=t.stale_reads if t else 0, max_age=t.max_age if t else 0,
                    table_bytes=t.nbytes if t else 0, grad_rows=h.rows_taken if h else 0,
                    stale_grad_rows=h.stale_rows if h else 0, max_grad_age=h.max_age if h else 0,
                    halo_gradient_bytes=h.nbytes if h else 0)

    def reset_counts(self) -> None:
        if self.tables is not None:
            self.tables.reset_counts()
        if self.halo_grads is not None:
            self.halo_grads.reset_counts()


class ChunkPipeline(Axis):
    """Stage ``s`` of the chunk pipeline: the whole graph, its layers, its tables."""

    def __init__(self, ctx: RunContext) -> None:
        cfg, dims, plan = ctx.cfg, ctx.dims, ctx.plan
        self.cfg, self.dims, self.plan = cfg, dims, plan
        s, k = dims.s, plan.pp
        self.graph = graph = load_chunk_graph(ctx.parts_dir, verify=cfg.verify)  # every stage: x0, the cost probe
        ctx.phase("part load")
        # the targets' kind: output width, the last stage's loss, the metric (every stage holds every label)
        self.task = make_task(graph, cfg)  # every stage holds every label: --pos-weight auto counts them here
        self.target = target = self.task.target  # the kind's output width, the last stage's loss and counts
        self.metric = self.task.metric
        self.spec = ModelSpec.of(cfg, graph.feature_dim, self.task.out_dim or graph.num_classes,
                                 num_layers=plan.num_layers)
        model = self.spec.build(seed=cfg.seed)  # the whole model, identical on every rank
        self.costs = None
        self.bounds = resumed_bounds(ctx, k, plan.stage_layers)  # a resumed run keeps its checkpoint's split
        if self.bounds is None:
            if plan.stage_layers is None and k > 1:  # balance the stages by measured per-layer cost
                self.costs = mean_over_ranks(dims.comm, chunk_layer_costs(model, graph,
                                                                          halo_gradients=cfg.halo_gradients))
            self.bounds = plan_stages(plan.num_layers, k, plan.stage_layers, self.costs)
        if dims.rank == 0:
            log.info("chunk pipeline: %d stages, layers %s%s, %d chunks (%s nodes, halos %s), %s, halo gradients %s",
                     k, " | ".join(f"{a}-{b - 1}" for a, b in self.bounds),
                     "" if self.costs is None else " (balanced by measured ms per layer: "
                     + ", ".join(f"{1e3 * c:.1f}" for c in self.costs) + "; the stale tables follow the split, so "
                     "a run that splits otherwise trains otherwise: to repeat this run exactly, give --stage-layers "
                     + ",".join(str(b - a) for a, b in self.bounds) + ")",
                     graph.num_chunks,
                     "/".join(str(b.num_dst) for b in graph.blocks), "/".join(map(str, graph.halo_sizes)),
                     plan.schedule, "on" if cfg.halo_gradients else "off")
        self.stage = ChunkStage(model, self.bounds, s, list(range(k)), dims.comm, graph, staleness=cfg.staleness,
                                lr=cfg.lr, weight_decay=cfg.weight_decay, halo_gradients=cfg.halo_gradients,
                                health=dims.health, target=target)
        ctx.phase("stages and tables")
        self.net, self.opt = self.stage.model, self.stage.opt
        self.whole = self.spec.build() if dims.rank == 0 else None  # rank 0 evaluates the whole model
        self.step_stats: list[StepStats] = []

    def steps(self) -> int:
        return 1

    def batches(self, epoch: int, first: int) -> Iterator:
        return iter([None] * (1 - first))

    def step(self, epoch: int, i: int, gstep: int, batch) -> StepResult:
        self.dims.health.enter(f"chunk stage {self.stage.stage}: forwards and backwards", epoch, i)
        keys = [rng_key(self.cfg.seed, epoch, 0, c) for c in range(self.graph.num_chunks)]
        stats = self.stage.step(epoch, keys, self.plan.schedule)
        self.step_stats.append(stats)
        if stats.loss is None:
            return StepResult()
        return StepResult(stats.loss, stats.loss * stats.count, stats.correct, stats.count)

    def end_epoch(self, epoch: int, times: dict) -> dict:
        mine = epoch_summary(self.step_stats)
        mine.update(pipeline=0, stage=self.dims.s, layers=[self.stage.start, self.stage.end], **self.stage.figures(),
                    encoder_gradient_bytes=self.dims.comm.stats.sent.get("encoder_gradient", 0))
        every = self.dims.comm.all_gather_object(mine)
        times = dict(times, sample=0.0, fetch=0.0, compute=mine["busy_seconds"], bubble=mine["wait_seconds"],
                     grad_sync=mine["grad_sync_seconds"])
        return {"stage_seconds": times, "pipeline": every}

    def whole_state(self) -> dict | None:
        states = self.dims.comm.all_gather_object({n: v.detach() for n, v in self.net.state_dict().items()})
        return merge_states(states) if self.dims.rank == 0 else None

    def evaluate(self, splits, gstep: int) -> dict[str, float]:
        whole = self.whole_model()
        acc = None
        if whole is not None:
            g = self.graph
            whole.eval()
            out = graph_inference(whole, g.blocks, g.x, g.degree)
            masks = {k: m for k, m in g.masks.items() if k in splits}
            acc = mask_metric(out, g.y, masks, self.target, self.metric, str(g.meta.get("dataset") or ""))
            acc["evaluation"] = {"method": "layerwise", "fanouts": None, "batches": 0, "metric": self.metric,
                                 "metrics": {k: {self.metric: acc[k]} for k in masks}}
        return shared(self.dims.comm, acc)

    def state(self) -> dict:
        return {**self.stage.state(), "bounds": self.bounds}

    def load_state(self, state: dict) -> None:
        self.stage.load_state(state)

    def ages(self) -> tuple[dict, int]:
        t = self.stage.tables
        if t is None:
            return {}, self.cfg.staleness
        counts: dict = {}
        for tab in t.tables.values():
            for a, n in tab.age_counts.items():
                counts[a] = counts.get(a, 0) + n
        return counts, self.cfg.staleness

    def reset_stats(self) -> None:
        self.stage.reset_counts()
        self.step_stats = []

    def step_loss(self, result: StepResult) -> float | None:
        got = self.dims.comm.all_reduce_named({"loss": result.loss_sum, "count": result.count})
        return got["loss"] / got["count"] if got["count"] else None

    def info(self) -> dict:
        g = self.graph
        return {"cache": {"policy": "none", "rows": 0, "bytes": 0},
                "exchange": {"mode": "chunks", "staleness": self.stage.tables.bound if self.stage.tables else
                             self.cfg.staleness},
                "stages": [list(b) for b in self.bounds], "layer_costs": self.costs, "chunks": g.num_chunks,
                "halos": g.halo_sizes, "halo_gradients": bool(self.cfg.halo_gradients), "task": "node",
                "metric": self.metric}
