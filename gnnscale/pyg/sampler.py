"""PyG's ``BaseSampler`` on gnnscale's keyed kernels: neighbours of nodes and of seed edges.

:class:`GnnscaleSampler` plugs into PyG's own ``NodeLoader`` / ``LinkLoader`` through their
extension point (``sample_from_nodes`` / ``sample_from_edges`` -> ``SamplerOutput``), the way
cuGraph-PyG does, so PyG's batches, models and ``trim_to_layer`` run unchanged, while the draws
are gnnscale's (``samplers.kernels``: compiled CSC draws keyed by (seed, epoch, step, hop) and
each node's id, and the compiled relabeler).

The output follows PyG's ``NeighborSampler`` (homogeneous; ``disjoint`` adds ``batch``, see
:meth:`GnnscaleSampler.sample`):

- ``node`` int64 [S]: original ids, the seeds first (in input order), then each hop's new nodes
  in order of first appearance (``num_sampled_nodes`` = [B, new at hop 1, ...]);
- ``row`` / ``col`` int64 [M]: local source / destination of each sampled edge (PyG's
  ``filter_data`` stacks them into ``batch.edge_index``), hop by hop (``num_sampled_edges``):
  hop ``h`` draws the in-edges of the nodes that hop ``h - 1`` added (the seeds at hop 0), so
  every node's in-edges are drawn once, at the hop that reached it;
- ``edge`` int64 [M]: the original edge id (column of ``data.edge_index``) of each sampled edge
  (``edge_permutation`` is None: the ids are already original);
- ``metadata``: ``(input_id, time)`` for nodes; for edges what PyG's ``edge_sample`` gives
  (``edge_label_index``/``edge_label``, or triplet ``src_index``/``dst_pos_index``/``dst_neg_index``).

A node's draws at hop ``h`` equal those of the engine's block sampler
(:class:`gnnscale.samplers.NeighborSampler`) at the same (epoch, step, hop): same keys, same CSC
order (each node's in-edges by source id). ``epoch`` is the loader's pass (set by
:class:`gnnscale.pyg.NeighborLoader` at every ``iter``), ``step`` the first input id of the batch
(unique within an epoch, and the same in a DataLoader worker as in the main process), or under
N processes that of the global step holding the batch (``steps``, :mod:`gnnscale.pyg.steps`):
then the batch also knows the step's other seeds, and a node that the whole step reaches at an
earlier hop than this batch does draws that hop's neighbours, so the N batches of a step
together draw what one process's batch of their seeds draws (and share its negatives).

Negatives (``sample_from_edges``) come from a ``torch.Generator`` keyed by (seed, epoch, step)
(the engine's :class:`~gnnscale.samplers.link.NegativeSampler` keys) and, unlike PyG's (which
keeps false negatives), a negative pair that is an edge of the graph is drawn again (up to
``MAX_REDRAWS`` rounds; only a graph denser than that can leave one).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch_geometric.sampler import (
    BaseSampler,
    EdgeSamplerInput,
    NegativeSampling,
    NodeSamplerInput,
    SamplerOutput,
)

from gnnscale.errors import SamplerError, SamplerValueError
from gnnscale.pyg.layout import first_occurrences, induced_edges, repeat_rows, shown
from gnnscale.pyg.steps import Step, StepBook
from gnnscale.pyg.world import refuse_unjoined_world
from gnnscale.samplers.kernels import Kernels
from gnnscale.samplers.link import EdgeFilter, NegativeSampler
from gnnscale.samplers.local import check_edge_weight, check_labor, check_replace, sampling_variant
from gnnscale.samplers.rng import stream_key

MAX_REDRAWS = 20


def csc_of(edge_index: torch.Tensor, num_nodes: int, num_src: int | None = None
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(indptr int64 [N + 1], indices int64 [E], perm int64 [E]) of ``edge_index`` int64 [2, E].

    In-edges of each node, ordered by source id (gnnscale's CSC order; duplicates kept);
    ``perm[p]`` is the original edge id (column of ``edge_index``) of CSC position ``p``.
    ``num_src``: the sources' id range when it differs from the targets' (typed relations).
    """
    src, dst = edge_index[0], edge_index[1]
    perm = torch.argsort(dst * max(num_nodes, num_src or 0, 1) + src, stable=True)
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
    return indptr, src[perm].contiguous(), perm


class GnnscaleSampler(BaseSampler):
    """Neighbour sampling of an in-memory homogeneous graph for PyG's loaders.

    Args:
        edge_index: int64 [2, E] (row 0 source -> row 1 target), ids in ``[0, num_nodes)``
            (checked by the loaders: :func:`gnnscale.pyg.checks.check_data`).
        num_nodes: N.
        fanouts: neighbours per hop from the seeds, positive or -1 (all).
        seed: base seed of the draws (neighbours and negatives).
        replace: draw with replacement (``fanout`` draws per node with a neighbour).
        backend: the kernels (``"auto"``, ``"numba"``, ``"torch"``; identical draws).
        disjoint: every seed grows its own tree (PyG's ``disjoint``; ``SamplerOutput.batch``).
        edge_weight: optional float [E] non-negative weights of ``edge_index``'s edges (PyG's
            ``weight_attr``): neighbours are drawn with probability proportional to their weight,
            never a zero-weight edge (the kernels' weighted draws).
        csc: ``(indptr, indices, perm)`` as :func:`csc_of` returns them, instead of ``edge_index``
            (None then): a graph store's CSC (:class:`gnnscale.pyg.stores.PartitionGraphStore`).
        subgraph_type: PyG's: ``"directional"`` (the drawn edges), ``"bidirectional"`` (and each one's
            reverse: PyG's ``to_bidirectional``; no per-hop counts) or ``"induced"`` (every edge of the
            graph among the drawn nodes; nodes per hop, no per-hop edge counts; not disjoint).
        labor: layer-neighbour sampling (LABOR-0, as GraphBolt's ``LayerNeighborSampler``; PyG
            has none): one uniform per candidate neighbour and hop, keyed by the hop's stream and
            the neighbour's id, shared by every seed; a node of in-degree ``d`` keeps a neighbour
            iff it is below ``fanout / d`` (``fanout`` in expectation, fewer distinct nodes per
            batch). Not with ``replace``, ``edge_weight`` or ``disjoint``.
        held: the id range the compiled relabeler indexes directly (:class:`gnnscale.samplers.kernels.Kernels`;
            default every id, ``8 N`` bytes); ``(0, 0)``: every id hashed, batch-sized (the own-part store's).
    """

    def __init__(self, edge_index: torch.Tensor, num_nodes: int, fanouts: Sequence[int], seed: int = 0,
                 replace: bool = False, backend: str = "auto", disjoint: bool = False,
                 edge_weight: torch.Tensor | None = None,
                 csc: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
                 subgraph_type: str = "directional", labor: bool = False,
                 held: tuple[int, int] | None = None) -> None:
        refuse_unjoined_world(type(self).__name__)
        self.num_nodes = int(num_nodes)
        self.subgraph_type = subgraph_type
        self.fanouts = [int(f) for f in fanouts]
        self.seed = int(seed)
        self.replace = check_replace(replace)
        self.indptr, self.indices, self.perm = csc if csc is not None else csc_of(edge_index, self.num_nodes)
        self.kernels = Kernels(self.num_nodes, "cpu", backend, held=held)
        # weighted draws (PyG's weight_attr): the kernels' weights, in CSC order
        weight = None if edge_weight is None else check_edge_weight(edge_weight[self.perm], self.indices.numel())
        self.variant = sampling_variant(self.replace, weight)
        self.epoch = 0
        if not isinstance(disjoint, bool):
            raise SamplerValueError(f"disjoint must be a bool; found {shown(disjoint)}. Pass disjoint=True or False.")
        self.labor = check_labor(labor, self.replace, weight)
        if self.labor:
            if disjoint:
                raise SamplerValueError("labor=True shares each neighbour's draw between the seeds of a hop, and "
                                        "disjoint=True grows a tree per seed; pass one of them")
            self.variant = {"labor": self.indices}  # a neighbour's key is its id (as the nodes' draws)
        self.disjoint = disjoint
        self._filter: EdgeFilter | None = None
        # N processes: the global step of each batch (gnnscale.pyg.run sets it)
        self.steps: StepBook | None = None
        self._reach: tuple[torch.Tensor, torch.Tensor] | None = None  # a step's first hops (_levels)

    @property
    def edge_permutation(self) -> None:
        """None: ``SamplerOutput.edge`` already holds original edge ids."""
        return None

    def set_epoch(self, epoch: int) -> None:
        """Key the following batches' draws by ``epoch`` (the loaders call it at every ``iter``)."""
        self.epoch = int(epoch)

    def _step(self, input_id: torch.Tensor | None) -> tuple[int, Step | None]:
        """(the draws' step number, the batch's global step or None). Alone, a batch's step is its
        first input position; under a :class:`~gnnscale.pyg.steps.StepBook` (N processes) it is the
        global step's (that of the one-process batch holding it)."""
        plan = self.steps.step(input_id) if self.steps is not None else None
        if plan is not None:
            return plan.key, plan
        return (int(input_id[0]) if input_id is not None and input_id.numel() else 0), None

    def _levels(self, seeds: torch.Tensor, epoch: int, step: int) -> torch.Tensor | None:
        """The hop at which the batch of ``seeds`` (int64, repeats allowed) reaches each node it
        reaches within ``len(fanouts) - 1`` hops, as :meth:`sample` draws it (hop h draws the nodes
        hop h - 1 added): (ids int64 [R] sorted, their hops int64 [R]), batch-sized. None when the
        draws do not depend on the hop (every fan-out -1)."""
        if all(f == -1 for f in self.fanouts):
            return None
        ids = frontier = torch.unique(seeds)
        hops = [torch.zeros(ids.numel(), dtype=torch.int64)]
        for hop in range(len(self.fanouts) - 1):
            nbrs = self._draw([(hop, frontier, frontier)], epoch, step, edges=False)[0][1]
            grown, _ = self.kernels.relabel(ids, nbrs)
            frontier, ids = grown[ids.numel():], grown
            hops.append(torch.full((frontier.numel(),), hop + 1, dtype=torch.int64))
        ids, order = torch.sort(ids)
        return ids, torch.cat(hops)[order]

    def _draw(self, groups: list[tuple[int, torch.Tensor, torch.Tensor]], epoch: int, step: int,
              edges: bool = True) -> list[tuple[torch.Tensor, ...]]:
        """The draws of ``groups``, each ``(level, at, ids)``: up to hop ``level``'s fan-out of in-neighbours
        of nodes ``at`` (int64 [k] original ids) with hop ``level``'s stream, node ``i`` keyed by ``ids[i]``:
        per group ``(counts int64 [k], nbrs int64 [M] original ids, edge ids int64 [M] (``e_id``) or None
        without ``edges``)``. The graph store's hook: :class:`gnnscale.pyg.own_part.OwnPartSampler` has
        the owners draw them (one exchange for every group)."""
        out = []
        for level, at, ids in groups:  # at most len(fanouts) groups: one kernel call each
            key = stream_key(self.seed, epoch, step, 0, level)
            if not edges:
                out.append(tuple(self.kernels.sample(self.indptr, self.indices, at, ids, self.fanouts[level], key,
                                                     **self.variant)[:2]) + (None,))
                continue
            counts, nb, pos = self.kernels.sample(self.indptr, self.indices, at, ids, self.fanouts[level], key,
                                                  return_edges=True, **self.variant)
            # numpy's take: faster than torch indexing at these sizes on the CPU (benchmarks/pyg_loader.py)
            out.append((counts, nb, torch.from_numpy(np.take(self.perm.numpy(), pos.numpy()))))
        return out

    def _hop(self, frontier: torch.Tensor, hop: int, epoch: int, step: int,
             levels: bool) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
        """(dst int64 [M] (numpy): each drawn edge's destination, an index into ``frontier``;
        nbrs int64 [M]; edge ids int64 [M]) of hop ``hop``'s draws for ``frontier`` (draw ids:
        original ids, or ``tree * N + node`` when disjoint).

        With ``levels`` (the global step's first hops in ``self._reach``: :meth:`_levels`), a node the whole step
        reaches at an earlier hop ``l`` draws what that hop drew (key and fan-out of hop ``l``):
        its in-edges are those of the one-process batch."""
        n = self.num_nodes
        at = frontier % n if self.disjoint else frontier
        lv = None
        if levels and frontier.numel():
            ids, hops = self._reach
            pos = torch.searchsorted(ids, at).clamp_(max=max(ids.numel() - 1, 0))
            # never unknown: every node this batch reaches, the step reaches
            lv = torch.where(ids[pos] == at, hops[pos], hop) if ids.numel() else torch.full_like(at, hop)
            if bool((lv == hop).all()):
                lv = None
        groups = [(hop, None)] if lv is None else [(int(l), torch.nonzero(lv == l).flatten())
                                                   for l in torch.unique(lv).tolist()]
        dsts, nbrs, edges = [], [], []
        drawn = self._draw([(level, at, frontier) if sel is None else (level, at[sel], frontier[sel])
                            for level, sel in groups], epoch, step)
        for (level, sel), (counts, nb, ed) in zip(groups, drawn):  # at most len(fanouts) groups
            f_at, f_ids = (at, frontier) if sel is None else (at[sel], frontier[sel])
            if self.disjoint:  # a neighbour joins its destination's tree
                nb = nb + torch.from_numpy(np.repeat((f_ids - f_at).numpy(), counts.numpy()))
            # numpy's repeat: several times faster than torch's repeat_interleave at these sizes
            index = np.arange(frontier.numel(), dtype=np.int64) if sel is None else sel.numpy()
            dsts.append(np.repeat(index, counts.numpy()))
            nbrs.append(nb)
            edges.append(ed)
        if len(groups) == 1:
            return dsts[0], nbrs[0], edges[0]
        return np.concatenate(dsts), torch.cat(nbrs), torch.cat(edges)

    def sample(self, seeds: torch.Tensor, epoch: int, step: int, others: torch.Tensor | None = None,
               trees: torch.Tensor | None = None) -> SamplerOutput:
        """PyG's output for seeds int64 [B] (node, row, col, edge, per-hop counts; ``batch`` when disjoint).

        Not disjoint, the seeds must be distinct. Disjoint, seed ``i`` grows its own tree: a node
        is identified by ``tree * N + node`` (relabeled, and the key of its draws, so trees draw
        independently) and ``batch`` is its tree (its index in ``seeds``).

        One rank's share of a global step (:mod:`gnnscale.pyg.steps`): ``others`` int64 the other
        ranks' seeds of the step (not disjoint): a node that the whole step reaches at an earlier
        hop than this batch does draws that hop's neighbours, so the union of the ranks' subgraphs
        is the one-process batch's (each rank keeps what its seeds reach); ``trees`` int64 [B]
        (disjoint): the seeds' tree numbers in the global step (default ``arange(B)``)."""
        seeds = seeds.to(torch.int64).contiguous()
        n = self.num_nodes
        if self.disjoint:
            tree = torch.arange(seeds.numel()) if trees is None else trees.to(torch.int64)
            ids = seeds + tree * n
            reached = None
        else:
            ids = seeds
            reached = None if others is None or not others.numel() else \
                self._levels(torch.cat([seeds, others.to(torch.int64)]), epoch, step)
            self._reach = reached
        frontier = ids
        rows, cols, pos = [], [], []
        num_nodes, num_edges = [seeds.numel()], []
        try:
            for hop in range(len(self.fanouts)):
                dst, nbrs, edges = self._hop(frontier, hop, epoch, step, reached is not None)
                grown, nbr_local = self.kernels.relabel(ids, nbrs)
                first = ids.numel() - frontier.numel()  # local id of the frontier's first node
                rows.append(nbr_local)
                cols.append(torch.from_numpy(dst + first))
                pos.append(edges)
                frontier = grown[ids.numel():]
                ids = grown
                num_nodes.append(frontier.numel())
                num_edges.append(nbrs.numel())
        finally:
            self._reach = None
        edge = torch.cat(pos) if pos else torch.empty(0, dtype=torch.int64)  # e_id (_draw)
        cat = (lambda t: torch.cat(t)) if rows else (lambda t: torch.empty(0, dtype=torch.int64))
        if self.disjoint:
            node, batch = ids % n, torch.div(ids, n, rounding_mode="floor")
            if trees is not None:  # global tree numbers -> the seeds' indices in this batch
                order = torch.argsort(tree)
                batch = order[torch.searchsorted(tree[order], batch)]
        else:
            node, batch = ids, None
        return SamplerOutput(node=node, row=cat(rows), col=cat(cols), edge=edge, batch=batch,
                             num_sampled_nodes=num_nodes, num_sampled_edges=num_edges)

    def shaped(self, out: SamplerOutput) -> SamplerOutput:
        """``out`` as ``subgraph_type`` asks: the drawn edges, the subgraph their nodes induce, or
        both directions of each drawn edge (PyG's ``to_bidirectional``)."""
        if self.subgraph_type == "induced":
            out.row, out.col, out.edge = induced_edges(self.indptr, self.indices, self.perm, out.node, out.node)
            out.num_sampled_edges = None
        elif self.subgraph_type == "bidirectional":
            out = out.to_bidirectional()
        return out

    def sample_from_nodes(self, inputs: NodeSamplerInput) -> SamplerOutput:
        """PyG's node sampling: ``inputs.node`` int64 [B] seeds; metadata (input_id, time).

        A seed given more than once (not disjoint) is sampled once; its copies are rows of their
        own (``n_id[:B]`` the seeds as given), each with the seed's first-hop in-edges."""
        if inputs.input_type is not None:
            raise SamplerError(f"gnnscale's PyG sampler samples homogeneous graphs; found node type "
                               f"{inputs.input_type!r}. Pass a torch_geometric Data (not HeteroData).")
        step, plan = self._step(inputs.input_id)
        seeds = inputs.node.to(torch.int64)
        repeats = None if self.disjoint else first_occurrences(seeds)
        if repeats is not None:
            seeds = repeats[0]
        if plan is None:
            out = self.sample(seeds, self.epoch, step)
        elif self.disjoint:
            out = self.sample(seeds, self.epoch, step, trees=plan.offset + torch.arange(plan.size))
        else:
            out = self.sample(seeds, self.epoch, step, others=self.steps.inputs[plan.others()])
        if repeats is not None:
            _, where, which = repeats
            B = inputs.node.numel()
            out.row, out.col, out.edge, added = repeat_rows(
                out.row, out.col, out.edge, out.num_sampled_edges[0] if out.num_sampled_edges else 0, True, True,
                where, which, B, out.node.numel())
            out.node = torch.cat([inputs.node.to(torch.int64), out.node[where.numel():]])
            out.num_sampled_nodes = [B, *out.num_sampled_nodes[1:]]
            if out.num_sampled_edges:
                out.num_sampled_edges = [out.num_sampled_edges[0] + added, *out.num_sampled_edges[1:]]
        out.metadata = (inputs.input_id, inputs.time)
        return self.shaped(out)

    def edge_filter(self) -> EdgeFilter:
        """The graph's edge set (sorted keys ``dst * N + src``), built at the first link batch."""
        if self._filter is None:
            self._filter = EdgeFilter(self.indptr, self.indices, num_nodes=self.num_nodes)
        return self._filter

    def _any(self, flag: bool) -> bool:
        """Whether ``flag`` holds anywhere: here, this process (a store whose edge filter asks the owners,
        :class:`gnnscale.pyg.own_part.OwnPartSampler`, asks every rank: its redraws stay in step)."""
        return flag

    def _draw_nodes(self, count: int, weight: torch.Tensor | None, gen: torch.Generator) -> torch.Tensor:
        if weight is None:
            return torch.randint(0, self.num_nodes, (count,), generator=gen, dtype=torch.int64)
        return torch.multinomial(weight.to(torch.float64), count, replacement=True, generator=gen)

    def negatives(self, src: torch.Tensor, dst: torch.Tensor, neg: NegativeSampling, epoch: int,
                  step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(src_neg, dst_neg) int64 [Q]: binary (Q = ceil(B * amount), both uniform) or triplet
        (Q = B * amount, sources those of positive ``q // amount``; disjoint, PyG pairs negative ``q``
        with positive ``q % B``), none an edge of the graph."""
        gen = NegativeSampler(self.num_nodes, seed=self.seed).generator(epoch, step, 0)
        if neg.is_binary():
            q = math.ceil(src.numel() * neg.amount)
            s, d = self._draw_nodes(q, neg.src_weight, gen), self._draw_nodes(q, neg.dst_weight, gen)
        else:
            q = src.numel() * int(neg.amount)
            s = src.repeat(int(neg.amount)) if self.disjoint else src.repeat_interleave(int(neg.amount))
            d = self._draw_nodes(q, neg.dst_weight, gen)
        has = self.edge_filter().has_edge
        bad = torch.nonzero(has(s, d)).flatten()
        for _ in range(MAX_REDRAWS):
            if not self._any(bad.numel() > 0):
                break
            if neg.is_binary():
                s[bad] = self._draw_nodes(bad.numel(), neg.src_weight, gen)
            d[bad] = self._draw_nodes(bad.numel(), neg.dst_weight, gen)
            bad = bad[has(s[bad], d[bad])]
        return s, d

    def _neg_range(self, plan: Step, neg: NegativeSampling) -> tuple[int, int]:
        """[lo, hi): this batch's share of its step's binary negatives (or triplet, not disjoint)."""
        a = neg.amount
        if neg.is_binary():
            return math.ceil(plan.offset * a), math.ceil((plan.offset + plan.size) * a)
        return plan.offset * int(a), (plan.offset + plan.size) * int(a)

    def step_pairs(self, plan: Step, neg: NegativeSampling | None, epoch: int
                   ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor]:
        """(src_neg, dst_neg, ends) of a batch that is one rank's share of global step ``plan``: the
        step's negatives are drawn for every rank's positives (as one process draws its batch's) and
        cut by position, so the ranks' negatives together are the one-process batch's; ``ends``
        int64: every endpoint of the step's pairs, positives and negatives (None negatives without
        ``neg``)."""
        pairs = self.steps.inputs[:, plan.positions]
        if neg is None:
            return None, None, pairs.reshape(-1)
        s, d = self.negatives(pairs[0], pairs[1], neg, epoch, plan.key)
        ends = torch.cat([pairs.reshape(-1), s, d] if neg.is_binary() else [pairs.reshape(-1), d])
        if not neg.is_binary() and self.disjoint:  # negative q pairs with positive q % S
            rows, cut = int(neg.amount), slice(plan.offset, plan.offset + plan.size)
            return s.view(rows, -1)[:, cut].reshape(-1), d.view(rows, -1)[:, cut].reshape(-1), ends
        lo, hi = self._neg_range(plan, neg)
        return s[lo:hi], d[lo:hi], ends

    def step_trees(self, plan: Step, neg: NegativeSampling | None) -> torch.Tensor:
        """int64: the global step's tree number of each of this batch's disjoint seeds
        (``cat([src, dst])`` as :meth:`sample_from_edges` lays them out, the step's the same way)."""
        S, off, b = plan.positions.numel(), plan.offset, plan.size
        pos = torch.arange(off, off + b)
        if neg is None:
            return torch.cat([pos, S + pos])
        if neg.is_binary():  # src = [pos S, neg Q], dst likewise
            Q = math.ceil(S * neg.amount)
            lo, hi = self._neg_range(plan, neg)
            pairs = torch.cat([pos, S + torch.arange(lo, hi)])
            return torch.cat([pairs, S + Q + pairs])
        rows = int(neg.amount)  # src = [pos S]; dst = [pos S, neg [rows, S]]
        neg_t = 2 * S + (torch.arange(rows)[:, None] * S + pos[None, :]).reshape(-1)
        return torch.cat([pos, S + pos, neg_t])

    def sample_from_edges(self, inputs: EdgeSamplerInput,
                          neg_sampling: NegativeSampling | None = None) -> SamplerOutput:
        """PyG's link sampling (``edge_sample``, homogeneous): the unique endpoints of the positives and
        negatives are the seeds (disjoint: every endpoint, its own tree); metadata as PyG's
        NeighborSampler gives it."""
        if inputs.input_type is not None:
            raise SamplerError(f"gnnscale's PyG sampler samples homogeneous graphs; found edge type "
                               f"{inputs.input_type!r}. Pass a torch_geometric Data (not HeteroData).")
        if inputs.time is not None:
            raise SamplerError("gnnscale's PyG sampler has no temporal sampling; found edge_label_time. "
                               "Leave edge_label_time unset.")
        epoch, (step, plan) = self.epoch, self._step(inputs.input_id)
        src, dst, label = inputs.row, inputs.col, inputs.label
        num_pos = src.numel()
        s_neg, d_neg, ends = (None, None, None) if plan is None else self.step_pairs(plan, neg_sampling, epoch)
        if neg_sampling is not None:
            if plan is None:
                s_neg, d_neg = self.negatives(src, dst, neg_sampling, epoch, step)
            if neg_sampling.is_binary():
                src, dst = torch.cat([src, s_neg]), torch.cat([dst, d_neg])
                if label is None:
                    label = torch.ones(num_pos)
                label = torch.cat([label, label.new_zeros((s_neg.numel(),) + label.size()[1:])])
            else:
                dst = torch.cat([dst, d_neg])
        if self.disjoint:  # PyG's disjoint edge_sample: one tree per endpoint, trees numbered by positive
            seed = torch.cat([src, dst])
            out = self.sample(seed, epoch, step, trees=None if plan is None else self.step_trees(plan, neg_sampling))
            out.batch = out.batch % num_pos
            if neg_sampling is None or neg_sampling.is_binary():
                out.metadata = (inputs.input_id, torch.arange(seed.numel()).view(2, -1), label, None)
            else:
                neg_index = torch.arange(2 * num_pos, seed.numel()).view(-1, num_pos).t()
                out.metadata = (inputs.input_id, torch.arange(num_pos), torch.arange(num_pos, 2 * num_pos),
                                neg_index.reshape(num_pos, -1).squeeze(-1), None)
            return self.shaped(out)
        seed, inverse = torch.unique(torch.cat([src, dst]), return_inverse=True)
        out = self.sample(seed, epoch, step, others=ends)
        if neg_sampling is None or neg_sampling.is_binary():
            out.metadata = (inputs.input_id, inverse.view(2, -1), label, None)
        else:
            dst_neg_index = inverse[2 * num_pos:].view(num_pos, -1).squeeze(-1)
            out.metadata = (inputs.input_id, inverse[:num_pos], inverse[num_pos:2 * num_pos], dst_neg_index, None)
        return self.shaped(out)
