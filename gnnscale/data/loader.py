"""The data stages of a step, filling one :class:`~gnnscale.samplers.block.MiniBatch` (GraphBolt's
sample, fetch and copy): sample the blocks of its seeds, fetch their input rows, degrees and
labels, and copy what the model reads onto the training device.

One loader per worker (a pipeline stage has its own, for the hops its layers read).
:meth:`MiniBatchLoader.stream` hands a step's batches to the training loop in order, in a
prefetching thread (``--pipeline``) or in line; the batches are the same either way (draws are
keyed by epoch, step and node, not by timing).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import torch

from gnnscale.data.prefetch import Prefetcher
from gnnscale.samplers.block import MiniBatch


class MiniBatchLoader:
    """Sample, fetch, copy.

    Args:
        sampler: ``sample(seeds, epoch, step) -> MiniBatch`` (a distributed or local sampler).
        features: a :class:`~gnnscale.data.feature_store.DistFeatureStore` (None: this worker
            reads no input rows, e.g. a pipeline stage after the first).
        labels: ``seeds -> int64 [B]`` (None: this worker computes no loss).
        degrees: a :class:`~gnnscale.data.degrees.DegreeStore` for degree-normalized layers (None).
        copier: the worker's :class:`~gnnscale.process.device.DeviceCopier`.
        health: the heartbeat (phases ``sampling`` and ``fetching features``).
        keys: a :class:`~gnnscale.data.node_keys.NodeKeyStore`: fills ``node_keys`` (the original
            ids of the blocks' sources, the keyed dropout's row keys) (None: not filled).

    Attributes: ``times``: seconds spent in ``sample`` and ``fetch`` (reset by the caller).
    """

    def __init__(self, sampler, features=None, labels: Callable | None = None, degrees=None, copier=None,
                 health=None, keys=None) -> None:
        self.sampler, self.features, self.labels, self.degrees = sampler, features, labels, degrees
        self.keys = keys
        self.copier, self.health = copier, health
        self.times = {"sample": 0.0, "fetch": 0.0}

    def load(self, seeds: torch.Tensor, epoch: int, step: int, key: int | None = None) -> MiniBatch:
        """The MiniBatch of ``seeds`` (int64 [B] global ids) at ``step`` of ``epoch`` (``key``: the
        sampler's step key, default ``step``), with ``x``, ``y``, ``degrees`` and the device blocks
        filled; ``ready`` is the copy's event (None on CPU)."""
        t0 = time.perf_counter()
        self._enter("sampling", epoch, step)
        mb = self.sampler.sample(seeds, epoch=epoch, step=step if key is None else key)
        t1 = time.perf_counter()
        self._enter("fetching features", epoch, step)
        copier = self.copier
        with copier.side_stream():
            if self.features is not None:
                mb.x = self.features.fetch(mb.input_ids)
            if self.degrees is not None:
                ids = torch.unique(torch.cat([b.src_ids for b in mb.blocks] + [mb.seeds]))
                mb.degrees = self.degrees.lookup(ids)
            if self.keys is not None:
                mb.node_keys = self.keys.block_keys(mb.blocks)
            if self.labels is not None:
                mb.y = self.labels(seeds)
            mb = mb.to(copier.device, non_blocking=True)  # every field the model and the loss read
            mb.ready = copier.record()
        self.times["sample"] += t1 - t0
        self.times["fetch"] += time.perf_counter() - t1
        return mb

    def stream(self, produce: Callable[[int], Any], first: int, count: int, prefetch: bool, depth: int,
               bound: float) -> Iterator[Any]:
        """``produce(i)`` for ``i`` in ``first .. count - 1``, in order: in a thread ``depth`` ahead
        (``prefetch``; every wait bounded by ``bound`` seconds) or in line."""
        if not prefetch:
            return (produce(i) for i in range(first, count))
        return Prefetcher(lambda i: produce(first + i), count - first, depth, timeout=bound,
                          describe=self.health.phase if self.health else None,
                          on_exit=self.health.leave if self.health else None)

    def _enter(self, phase: str, epoch: int, step: int) -> None:
        if self.health is not None:
            self.health.enter(phase, epoch, step)


def wait_ready(copier, mb: MiniBatch) -> None:
    """Make the compute stream wait for ``mb``'s copies (a no-op on the CPU)."""
    if mb.ready is not None:
        copier.ready(mb.ready, *mb.tensors())


def build_samplers(part, comm, cfg, fanouts, mode: str = "exact", edge_attr: bool = False):
    """(training sampler, evaluation sampler, eval fanouts) of a part over ``comm`` (the stage's
    data group): the training fanouts in exchange ``mode``, the eval fanouts with a stream of
    their own (seed + 7919), both keyed by the nodes' original ids. A typed part is sampled by
    relation (every relation with the hop's fan-out). ``edge_attr``: both give every block the
    features of its edges (``part.edge_attr`` float32 [E_p, De], owners sending remote edges'
    rows: category ``edge_attr``), for a model whose layers read them
    (:func:`~gnnscale.nn.edge_features.resolve_edge_dim`); the draws are the same without."""
    from gnnscale.samplers import DistNeighborSampler, check_fanouts

    eval_fanouts = check_fanouts(cfg.eval_fanouts or cfg.fanouts, num_layers=len(cfg.fanouts))
    typed = getattr(part, "typed", None)
    train_typed = eval_typed = None
    if typed is not None:
        # --relation-fanouts: training only; evaluation draws --eval-fanouts for every relation
        train_typed = typed_graph(part, fanouts, getattr(cfg, "relation_fanouts", None))
        eval_typed = typed_graph(part, eval_fanouts)
    attr = None
    if edge_attr:
        attr = getattr(part, "edge_attr", None)
        if attr is None:
            from gnnscale.errors import SamplerError

            raise SamplerError("the model reads edge features but this part has none (no edge_attr.npy); partition a "
                               "dataset with edge_attr, or train with --edge-features off")
    # --sampler labor: training draws layer-neighbours (the sources' original ids are set by
    # open_data, set_source_keys); evaluation draws neighbours
    sampler = DistNeighborSampler(part.indptr, part.indices, part.book, comm, fanouts, seed=cfg.seed,
                                  owned_keys=part.orig_ids, backend=cfg.sampler_backend, mode=mode, typed=train_typed,
                                  edge_attr=attr, labor=getattr(cfg, "sampler", "neighbor") == "labor")
    eval_sampler = DistNeighborSampler(part.indptr, part.indices, part.book, comm, eval_fanouts, seed=cfg.seed + 7919,
                                       owned_keys=part.orig_ids, backend=cfg.sampler_backend, typed=eval_typed,
                                       edge_attr=attr)
    return sampler, eval_sampler, eval_fanouts


def typed_graph(part, fanouts, per_relation=None):
    """The :class:`~gnnscale.samplers.typed.TypedGraph` of a typed part: its per-relation pointer,
    each relation's destination type, ``fanouts`` for every relation but those ``per_relation``
    names (``{relation: fanouts}``) and the partition book's node types."""
    from gnnscale.samplers.typed import TypedGraph, typed_fanouts

    typed = part.typed
    names = [t for t in typed.meta["node_types"]]
    rels = [tuple(r) for r in typed.meta["edge_types"]]
    dst_type = torch.tensor([names.index(d) for _, _, d in rels], dtype=torch.int64)
    return TypedGraph(part.relation_indptr(), dst_type,
                      typed_fanouts(fanouts, [r for _, r, _ in rels], len(fanouts), per_relation), typed.book.ntype)
