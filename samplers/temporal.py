"""Time-respecting neighbour sampling, in one process or over owners (docs/temporal.md).

Each seed carries a time t; at every hop a node reached from that seed is asked at the seed's
time, and only its in-edges before t are candidates: ``edge_time < t`` (``strict``, the
default) or ``<= t``, optionally within a window ``[t - w, t)``; ``uniform`` draws a uniform
subset of them, ``last`` the ``fanout`` most recent. In ``disjoint`` mode (the default) every
seed grows its own tree: a node reached by two seeds is two sources, one per tree, each seeing
only its own seed's past; a batch whose seeds share one time may share nodes (``disjoint=False``).

The draws are :func:`gnnscale.samplers.temporal_kernels.sample_temporal`, keyed by (seed, epoch,
step, hop), the node's original id and the query's time, never by the rank that asks: the
distributed sampler (owners answer for their nodes, one request/response exchange per hop) draws
what the local sampler draws for the same seeds and times, on any number of parts.

A temporal graph's CSC is a T-CSR: each node's in-edges ordered by (time, original edge column)
(:func:`time_sorted_csc`; the partition writer stores parts so), so "before t" is a binary
search and the order does not depend on the partitioning.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from gnnscale.errors import SamplerError
from gnnscale.samplers.block import Block, MiniBatch
from gnnscale.samplers.fanouts import check_fanouts
from gnnscale.samplers.kernels import Kernels
from gnnscale.samplers.local import SamplingKeys
from gnnscale.samplers.temporal_kernels import STRATEGIES, TreeRelabeler, sample_temporal

# The rule's names as PyG spells them where it has one.
CUTS = ("<", "<=")


@dataclass
class TemporalBlock(Block):
    """A :class:`~gnnscale.samplers.block.Block` with time: ``edge_time`` int64 [M] the time of
    each sampled edge (column order of ``edge_index``), ``src_time`` int64 [S] the time each
    source was asked at (its tree's seed time), ``src_tree`` int64 [S] the seed (tree) each
    source belongs to (0 for every source when the batch is not disjoint)."""

    edge_time: torch.Tensor | None = None
    src_time: torch.Tensor | None = None
    src_tree: torch.Tensor | None = None

    def edge_age(self) -> torch.Tensor:
        """int64 [M]: each edge's age relative to its destination's (seed's) time, > 0 under
        the strict rule (the time encoding's input)."""
        return self.src_time[self.edge_index[1]] - self.edge_time


def check_temporal_options(strategy: str, window, cut: str) -> tuple[str, int, bool]:
    """(strategy, window, strict) checked: one line each for a bad value."""
    if strategy not in STRATEGIES:
        raise SamplerError(f"expected temporal_strategy among {', '.join(STRATEGIES)}, found {strategy!r}; "
                           "'uniform' draws among all earlier in-edges, 'last' takes the most recent")
    if isinstance(window, bool) or window is None or int(window) != window or int(window) < 0:
        raise SamplerError(f"expected a time window as an integer >= 0 (0: no window), found {window!r}; "
                           "pass the window's length in the graph's time unit")
    if cut not in CUTS:
        raise SamplerError(f"expected the time cut '<' (strictly earlier edges, the default) or '<=' (also "
                           f"edges at the seed's time), found {cut!r}")
    return strategy, int(window), cut == "<"


def check_edge_time(edge_time, num_edges: int, where: str = "edge_time", claimed_sorted: bool = False):
    """int64 [num_edges] from an array of times: one line for another length, NaN, infinite or
    non-integral values, or (``claimed_sorted``) times out of order."""
    from gnnscale.errors import DatasetError

    t = edge_time.detach().cpu().numpy() if isinstance(edge_time, torch.Tensor) else np.asarray(edge_time)
    if t.ndim != 1 or t.shape[0] != num_edges:
        raise DatasetError(f"expected {where} with one time per edge, i.e. shape [{num_edges}], found shape "
                           f"{tuple(t.shape)}; give exactly one timestamp per edge, in the edges' order")
    if t.dtype.kind == "f":
        bad = ~np.isfinite(t)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DatasetError(f"expected finite times in {where}, found {int(bad.sum())} NaN or infinite "
                               f"(first at edge {i}: {t[i]}); drop or fill those events")
        if t.size and not np.array_equal(t, np.floor(t)):
            i = int(np.flatnonzero(t != np.floor(t))[0])
            raise DatasetError(f"expected integer times in {where}, found {t[i]} at edge {i}; scale the "
                               "times to an integer unit (e.g. seconds or milliseconds)")
    elif t.dtype.kind not in "iu":
        raise DatasetError(f"expected integer times in {where}, found dtype {t.dtype}; store int64 timestamps")
    t = t.astype(np.int64)
    if claimed_sorted and t.size > 1:
        down = np.flatnonzero(t[1:] < t[:-1])
        if down.size:
            i = int(down[0]) + 1
            raise DatasetError(f"expected {where} sorted by time as claimed, found time {t[i]} at edge {i} after "
                               f"{t[i - 1]}; sort the events by time or do not claim they are sorted")
    return torch.from_numpy(t)


def time_sorted_csc(indptr: torch.Tensor, indices: torch.Tensor, edge_time: torch.Tensor,
                    tiebreak: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(indices, perm): each node's in-edges reordered by (time, ``tiebreak``) (default: their
    position), the T-CSR of :mod:`gnnscale.samplers.temporal`; ``perm`` int64 [E] maps new
    positions to old (reorder any edge-aligned array with it). One lexsort, no loop."""
    deg = torch.diff(indptr).numpy()
    row = np.repeat(np.arange(deg.shape[0], dtype=np.int64), deg)
    tb = np.arange(indices.numel(), dtype=np.int64) if tiebreak is None else tiebreak.numpy()
    perm = torch.from_numpy(np.lexsort((tb, edge_time.numpy(), row)).astype(np.int64))
    return indices[perm], perm


def _times(seeds: torch.Tensor, times, disjoint: bool) -> torch.Tensor:
    if isinstance(times, int) and not isinstance(times, bool):
        return torch.full((seeds.numel(),), int(times), dtype=torch.int64)
    if not isinstance(times, torch.Tensor) or times.dim() != 1 or times.numel() != seeds.numel():
        raise SamplerError(f"expected one seed time per seed (int64 [{seeds.numel()}]) or one int for all, found "
                           f"{type(times).__name__} {tuple(getattr(times, 'shape', ()))}; pass input_time aligned "
                           "with the seeds")
    if times.dtype.is_floating_point:
        if not bool(torch.isfinite(times).all()) or not bool((times == times.floor()).all()):
            raise SamplerError("expected integer seed times, found NaN or fractional values; use the graph's "
                               "integer time unit")
    return times.to(torch.int64)


def _check_seeds(seeds: torch.Tensor, times: torch.Tensor, num_nodes: int, disjoint: bool) -> None:
    if seeds.dtype != torch.int64 or seeds.dim() != 1:
        raise SamplerError(f"seeds must be a 1-D int64 tensor; found dtype {seeds.dtype}, shape {tuple(seeds.shape)}")
    if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= num_nodes):
        raise SamplerError(f"seed ids must lie in [0, {num_nodes}); found range [{int(seeds.min())}, "
                           f"{int(seeds.max())}]")
    if not disjoint:
        if times.numel() and bool((times != times[0]).any()):
            raise SamplerError("expected one time for every seed of a batch that is not disjoint, found several; "
                               "sample with disjoint=True (each seed sees only its own past)")
        if torch.unique(seeds).numel() != seeds.numel():
            raise SamplerError("seeds must be distinct when the batch is not disjoint; found repeats. Sample with "
                               "disjoint=True (a node may then be a seed at several times)")


class _TemporalBase:
    """The hop loop shared by the local and distributed samplers."""

    def _init(self, fanouts, seed, strategy, window, cut, disjoint, num_nodes, held=None):
        self.fanouts = check_fanouts(fanouts)
        self.keys = SamplingKeys(seed)
        self.strategy, self.window, self.strict = check_temporal_options(strategy, window, cut)
        if not isinstance(disjoint, bool):
            raise SamplerError(f"disjoint must be a bool; found {disjoint!r}")
        self.disjoint = disjoint
        self.num_nodes = int(num_nodes)
        self.kernels = Kernels(self.num_nodes, "cpu", "numba", held=held)
        self.trees = TreeRelabeler(self.num_nodes) if disjoint else None  # disjoint trees' relabeling

    def _draw_csc(self, indptr, indices, edge_time, node_keys, offset, ids, times, fanout, key):
        rows = ids - offset
        from gnnscale.samplers import cpu_kernels

        return sample_temporal(indptr, indices, edge_time, rows, node_keys[rows], times, fanout, key,
                               self.strategy, self.strict, self.window, cpu_kernels.parallel_enabled(),
                               return_edges=False)

    def sample(self, seeds: torch.Tensor, times, epoch: int = 0, step: int = 0) -> MiniBatch:
        """The time-respecting computation graph of ``seeds`` (int64 [B]) at ``times`` (int64 [B],
        or one int for all). Blocks are :class:`TemporalBlock`; ``MiniBatch.seed_time`` holds the
        seeds' times. Distributed: every rank calls it the same number of times (collectives)."""
        times = _times(seeds, times, self.disjoint)
        _check_seeds(seeds, times, self.num_nodes, self.disjoint)
        B = seeds.numel()
        dst = seeds
        dst_tree = torch.arange(B, dtype=torch.int64) if self.disjoint else torch.zeros(B, dtype=torch.int64)
        dst_time = times
        one_time = int(times[0]) if B else 0
        blocks: list[TemporalBlock] = []
        for hop, fanout in enumerate(self.fanouts):
            counts, nbrs, etime = self._hop(dst, dst_time, fanout, self.keys(epoch, step, hop))
            c = counts.numpy()
            # numpy's repeat: several times faster than torch's repeat_interleave at these sizes
            dst_local = torch.from_numpy(np.repeat(np.arange(dst.numel(), dtype=np.int64), c))
            if self.disjoint:  # a node is (tree, node): numbered as the ids tree * N + node would be
                src_ids, src_tree, src_time, nbr_local = self.trees(dst, dst_tree, counts, nbrs, times)
            else:  # one time for the batch: plain ids
                src_ids, nbr_local = self.kernels.relabel(dst, nbrs)
                src_tree = torch.zeros(src_ids.numel(), dtype=torch.int64)
                src_time = torch.full((src_ids.numel(),), one_time, dtype=torch.int64)
            blocks.append(TemporalBlock(src_ids, dst, torch.stack([nbr_local, dst_local]), edge_time=etime,
                                        src_time=src_time, src_tree=src_tree))
            dst, dst_tree, dst_time = src_ids, src_tree, src_time
        blocks.reverse()
        mb = MiniBatch(seeds=seeds, blocks=blocks, stats={"sampled_edges": sum(b.num_edges for b in blocks)})
        mb.seed_time = times
        return mb


class TemporalNeighborSampler(_TemporalBase):
    """Time-respecting sampling over a whole graph in one process.

    Args:
        indptr, indices: the CSC (int64 [N + 1], [E]) of a T-CSR: each node's in-edges ascending
            in ``edge_time`` (:func:`time_sorted_csc`; checked here).
        edge_time: int64 [E] the time of each in-edge (aligned with ``indices``).
        fanouts: per hop, from the seeds; -1 takes every candidate.
        seed: the random streams' seed; node_keys: int64 [N] each node's stream identity
            (default its id; partitions pass original ids).
        strategy: ``uniform`` or ``last``; window: w > 0 keeps edges in ``[t - w, t)``;
        cut: ``'<'`` (strictly earlier, default) or ``'<='``; disjoint: one tree per seed.
    """

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, edge_time: torch.Tensor, fanouts: Sequence[int],
                 seed: int = 0, node_keys: torch.Tensor | None = None, strategy: str = "uniform", window: int = 0,
                 cut: str = "<", disjoint: bool = True) -> None:
        self._init(fanouts, seed, strategy, window, cut, disjoint, indptr.numel() - 1)
        self.indptr, self.indices = indptr, indices
        self.edge_time = check_tcsr(indptr, edge_time, indices.numel())
        self.node_keys = node_keys if node_keys is not None else torch.arange(self.num_nodes, dtype=torch.int64)

    def _hop(self, dst, times, fanout, key):
        counts, nbrs, _, etime = self._draw_csc(self.indptr, self.indices, self.edge_time, self.node_keys, 0, dst,
                                                times, fanout, key)
        return counts, nbrs, etime


def check_tcsr(indptr: torch.Tensor, edge_time, num_edges: int) -> torch.Tensor:
    """int64 edge times aligned with the CSC, ascending within each node's in-edges (one line
    otherwise)."""
    if not isinstance(edge_time, torch.Tensor) or edge_time.dim() != 1 or edge_time.numel() != num_edges:
        raise SamplerError(f"expected edge_time int64 [{num_edges}] aligned with the CSC's indices, found "
                           f"{type(edge_time).__name__} {tuple(getattr(edge_time, 'shape', ()))}")
    t = edge_time.to(torch.int64).contiguous()
    if num_edges > 1:
        down = t[1:] < t[:-1]
        starts = torch.zeros(num_edges, dtype=torch.bool)
        inner = indptr[1:-1]
        starts[inner[(inner > 0) & (inner < num_edges)]] = True
        bad = down & ~starts[1:]
        if bool(bad.any()):
            e = int(torch.nonzero(bad)[0]) + 1
            raise SamplerError(f"expected each node's in-edges sorted by time (a T-CSR), found time {int(t[e])} at "
                               f"edge {e} after {int(t[e - 1])}; build the CSC with time_sorted_csc")
    return t


class DistTemporalSampler(_TemporalBase):
    """Time-respecting sampling over a partitioned graph: owners draw their nodes for every rank.

    Args:
        part: this rank's part (``indptr``, ``indices``, ``edge_time``, ``orig_ids``; a
            :class:`~gnnscale.partitioning.part.LocalPart` of a temporal partition).
        book: the partition book; comm: the communicator (``rank``, ``world_size``, ``exchange``).
        Others as :class:`TemporalNeighborSampler`.

    ``sample`` draws exactly what :class:`TemporalNeighborSampler` draws over the whole graph
    (in the partition's numbering, with the original ids as node keys) at the same epoch and step.
    """

    def __init__(self, indptr, indices, edge_time, owned_keys, book, comm, fanouts: Sequence[int], seed: int = 0,
                 strategy: str = "uniform", window: int = 0, cut: str = "<", disjoint: bool = True,
                 edge_ids: torch.Tensor | None = None) -> None:
        self.book, self.comm = book, comm
        self.edge_ids = edge_ids  # int64 [E_p] an id per in-edge: draw_hop returns the drawn edges' ids
        lo, hi = int(book.offsets[comm.rank]), int(book.offsets[comm.rank + 1])
        self._init(fanouts, seed, strategy, window, cut, disjoint, book.num_nodes, held=(lo, hi))
        self.offset = lo
        self.indptr, self.indices, self.owned_keys = indptr, indices, owned_keys
        self.edge_time = check_tcsr(indptr, edge_time, indices.numel())

    def _own(self, ids, times, fanout, key):
        from gnnscale.samplers import cpu_kernels

        rows = ids - self.offset
        counts, nbrs, pos, etime = sample_temporal(
            self.indptr, self.indices, self.edge_time, rows, self.owned_keys[rows], times, fanout, key, self.strategy,
            self.strict, self.window, cpu_kernels.parallel_enabled(), return_edges=self.edge_ids is not None)
        if self.edge_ids is None:
            return counts, nbrs, etime
        return counts, nbrs, etime, self.edge_ids[pos]

    def _hop(self, dst, times, fanout, key):
        return self.draw_hop(dst, times, fanout, key)[:3]

    def draw_hop(self, dst, times, fanout, key):
        """(counts [n], nbrs, edge times, edge ids or None) of ``dst`` int64 [n] (partition ids) at
        ``times``, each drawn by its owner (one request/response exchange; a collective); edge ids
        with ``edge_ids`` (the owners send them beside the times). ``key``: the hop's stream key, or
        int64 [n] one per node (sent with the requests: ranks whose batches are of different steps;
        every rank passes the same kind)."""
        from gnnscale.partitioning.routing import Route

        comm, rank, P = self.comm, self.comm.rank, self.comm.world_size
        route = Route.build(self.book.owner(dst), P)
        per_node = isinstance(key, torch.Tensor)
        cols = [route.split(dst), route.split(times)] + ([route.split(key)] if per_node else [])
        ids, ts = cols[0], cols[1]
        req = [torch.cat([c[r] for c in cols]) if r != rank else dst.new_empty(0) for r in range(P)]
        got = comm.exchange(req, "sample_request")
        w = len(cols)
        sizes = [g.numel() // w for g in got]
        served, served_t, *served_k = [torch.cat([g.view(w, -1)[j] for g in got]) for j in range(w)]
        k = 3 if self.edge_ids is None else 4  # segments per reply: counts, nbrs, times (, edge ids)
        s_counts, s_nbrs, *s_vals = self._own(served, served_t, fanout, served_k[0] if per_node else key)
        per_c = list(torch.split(s_counts, sizes))
        e_sizes = [int(c.sum()) for c in per_c]
        per_v = [torch.split(v, e_sizes) for v in (s_nbrs, *s_vals)]
        reply = [torch.cat([c, *(v[r] for v in per_v)]) for r, c in enumerate(per_c)]
        back = comm.exchange(reply, "sample_response")
        own = self._own(ids[rank], ts[rank], fanout, cols[2][rank] if per_node else key)
        counts_l, vals_l = [], [[] for _ in range(k - 1)]
        for r in range(P):  # loop over ranks (a handful), not over nodes
            if r == rank:
                c, vals = own[0], own[1:]
            else:
                n_r = ids[r].numel()
                c = back[r][:n_r]
                vals = back[r][n_r:].view(k - 1, -1).unbind(0)  # k - 1 pieces, also when none was drawn
            counts_l.append(c)
            for acc, v in zip(vals_l, vals):
                acc.append(v)
        counts, nbrs = route.merge_segments(counts_l, vals_l[0])
        rest = [route.merge_segments(counts_l, v)[1] for v in vals_l[1:]]
        return counts, nbrs, rest[0], rest[1] if k == 4 else None
