"""Chunk pipelining (GNNPipe): full-graph training of a deep model, the graph's chunks flowing
through K layer stages.

The parts of a partition folder are the chunks (cut by METIS or any strategy of
``gnnscale partition``): chunk c owns the contiguous new ids ``offsets[c] .. offsets[c+1]-1``
and is one micro-batch. Stage s holds layers ``[start, end)`` and runs them on every chunk in
turn, one optimizer step per epoch (a flush after the C chunks, GPipe or 1F1B order):

- a chunk's block holds its nodes' *full* in-neighborhoods: its own nodes first, then its halo
  (in-neighbors in other chunks). At layer 0 the halo's input rows are computed fresh from the
  features (stage 0);
  at a later layer i a halo node's h^i is read from this stage's table of layer i: computed in
  this pass if its chunk has already passed layer i-1 (an earlier chunk), else the previous
  pass's (one step old). Every read checks the age of each row against the staleness bound;
- the gradient of those reads is not dropped (:class:`HaloGradients`): it is added to the
  row's own gradient when its chunk runs backward, in this pass or (a chunk that ran before)
  in the next, as PipeGCN passes stale feature gradients; with ``halo_gradients=False`` the
  reads carry no gradient, as GNNAutoScale's historical embeddings do;
- between stages only the chunk's own h^{start} moves (forward) and its gradient (backward):
  every node crosses each stage boundary once per pass, whatever the number of chunks;
- GCNII's initial representation x0 is not sent: every stage keeps a copy of the encoder and
  rebuilds x0 from the input features (same dropout keys, so the copies agree); after the
  flush the copies' gradients are summed across the stages (one all-reduce of the encoder's
  F x H weights, counted as ``encoder_gradient``), so they stay equal.

With one chunk there is no halo and no table: a step equals one step of full-graph training
(:func:`full_graph_reference`). Before the first step (with more than one chunk) a layer-wise
pass fills the tables with the initial weights' embeddings (version -1, so the first step's
reads are one step old); evaluation is the same exact layer-wise pass through the stages.
"""
from __future__ import annotations

import json
import logging
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Sequence

import torch
import torch.nn.functional as F

from gnnscale.process.comm import Communicator
from gnnscale.parallel.layer_pipeline import (
    PipelineConfig,
    PipelineStage,
    StepStats,
    all_reduce_gradients,
    epoch_summary,
    mean_over_ranks,
    measure_layer_costs,
    rng_key,
    stage_figures,
)
from gnnscale.nn.models import GNN
from gnnscale.parallel.schedules import PipelineError, check_pipeline, plan_stages
from gnnscale.samplers.block import Block
from gnnscale.nn.sparse_ops import add_rows_

log = logging.getLogger("gnnscale.data.prefetch")

NEVER = -(1 << 62)  # version of a table row that was never written
_MASKS = ("train", "val", "test")


class StalenessError(PipelineError):
    """A historical read found a row older than the staleness bound (or never written)."""


@dataclass
class ChunkGraph:
    """The whole graph of a partition folder, its parts as chunks.

    Attributes:
        offsets: int64 [C + 1]: chunk c owns new ids ``offsets[c] .. offsets[c+1]-1``.
        blocks: per chunk, its full-neighborhood block: ``src_ids`` = its nodes then its halo
            (sorted), ``num_hist`` = the halo's size (the layers >= 1 read the halo from tables).
        degree: int64 [N] in-degree of every node (GCN normalization).
        x: float32 [N, F] features (None where the stage needs none). y: int64 [N].
        masks: ``train``/``val``/``test`` -> bool [N].
    """

    offsets: torch.Tensor
    blocks: list[Block]
    degree: torch.Tensor
    x: torch.Tensor | None
    y: torch.Tensor
    masks: dict
    feature_dim: int
    num_classes: int
    _full: Block | None = field(default=None, repr=False)

    @property
    def num_nodes(self) -> int:
        return int(self.offsets[-1])

    @property
    def num_chunks(self) -> int:
        return len(self.blocks)

    def bounds(self, c: int) -> tuple[int, int]:
        return int(self.offsets[c]), int(self.offsets[c + 1])

    def full_block(self) -> Block:
        """One block of the whole graph (every node a source and a destination)."""
        if self._full is None:
            ids = torch.arange(self.num_nodes, dtype=torch.int64)
            self._full = Block(ids, ids, self._global_edges())
        return self._full

    def _global_edges(self) -> torch.Tensor:
        parts = []
        for b in self.blocks:  # one tensor op per chunk: local numbering -> new global ids
            parts.append(torch.stack([b.src_ids[b.edge_index[0]], b.dst_ids[b.edge_index[1]]]))
        return torch.cat(parts, 1)

    @property
    def halo_sizes(self) -> list[int]:
        return [b.num_hist for b in self.blocks]


def chunk_block(indptr: torch.Tensor, indices: torch.Tensor, lo: int, hi: int) -> Block:
    """The full-neighborhood block of chunk ``[lo, hi)`` from its CSC (``indptr`` int64 [n+1] over
    its nodes, ``indices`` int64 [E] sources in new global ids): its nodes, then its halo."""
    n = hi - lo
    dst = torch.repeat_interleave(torch.arange(n, dtype=torch.int64), indptr[1:] - indptr[:-1])
    inside = (indices >= lo) & (indices < hi)
    halo = torch.unique(indices[~inside])
    src = torch.where(inside, indices - lo, n + torch.searchsorted(halo, indices))
    own = torch.arange(lo, hi, dtype=torch.int64)
    return Block(torch.cat([own, halo]), own, torch.stack([src, dst]), num_hist=int(halo.numel()))


def load_chunk_graph(parts_dir: str, verify: bool = True, features: bool = True) -> ChunkGraph:
    """Every part of ``parts_dir`` as a chunk of one graph (see :class:`ChunkGraph`)."""
    from gnnscale.partitioning import load_meta, load_part

    meta = load_meta(parts_dir)
    blocks, degree, xs, ys = [], [], [], []
    masks = {k: [] for k in _MASKS}
    offsets = None
    for p in range(meta["num_parts"]):  # one load per part
        part = load_part(parts_dir, p, verify=verify)
        offsets = part.book.offsets.to(torch.int64)
        lo, hi = int(offsets[p]), int(offsets[p + 1])
        blocks.append(chunk_block(part.indptr, part.indices, lo, hi))
        degree.append(part.indptr[1:] - part.indptr[:-1])
        if features:
            xs.append(part.features(torch.arange(hi - lo)))
        ys.append(part.y)
        for k in _MASKS:
            masks[k].append(getattr(part, f"{k}_mask"))
    y = torch.cat(ys)
    return ChunkGraph(offsets=offsets, blocks=blocks, degree=torch.cat(degree), x=torch.cat(xs) if features else None,
                      y=y, masks={k: torch.cat(v) for k, v in masks.items()}, feature_dim=int(meta["feature_dim"]),
                      num_classes=int(meta.get("num_classes") or int(y.max()) + 1))


class HistoryTables:
    """A stage's embedding tables: for each layer input i it reads, float32 [N, dims[i]] rows
    and the step each row was written (int64 [N]); every read checks the rows' ages."""

    def __init__(self, layers: Sequence[int], num_nodes: int, dims: Sequence[int], bound: int) -> None:
        self.rows = {i: torch.zeros(num_nodes, dims[i]) for i in layers}
        self.version = {i: torch.full((num_nodes,), NEVER, dtype=torch.int64) for i in layers}
        self.bound = int(bound)
        self.reads = 0  # rows read
        self.stale_reads = 0  # rows read from an earlier step
        self.max_age = 0

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.rows.values())

    def write(self, i: int, lo: int, hi: int, rows: torch.Tensor, step: int) -> None:
        """Rows ``[lo, hi)`` of layer i's table, written at ``step``."""
        self.rows[i][lo:hi] = rows.detach()
        self.version[i][lo:hi] = step

    def read(self, i: int, ids: torch.Tensor, step: int) -> torch.Tensor:
        """float32 [len(ids), dims[i]] rows of layer i at ``step``.

        Raises:
            StalenessError: a row older than the bound, or never written.
        """
        age = step - self.version[i].index_select(0, ids)
        worst = int(age.max()) if ids.numel() else 0
        if worst > self.bound:
            bad = int((age > self.bound).sum())
            never = int((self.version[i][ids] == NEVER).sum())
            raise StalenessError(
                f"step {step}, layer {i}: {bad} of {ids.numel()} historical rows are older than the staleness bound "
                f"({self.bound} steps; {never} never written, the oldest written one "
                f"{int(age[age < (1 << 61)].max()) if never < ids.numel() else 'none'} steps). Chunk pipelining "
                "reads rows at most one step old: a table was not filled (run the filling pass first)."
            )
        self.reads += int(ids.numel())
        self.stale_reads += int((age > 0).sum())
        self.max_age = max(self.max_age, worst)
        return self.rows[i].index_select(0, ids)


class HaloGradients:
    """The gradients of a stage's halo reads, passed on to the rows' own chunks (PipeGCN's stale
    feature gradients): without them, every edge between two chunks would carry no gradient.

    A reader chunk's backward hands in d loss / d h^i of its whole halo (:meth:`add`; kept as
    it is, one tensor per reader and layer, no scatter). An owner chunk's backward takes the
    pieces of every reader's latest gradient that fall in its rows (:meth:`take`): those of the
    chunks whose backward ran before its own in this pass, and the others' from the pass
    before (one step old). Chunks run backward in the same order every pass, so each piece is
    taken exactly once before its reader replaces it. Every piece's age is checked against the
    staleness bound.

    Args:
        layers: the layer inputs i this stage reads from tables.
        offsets: int64 [C + 1] chunk bounds. halos: per chunk, its sorted halo ids (int64).
    """

    def __init__(self, layers: Sequence[int], offsets: torch.Tensor, halos: Sequence[torch.Tensor],
                 bound: int) -> None:
        self.offsets = [int(v) for v in offsets]
        self.bound = int(bound)
        # Halo ids are sorted and chunks own contiguous ids, so each reader's halo is one run
        # per owner: reader c's rows for owner o are [cut[c][o], cut[c][o + 1]).
        self.cut = [torch.searchsorted(h, offsets).tolist() for h in halos]
        self.local = []  # each halo id as a row of its owner chunk
        for h in halos:
            owner = torch.searchsorted(offsets, h, right=True) - 1
            self.local.append(h - offsets[owner])
        self.waiting: dict[int, dict[int, tuple[int, torch.Tensor]]] = {i: {} for i in layers}
        self.rows_taken = 0  # gradient rows added into an owner's gradient
        self.stale_rows = 0  # of them, rows from the pass before
        self.max_age = 0

    @property
    def nbytes(self) -> int:
        return sum(g.numel() * g.element_size() for w in self.waiting.values() for _, g in w.values())

    def add(self, i: int, reader: int, grad: torch.Tensor, step: int) -> None:
        """Reader chunk's float32 [halo, dims[i]] gradient of its halo rows of layer i at ``step``."""
        self.waiting[i][reader] = (step, grad.detach().clone())

    def take(self, i: int, owner: int, step: int) -> torch.Tensor | None:
        """The halo gradients waiting for owner chunk's rows of layer i, summed: float32
        [its nodes, dims[i]]; None where none waits.

        Raises:
            StalenessError: a waiting gradient older than the bound.
        """
        out = None
        for reader, (when, grad) in self.waiting[i].items():
            a, b = self.cut[reader][owner], self.cut[reader][owner + 1]
            if a == b:
                continue
            age = step - when
            if age > self.bound:
                raise StalenessError(
                    f"step {step}, layer {i}: chunk {owner}'s halo gradients from chunk {reader} are {age} steps old, "
                    f"beyond the staleness bound ({self.bound} steps): a chunk's backward was skipped."
                )
            if out is None:
                out = torch.zeros(self.offsets[owner + 1] - self.offsets[owner], grad.shape[1], dtype=grad.dtype)
            add_rows_(out, self.local[reader][a:b], grad[a:b])  # one pass per reader, no concatenation
            self.rows_taken += b - a
            self.stale_rows += (b - a) if age > 0 else 0
            self.max_age = max(self.max_age, age)
        return out


class _HaloTap(torch.autograd.Function):
    """Identity on a chunk's halo rows whose backward hands their gradient to ``callback``
    (and nowhere else: no ``.grad`` is accumulated for the rows)."""

    @staticmethod
    def forward(ctx, root: torch.Tensor, rows: torch.Tensor, callback) -> torch.Tensor:  # type: ignore[override]
        ctx.callback = callback
        return rows.view_as(rows)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        ctx.callback(grad)
        return None, None, None


# What puts a tap in the autograd graph (a tensor that requires grad; it never receives one).
_TAP_ROOT = torch.empty(0, requires_grad=True)


class ChunkStage(PipelineStage):
    """Stage ``stage`` of a chunk pipeline: its layers on every chunk of ``graph``, the tables of
    the layer inputs it reads historically, and (GCNII) its copy of the encoder."""

    def __init__(self, model: GNN, bounds, stage: int, ranks: Sequence[int], comm: Communicator, graph: ChunkGraph,
                 staleness: int = 4, lr: float = 0.003, weight_decay: float = 0.0,
                 halo_gradients: bool = True) -> None:
        super().__init__(model, bounds, stage, ranks, comm, lr=lr, weight_decay=weight_decay,
                         keep_encoder=model.uses_x0)
        self.graph = graph
        self.num_train = max(1, int(graph.masks["train"].sum()))
        layers = [i for i in range(max(self.start, 1), self.end)]
        self.tables = HistoryTables(layers, graph.num_nodes, self.model.dims, staleness) \
            if graph.num_chunks > 1 and layers else None
        self.halo_grads = HaloGradients(layers, graph.offsets, [b.hist_ids for b in graph.blocks], staleness) \
            if self.tables is not None and halo_gradients else None
        self.encoder_params = list(self.model.encoder.parameters()) \
            if self.model.encoder is not None and self.num_stages > 1 else []

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
        the last stage the chunk's share of the step's loss (cross-entropy summed over its
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
                    hist[i] = _HaloTap.apply(_TAP_ROOT, hist[i], self._add_hook(i, c, step))
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
        out, _ = model.forward_layers(h, x0, [blk] * model.num_layers, self.start, self.end, hist=hist, emit=emit,
                                      node_degree=g.degree, rng_key=key, grad_hooks=hooks)
        for j, e in enumerate(emit or []):  # h^{i} of this chunk for this stage's later layers
            if self.start + j + 1 in self.tables.rows:
                self.tables.write(self.start + j + 1, lo, hi, e, step)
        if not self.last:
            return [out]
        train = g.masks["train"][lo:hi]
        if not bool(train.any()):
            return out.sum() * 0.0
        return F.cross_entropy(out[train], g.y[lo:hi][train], reduction="sum") / self.num_train

    def step(self, step: int, keys: Sequence[int], schedule_name: str) -> StepStats:
        """One pass over every chunk (one optimizer step); ``keys`` the C dropout keys."""
        g = self.graph
        return self.run(
            g.num_chunks, schedule_name, 2 * step + 2,
            lambda c: [(g.bounds(c)[1] - g.bounds(c)[0], self.model.dims[self.start])],
            lambda c: [g.x[g.bounds(c)[0]:g.bounds(c)[1]]],
            lambda c, inp: self.forward_chunk(c, inp, step, keys[c]),
        )

    @torch.no_grad()
    def layerwise(self, step_tag: int, version: int | None = None) -> dict:
        """Exact full-graph inference through the stages, layer by layer over the whole graph
        (eval mode; each layer chunk by chunk, every halo row current). ``version``: write every
        row of this stage's tables at that step (the filling pass). Returns ``stats`` (a :class:`StepStats`) and, on the last stage, the
        ``train``/``val``/``test`` accuracies."""
        g, model = self.graph, self.model
        model.eval()
        stats = StepStats()
        t0 = time.perf_counter()
        n = g.num_nodes
        tag = step_tag * 2 * max(1, g.num_chunks)  # above every tag of the training step before it
        x0 = None
        if self.first:
            h, x0 = model.encode(g.x)
        else:
            h = self._recv([(n, model.dims[self.start])], self.prev, tag, "activation",
                           "activations of the layer-wise pass", stats)[0]
            if self.uses_x0:
                x0 = model.encode(g.x)[0]
        for i in range(self.start, self.end):
            if version is not None and self.tables is not None and i in self.tables.rows:
                self.tables.write(i, 0, n, h, version)
            pieces = []
            for c, blk in enumerate(g.blocks):  # chunk by chunk (a handful), for memory
                lo, hi = g.bounds(c)
                pieces.append(model.layer_step(i, h[blk.src_ids], h[lo:hi], blk.edge_index,
                                               x0[lo:hi] if x0 is not None else None,
                                               blk.source_degrees(g.degree) if model.needs_degree[i] else None))
            h = torch.cat(pieces)
        out = {}
        if not self.last:
            pending = self._send([h], self.next, tag, "activation", stats)
            self.wait_sends(pending, stats)
        else:
            out.update(mask_accuracy(model.readout(h, []).argmax(1), g.y, g.masks))
        stats.step_seconds = time.perf_counter() - t0
        out["stats"] = stats
        return out


def mask_accuracy(pred: torch.Tensor, y: torch.Tensor, masks: dict) -> dict:
    """Accuracy of ``pred`` (int64 [N]) against ``y`` over each mask (None for an empty one)."""
    return {k: float((pred[m] == y[m]).float().mean()) if bool(m.any()) else None for k, m in masks.items()}


def build_model(cfg, graph: ChunkGraph, num_layers: int) -> GNN:
    """The whole model, identical on every rank (seeded by the run's seed)."""
    torch.manual_seed(cfg.seed)
    return GNN(graph.feature_dim, cfg.hidden, graph.num_classes, num_layers=num_layers, layer=cfg.layer,
               layer_kwargs=cfg.layer_kwargs, dropout=cfg.dropout, norm=cfg.norm, residual=cfg.residual, jk=cfg.jk)


def _fastest_seconds(run, timed: int) -> float:
    """Seconds of ``run()``: the fastest of ``timed`` calls after an untimed warm-up one (what
    slows a call on a shared machine is noise, not the work)."""
    run()
    best = float("inf")
    for _ in range(max(1, timed)):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def _encoder_seconds(model: GNN, x: torch.Tensor, repeats: int = 3) -> float:
    """Seconds of the encoder's forward and backward on ``x``: the fastest of ``repeats - 1``
    passes after a warm-up one."""
    model.train()
    best = _fastest_seconds(lambda: model.encode(x)[0].sum().backward(), repeats - 1)
    model.zero_grad(set_to_none=True)
    return best


def _probe_block(blk: Block, lo: int, max_rows: int) -> Block:
    """The first ``max_rows`` destinations of chunk block ``blk`` (chunk starting at ``lo``)
    with all their in-edges, as a chunk block of their own: sources outside them are its halo.
    ``blk`` itself when it is no larger."""
    if blk.num_dst <= max_rows:
        return blk
    keep = blk.edge_index[1] < max_rows  # edges are grouped by destination, in order
    indptr = torch.zeros(max_rows + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(blk.edge_index[1][keep], minlength=max_rows), 0)
    return chunk_block(indptr, blk.src_ids[blk.edge_index[0][keep]], lo, lo + max_rows)


def _table_seconds(graph: ChunkGraph, dim: int, halo_gradients: bool, repeats: int = 10) -> float:
    """Seconds that one table layer adds to chunk 0's forward and backward on any stage, beside
    the layer itself: reading its halo's rows and writing its own, and with halo gradients
    handing its halo's gradient in and taking its own rows' from every other chunk (each of
    them holding one, as in a pass). The fastest of ``repeats`` after a warm-up."""
    full = graph.blocks[0]
    lo, hi = graph.bounds(0)
    gen = torch.Generator().manual_seed(0)
    # Values do not change the cost, only the rows touched: the table's rows stay zero (every
    # one current at step 0), and so do the other chunks' waiting gradients.
    tables = HistoryTables([1], graph.num_nodes, [dim, dim], bound=1)
    tables.version[1].zero_()
    halo = HaloGradients([1], graph.offsets, [b.hist_ids for b in graph.blocks], 1) if halo_gradients else None
    if halo is not None:
        for c, b in enumerate(graph.blocks[1:], 1):
            halo.add(1, c, torch.zeros(b.num_hist, dim), 0)
    grad = torch.rand(full.num_hist, dim, generator=gen)
    own = torch.rand(hi - lo, dim, generator=gen)

    def one_layer() -> None:
        tables.read(1, full.hist_ids, 0)
        tables.write(1, lo, hi, own, 0)
        if halo is not None:
            halo.add(1, 0, grad, 0)
            waiting = halo.take(1, 0, 0)
            if waiting is not None:
                waiting.add_(own)

    return _fastest_seconds(one_layer, repeats)


def chunk_layer_costs(model: GNN, graph: ChunkGraph, max_rows: int = 20000,
                      halo_gradients: bool = True) -> list[float]:
    """Per-layer costs for :func:`~gnnscale.parallel.schedules.plan_stages`, measured on chunk 0's
    real block with its halo as historical leaves (its first ``max_rows`` nodes where it has
    more): seconds of each layer's forward and backward, with what a stage runs besides its
    layers folded in.

    - Stage 0 alone gathers and encodes the input rows of every chunk's halo (layer 0's leaves):
      that cost (for as many halo rows per probed node as chunk 0 has) is added to layer 0,
      which stage 0 always runs.
    - Every other stage encodes the chunk's own rows for its copy of x0 (GCNII), which stage 0
      does inside layer 0: adding that cost to every stage and taking it off layer 0 leaves the
      best split unchanged, so it is taken off layer 0.
    - Layers 1..L-1 of the same kind and widths run the same work on the same block: each gets
      their median, so that a pass slowed by a neighbouring process does not move a cut.
    - Each of them also reads and writes its table, and passes halo gradients on: that cost
      (:func:`_table_seconds`, in chunk 0's share for the probed nodes) is added to each.
    """
    full, lo = graph.blocks[0], graph.bounds(0)[0]
    blk = _probe_block(full, lo, max_rows)
    n = blk.num_dst
    gen = torch.Generator().manual_seed(0)
    hist: list[torch.Tensor | None] = [None] * model.num_layers
    halo_seconds = 0.0
    if blk.num_hist:
        t0 = time.perf_counter()
        rows = graph.x[full.hist_ids[: max(1, round(full.num_hist * n / full.num_dst))]]
        halo_seconds = time.perf_counter() - t0
        if model.encoder is not None:
            halo_seconds += _encoder_seconds(model, rows)
        with torch.no_grad():
            leaves = graph.x[blk.hist_ids]
            hist[0] = model.encode(leaves)[0] if model.encoder is not None else leaves
        for i in range(1, model.num_layers):  # table rows (their values do not change the cost)
            hist[i] = torch.rand(blk.num_hist, model.dims[i], generator=gen)
    costs = measure_layer_costs(model, [blk] * model.num_layers, graph.x[lo:lo + n], hist=hist)
    kinds: dict[tuple, list[int]] = {}
    for i in range(1, model.num_layers):
        kinds.setdefault((type(model.convs[i]), model.dims[i], model.dims[i + 1], i < model.n_post), []).append(i)
    for same in kinds.values():
        mid = statistics.median(costs[i] for i in same)
        for i in same:
            costs[i] = mid
    x0_seconds = _encoder_seconds(model, graph.x[lo:lo + n]) if model.uses_x0 else 0.0
    costs[0] = max(costs[0] + halo_seconds - x0_seconds, 1e-6)
    if graph.num_chunks > 1:
        share = n / full.num_dst
        per_width: dict[int, float] = {}
        for i in range(1, model.num_layers):
            d = model.dims[i]
            if d not in per_width:
                per_width[d] = _table_seconds(graph, d, halo_gradients) * share
            costs[i] += per_width[d]
    return costs


def chunk_worker(parts_dir: str, cfg, pipe: PipelineConfig | None = None) -> dict:
    """One rank of a chunk pipeline of K stages (W = K workers, a process of
    :func:`gnnscale.process.launch.launch_local` or torchrun): rank s is stage s; the parts of
    ``parts_dir`` are the chunks. Trains ``cfg.epochs`` epochs of one full-graph step each and
    evaluates (exact, layer-wise) every ``cfg.eval_every`` epochs and after the last.

    Returns a dict: ``stage``, ``layers``, ``losses`` (the last stage's, per epoch), ``epochs``
    (per epoch: the stage's bytes sent by category, wait/busy/step seconds, bubble, peak
    micro-batches and activation bytes held), ``accuracy`` (the last stage's, per evaluation),
    ``reads``/``stale_reads``/``max_age`` of its tables, ``grad_rows``/``stale_grad_rows``/``max_grad_age``
    of the halo gradients passed on (``halo_gradient_bytes`` held at the end), ``table_bytes``, ``encoder_gradient_bytes``,
    ``fill_bytes`` (the filling pass) and ``state`` (its parameters by name).
    """
    from gnnscale.logs import setup_logging
    from gnnscale.process.groups import init_distributed, shutdown_distributed

    pipe = pipe or PipelineConfig(cfg.pipeline_stages, cfg.stage_layers, cfg.micro_batches, cfg.schedule)
    setup_logging(rank=int(os.environ.get("RANK", "0")))
    info = init_distributed(timeout=cfg.timeout)
    try:
        k, w, s = pipe.stages, info.world_size, info.rank
        num_layers = cfg.model_layers()
        check_pipeline(k, pipe.stage_layers, 1, pipe.schedule, num_layers, w)
        if w != k:
            raise PipelineError(
                f"chunk pipelining runs one pipeline over the whole graph (W = K): found {w} workers for {k} stages. "
                f"Use --workers {k}; for data parallelism over several parts use sampled micro-batches (no --chunks)."
            )
        comm = Communicator(s, w, timeout=cfg.timeout)
        graph = load_chunk_graph(parts_dir, verify=cfg.verify)  # every stage: x0, the cost probe
        model = build_model(cfg, graph, num_layers)
        costs = None
        if pipe.stage_layers is None and k > 1:  # balance the stages by measured per-layer cost
            costs = mean_over_ranks(comm, chunk_layer_costs(model, graph, halo_gradients=cfg.halo_gradients))
        bounds = plan_stages(num_layers, k, pipe.stage_layers, costs)
        if s == 0:
            log.info("chunk pipeline: %d stages, layers %s%s, %d chunks (%s nodes, halos %s), %s, halo gradients %s", k,
                     " | ".join(f"{a}-{b - 1}" for a, b in bounds),
                     "" if costs is None else " (balanced by measured ms per layer: "
                     + ", ".join(f"{1e3 * c:.1f}" for c in costs) + ")", graph.num_chunks,
                     "/".join(str(b.num_dst) for b in graph.blocks), "/".join(map(str, graph.halo_sizes)),
                     pipe.schedule, "on" if cfg.halo_gradients else "off")
        stage = ChunkStage(model, bounds, s, list(range(k)), comm, graph, staleness=cfg.staleness, lr=cfg.lr,
                           weight_decay=cfg.weight_decay, halo_gradients=cfg.halo_gradients)
        fill_bytes = 0
        if graph.num_chunks > 1:  # every stage takes part (the pass flows through them all)
            fill = stage.layerwise(1, version=-1)
            fill_bytes = fill["stats"].bytes_sent["activation"]
        losses, epochs, accuracy, history = [], [], [], []
        for epoch in range(cfg.epochs):
            keys = [rng_key(cfg.seed, epoch, 0, c) for c in range(graph.num_chunks)]
            st = stage.step(epoch, keys, pipe.schedule)
            row = dict(epoch=epoch, bytes_sent=dict(st.bytes_sent), bytes_received=dict(st.bytes_received),
                       wait_seconds=st.wait_seconds, busy_seconds=st.busy_seconds, step_seconds=st.step_seconds,
                       peak_micro_batches=st.peak_micro_batches, peak_activation_bytes=st.peak_activation_bytes)
            epochs.append(row)
            if st.loss is not None:
                losses.append(st.loss)
            acc = None
            if cfg.eval_every and ((epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1):
                acc = {key: v for key, v in stage.layerwise(2 * epoch + 3).items() if key != "stats"}
                if stage.last:
                    accuracy.append(dict(epoch=epoch, **acc))
            history.append(_log_chunk_epoch(comm, epoch, row, st.loss, acc if stage.last else None,
                                            stage.tables.max_age if stage.tables else 0))
        if s == 0 and cfg.metrics:
            _write_metrics(cfg.metrics, dict(mode="chunks", stages=k, layers=[list(b) for b in bounds],
                                             chunks=graph.num_chunks, halos=graph.halo_sizes, schedule=pipe.schedule,
                                             epochs=history))
        tables, halo = stage.tables, stage.halo_grads
        state = {name: v.detach().clone() for name, v in stage.model.state_dict().items()}
        return dict(stage=s, layers=(stage.start, stage.end), losses=losses, epochs=epochs, accuracy=accuracy,
                    reads=tables.reads if tables else 0, stale_reads=tables.stale_reads if tables else 0,
                    max_age=tables.max_age if tables else 0, table_bytes=tables.nbytes if tables else 0,
                    grad_rows=halo.rows_taken if halo else 0, stale_grad_rows=halo.stale_rows if halo else 0,
                    max_grad_age=halo.max_age if halo else 0, halo_gradient_bytes=halo.nbytes if halo else 0,
                    encoder_gradient_bytes=comm.stats.sent.get("encoder_gradient", 0), fill_bytes=fill_bytes,
                    layer_costs=costs, state=state, num_nodes=graph.num_nodes, halos=graph.halo_sizes)
    finally:
        shutdown_distributed()


def _log_chunk_epoch(comm: Communicator, epoch: int, row: dict, loss: float | None, acc: dict | None,
                     max_age: int) -> dict:
    """Every stage's epoch, gathered; rank 0 logs one line. Returns the gathered epoch (metrics)."""
    mine = epoch_summary([row])
    mine.update(loss=loss, accuracy=acc, max_age=max_age)
    every = comm.all_gather_object(mine) if comm.world_size > 1 else [mine]
    loss = next((e["loss"] for e in every if e["loss"] is not None), None)
    acc = next((e["accuracy"] for e in every if e["accuracy"] is not None), None)
    if comm.rank == 0:
        log.info("epoch %3d | loss %.4f%s | %s | oldest read %d step(s)", epoch,
                 loss if loss is not None else float("nan"),
                 "" if acc is None else f" | val {acc['val']:.4f} test {acc['test']:.4f}",
                 stage_figures(every, "chunks"), max(e["max_age"] for e in every))
    return dict(epoch=epoch, loss=loss, accuracy=acc, stages=every)


def _write_metrics(path: str, result: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    log.info("metrics written to %s", path)


def full_graph_reference(parts_dir: str, cfg, epochs: int | None = None, eval_every: int = 0) -> dict:
    """Single-process full-graph training of the same model on the same graph (the unpipelined,
    unchunked run): ``losses`` per epoch, ``accuracy`` (train/val/test of the final weights,
    exact inference), ``history`` (the same, with ``epoch``, every ``eval_every`` epochs and
    after the last; empty when 0) and ``state``. Dropout keys equal a one-chunk pipeline's."""
    graph = load_chunk_graph(parts_dir, verify=False)
    num_layers = cfg.model_layers()
    model = build_model(cfg, graph, num_layers)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    full = graph.full_block()
    blocks = [full] * num_layers
    train = graph.masks["train"]
    total = cfg.epochs if epochs is None else epochs

    def evaluate() -> dict:
        model.eval()
        with torch.no_grad():
            pred = model.forward_layers(graph.x, None, blocks, 0, num_layers, node_degree=graph.degree)[0].argmax(1)
        return mask_accuracy(pred, graph.y, graph.masks)

    losses, history = [], []
    for epoch in range(total):
        model.train()
        opt.zero_grad(set_to_none=True)
        out, _ = model.forward_layers(graph.x, None, blocks, 0, num_layers, node_degree=graph.degree,
                                      rng_key=rng_key(cfg.seed, epoch, 0, 0))
        loss = F.cross_entropy(out[train], graph.y[train])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if eval_every and ((epoch + 1) % eval_every == 0 or epoch == total - 1):
            history.append(dict(epoch=epoch, **evaluate()))
    accuracy = {k: v for k, v in history[-1].items() if k != "epoch"} if history else evaluate()
    return dict(losses=losses, accuracy=accuracy, history=history,
                state={n: v.detach().clone() for n, v in model.state_dict().items()})


def graph_parallel_bytes(graph: ChunkGraph, hidden: int, num_layers: int, dtype_bytes: int = 4) -> dict:
    """Bytes per epoch of graph-parallel full-graph training of an L-layer model with hidden size
    H on the same parts (computed, not run): every layer, each part receives the h^i of its halo
    (forward) and sends the gradients of those rows back to their owners (backward)::

        forward = backward = L x sum_p |halo_p| x H x dtype_bytes

    (the layer-0 rows are counted as H-wide encoded rows, not as F-wide features, in the
    baseline's favour). Parameter gradients are left out on both sides."""
    halo = sum(graph.halo_sizes)
    fwd = num_layers * halo * hidden * dtype_bytes
    return dict(halo_rows=halo, forward=fwd, backward=fwd, total=2 * fwd)
