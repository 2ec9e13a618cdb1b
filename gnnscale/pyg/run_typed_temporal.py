"""Time-respecting rank loaders over a typed temporal partition folder: :meth:`gnnscale.pyg.run.DistRun.node_loader`
/ ``link_loader`` with PyG's time arguments on a ``HeteroData``'s folder (docs/temporal.md section 4).

A typed temporal folder (:mod:`gnnscale.partitioning.format`: each part's in-edges of each relation a
T-CSR, ``edge_time.npy`` and ``edge_ids.npy``, the column of the relation's ``edge_index``) is sampled
by :class:`RankTypedTemporalSampler`: the one-process typed temporal sampler
(:class:`gnnscale.pyg.typed_temporal.TypedTemporalSampler`: its seed times, trees and negatives) whose
every draw is made by the node's owner, one :class:`gnnscale.samplers.temporal.DistTemporalSampler`
per relation over this rank's in-edges of it (at every hop each relation's frontier nodes go, with
their tree's seed time and the batch's key, to their owner, which draws among their in-edges of the
relation before that time and sends back the sources, the edges' times and their ``e_id``: one
``sample_request`` / ``sample_response`` exchange per relation and hop). The keys are the one-process
sampler's (seed, pass, step, relation, hop; the node's original per-type id; the tree's time) and
both order a node's in-edges of a relation by (time, input column), so with ``batch_size=B // N`` a
step's N batches are, tree for tree, one process's typed ``NeighborLoader`` / ``LinkNeighborLoader``
batch of B over the ``HeteroData`` (:mod:`gnnscale.pyg.steps`). Batches carry ``batch[relation].edge_time``
(aligned with ``edge_index``, from the owners' answers) and ``e_id``.

The folder holds edge times only: ``time_attr`` names them (``'edge_time'`` or PyG's ``'time'``), a
node loader needs ``input_time`` and a link loader ``edge_label_time`` (``run_temporal``'s checks).
Link loaders take binary negatives (a step's negatives cut by position, filtered by the owners of their
destinations); a negative is timed by its place in the rank's batch (PyG's layout), which is the
one-process batch's at ``neg_sampling_ratio=1``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gnnscale.errors import SamplerError
from gnnscale.partitioning.manifest import part_dir_name
from gnnscale.partitioning.validate import load_array
from gnnscale.pyg.hetero import HeteroGnnscaleSampler
from gnnscale.pyg.typed_inputs import fanout_hops, hetero_fanouts
from gnnscale.pyg.typed_temporal import TypedTemporalSampler
from gnnscale.samplers.link import EdgeFilter
from gnnscale.samplers.rng import stream_key
from gnnscale.samplers.temporal import DistTemporalSampler, check_temporal_options

_EMPTY = torch.empty(0, dtype=torch.int64)


def _relations(graph: Any, rank: int) -> dict:
    """{relation: (indptr int64 [n_dst + 1] over this part's nodes of the target type, sources int64 [E_r]
    original per-type ids, edge times, e_id, the targets' original per-type ids [n_dst])} of part ``rank``
    of a typed temporal folder (its files in T-CSR order: by target, relation, time, input column)."""
    book = graph.book
    pdir = graph.parts_dir / part_dir_name(rank)
    n = book.book.part_size(rank)
    indptr = load_array(pdir / "indptr.npy", np.int64, (n + 1,), mmap="r")
    e = int(indptr[-1])
    src_new = torch.from_numpy(load_array(pdir / "indices.npy", np.int64, (e,), mmap=False))
    rel = torch.from_numpy(load_array(pdir / "etype.npy", np.int16, (e,), mmap=False).astype(np.int64))
    etime = torch.from_numpy(load_array(pdir / "edge_time.npy", np.int64, (e,), mmap=False))
    eid = torch.from_numpy(load_array(pdir / "edge_ids.npy", np.int64, (e,), mmap=False))
    offset = int(book.book.offsets[rank])
    dst_pt = book.map_to_per_ntype(offset + torch.repeat_interleave(torch.arange(n), torch.from_numpy(
        np.diff(indptr)), output_size=e))[1]
    src_pt = book.map_to_per_ntype(src_new)[1]
    index = {t: i for i, t in enumerate(graph.node_types)}
    out = {}
    for r, et in enumerate(graph.edge_types):  # loop over relations (a handful)
        sel = torch.nonzero(rel == r).flatten()  # order kept: each target's in-edges of et by time
        td = index[et[2]]
        lo, hi = (int(v) for v in book.type_offsets[td, rank:rank + 2])
        row = dst_pt[sel] - lo
        ptr = torch.zeros(hi - lo + 1, dtype=torch.int64)
        ptr[1:] = torch.cumsum(torch.bincount(row, minlength=hi - lo), 0)
        out[et] = (ptr, graph.old_of_new[et[0]][src_pt[sel]].contiguous(), etime[sel].contiguous(),
                   eid[sel].contiguous(), graph.old_of_new[et[2]][lo:hi].contiguous())
    return out


class _OwnerEdges:
    """``has_edge(src, dst)`` of one relation over original per-type ids, answered by the destinations'
    owners (collective)."""

    def __init__(self, graph: Any, comm: Any, book: Any, et: tuple, ptr: torch.Tensor, src: torch.Tensor) -> None:
        self.new_of_old = graph.new_of_old[et[2]]
        many = comm.world_size > 1
        self.filter = EdgeFilter(ptr, src, book=book if many else None, comm=comm if many else None,
                                 num_nodes=max(graph.num_nodes[et[0]], graph.num_nodes[et[2]], 1))

    def has_edge(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return self.filter.has_edge(src, self.new_of_old[dst])


class RankTypedTemporalSampler(TypedTemporalSampler):
    """:class:`~gnnscale.pyg.typed_temporal.TypedTemporalSampler` over a typed temporal folder, every draw
    made by the node's owner (module docstring). A collective: every rank samples the same number of
    batches (the rank loaders give them that).

    Args:
        graph: the run's typed graph store (whole or own part: ``parts_dir``, ``book``, ``node_types``,
            ``edge_types``, ``num_nodes``, ``old_of_new``, ``new_of_old``); comm: the run's communicator;
        num_neighbors: PyG's typed fan-outs; seed, strategy, window, cut: the draws'.
    """

    steps_disjoint = True  # a step's disjoint link batches: the trees' keys do not depend on the tree

    def __init__(self, graph: Any, comm: Any, num_neighbors: Any, seed: int, strategy: str, window: int,
                 cut: str) -> None:
        rels = _relations(graph, comm.rank)
        index = {t: i for i, t in enumerate(graph.node_types)}
        self.dist, self._owner = {}, {}
        for et, (ptr, src, etime, eid, keys) in rels.items():  # loop over relations
            book = graph.book.type_book(index[et[2]])
            self.dist[et] = DistTemporalSampler(ptr, src, etime, keys, book, comm, [1], seed=seed, strategy=strategy,
                                                window=window, cut=cut, disjoint=True, edge_ids=eid)
            self._owner[et] = (book, ptr, src)
        HeteroGnnscaleSampler.__init__(self, None, graph.num_nodes, hetero_fanouts(num_neighbors, graph.edge_types),
                                       seed=seed, csc={et: (r[0], r[1], r[3]) for et, r in rels.items()},
                                       disjoint=True, num_hops=fanout_hops(num_neighbors))
        self.strategy, self.window, self.strict = check_temporal_options(strategy, window, cut)
        self.graph, self.comm = graph, comm
        self.node_time = {}
        self.edge_time = {et: r[2] for et, r in rels.items()}
        self._tree_time = self._seed_times = self._pos_times = None
        self._time_order = {}
        self._hop_at = 0
        self._times: dict[tuple, list] = {}

    def _any(self, flag: bool) -> bool:
        if self.comm.world_size == 1:
            return flag
        return bool(self.comm.all_reduce(torch.tensor([int(flag)], dtype=torch.int64), op="max")[0])

    def _filter(self, et: tuple) -> _OwnerEdges:
        if et not in self._filters:
            book, ptr, src = self._owner[et]
            self._filters[et] = _OwnerEdges(self.graph, self.comm, book, et, ptr, src)
        return self._filters[et]

    def sample_seeds(self, seeds, epoch, step, others=None, trees=None):
        self._hop_at, self._times = 0, {et: [] for et in self.edge_types}
        out = super().sample_seeds(seeds, epoch, step, others, trees)
        out.edge_time = {et: torch.cat(v) if v else _EMPTY for et, v in self._times.items()}
        return out

    def _draw_hop(self, groups: list[tuple], epoch: int, step: int, edges: bool = True) -> list[tuple]:
        """Every relation's draws of this hop by the owners, one exchange per relation with a non-zero
        fan-out (every rank, asked or not: collectives in step); ``groups`` as the base's (disjoint: one
        per relation, at this hop)."""
        hop, self._hop_at = self._hop_at, self._hop_at + 1
        asked = {r: (level, rows, ids) for r, level, rows, ids in groups}
        if any(level != hop for level, _, _ in asked.values()):  # pragma: no cover - disjoint draws at their hop
            raise SamplerError("a temporal typed rank batch drew a node at another hop than its own")
        got = {}
        for r, et in enumerate(self.edge_types):  # loop over relations: the same on every rank
            fanout = self.fanouts[et][hop] if hop < self.num_hops else 0
            if fanout == 0:
                continue
            _, rows, ids = asked.get(r, (hop, _EMPTY, _EMPTY))
            t, n = et[2], self.num_nodes[et[2]]
            times = self._tree_time[torch.div(ids, n, rounding_mode="floor")].contiguous()
            key = torch.full((rows.numel(),), stream_key(self.seed, epoch, step, 0, hop, r), dtype=torch.int64)
            counts, nbrs, etime, eid = self.dist[et].draw_hop(self.graph.new_of_old[t][rows], times, fanout, key)
            if r in asked:
                got[r] = (counts, nbrs, eid)
                self._times[et].append(etime)
        return [got[r] for r, *_ in groups]


def sampler(run: Any, data: tuple, num_neighbors: Any, seed: int, opts: tuple) -> RankTypedTemporalSampler:
    """The typed temporal rank sampler of a typed temporal folder's stores ``data``."""
    _, strategy, window, cut = opts
    return RankTypedTemporalSampler(data[1], run.comm, num_neighbors, int(seed), strategy, window, cut)


class EdgeTimes:
    """A rank loader whose batches carry the owners' edge times (a folder's feature store holds none):
    ``batch[relation].edge_time`` of a typed batch, ``batch.edge_time`` of an untyped one (int64, aligned
    with ``edge_index``); nothing for a batch drawn without time (:mod:`gnnscale.pyg.distributed`'s
    loaders mix it in)."""

    def filter_fn(self, out: Any) -> Any:
        data = super().filter_fn(out)  # type: ignore[misc]
        times = getattr(out, "edge_time", None)
        if isinstance(times, dict):
            for et, t in times.items():
                if et in data.edge_types:
                    data[et].edge_time = t
        elif times is not None:
            data.edge_time = times
        return data


_LOADERS: dict[type, type] = {}


def with_typed_edge_times(base: type) -> type:
    """``base`` (a rank loader class of :mod:`gnnscale.pyg.run`) with :class:`EdgeTimes` mixed in."""
    if base not in _LOADERS:
        _LOADERS[base] = type(base.__name__.replace("Rank", "RankTypedTemporal"), (EdgeTimes, base),
                              {"__doc__": f"{base.__name__} sampling a typed folder in time (batches carry each "
                                          "relation's ``edge_time``).", "__module__": __name__})
    return _LOADERS[base]
