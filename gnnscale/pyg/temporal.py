"""Temporal sampling for PyG's loaders (``time_attr``, ``input_time``, ``edge_label_time``,
``temporal_strategy``, plus a ``time_window`` and the cut), on gnnscale's time-respecting kernels
(:mod:`gnnscale.samplers.temporal_kernels`; docs/temporal.md).

``time_attr`` names an edge attribute (one time per edge: edge-level) or a node attribute (one
time per node: a neighbour then counts at its own time, PyG's node-level rule). Each seed has a
time: ``input_time`` (node loaders; default the seed's node time), ``edge_label_time`` (link
loaders: both endpoints, and every negative at its positive's time, as PyG lays them out). Every
seed grows its own tree (temporal batches are always disjoint: ``batch`` says the tree), and a
tree draws only among edges before its seed's time. The cut is PyG's by default (``<=``: an edge at
the seed's very time is a candidate, what PyG's tests and pyg-lib do); ``time_cut='<'`` makes it
strict (the engine's default). ``time_window=w`` keeps edges no older than ``t - w``.

The draws are keyed like every gnnscale draw (seed, epoch, step, hop; the node's id; and the
seed's time), so the batches do not depend on the process that draws them.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np
import torch
from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling, NodeSamplerInput, SamplerOutput

from gnnscale.errors import SamplerError, SamplerValueError
from gnnscale.pyg.sampler import GnnscaleSampler, csc_of
from gnnscale.samplers.rng import stream_key
from gnnscale.samplers.temporal import check_edge_time, check_temporal_options, time_sorted_csc
from gnnscale.samplers.temporal_kernels import sample_temporal


def time_of(data, time_attr: str) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(node_time int64 [N] or None, edge_time int64 [E] or None) of ``data[time_attr]``."""
    if time_attr not in data.keys():
        raise SamplerError(f"time_attr={time_attr!r} names no attribute of the data (found {sorted(data.keys())}); "
                           "name the node or edge attribute that holds the times")
    value = data[time_attr]
    e = int(data.edge_index.size(1))
    n = int(data.num_nodes)
    if data.is_edge_attr(time_attr) and value.numel() == e:
        return None, check_edge_time(value, e, f"data.{time_attr}").clone()
    if data.is_node_attr(time_attr) and value.numel() == n:
        return check_edge_time(value, n, f"data.{time_attr}").clone(), None
    raise SamplerError(f"expected data.{time_attr} with one time per node ({n}) or per edge ({e}), found shape "
                       f"{tuple(value.shape)}")


def negatives_generator(seed: int, epoch: int, step: int) -> torch.Generator:
    """The generator of a batch's negatives' redraws (keyed by the batch's step)."""
    return torch.Generator().manual_seed(stream_key(seed, epoch, step, 1, 0) & (2 ** 62 - 1))


def redraw_late(ends: torch.Tensor, node_time: torch.Tensor, order: torch.Tensor, pos_times: torch.Tensor,
                strict: bool, gen: torch.Generator) -> None:
    """Negative nodes ``ends`` (int64 [Q], in place) from the future of their positive (negative ``q``
    is timed as positive ``q % B``, PyG's layout: ``pos_times`` int64 [B]) redrawn among the nodes at
    or before that time (before it when ``strict``): one uniform draw over the eligible prefix of the
    nodes in time order (``order``: ``argsort(node_time)``). A slot with no earlier node keeps its draw
    (as PyG's: it has nothing to offer)."""
    tq = pos_times[torch.arange(ends.numel()) % pos_times.numel()]
    late = node_time[ends] >= tq if strict else node_time[ends] > tq
    bad = torch.nonzero(late).flatten()
    if not bad.numel():
        return
    room = torch.searchsorted(node_time[order], tq[bad], right=not strict)  # eligible nodes per slot
    ok = room > 0
    pick = (torch.rand(int(bad.numel()), generator=gen, dtype=torch.float64) * room).to(torch.int64)
    ends[bad[ok]] = order[torch.minimum(pick, room - 1)[ok]]



def seed_edge_times(inputs: Any, neg_sampling: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A temporal link batch's times: (``edge_label_time`` int64 [B], the source half's [S], the
    destination half's [D]), each half's position j at its positive's time ``t[j % B]`` (PyG's layout
    of binary and triplet negatives)."""
    if inputs.time is None:
        raise SamplerValueError("a temporal link loader needs edge_label_time (the time of each seed edge); "
                                "'edge_label_time' is not set")
    b = inputs.row.numel()
    t = check_edge_time(inputs.time, b, "edge_label_time")
    if neg_sampling is None:
        n_src = n_dst = b
    elif neg_sampling.is_binary():
        n_src = n_dst = b + int(np.ceil(b * neg_sampling.amount))
    else:
        n_src, n_dst = b, b * (1 + int(neg_sampling.amount))
    return (t, t[torch.arange(n_src) % b], t[torch.arange(n_dst) % b]) if b else (t, t, t)


def step_redraw_times(sampler: Any, inputs: Any, neg_sampling: Any, t: torch.Tensor) -> torch.Tensor:
    """The times a link batch's negatives are redrawn against (``redraw_late``'s ``pos_times``): the batch's
    positives' ``t``, or, for a rank's share of a global step (:mod:`gnnscale.pyg.steps`, ``steps.times``:
    each position's time), one per negative of the step: negative ``q`` at the step's positive ``q % S``
    (one process's rule), except this batch's own binary negatives ``[lo, hi)``, which stay at the times
    their trees are sampled at (PyG's layout in this batch: its positive ``(b + j) % b``). At
    ``neg_sampling_ratio=1`` both rules give the same times, so a step's negatives are one process's."""
    times = getattr(sampler.steps, "times", None) if sampler.steps is not None else None
    plan = sampler.steps.step(inputs.input_id) if times is not None else None
    if plan is None or neg_sampling is None:
        return t
    step = times[plan.positions]
    if not neg_sampling.is_binary():  # triplet: negative q pairs with positive q % S, in the batch as in the step
        return step
    a, S, b = neg_sampling.amount, step.numel(), t.numel()
    lo, hi = int(np.ceil(plan.offset * a)), int(np.ceil((plan.offset + plan.size) * a))
    per = step[torch.arange(int(np.ceil(S * a))) % max(S, 1)]
    if b:
        per[lo:hi] = t[(b + torch.arange(hi - lo)) % b]
    return per


class TemporalGnnscaleSampler(GnnscaleSampler):
    """:class:`~gnnscale.pyg.sampler.GnnscaleSampler` with time (see the module docstring).

    Args beyond GnnscaleSampler's: ``node_time`` int64 [N] or ``edge_time`` int64 [E] (one of them),
    ``temporal_strategy`` (``uniform``/``last``), ``time_window`` (0: none), ``time_cut``
    (``'<='`` PyG's rule, or ``'<'``). Always disjoint.
    """

    def __init__(self, edge_index: torch.Tensor, num_nodes: int, fanouts: Sequence[int], *,
                 node_time: torch.Tensor | None = None, edge_time: torch.Tensor | None = None,
                 temporal_strategy: str = "uniform", time_window: int = 0, time_cut: str = "<=", seed: int = 0,
                 backend: str = "auto", replace: bool = False, edge_weight: torch.Tensor | None = None) -> None:
        if replace or edge_weight is not None:
            raise SamplerError("gnnscale.pyg's temporal sampling draws without replacement and without weights; "
                               "leave replace and weight_attr out with time_attr")
        self.strategy, self.window, self.strict = check_temporal_options(temporal_strategy, time_window, time_cut)
        indptr, indices, perm = csc_of(edge_index, int(num_nodes))
        et = node_time[indices] if edge_time is None else edge_time[perm]  # node-level: the source's time
        indices, order = time_sorted_csc(indptr, indices, et, perm)
        super().__init__(edge_index, num_nodes, fanouts, seed=seed, backend=backend, disjoint=True,
                         csc=(indptr, indices.contiguous(), perm[order].contiguous()))
        self.edge_time = et[order].contiguous()
        self.node_time = node_time
        self._times: torch.Tensor | None = None  # the time of each tree of the batch being drawn
        self._seed_times: torch.Tensor | None = None  # the batch's seeds' times, in seed order
        self._pos_times: torch.Tensor | None = None  # a link batch's positives' times (their negatives')
        self._time_order: torch.Tensor | None = None  # the nodes in node-time order (negatives' redraws)

    def _hop(self, frontier: torch.Tensor, hop: int, epoch: int, step: int, levels: bool):
        n = self.num_nodes
        tree = torch.div(frontier, n, rounding_mode="floor")
        at = frontier - tree * n
        counts, nbrs, edges, _ = sample_temporal(self.indptr, self.indices, self.edge_time, at, at,
                                                 self._times[tree].contiguous(), self.fanouts[hop],
                                                 stream_key(self.seed, epoch, step, 0, hop), self.strategy,
                                                 self.strict, self.window, return_edges=True)
        c = counts.numpy()
        nbrs = nbrs + torch.from_numpy(np.repeat((tree * n).numpy(), c))  # a neighbour joins its tree
        edges = torch.from_numpy(np.take(self.perm.numpy(), edges.numpy()))  # CSC positions -> original edge ids
        return np.repeat(np.arange(frontier.numel(), dtype=np.int64), c), nbrs, edges

    def sample(self, seeds: torch.Tensor, epoch: int, step: int, others: torch.Tensor | None = None,
               trees: torch.Tensor | None = None) -> SamplerOutput:
        times = self._seed_times
        if times is None or times.numel() != seeds.numel():
            raise SamplerError("a temporal batch needs one time per seed (input_time or edge_label_time); found "
                               f"{None if times is None else times.numel()} for {seeds.numel()} seeds")
        if trees is None:
            self._times = times
        else:  # global tree numbers (gnnscale.pyg.steps): their times by number
            self._times = torch.zeros(int(trees.max()) + 1 if trees.numel() else 0, dtype=torch.int64)
            self._times[trees] = times
        try:
            return super().sample(seeds, epoch, step, others, trees)
        finally:
            self._times = None

    def negatives(self, src: torch.Tensor, dst: torch.Tensor, neg: NegativeSampling, epoch: int,
                  step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The plain sampler's negatives, then, with node times, every negative node from the future of
        its positive (negative ``q`` is timed as positive ``q % B``: PyG's layout) redrawn among the
        nodes at or before that time (before it with the strict cut): one uniform draw over the
        eligible prefix of the nodes in time order, keyed by the batch's step (PyG redraws so too)."""
        s, d = super().negatives(src, dst, neg, epoch, step)
        t = self._pos_times
        if self.node_time is None or t is None or not t.numel():
            return s, d
        if self._time_order is None:
            self._time_order = torch.argsort(self.node_time, stable=True)
        gen = negatives_generator(self.seed, epoch, step)
        for ends in ((s, d) if neg.is_binary() else (d,)):
            redraw_late(ends, self.node_time, self._time_order, t, self.strict, gen)
        return s, d

    def sample_from_nodes(self, inputs: NodeSamplerInput) -> SamplerOutput:
        t = inputs.time
        if t is None:
            if self.node_time is None:
                raise SamplerError("edge-level time_attr needs input_time (the time of each seed); pass "
                                   "input_time=... to the loader")
            t = self.node_time[inputs.node]
        self._seed_times = check_edge_time(t, inputs.node.numel(), "input_time")
        try:
            return super().sample_from_nodes(inputs)
        finally:
            self._seed_times = None

    def sample_from_edges(self, inputs: EdgeSamplerInput,
                          neg_sampling: NegativeSampling | None = None) -> SamplerOutput:
        t, ts, td = seed_edge_times(inputs, neg_sampling)
        self._seed_times = torch.cat([ts, td]) if t.numel() else t
        plain = copy.copy(inputs)
        plain.time = None
        self._pos_times = step_redraw_times(self, inputs, neg_sampling, t)  # a step's share: the step's negatives
        try:
            out = super().sample_from_edges(plain, neg_sampling)
        finally:
            self._seed_times = self._pos_times = None
        src_time = ts  # each source's position at its positive's time (empty batch: t)
        meta = list(out.metadata)
        meta[-1] = src_time  # PyG's src_time (binary: metadata[3], triplet: metadata[4])
        out.metadata = tuple(meta)
        return out


def temporal_sampler(data, edge_index: torch.Tensor, num_nodes: int, fanouts, time_attr: str, temporal_strategy: str,
                     time_window: int, time_cut: str, seed: int, backend: str, replace: bool,
                     edge_weight) -> TemporalGnnscaleSampler:
    """The loaders' hook: a :class:`TemporalGnnscaleSampler` of a homogeneous ``Data`` (its graph
    checked by the loaders; a typed graph: :mod:`gnnscale.pyg.typed_temporal`)."""
    from torch_geometric.data import Data

    if not isinstance(data, Data):
        raise SamplerError("time_attr with a (FeatureStore, GraphStore) of untyped edges is not supported (typed "
                           "stores are: node times in the feature store); pass a Data or a HeteroData")
    node_time, edge_time = time_of(data, time_attr)
    return TemporalGnnscaleSampler(edge_index, num_nodes, fanouts, node_time=node_time, edge_time=edge_time,
                                   temporal_strategy=temporal_strategy, time_window=time_window, time_cut=time_cut,
                                   seed=seed, backend=backend, replace=replace, edge_weight=edge_weight)


def temporal_kwargs(kwargs: dict[str, Any], time_attr: str | None) -> tuple[int, str]:
    """(time_window, time_cut) popped from a loader's keyword arguments; one line when given
    without ``time_attr`` (they would do nothing)."""
    if time_attr is None:
        for name in ("time_window", "time_cut"):
            if name in kwargs:
                raise SamplerError(f"{name}={kwargs[name]!r} needs time_attr (the times it applies to); pass "
                                   f"time_attr=... or leave {name} out")
    return int(kwargs.pop("time_window", 0) or 0), str(kwargs.pop("time_cut", "<="))
