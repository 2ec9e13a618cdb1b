"""Seed-edge batches for link prediction (docs/link_prediction.md, section 3).

A batch of positive edges (this rank's supervision edges) becomes a :class:`MiniBatch` whose
seeds are the endpoints of the positives and of their negatives:

- :class:`NegativeSampler` draws the negatives from a ``torch.Generator`` keyed by (seed,
  epoch, step, rank) only. No communication: parts own contiguous id ranges, so a uniform id
  is a uniform node whatever the partitioning, and a single process replaying rank ``r``
  draws the same negatives as rank ``r`` of a distributed run.
- :class:`EdgeFilter` answers "is (u, v) an edge of the message-passing graph?": one sorted
  int64 key array ``dst * N + src`` of the (owned) in-edges, searched; distributed, the pairs
  go to the owners of their destinations in one exchange.
- :class:`LinkSampler` puts them together: positives, negatives (filtered), the neighbour
  sampler on the unique endpoints, and the removal of the batch's own positives (either
  direction) from every block, so that a model never sees the edge it is asked to predict.

Everything is vectorized (loops run over ranks or blocks, never over nodes or edges).
"""
from __future__ import annotations

import operator
from dataclasses import replace

import torch

from gnnscale.errors import SamplerError
from gnnscale.partitioning.routing import Route
from gnnscale.samplers.block import MiniBatch
from gnnscale.samplers.link_kernels import drop_columns, seed_pair_hits
from gnnscale.samplers.rng import stream_key

NEGATIVE_MODES = ("uniform", "per_source", "in_batch")

# Salt of the negatives' stream keys: the neighbour sampler's keys are stream_key(seed, epoch,
# step, 0, hop), these stream_key(_SALT, seed, epoch, step, rank): independent streams.
_SALT = 0x4E45474154495645  # "NEGATIVE"
_MASK64 = (1 << 64) - 1


def _check_pairs(pairs: torch.Tensor, what: str) -> None:
    if not isinstance(pairs, torch.Tensor) or pairs.dtype != torch.int64 or pairs.dim() != 2 or pairs.size(0) != 2:
        shape = tuple(pairs.shape) if isinstance(pairs, torch.Tensor) else type(pairs).__name__
        dtype = pairs.dtype if isinstance(pairs, torch.Tensor) else None
        raise SamplerError(f"{what} must be an int64 tensor of shape [2, n]; found dtype {dtype}, shape {shape}")


def _check_count(value, what: str) -> int:
    try:
        n = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        n = None
    if n is None or n < 1:
        raise SamplerError(f"{what} must be an integer >= 1; found {value!r}")
    return n


class NegativeSampler:
    """Negative pairs for a batch of positives, drawn without communication.

    Args:
        num_nodes: N; negative endpoints are drawn uniformly in ``[0, N)`` (global ids).
        mode: ``"uniform"`` (both endpoints uniform, Q = B * k), ``"per_source"`` (each
            positive's source kept, the destination uniform, Q = B * k) or ``"in_batch"``
            (each positive's source with the destinations of the next k positives of the
            batch, cyclically, Q = B * min(k, B - 1); draws nothing at random).
        k: negatives per positive.
        seed: base seed of the streams.
        draw_src, draw_dst: typed graphs: ``(count, generator) -> int64 [count]`` global ids of
            the relation's source (destination) type, drawn uniformly among that type's nodes
            (see :func:`typed_drawer`); None: uniform over ``[0, N)``.

    ``draw`` returns the negatives grouped by positive: negative ``q`` belongs to positive
    ``q // k'`` (``of_pos = arange(B).repeat_interleave(k')``, k' = k, or min(k, B - 1) in
    ``in_batch`` mode).
    """

    def __init__(self, num_nodes: int, mode: str = "uniform", k: int = 1, seed: int = 0,
                 draw_src=None, draw_dst=None) -> None:
        if mode not in NEGATIVE_MODES:
            raise SamplerError(f"negative sampling mode must be one of {', '.join(NEGATIVE_MODES)}; found {mode!r}")
        self.num_nodes = _check_count(num_nodes, "num_nodes (the number of nodes negatives are drawn from)")
        self.k = _check_count(k, "k (negatives per positive)")
        self.mode = mode
        self.seed = int(seed)
        # typed graphs: (count, generator) -> int64 [count] global ids of the relation's source
        # (destination) type; None: uniform over [0, N)
        self.draw_src, self.draw_dst = draw_src, draw_dst

    def _ids(self, fn, count: int, gen: torch.Generator) -> torch.Tensor:
        if fn is None:
            return torch.randint(0, self.num_nodes, (count,), generator=gen, dtype=torch.int64)
        return fn(count, gen)

    def key(self, epoch: int, step: int, rank: int) -> int:
        """The unsigned 64-bit seed of the generator of (epoch, step, rank)."""
        return stream_key(_SALT, self.seed, epoch, step, rank) & _MASK64

    def generator(self, epoch: int, step: int, rank: int) -> torch.Generator:
        return torch.Generator().manual_seed(self.key(epoch, step, rank))

    def draw(self, pos: torch.Tensor, epoch: int, step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(neg int64 [2, Q], of_pos int64 [Q]: the positive each negative belongs to).

        Args:
            pos: int64 [2, B] the batch's positive pairs (global ids).
        """
        _check_pairs(pos, "positive pairs")
        B, N = pos.size(1), self.num_nodes
        k = self.k if self.mode != "in_batch" else min(self.k, max(B - 1, 0))
        of_pos = torch.arange(B, dtype=torch.int64, device=pos.device).repeat_interleave(k)
        if self.mode == "in_batch":
            shift = torch.arange(1, k + 1, device=pos.device)
            nxt = (torch.arange(B, device=pos.device).unsqueeze(1) + shift) % max(B, 1)
            neg = torch.stack([pos[0][of_pos], pos[1][nxt.reshape(-1)]])
        else:
            gen = self.generator(epoch, step, rank)
            if self.mode == "uniform":
                if self.draw_src is None and self.draw_dst is None:
                    neg = torch.randint(0, N, (2, B * k), generator=gen, dtype=torch.int64).to(pos.device)
                else:
                    neg = torch.stack([self._ids(self.draw_src, B * k, gen), self._ids(self.draw_dst, B * k, gen)])
                    neg = neg.to(pos.device)
            else:  # per_source
                dst = self._ids(self.draw_dst, B * k, gen).to(pos.device)
                neg = torch.stack([pos[0][of_pos], dst])
        return neg, of_pos


class EdgeFilter:
    """Answers "is (u, v) an edge of the message-passing graph?", vectorized.

    Args:
        indptr: int64 [n + 1] CSC pointers: in-edges of each (owned) destination.
        indices: int64 [E] source (global id) of each in-edge.
        book: the partition book (``owner`` of global ids); may be None when ``comm`` is.
        comm: this rank's communicator (``exchange(list_of_tensors, category)``), or None for
            one process holding the whole graph (then ``indptr``/``indices`` are the whole
            graph's CSC and row ``v`` is node ``v``).
        rank: this rank (default ``comm.rank``; 0 without ``comm``).
        num_nodes: N (default ``book.num_nodes``, or ``indptr.numel() - 1`` without a book).

    Holds one sorted int64 array of keys ``dst * N + src`` over the (owned) in-edges
    (E_owned * 8 bytes). Distributed, :meth:`has_edge` is a collective: every rank calls it
    the same number of times (an empty query is fine); the pairs travel to the owners of their
    destinations in one exchange (``negative_filter_request``), the answers come back in one
    (``negative_filter``, one byte per pair).
    """

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, book=None, comm=None, rank: int | None = None,
                 num_nodes: int | None = None) -> None:
        if comm is not None and book is None:
            raise SamplerError("a distributed EdgeFilter needs the partition book (owner of each destination); "
                               "pass book=")
        self.comm = comm
        self.book = book
        self.rank = int(rank if rank is not None else (comm.rank if comm is not None else 0))
        if num_nodes is None:
            num_nodes = book.num_nodes if book is not None else indptr.numel() - 1
        self.num_nodes = int(num_nodes)
        if self.num_nodes > 3_037_000_499:  # N * N must fit in int64
            raise SamplerError(f"EdgeFilter keys dst * N + src need N <= 3037000499; found N = {self.num_nodes}")
        self.offset = int(book.offsets[self.rank]) if comm is not None else 0
        indptr = torch.as_tensor(indptr)
        indices = torch.as_tensor(indices).to(torch.int64)
        n_rows = indptr.numel() - 1
        rows = torch.repeat_interleave(torch.arange(n_rows, dtype=torch.int64), torch.diff(indptr.to(torch.int64)),
                                       output_size=indices.numel())
        rows += self.offset
        rows *= self.num_nodes
        rows += indices
        self.keys = torch.sort(rows).values

    def _lookup(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        """bool [n]: membership of (src, dst) in this rank's key array."""
        q = dst * self.num_nodes + src
        if self.keys.numel() == 0 or q.numel() == 0:
            return torch.zeros(q.numel(), dtype=torch.bool)
        pos = torch.searchsorted(self.keys, q).clamp_(max=self.keys.numel() - 1)
        return self.keys[pos] == q

    def has_edge(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        """bool [Q]: whether each (src[i], dst[i]) (int64 global ids) is an edge src -> dst."""
        src = torch.as_tensor(src).to(torch.int64).reshape(-1)
        dst = torch.as_tensor(dst).to(torch.int64).reshape(-1)
        if src.numel() != dst.numel():
            raise SamplerError(f"has_edge needs as many sources as destinations; found {src.numel()} and {dst.numel()}")
        if src.numel():
            lo, hi = int(torch.minimum(src.min(), dst.min())), int(torch.maximum(src.max(), dst.max()))
            if lo < 0 or hi >= self.num_nodes:
                raise SamplerError(f"has_edge ids must lie in [0, {self.num_nodes}); found range [{lo}, {hi}]")
        if self.comm is None:
            return self._lookup(src, dst)
        comm, rank, P = self.comm, self.rank, self.comm.world_size
        route = Route.build(self.book.owner(dst), P)
        req = route.split(torch.stack([src, dst], 1))
        own = req[rank]
        req[rank] = own.new_empty((0, 2))  # answered here, never sent
        got = comm.exchange(req, "negative_filter_request")
        sizes = [g.size(0) for g in got]
        asked = torch.cat(got)
        answers = self._lookup(asked[:, 0], asked[:, 1]).to(torch.uint8)
        back = comm.exchange(list(torch.split(answers, sizes)), "negative_filter")
        back[rank] = self._lookup(own[:, 0], own[:, 1]).to(torch.uint8)
        return route.merge_rows(back).to(torch.bool)


class LinkSampler:
    """Mini-batches of seed edges: positives, negatives, their endpoints' computation graph.

    Args:
        node_sampler: a :class:`~gnnscale.samplers.distributed.DistNeighborSampler`, or a local
            :class:`~gnnscale.samplers.local.NeighborSampler`, or any object with
            ``sample(seeds, epoch=, step=)`` whose batch's seeds are the seeds given.
        pos: int64 [2, E_r] this rank's supervision edges (global ids).
        negatives: the :class:`NegativeSampler` (its ``num_nodes`` is the graph's N), or None:
            no negatives (edge classification / regression: the positives only, Q = 0; give
            ``num_nodes``).
        rank: this rank (the negatives' and a local sampler's stream).
        edge_filter: an :class:`EdgeFilter`: negatives that are edges of the message-passing
            graph are dropped. None: kept.
        exclude: remove every block edge equal to a batch positive or its reverse.
        num_nodes: N, when ``negatives`` is None (default: ``negatives.num_nodes``).

    Every rank must call :meth:`sample` the same number of times (the distributed node
    sampler and edge filter hold collectives); an empty ``edge_ids`` is allowed.
    """

    def __init__(self, node_sampler, pos: torch.Tensor, negatives: NegativeSampler | None, rank: int,
                 edge_filter: EdgeFilter | None = None, exclude: bool = True, num_nodes: int | None = None) -> None:
        _check_pairs(pos, "pos (this rank's supervision edges)")
        if negatives is None and num_nodes is None:
            raise SamplerError("a LinkSampler without negatives needs num_nodes (the graph's N)")
        if negatives is not None and not isinstance(negatives, NegativeSampler):
            raise SamplerError(f"negatives must be a NegativeSampler or None; found {type(negatives).__name__}")
        if not isinstance(exclude, bool):
            raise SamplerError(f"exclude must be a bool; found {exclude!r}")
        self.node_sampler = node_sampler
        self.pos = pos
        self.negatives = negatives
        self.rank = int(rank)
        self.edge_filter = edge_filter
        self.exclude = exclude
        self.num_nodes = negatives.num_nodes if negatives is not None else \
            _check_count(num_nodes, "num_nodes (the graph's number of nodes)")

    def sample(self, edge_ids: torch.Tensor, epoch: int = 0, step: int = 0) -> MiniBatch:
        """The batch of positives ``pos[:, edge_ids]`` (``edge_ids`` int64 [B] positions into ``pos``).

        Returns a :class:`MiniBatch` with ``seeds`` the sorted unique endpoints,
        ``edge_label_index`` int64 [2, B + Q] (positions into ``seeds``, positives first),
        ``edge_label`` float32 [B + Q], ``neg_of_pos`` int64 [Q] and
        ``stats["excluded_edges"]``, ``stats["filtered_negatives"]``.
        """
        edge_ids = torch.as_tensor(edge_ids)
        E = self.pos.size(1)
        if edge_ids.dtype != torch.int64 or edge_ids.dim() != 1:
            raise SamplerError(f"edge_ids must be a 1-D int64 tensor; found dtype {edge_ids.dtype}, "
                               f"shape {tuple(edge_ids.shape)}")
        if edge_ids.numel() and (int(edge_ids.min()) < 0 or int(edge_ids.max()) >= E):
            raise SamplerError(f"edge_ids must lie in [0, {E}) (positions into this rank's positives); found range "
                               f"[{int(edge_ids.min())}, {int(edge_ids.max())}]")
        pos = self.pos[:, edge_ids].to(torch.int64)
        if self.negatives is not None:
            neg, of_pos = self.negatives.draw(pos, epoch, step, self.rank)
        else:  # the positives only (edge classification / regression)
            neg, of_pos = pos.new_empty((2, 0)), pos.new_empty((0,))
        filtered = 0
        if self.edge_filter is not None:  # called even when empty: a collective when distributed
            hit = self.edge_filter.has_edge(neg[0], neg[1])
            filtered = int(hit.sum())
            if filtered:
                keep = ~hit
                neg, of_pos = neg[:, keep], of_pos[keep]
        pairs = torch.cat([pos, neg], 1)
        nodes = torch.unique(pairs.reshape(-1))  # sorted
        mb = self.node_sampler.sample(nodes, epoch=epoch, step=step)
        if mb.seeds is not nodes and not torch.equal(mb.seeds, nodes):
            raise SamplerError("the node sampler's batch must keep the seeds it was given, in order")
        excluded = self._exclude(mb, pos) if self.exclude else 0
        B, Q = pos.size(1), neg.size(1)
        mb.edge_label_index = torch.searchsorted(nodes, pairs)
        mb.edge_label = torch.cat([torch.ones(B, dtype=torch.float32), torch.zeros(Q, dtype=torch.float32)])
        mb.neg_of_pos = of_pos
        mb.stats["excluded_edges"] = excluded
        mb.stats["filtered_negatives"] = filtered
        mb.stats["positive_edges"] = B
        mb.stats["negative_edges"] = Q
        return mb

    def _exclude(self, mb: MiniBatch, pos: torch.Tensor) -> int:
        """Drop, in place, every block edge (src -> dst) equal to a positive (u, v) or (v, u).

        Both endpoints of a positive are seeds, and the samplers keep the seeds as the first
        ``S`` sources and destinations of every block (relabeling puts the destinations first),
        so only an edge whose two local ids are below ``S`` can be a positive: those few are
        looked up in the positives' local keys ``u * S + v`` instead of every edge's global key
        (the same edges dropped, 10x less work on R-MAT 100k), compiled
        (:mod:`gnnscale.samplers.link_kernels`). A node sampler whose blocks do not keep that
        prefix gets the global keys. ``edge_type`` and ``edge_attr`` lose the same rows."""
        if pos.size(1) == 0:
            return 0
        nodes = mb.seeds
        S = nodes.numel()
        total = 0
        local = all(b.src_ids.numel() >= S and b.dst_ids.numel() >= S and torch.equal(b.src_ids[:S], nodes)
                    and torch.equal(b.dst_ids[:S], nodes) for b in mb.blocks)
        if local:
            u, v = torch.searchsorted(nodes, pos)
            banned = torch.sort(torch.cat([u * S + v, v * S + u])).values
        else:
            N = self.num_nodes
            banned = torch.sort(torch.cat([pos[0] * N + pos[1], pos[1] * N + pos[0]])).values
        for i, b in enumerate(mb.blocks):  # a loop over blocks (hops)
            ei = b.edge_index
            if ei.size(1) == 0:
                continue
            if local:
                hits = seed_pair_hits(ei, S, banned)
            else:
                key = b.src_ids[ei[0]] * self.num_nodes + b.dst_ids[ei[1]]
                ban = banned.to(ei.device)
                hits = torch.nonzero(ban[torch.searchsorted(ban, key).clamp_(max=ban.numel() - 1)] == key).reshape(-1)
            n = hits.numel()
            if n:
                mb.blocks[i] = replace(b, edge_index=drop_columns(ei, hits), _degree=None,
                                       edge_type=None if b.edge_type is None else drop_columns(b.edge_type[None], hits)[0],
                                       edge_attr=None if b.edge_attr is None else drop_columns(b.edge_attr.T, hits).T.contiguous())
                total += n
        if total and "sampled_edges" in mb.stats:
            mb.stats["sampled_edges"] -= total
        return total


__all__ = ["EdgeFilter", "LinkSampler", "NEGATIVE_MODES", "NegativeSampler"]


def typed_drawer(book, t: int, count_t: int):
    """A ``draw_src``/``draw_dst`` of :class:`NegativeSampler` for node type ``t`` of a typed
    partition: per-type ids uniform in ``[0, count_t)``, mapped to global ids by the
    :class:`~gnnscale.partitioning.book.TypedPartitionBook` ``book`` (no communication)."""

    def draw(count: int, gen: torch.Generator) -> torch.Tensor:
        return book.to_global(t, torch.randint(0, count_t, (count,), generator=gen, dtype=torch.int64))

    return draw
