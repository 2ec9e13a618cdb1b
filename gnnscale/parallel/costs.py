"""Measured costs that balance pipeline stages: each layer's forward and backward on a real batch
(sampled micro-batches) or on a real chunk with its halo (chunk pipelining, with what a stage
runs besides its layers folded in). :func:`~gnnscale.planning.schedules.plan_stages` splits the
layers so that the most expensive stage is as cheap as possible.
"""
from __future__ import annotations

import statistics
import time
from typing import Sequence

import torch

from gnnscale.nn.models import GNN, LayerHooks
from gnnscale.parallel.chunk_graph import ChunkGraph, chunk_block
from gnnscale.parallel.chunk_tables import HaloGradients, StageTables
from gnnscale.process.comm import Communicator
from gnnscale.samplers.block import Block


def mean_over_ranks(comm: Communicator, values: Sequence[float]) -> list[float]:
    """Each of ``values`` averaged over every rank of ``comm`` (one all-reduce, figures by name)."""
    total = comm.all_reduce_named({f"{i:04d}": v for i, v in enumerate(values)}, op="sum")
    return [total[f"{i:04d}"] / comm.world_size for i in range(len(values))]


def measure_layer_costs(model: GNN, blocks: Sequence[Block], x: torch.Tensor, repeats: int = 3,
                        hist: Sequence[torch.Tensor | None] | None = None) -> list[float]:
    """Seconds of each layer's forward and backward on one batch (``blocks``, input rows ``x``):
    the fastest of ``repeats - 1`` timed passes after one that loads compiled kernels (the
    fastest, because what slows a pass on a shared machine is noise, not the layer). The
    model's weights, gradients and buffers (batch-norm statistics) are left as they were.

    ``hist``: per layer, float32 [blocks[i].num_hist, dims[i]] rows of the block's historical
    leaves (None where a block has none); their gathering is not timed.
    """
    saved = {name: b.detach().clone() for name, b in model.named_buffers()}
    costs = [float("inf")] * model.num_layers
    model.train()
    for rep in range(max(2, repeats)):
        h, x0 = x, None
        for i in range(model.num_layers):
            inp = h.detach().requires_grad_(i > 0)
            x0_in = x0.detach().requires_grad_() if x0 is not None else None
            rows = [None] * model.num_layers
            if hist is not None and hist[i] is not None:
                rows[i] = hist[i].detach().requires_grad_(i > 0)
            t0 = time.perf_counter()
            h, x0 = model.forward_layers(inp, x0_in, blocks, i, i + 1, LayerHooks(hist=rows))
            (h.sum() + (x0.sum() if x0 is not None else 0)).backward()
            if rep:
                costs[i] = min(costs[i], time.perf_counter() - t0)
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        for name, b in model.named_buffers():
            b.copy_(saved[name])
    return costs


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
    tables = StageTables([1], graph.num_nodes, [dim, dim], bound=1)
    tables.tables[1].stamps.zero_()
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
    """Per-layer costs for :func:`~gnnscale.planning.schedules.plan_stages`, measured on chunk 0's
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
