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

from gnnscale.errors import SamplerError, SamplerValueError
from gnnscale.pyg.layout import first_occurrences, induced_edges, repeat_rows, shown
from gnnscale.pyg.sampler import csc_of
from gnnscale.pyg.steps import Step, StepBook
from gnnscale.pyg.world import refuse_unjoined_world
from gnnscale.samplers.kernels import Kernels
from gnnscale.samplers.local import check_edge_weight, check_replace, sampling_variant
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
        disjoint: every seed grows its own tree (PyG's ``disjoint``; ``batch`` per type): a node of
            type t in tree i is drawn as ``i * N_t + node`` (its draws keyed so), and a neighbour
            joins its destination's tree.
        edge_weight: ``{relation: float [E]}`` (PyG's ``weight_attr``; relations left out draw
            uniformly): weighted draws, as :class:`gnnscale.pyg.sampler.GnnscaleSampler`'s.
        subgraph_type: as :class:`gnnscale.pyg.sampler.GnnscaleSampler`'s (``"induced"``: every edge
            of each relation among the drawn nodes; ``"bidirectional"``: PyG's ``to_bidirectional``).
        num_hops: the hops when there are no relations to count them by (a graph without edges).
    """

    def __init__(self, edge_index: Mapping[tuple, torch.Tensor] | None, num_nodes: Mapping[str, int],
                 fanouts: Mapping[tuple, Sequence[int]], seed: int = 0, replace: bool = False,
                 backend: str = "auto", csc: Mapping[tuple, tuple] | None = None, disjoint: bool = False,
                 edge_weight: Mapping[tuple, torch.Tensor] | None = None, subgraph_type: str = "directional",
                 num_hops: int = 0) -> None:
        refuse_unjoined_world(type(self).__name__)
        self.node_types = list(num_nodes)
        self.edge_types = list(edge_index if csc is None else csc)
        self.num_nodes = {t: int(n) for t, n in num_nodes.items()}
        self.fanouts = {et: [int(f) for f in fanouts[et]] for et in self.edge_types}
        self.num_hops = len(next(iter(self.fanouts.values()))) if self.fanouts else int(num_hops)
        self.seed = int(seed)
        self.replace = check_replace(replace)
        self.csc = dict(csc) if csc is not None else \
            {et: csc_of(ei, self.num_nodes[et[2]], self.num_nodes[et[0]]) for et, ei in edge_index.items()}
        weights = dict(edge_weight or {})
        self.variants = {et: sampling_variant(self.replace, None if et not in weights else check_edge_weight(
            weights[et][self.csc[et][2]], self.csc[et][1].numel())) for et in self.edge_types}
        self.kernels = Kernels(max(self.num_nodes.values(), default=1), "cpu", backend)
        self.epoch = 0
        if not isinstance(disjoint, bool):
            raise SamplerValueError(f"disjoint must be a bool; found {shown(disjoint)}. Pass disjoint=True or False.")
        self.disjoint = disjoint
        self.subgraph_type = subgraph_type
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
            asked = [(r, hop, frontier[et[2]], frontier[et[2]]) for r, et in enumerate(self.edge_types)
                     if self.fanouts[et][hop] != 0 and frontier[et[2]].numel()]
            for (r, *_), (_, nbrs, _) in zip(asked, self._draw_hop(asked, epoch, step, edges=False)):
                drawn[self.edge_types[r][0]].append(nbrs)
            for t in self.node_types:
                grown, _ = self.kernels.relabel(nodes[t], _cat(drawn[t]))
                frontier[t], nodes[t] = grown[nodes[t].numel():], grown
                self._level[t][frontier[t]] = hop + 1
        return nodes

    def sample_seeds(self, seeds: Mapping[str, torch.Tensor], epoch: int, step: int,
                     others: Mapping[str, torch.Tensor] | None = None,
                     trees: Mapping[str, torch.Tensor] | None = None) -> HeteroSamplerOutput:
        """PyG's output for distinct seeds of one or more types (``{type: int64 [B_t]}``; links: both ends).

        ``others``: the other ranks' seeds of the global step (``{type: int64}``, :mod:`gnnscale.pyg.steps`):
        a node that the whole step reaches at an earlier hop than this batch does draws that hop's
        neighbours (each relation's fan-out and key of that hop).

        Disjoint: ``trees`` ``{type: int64 [B_t]}`` each seed's tree (default: its index among its
        type's seeds); repeats allowed; ``batch[type]`` of the output is each node's tree."""
        if self.disjoint:
            ids = {}
            for t, s in seeds.items():
                tree = torch.arange(s.numel()) if trees is None or t not in trees else trees[t].to(torch.int64)
                ids[t] = s.to(torch.int64) + tree * self.num_nodes[t]
            out = self._sample_seeds(ids, epoch, step, False)
            out.batch = {t: torch.div(v, self.num_nodes[t], rounding_mode="floor") for t, v in out.node.items()}
            out.node = {t: v % self.num_nodes[t] for t, v in out.node.items()}
            return out
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
            drawn, asked, plan = {}, [], []
            for r, et in enumerate(self.edge_types):
                at = frontier[et[2]]
                lv = self._level[et[2]][at].to(torch.int64) if levels and at.numel() else None
                if lv is not None:
                    lv = torch.where(lv < 0, hop, lv)
                groups = [(hop, None)] if lv is None or bool((lv == hop).all()) else \
                    [(int(l), torch.nonzero(lv == l).flatten()) for l in torch.unique(lv).tolist()]
                groups = [(l, sel) for l, sel in groups if self.fanouts[et][l] != 0 and at.numel()]
                plan.append((at, groups))
                for level, sel in groups:  # at most num_hops groups per relation
                    sub = at if sel is None else at[sel]
                    asked.append((r, level, sub % self.num_nodes[et[2]] if self.disjoint else sub, sub))
            answers = iter(self._draw_hop(asked, epoch, step))  # every relation's draws of the hop at once
            for et, (at, groups) in zip(self.edge_types, plan):
                if not groups:
                    nse[et].append(0)
                    continue
                first = nodes[et[2]].numel() - at.numel()
                got = []
                for level, sel in groups:  # at most num_hops groups, answered in order
                    sub = at if sel is None else at[sel]
                    counts, nbrs, e_id = next(answers)
                    if self.disjoint:  # a neighbour joins its destination's tree
                        tree = torch.div(sub, self.num_nodes[et[2]], rounding_mode="floor")
                        nbrs = nbrs + torch.from_numpy(np.repeat((tree * self.num_nodes[et[0]]).numpy(),
                                                                 counts.numpy()))
                    index = np.arange(first, first + at.numel(), dtype=np.int64) if sel is None else \
                        sel.numpy() + first
                    cols[et].append(torch.from_numpy(np.repeat(index, counts.numpy())))
                    edges[et].append(e_id)
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

    def _draw_hop(self, groups: list[tuple], epoch: int, step: int, edges: bool = True) -> list[tuple]:
        """Per group ``(r, level, rows, ids)``: relation ``r``'s draws of hop ``level`` for the CSC ``rows`` keyed by
        ``ids``, as ``(counts, nbrs, e_id or None)``. One call per hop: the graph store's hook (typed_own_part)."""
        ets = [self.edge_types[r] for r, *_ in groups]
        drawn = [self.draw_relation(et, rows, ids, self.fanouts[et][lv], stream_key(self.seed, epoch, step, 0, lv, r))
                 for et, (r, lv, rows, ids) in zip(ets, groups)]
        return [(c, nb, torch.from_numpy(np.take(self.csc[et][2].numpy(), pos.numpy())) if edges else None)
                for et, (c, nb, pos) in zip(ets, drawn)]

    def draw_relation(self, et: tuple, rows: torch.Tensor, ids: torch.Tensor, fanout: int,
                      key: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(counts, neighbours, CSC positions) of relation ``et``'s in-edges of the CSC ``rows``
        (``ids``: the nodes as drawn, ``tree * N + node`` when disjoint: the draws' keys). The one
        draw per relation and hop; :mod:`gnnscale.pyg.typed_temporal` draws in time here."""
        indptr, indices, _ = self.csc[et]
        return self.kernels.sample(indptr, indices, rows, ids, fanout, key, return_edges=True, **self.variants[et])

    def shaped(self, out: HeteroSamplerOutput) -> HeteroSamplerOutput:
        """``out`` as ``subgraph_type`` asks (see :meth:`GnnscaleSampler.shaped`), relation by relation."""
        if self.subgraph_type == "induced":
            for et in self.edge_types:
                indptr, indices, perm = self.csc[et]
                out.row[et], out.col[et], out.edge[et] = induced_edges(indptr, indices, perm, out.node[et[2]],
                                                                       out.node[et[0]])
            out.num_sampled_edges = None
        elif self.subgraph_type == "bidirectional":
            out = out.to_bidirectional()
        return out

    def sample_from_nodes(self, inputs: NodeSamplerInput) -> HeteroSamplerOutput:
        """PyG's node sampling of seeds of ``inputs.input_type``; a seed given more than once (not
        disjoint) as :meth:`GnnscaleSampler.sample_from_nodes` lays it out."""
        if inputs.input_type is None:
            raise SamplerError("a HeteroData loader needs input_nodes with a node type, e.g. "
                               "input_nodes=('paper', mask); found none.")
        t = inputs.input_type
        step, plan = self._step(inputs.input_id)
        seeds = inputs.node.to(torch.int64)
        repeats = None if self.disjoint else first_occurrences(seeds)
        if repeats is not None:
            seeds = repeats[0]
        others = None if plan is None else {t: self.steps.inputs[plan.others()]}
        out = self.sample_seeds({t: seeds}, self.epoch, step, others)
        if repeats is not None:
            _, where, which = repeats
            B, S = inputs.node.numel(), out.node[t].numel()
            for et in self.edge_types:
                if t not in (et[0], et[2]):
                    continue
                hop0 = out.num_sampled_edges[et][0] if out.num_sampled_edges[et] else 0
                out.row[et], out.col[et], out.edge[et], added = repeat_rows(
                    out.row[et], out.col[et], out.edge[et], hop0, et[2] == t, et[0] == t, where, which, B, S)
                if added:
                    out.num_sampled_edges[et][0] += added
            out.node[t] = torch.cat([inputs.node.to(torch.int64), out.node[t][where.numel():]])
            out.num_sampled_nodes[t][0] = B
        out.metadata = (inputs.input_id, inputs.time)
        return self.shaped(out)

    def _draw(self, n: int, count: int, weight: torch.Tensor | None, gen: torch.Generator) -> torch.Tensor:
        if weight is None:
            return torch.randint(0, n, (count,), generator=gen, dtype=torch.int64)
        return torch.multinomial(weight.to(torch.float64), count, replacement=True, generator=gen)

    def _filter(self, et: tuple):
        from gnnscale.samplers.link import EdgeFilter

        if et not in self._filters:
            ns, nd = self.num_nodes[et[0]], self.num_nodes[et[2]]
            if et in self.csc:
                indptr, indices, _ = self.csc[et]
            else:  # a relation without edges: every pair is a negative
                indptr, indices = torch.zeros(nd + 1, dtype=torch.int64), torch.empty(0, dtype=torch.int64)
            self._filters[et] = EdgeFilter(indptr, indices, num_nodes=max(ns, nd, 1))
        return self._filters[et]

    # whether a rank's share of a step may be disjoint (its draws keyed by nothing that depends on the
    # tree numbers: the temporal rank samplers, gnnscale.pyg.run_typed_temporal)
    steps_disjoint = False

    _any = staticmethod(bool)  # whether a flag holds anywhere: here, in this process (own-part samplers: any rank)

    def negatives(self, et: tuple, count: int, neg, epoch: int, step: int,
                  src: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(src int64 [Q], dst int64 [Q]) negatives of relation ``et``: binary (``src`` None): sources
        uniform over ``et[0]``'s nodes, targets over ``et[2]``'s (or by PyG's src_weight / dst_weight);
        triplet: the sources given (``src`` int64 [Q]), targets drawn; none an edge of ``et``
        (redrawn up to MAX_REDRAWS rounds), keyed by (seed, epoch, step) as the homogeneous sampler's."""
        from gnnscale.pyg.sampler import MAX_REDRAWS
        from gnnscale.samplers.link import NegativeSampler

        ns, nd = self.num_nodes[et[0]], self.num_nodes[et[2]]
        has = self._filter(et).has_edge
        gen = NegativeSampler(max(ns, nd, 1), seed=self.seed).generator(epoch, step, 0)
        s = self._draw(ns, count, neg.src_weight, gen) if src is None else src.clone()
        d = self._draw(nd, count, neg.dst_weight, gen)
        bad = torch.nonzero(has(s, d)).flatten()
        for _ in range(MAX_REDRAWS):
            if not self._any(bad.numel() > 0):  # owners' filters: every rank redraws in step
                break
            if src is None:
                s[bad] = self._draw(ns, bad.numel(), neg.src_weight, gen)
            d[bad] = self._draw(nd, bad.numel(), neg.dst_weight, gen)
            bad = bad[has(s[bad], d[bad])]
        return s, d

    def sample_from_edges(self, inputs, neg_sampling=None) -> HeteroSamplerOutput:
        """PyG's link sampling of one relation ``inputs.input_type`` (PyG's ``edge_sample``): the endpoints
        of the positives and negatives are the seeds (per type; both ends one set when the relation
        joins one type; disjoint: each endpoint its own tree, numbered by its place among its type's
        seeds, modulo the positives); metadata as PyG's NeighborSampler gives it: binary
        ``(input_id, edge_label_index, edge_label, None)``, triplet ``(input_id, src_index,
        dst_pos_index, dst_neg_index, None)``. The relation may have no edges in the graph."""
        import math

        et = inputs.input_type
        if et[0] not in self.num_nodes or et[2] not in self.num_nodes:
            raise SamplerError(f"edge_label_index names relation {et!r}, whose node types are not among "
                               f"{self.node_types}; pass (relation, pairs) with a relation of the graph.")
        if inputs.time is not None:
            raise SamplerError("gnnscale's PyG sampler has no temporal sampling; found edge_label_time. "
                               "Leave edge_label_time unset.")
        triplet = neg_sampling is not None and not neg_sampling.is_binary()
        if self.steps is not None and (triplet or (self.disjoint and not self.steps_disjoint)):
            raise SamplerError("rank loaders draw binary negatives of a HeteroData only, not disjoint; found "
                               f"{'triplet negatives' if triplet else 'disjoint=True'}. Use neg_sampling_ratio.")
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
        if neg_sampling is not None and not triplet:
            if plan is None:
                s_neg, d_neg = self.negatives(et, math.ceil(num_pos * neg_sampling.amount), neg_sampling, epoch,
                                              step)
            src, dst = torch.cat([src, s_neg]), torch.cat([dst, d_neg])
            if label is None:
                label = torch.ones(num_pos)
            label = torch.cat([label, label.new_zeros((s_neg.numel(),) + label.size()[1:])])
        elif triplet:
            amount = int(neg_sampling.amount)
            # disjoint: negative q pairs with positive q % B (PyG's layout), else with positive q // amount
            own = src.repeat(amount) if self.disjoint else src.repeat_interleave(amount)
            _, d_neg = self.negatives(et, num_pos * amount, neg_sampling, epoch, step, src=own)
            dst = torch.cat([dst, d_neg])
        if et[0] == et[2]:
            both = torch.cat([src, dst])
            if self.disjoint:
                out = self.sample_seeds({et[0]: both}, epoch, step)
                inverse = torch.arange(both.numel())
            else:
                seed, inverse = torch.unique(both, return_inverse=True)
                out = self.sample_seeds({et[0]: seed}, epoch, step, others)
            s_inv, d_inv = inverse[:src.numel()], inverse[src.numel():]
        else:
            if self.disjoint:
                out = self.sample_seeds({et[0]: src, et[2]: dst}, epoch, step)
                s_inv, d_inv = torch.arange(src.numel()), torch.arange(dst.numel())
            else:
                s_seed, s_inv = torch.unique(src, return_inverse=True)
                d_seed, d_inv = torch.unique(dst, return_inverse=True)
                out = self.sample_seeds({et[0]: s_seed, et[2]: d_seed}, epoch, step, others)
        if self.disjoint:
            out.batch = {t: b % max(num_pos, 1) for t, b in out.batch.items()}
        if not triplet:
            out.metadata = (inputs.input_id, torch.stack([s_inv, d_inv]), label, None)
        else:
            if self.disjoint:  # negative q of tree q % B: row i of dst_neg_index holds tree i's
                neg = d_inv[num_pos:].view(-1, num_pos).t()
            else:
                neg = d_inv[num_pos:].view(num_pos, -1)
            out.metadata = (inputs.input_id, s_inv, d_inv[:num_pos], neg.reshape(num_pos, -1).squeeze(-1), None)
        return self.shaped(out)
