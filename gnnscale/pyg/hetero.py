"""PyG's ``BaseSampler`` for an in-memory ``HeteroData`` on gnnscale's kernels (node and link batches).

Each relation ``(src, rel, dst)`` is its own CSC (in-edges of the ``dst`` nodes, sources in
``src``'s ids, ordered by source id). Hop ``h`` draws, for every relation, ``fanout[rel][h]``
in-edges of the ``dst`` nodes that hop ``h - 1`` added (the seeds at hop 0), keyed by (seed,
epoch, step, relation, hop) and the node's id; each source type relabels the draws of all its
relations at once, so a node appears once per type. The output is PyG's ``HeteroSamplerOutput``:
``node[type]`` original per-type ids (the seeds first), ``row``/``col``/``edge`` per relation
(local source, local target, original edge id), ``num_sampled_nodes[type]`` per hop and
``num_sampled_edges[relation]`` per hop, as ``trim_to_layer`` reads them.

Under N processes (``steps``, :mod:`gnnscale.pyg.steps`) a batch is drawn as its share of the
global step, as :class:`gnnscale.pyg.sampler.GnnscaleSampler` draws it: keyed by the step, a node
that the whole step reaches at an earlier hop drawing that hop's relations' neighbours, and the
step's negatives cut by position.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
from torch_geometric.sampler import BaseSampler, HeteroSamplerOutput, NodeSamplerInput

from gnnscale.errors import SamplerError
from gnnscale.pyg.sampler import csc_of
from gnnscale.pyg.steps import Step, StepBook
from gnnscale.pyg.world import refuse_unjoined_world
from gnnscale.samplers.kernels import Kernels
from gnnscale.samplers.local import check_replace
from gnnscale.samplers.rng import stream_key

_EMPTY = torch.empty(0, dtype=torch.int64)


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat(parts) if parts else _EMPTY


class HeteroGnnscaleSampler(BaseSampler):
    """Neighbour sampling of a typed graph for PyG's ``NodeLoader``.

    Args:
        edge_index: ``{(src, rel, dst): int64 [2, E]}`` (ids per type, checked by the loader).
        num_nodes: ``{type: N_type}``.
        fanouts: ``{(src, rel, dst): [per hop]}``, every relation the same number of hops;
            0 skips a relation at that hop, -1 takes all.
        seed, replace, backend: as :class:`gnnscale.pyg.sampler.GnnscaleSampler`.
        csc: ``{relation: (indptr, indices, perm)}`` as :func:`gnnscale.pyg.sampler.csc_of` returns
            them, instead of ``edge_index`` (None then; e.g. a
            :class:`gnnscale.pyg.typed_stores.TypedPartitionGraphStore`'s).
    """

    def __init__(self, edge_index: Mapping[tuple, torch.Tensor] | None, num_nodes: Mapping[str, int],
                 fanouts: Mapping[tuple, Sequence[int]], seed: int = 0, replace: bool = False,
                 backend: str = "auto", csc: Mapping[tuple, tuple] | None = None) -> None:
        refuse_unjoined_world(type(self).__name__)
        self.node_types = list(num_nodes)
        self.edge_types = list(edge_index if csc is None else csc)
        self.num_nodes = {t: int(n) for t, n in num_nodes.items()}
        self.fanouts = {et: [int(f) for f in fanouts[et]] for et in self.edge_types}
        self.num_hops = len(next(iter(self.fanouts.values()))) if self.fanouts else 0
        self.seed = int(seed)
        self.replace = check_replace(replace)
        self.variant = {"replace": True} if replace else {}
        self.csc = dict(csc) if csc is not None else \
            {et: csc_of(ei, self.num_nodes[et[2]], self.num_nodes[et[0]]) for et, ei in edge_index.items()}
        self.kernels = Kernels(max(self.num_nodes.values(), default=1), "cpu", backend)
        self.epoch = 0
        self.disjoint = False
        self._filters: dict = {}
        self.steps: StepBook | None = None  # N processes: each batch's global step
        self._level: dict[str, torch.Tensor] = {}  # int8 [N_type]: a step's first hops (_levels)

    @property
    def edge_permutation(self) -> None:
        return None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def sample(self, input_type: str, seeds: torch.Tensor, epoch: int, step: int) -> HeteroSamplerOutput:
        """PyG's output for distinct seeds int64 [B] of ``input_type``."""
        return self.sample_seeds({input_type: seeds}, epoch, step)

    def _step(self, input_id: torch.Tensor | None) -> tuple[int, Step | None]:
        """(the draws' step number, the batch's global step or None), as GnnscaleSampler's."""
        plan = self.steps.step(input_id) if self.steps is not None else None
        if plan is not None:
            return plan.key, plan
        return (int(input_id[0]) if input_id is not None and input_id.numel() else 0), None

    def _levels(self, seeds: Mapping[str, torch.Tensor], epoch: int, step: int) -> dict[str, torch.Tensor] | None:
        """The hop at which a batch of ``seeds`` (``{type: int64}``, repeats allowed) reaches each node
        within ``num_hops - 1`` hops, written into ``self._level[type]`` (int8 [N_type], -1 elsewhere;
        the caller resets the returned ``{type: ids}``). None when no draw depends on the hop."""
        if all(f in (-1, 0) for fs in self.fanouts.values() for f in fs) and \
                all(len(set(fs)) == 1 for fs in self.fanouts.values()):
            return None
        nodes, frontier = {}, {}
        for t in self.node_types:
            ids = torch.unique(seeds[t].to(torch.int64)) if t in seeds else _EMPTY
            nodes[t] = frontier[t] = ids
            if t not in self._level:
                self._level[t] = torch.full((self.num_nodes[t],), -1, dtype=torch.int8)
            self._level[t][ids] = 0
        for hop in range(self.num_hops - 1):
            drawn: dict[str, list] = {t: [] for t in self.node_types}
            for r, et in enumerate(self.edge_types):
                fanout, at = self.fanouts[et][hop], frontier[et[2]]
                if fanout == 0 or at.numel() == 0:
                    continue
                indptr, indices, _ = self.csc[et]
                key = stream_key(self.seed, epoch, step, 0, hop, r)
                drawn[et[0]].append(self.kernels.sample(indptr, indices, at, at, fanout, key, **self.variant)[1])
            for t in self.node_types:
                grown, _ = self.kernels.relabel(nodes[t], _cat(drawn[t]))
                frontier[t], nodes[t] = grown[nodes[t].numel():], grown
                self._level[t][frontier[t]] = hop + 1
        return nodes

    def sample_seeds(self, seeds: Mapping[str, torch.Tensor], epoch: int, step: int,
                     others: Mapping[str, torch.Tensor] | None = None) -> HeteroSamplerOutput:
        """PyG's output for distinct seeds of one or more types (``{type: int64 [B_t]}``; links: both ends).

        ``others``: the other ranks' seeds of the global step (``{type: int64}``, :mod:`gnnscale.pyg.steps`):
        a node that the whole step reaches at an earlier hop than this batch does draws that hop's
        neighbours (each relation's fan-out and key of that hop)."""
        reached = None
        if others is not None and any(o.numel() for o in others.values()):
            both = {t: _cat([x for x in (seeds.get(t), others.get(t)) if x is not None])
                    for t in set(seeds) | set(others)}
            reached = self._levels(both, epoch, step)
        try:
            return self._sample_seeds(seeds, epoch, step, reached is not None)
        finally:
            if reached is not None:
                for t, ids in reached.items():
                    self._level[t][ids] = -1

    def _sample_seeds(self, seeds: Mapping[str, torch.Tensor], epoch: int, step: int,
                      levels: bool) -> HeteroSamplerOutput:
        nodes = {t: _EMPTY for t in self.node_types}
        for t, ids in seeds.items():
            nodes[t] = ids.to(torch.int64).contiguous()
        frontier = dict(nodes)
        rows = {et: [] for et in self.edge_types}
        cols = {et: [] for et in self.edge_types}
        edges = {et: [] for et in self.edge_types}
        nsn = {t: [nodes[t].numel()] for t in self.node_types}
        nse = {et: [] for et in self.edge_types}
        for hop in range(self.num_hops):
            drawn = {}
            for r, et in enumerate(self.edge_types):
                at = frontier[et[2]]
                lv = self._level[et[2]][at].to(torch.int64) if levels and at.numel() else None
                if lv is not None:
                    lv = torch.where(lv < 0, hop, lv)
                groups = [(hop, None)] if lv is None or bool((lv == hop).all()) else \
                    [(int(l), torch.nonzero(lv == l).flatten()) for l in torch.unique(lv).tolist()]
                groups = [(l, sel) for l, sel in groups if self.fanouts[et][l] != 0 and at.numel()]
                if not groups:
                    nse[et].append(0)
                    continue
                indptr, indices, perm = self.csc[et]
                first = nodes[et[2]].numel() - at.numel()
                got = []
                for level, sel in groups:  # at most num_hops groups: one kernel call each
                    key = stream_key(self.seed, epoch, step, 0, level, r)
                    sub = at if sel is None else at[sel]
                    counts, nbrs, pos = self.kernels.sample(indptr, indices, sub, sub, self.fanouts[et][level], key,
                                                            return_edges=True, **self.variant)
                    index = np.arange(first, first + at.numel(), dtype=np.int64) if sel is None else \
                        sel.numpy() + first
                    cols[et].append(torch.from_numpy(np.repeat(index, counts.numpy())))
                    edges[et].append(torch.from_numpy(np.take(perm.numpy(), pos.numpy())))
                    got.append(nbrs)
                nbrs = _cat(got)
                nse[et].append(nbrs.numel())
                drawn[et] = nbrs
            for t in self.node_types:  # one relabeling per source type, over all its relations' draws
                mine = [et for et in drawn if et[0] == t]
                if not mine:
                    frontier[t] = _EMPTY
                    nsn[t].append(0)
                    continue
                grown, local = self.kernels.relabel(nodes[t], torch.cat([drawn[et] for et in mine]))
                for et, part in zip(mine, torch.split(local, [drawn[et].numel() for et in mine])):
                    rows[et].append(part)
                frontier[t] = grown[nodes[t].numel():]
                nodes[t] = grown
                nsn[t].append(frontier[t].numel())
        return HeteroSamplerOutput(
            node=nodes,
            row={et: _cat(rows[et]) for et in self.edge_types},
            col={et: _cat(cols[et]) for et in self.edge_types},
            edge={et: _cat(edges[et]) for et in self.edge_types},
            batch=None, num_sampled_nodes=nsn, num_sampled_edges=nse)

    def sample_from_nodes(self, inputs: NodeSamplerInput) -> HeteroSamplerOutput:
        if inputs.input_type is None:
            raise SamplerError("a HeteroData loader needs input_nodes with a node type, e.g. "
                               "input_nodes=('paper', mask); found none.")
        step, plan = self._step(inputs.input_id)
        others = None if plan is None else {inputs.input_type: self.steps.inputs[plan.others()]}
        out = self.sample_seeds({inputs.input_type: inputs.node}, self.epoch, step, others)
        out.metadata = (inputs.input_id, inputs.time)
        return out

    def _draw(self, n: int, count: int, weight: torch.Tensor | None, gen: torch.Generator) -> torch.Tensor:
        if weight is None:
            return torch.randint(0, n, (count,), generator=gen, dtype=torch.int64)
        return torch.multinomial(weight.to(torch.float64), count, replacement=True, generator=gen)

    def negatives(self, et: tuple, count: int, neg, epoch: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(src int64 [Q], dst int64 [Q]) binary negatives of relation ``et``: sources uniform over ``et[0]``'s
        nodes, targets over ``et[2]``'s (or by PyG's src_weight / dst_weight), none an edge of ``et``
        (redrawn up to MAX_REDRAWS rounds), keyed by (seed, epoch, step) as the homogeneous sampler's."""
        from gnnscale.pyg.sampler import MAX_REDRAWS
        from gnnscale.samplers.link import EdgeFilter, NegativeSampler

        ns, nd = self.num_nodes[et[0]], self.num_nodes[et[2]]
        if et not in self._filters:
            indptr, indices, _ = self.csc[et]
            self._filters[et] = EdgeFilter(indptr, indices, num_nodes=max(ns, nd, 1))
        has = self._filters[et].has_edge
        gen = NegativeSampler(max(ns, nd, 1), seed=self.seed).generator(epoch, step, 0)
        s, d = self._draw(ns, count, neg.src_weight, gen), self._draw(nd, count, neg.dst_weight, gen)
        bad = torch.nonzero(has(s, d)).flatten()
        for _ in range(MAX_REDRAWS):
            if bad.numel() == 0:
                break
            s[bad] = self._draw(ns, bad.numel(), neg.src_weight, gen)
            d[bad] = self._draw(nd, bad.numel(), neg.dst_weight, gen)
            bad = bad[has(s[bad], d[bad])]
        return s, d

    def sample_from_edges(self, inputs, neg_sampling=None) -> HeteroSamplerOutput:
        """PyG's link sampling of one relation ``inputs.input_type``: the endpoints of the positives and
        binary negatives are the seeds (per type; both ends one set when the relation joins one type);
        metadata ``(input_id, edge_label_index, edge_label, None)`` as PyG's NeighborSampler gives it."""
        import math

        et = inputs.input_type
        if et not in self.csc:
            raise SamplerError(f"edge_label_index names relation {et!r}, not one of {self.edge_types}; pass "
                               "(relation, pairs) with a relation of the graph.")
        if inputs.time is not None:
            raise SamplerError("gnnscale's PyG sampler has no temporal sampling; found edge_label_time. "
                               "Leave edge_label_time unset.")
        if neg_sampling is not None and not neg_sampling.is_binary():
            raise SamplerError("triplet negatives on HeteroData are not supported yet; found neg_sampling='triplet'. "
                               "Use neg_sampling_ratio (binary) or a Data.")
        epoch = self.epoch
        step, plan = self._step(inputs.input_id)
        src, dst, label = inputs.row, inputs.col, inputs.label
        num_pos = src.numel()
        others = None
        if plan is not None:  # the global step's pairs and negatives (cut by position), as GnnscaleSampler's
            pairs = self.steps.inputs[:, plan.positions]
            ends = {et[0]: [pairs[0]], et[2]: [pairs[1]]} if et[0] != et[2] else {et[0]: [pairs.reshape(-1)]}
            if neg_sampling is not None:
                a = neg_sampling.amount
                gs, gd = self.negatives(et, math.ceil(pairs.size(1) * a), neg_sampling, epoch, step)
                ends[et[0]].append(gs)
                ends[et[2]].append(gd)
                lo, hi = math.ceil(plan.offset * a), math.ceil((plan.offset + plan.size) * a)
                s_neg, d_neg = gs[lo:hi], gd[lo:hi]
            others = {t: torch.cat(v) for t, v in ends.items()}
        if neg_sampling is not None:
            if plan is None:
                s_neg, d_neg = self.negatives(et, math.ceil(num_pos * neg_sampling.amount), neg_sampling, epoch,
                                              step)
            src, dst = torch.cat([src, s_neg]), torch.cat([dst, d_neg])
            if label is None:
                label = torch.ones(num_pos)
            label = torch.cat([label, label.new_zeros((s_neg.numel(),) + label.size()[1:])])
        if et[0] == et[2]:
            seed, inverse = torch.unique(torch.cat([src, dst]), return_inverse=True)
            seeds, eli = {et[0]: seed}, inverse.view(2, -1)
        else:
            s_seed, s_inv = torch.unique(src, return_inverse=True)
            d_seed, d_inv = torch.unique(dst, return_inverse=True)
            seeds, eli = {et[0]: s_seed, et[2]: d_seed}, torch.stack([s_inv, d_inv])
        out = self.sample_seeds(seeds, epoch, step, others)
        out.metadata = (inputs.input_id, eli, label, None)
        return out


def check_hetero_data(data) -> tuple[dict, dict]:
    """({relation: edge_index int64 [2, E]}, {type: N}) of a ``HeteroData``, or a one-line error."""
    from gnnscale.errors import DatasetError

    num_nodes = {}
    for t in data.node_types:
        n = data[t].num_nodes
        if n is None:
            raise DatasetError(f"data[{t!r}] has no num_nodes and no x to count nodes by; set data[{t!r}].num_nodes.")
        x = getattr(data[t], "x", None)
        if isinstance(x, torch.Tensor) and x.size(0) != n:
            raise DatasetError(f"data[{t!r}].x has {x.size(0)} rows but the type has num_nodes = {n}; x needs one "
                               f"row per node: fix data[{t!r}].num_nodes or data[{t!r}].x.")
        num_nodes[t] = int(n)
    if not data.edge_types:
        raise DatasetError("data has no edge types: the sampler needs the graph's edges. Add data[(src, rel, dst)]"
                           ".edge_index.")
    edge_index = {}
    for et in data.edge_types:
        ei = getattr(data[et], "edge_index", None)
        if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2 or ei.dtype.is_floating_point:
            raise DatasetError(f"data[{et!r}] needs edge_index, an integer tensor [2, E]; found "
                               f"{getattr(ei, 'dtype', type(ei).__name__)}. Store each relation's edges there.")
        ei = ei.to(torch.int64)
        for row, t in ((0, et[0]), (1, et[2])):
            if ei.numel() and (int(ei[row].min()) < 0 or int(ei[row].max()) >= num_nodes[t]):
                raise DatasetError(f"data[{et!r}].edge_index row {row} ids must lie in [0, {num_nodes[t]}) (the "
                                   f"{t!r} nodes); found range [{int(ei[row].min())}, {int(ei[row].max())}].")
        edge_index[et] = ei
    return edge_index, num_nodes


def hetero_fanouts(num_neighbors, edge_types: list[tuple]) -> dict:
    """``{relation: fan-outs}`` from a list (every relation) or a dict naming every relation."""
    fix = ("Pass num_neighbors as a list of ints (every relation, per hop) or a dict {(src, rel, dst): [per hop]} "
           "naming every relation; 0 skips a relation at a hop, -1 takes all.")
    if isinstance(num_neighbors, (list, tuple)):
        num_neighbors = {et: num_neighbors for et in edge_types}
    if not isinstance(num_neighbors, dict):
        raise SamplerError(f"num_neighbors must be a list of ints or a dict per relation; found {num_neighbors!r}. "
                           f"{fix}")
    missing = [et for et in edge_types if et not in num_neighbors]
    if missing:
        raise SamplerError(f"num_neighbors names no fan-outs for relation(s) {missing}. {fix}")
    out, hops = {}, None
    for et in edge_types:
        f = num_neighbors[et]
        if not isinstance(f, (list, tuple)) or not f or any(
                isinstance(v, bool) or not isinstance(v, int) or v < -1 for v in f):
            raise SamplerError(f"num_neighbors[{et!r}] must be a non-empty list of ints >= 0 or -1; found {f!r}. {fix}")
        if hops is not None and len(f) != hops:
            raise SamplerError(f"every relation needs the same number of hops; found {hops} and {len(f)} "
                               f"({et!r}). {fix}")
        hops = len(f)
        out[et] = [int(v) for v in f]
    return out
