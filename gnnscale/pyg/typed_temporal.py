"""Temporal sampling of a ``HeteroData`` for PyG's loaders (``time_attr``, ``input_time``,
``edge_label_time``, ``temporal_strategy``, plus ``time_window`` and ``time_cut``): the typed sampler
(:class:`gnnscale.pyg.hetero.HeteroGnnscaleSampler`) whose per-relation draw runs the
time-respecting kernels (:mod:`gnnscale.samplers.temporal_kernels`) on each relation's T-CSR.

The times are PyG's: ``time_attr`` names a node attribute (``data[type].time``: a neighbour counts at
its own time, so every relation out of that type is timed by its sources) or an edge attribute
(``data[relation].edge_time``: one time per edge of that relation), not both. A relation with no
time (its source type has none, or it holds no edge times) is static: all its in-edges are
candidates, drawn as without time (PyG's rule). Every seed grows its own tree (always disjoint,
``batch[type]`` says the tree); a node reached in tree ``i`` is asked at tree ``i``'s time at every
hop and relation, so every sampled edge of a timed relation is before its tree's seed time (``<=``
by default, PyG's; ``time_cut='<'`` strict). Seed times: ``input_time``, else the seeds' own node
times (node loaders); ``edge_label_time`` for links, both ends and every negative at its positive's
time, and a negative node from the future of its positive redrawn among the earlier nodes of its
type. The draws are keyed as the homogeneous temporal sampler's (seed, epoch, step, relation, hop;
the node's id; the tree's time). docs/temporal.md section 4.
"""
from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

import torch
from torch_geometric.data import HeteroData
from torch_geometric.sampler import EdgeSamplerInput, HeteroSamplerOutput, NegativeSampling, NodeSamplerInput

from gnnscale.errors import DatasetError, SamplerError, SamplerValueError
from gnnscale.pyg.hetero import HeteroGnnscaleSampler
from gnnscale.pyg.sampler import csc_of
from gnnscale.pyg.temporal import negatives_generator, redraw_late, seed_edge_times, step_redraw_times
from gnnscale.samplers.temporal import check_edge_time, check_temporal_options, time_sorted_csc
from gnnscale.samplers.temporal_kernels import sample_temporal


def _node_time(value: Any, n: int, where: str) -> torch.Tensor:
    """int64 [n] node times, or one line (another length, NaN / infinite / fractional values)."""
    t = torch.as_tensor(value)
    if t.dim() != 1 or t.numel() != n:
        raise DatasetError(f"expected {where} with one time per node, i.e. shape [{n}], found shape {tuple(t.shape)}; "
                           "give exactly one timestamp per node of the type")
    if t.dtype.is_floating_point and t.numel() and not bool(torch.isfinite(t).all()):
        i = int(torch.nonzero(~torch.isfinite(t))[0])
        raise DatasetError(f"expected finite times in {where}, found {int((~torch.isfinite(t)).sum())} NaN or "
                           f"infinite (first at node {i}: {float(t[i])}); fill or drop those nodes' times")
    return check_edge_time(t, n, where).clone()  # integral values, int64


def typed_times(data: Any, time_attr: str, edge_index: Mapping[tuple, torch.Tensor],
                num_nodes: Mapping[str, int]) -> tuple[dict, dict]:
    """({type: int64 [N_type]} node times, {relation: int64 [E]} edge times) of ``time_attr`` in a
    ``HeteroData`` (node stores or relation stores, not both) or a typed ``(FeatureStore,
    GraphStore)`` (node times in the feature store); one line each for a bad value."""
    if isinstance(data, HeteroData):
        node = {t: data[t][time_attr] for t in num_nodes if time_attr in data[t]}
        edge = {et: data[et][time_attr] for et in edge_index if time_attr in data[et]}
    else:  # (FeatureStore, GraphStore): a graph store holds no edge attributes
        have = {(a.group_name, a.attr_name) for a in data[0].get_all_tensor_attrs()}
        node = {t: data[0].get_tensor(group_name=t, attr_name=time_attr, index=None) for t in num_nodes
                if (t, time_attr) in have}
        edge = {}
    if node and edge:
        raise SamplerValueError(f"time_attr={time_attr!r} names node times ({sorted(node)}) and edge times "
                                f"({sorted(edge)}); PyG's time_attr is node-level or edge-level: rename one of them")
    if not node and not edge:
        raise SamplerValueError(f"time_attr={time_attr!r} names no attribute of the data's node types {list(num_nodes)} "
                                "or relations; store the times as data[type].time (per node) or "
                                "data[relation].edge_time (per edge) and name that attribute")
    return ({t: _node_time(v, num_nodes[t], f"data[{t!r}].{time_attr}") for t, v in node.items()},
            {et: check_edge_time(v, int(edge_index[et].size(1)), f"data[{et!r}].{time_attr}").clone()
             for et, v in edge.items()})


class TypedTemporalSampler(HeteroGnnscaleSampler):
    """:class:`~gnnscale.pyg.hetero.HeteroGnnscaleSampler` with time (see the module docstring).

    Args beyond its own: ``node_time`` ``{type: int64 [N_type]}`` or ``edge_time`` ``{relation:
    int64 [E]}``, ``temporal_strategy`` (``uniform``/``last``), ``time_window`` (0: none),
    ``time_cut`` (``'<='`` PyG's rule, or ``'<'``). Always disjoint, without replacement or weights.
    """

    def __init__(self, edge_index: Mapping[tuple, torch.Tensor], num_nodes: Mapping[str, int],
                 fanouts: Mapping[tuple, Sequence[int]], *, node_time: Mapping[str, torch.Tensor] | None = None,
                 edge_time: Mapping[tuple, torch.Tensor] | None = None, temporal_strategy: str = "uniform",
                 time_window: int = 0, time_cut: str = "<=", seed: int = 0, backend: str = "auto",
                 replace: bool = False, edge_weight: Any = None, num_hops: int = 0) -> None:
        if replace or edge_weight:
            raise SamplerError("gnnscale.pyg's temporal sampling draws without replacement and without weights; "
                               "leave replace and weight_attr out with time_attr")
        self.strategy, self.window, self.strict = check_temporal_options(temporal_strategy, time_window, time_cut)
        self.node_time = dict(node_time or {})
        edge_time = dict(edge_time or {})
        csc, self.edge_time = {}, {}
        for et, ei in edge_index.items():  # each timed relation's T-CSR: in-edges by (time, edge id)
            indptr, indices, perm = csc_of(ei, int(num_nodes[et[2]]), int(num_nodes[et[0]]))
            if et in edge_time:
                t = edge_time[et][perm]
            elif et[0] in self.node_time:
                t = self.node_time[et[0]][indices]  # node-level: an edge takes its source's time
            else:  # static relation
                csc[et] = (indptr, indices, perm)
                continue
            indices, order = time_sorted_csc(indptr, indices, t, perm)
            csc[et] = (indptr, indices.contiguous(), perm[order].contiguous())
            self.edge_time[et] = t[order].contiguous()
        super().__init__(None, num_nodes, fanouts, seed=seed, backend=backend, csc=csc, disjoint=True,
                         num_hops=num_hops)
        self._tree_time: torch.Tensor | None = None  # int64 [trees]: each tree's time, the batch being drawn
        self._seed_times: dict | None = None  # {type: int64 [B_type]}: the seeds' times, as sample_seeds gets them
        self._pos_times: torch.Tensor | None = None  # a link batch's positives' times (their negatives')
        self._time_order: dict[str, torch.Tensor] = {}  # {type: its nodes in time order} (negatives' redraws)

    @property
    def steps_disjoint(self) -> bool:
        """A rank's share of a step may be disjoint when every relation is timed: a timed draw is keyed by the
        node and its tree's time, not by the tree's number (a static relation's is: refused on rank link loaders)."""
        return all(et in self.edge_time for et in self.edge_types)

    def draw_relation(self, et: tuple, rows: torch.Tensor, ids: torch.Tensor, fanout: int,
                      key: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        etime = self.edge_time.get(et)
        if etime is None:
            return super().draw_relation(et, rows, ids, fanout, key)
        indptr, indices, _ = self.csc[et]
        tree = torch.div(ids, self.num_nodes[et[2]], rounding_mode="floor")
        rows = rows.contiguous()
        counts, nbrs, pos, _ = sample_temporal(indptr, indices, etime, rows, rows, self._tree_time[tree].contiguous(),
                                               fanout, key, self.strategy, self.strict, self.window, return_edges=True)
        return counts, nbrs, pos

    def sample_seeds(self, seeds: Mapping[str, torch.Tensor], epoch: int, step: int,
                     others: Mapping[str, torch.Tensor] | None = None,
                     trees: Mapping[str, torch.Tensor] | None = None) -> HeteroSamplerOutput:
        given = self._seed_times or {}
        numbers, times = [], []
        for t, s in seeds.items():
            tm = given.get(t)
            if tm is None or tm.numel() != s.numel():
                raise SamplerError(f"a temporal batch needs one time per seed of type {t!r} (input_time or "
                                   f"edge_label_time); found {None if tm is None else tm.numel()} for {s.numel()} seeds")
            numbers.append(torch.arange(s.numel()) if trees is None or t not in trees else trees[t].to(torch.int64))
            times.append(tm)
        number = torch.cat(numbers) if numbers else torch.empty(0, dtype=torch.int64)
        self._tree_time = torch.zeros(int(number.max()) + 1 if number.numel() else 0, dtype=torch.int64)
        if numbers:
            self._tree_time[number] = torch.cat(times)
        try:
            return super().sample_seeds(seeds, epoch, step, others, trees)
        finally:
            self._tree_time = None

    def sample_from_nodes(self, inputs: NodeSamplerInput) -> HeteroSamplerOutput:
        t, kind = inputs.time, inputs.input_type
        if t is None and kind is not None:
            if kind not in self.node_time:
                raise SamplerError(f"temporal seeds of type {kind!r}, which has no node times, need input_time (the "
                                   "time of each seed); pass input_time=... to the loader")
            t = self.node_time[kind][inputs.node]
        if kind is not None:
            self._seed_times = {kind: check_edge_time(t, inputs.node.numel(), "input_time")}
        try:
            return super().sample_from_nodes(inputs)
        finally:
            self._seed_times = None

    def negatives(self, et: tuple, count: int, neg: NegativeSampling, epoch: int, step: int,
                  src: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The typed sampler's negatives, then every negative node of a timed type from the future of
        its positive redrawn among the earlier nodes of its type (:func:`gnnscale.pyg.temporal.redraw_late`)."""
        s, d = super().negatives(et, count, neg, epoch, step, src)
        t = self._pos_times
        if t is None or not t.numel():
            return s, d
        gen = negatives_generator(self.seed, epoch, step)
        for ends, kind in (((s, et[0]), (d, et[2])) if src is None else ((d, et[2]),)):
            if kind not in self.node_time:
                continue
            if kind not in self._time_order:
                self._time_order[kind] = torch.argsort(self.node_time[kind], stable=True)
            redraw_late(ends, self.node_time[kind], self._time_order[kind], t, self.strict, gen)
        return s, d

    def sample_from_edges(self, inputs: EdgeSamplerInput,
                          neg_sampling: NegativeSampling | None = None) -> HeteroSamplerOutput:
        et = inputs.input_type
        t, ts, td = seed_edge_times(inputs, neg_sampling)
        self._seed_times = {et[0]: torch.cat([ts, td])} if et[0] == et[2] else {et[0]: ts, et[2]: td}
        self._pos_times = step_redraw_times(self, inputs, neg_sampling, t)  # a step's share: the step's negatives
        plain = copy.copy(inputs)
        plain.time = None
        try:
            out = super().sample_from_edges(plain, neg_sampling)
        finally:
            self._seed_times = self._pos_times = None
        out.metadata = (*out.metadata[:-1], ts)  # PyG's edge_label_time (binary) / seed_time (triplet)
        return out


def typed_temporal_sampler(data: Any, edge_index: Mapping[tuple, torch.Tensor], num_nodes: Mapping[str, int],
                           fanouts: Mapping[tuple, Sequence[int]], time_attr: str, temporal_strategy: str,
                           time_window: int, time_cut: str, seed: int, backend: str, replace: bool, edge_weight: Any,
                           num_hops: int = 0) -> TypedTemporalSampler:
    """The loaders' hook: a :class:`TypedTemporalSampler` of a typed graph (checked by the loaders)."""
    node_time, edge_time = typed_times(data, time_attr, edge_index, num_nodes)
    return TypedTemporalSampler(edge_index, num_nodes, fanouts, node_time=node_time, edge_time=edge_time,
                                temporal_strategy=temporal_strategy, time_window=time_window, time_cut=time_cut,
                                seed=seed, backend=backend, replace=replace, edge_weight=edge_weight,
                                num_hops=num_hops)
