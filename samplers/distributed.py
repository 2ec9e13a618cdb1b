"""Distributed neighbor sampler: owners sample their own nodes for everyone.

Each hop splits the frontier by owner. Ids this rank owns are sampled from its local CSC;
the others go to their owners in one request/response exchange (two all_to_all payloads)
per hop. A node's draws are keyed by (seed, epoch, step, hop) and its original id, never by
the rank that asks, so the result equals what :class:`~gnnscale.samplers.local.NeighborSampler`
draws in one process at the same epoch and step, however the graph is partitioned and whichever
rank holds the seed: the ranks' batches of a step draw what one worker draws for their union.
With edge attributes, owners also gather the rows of the edges they drew for each requester and
send them right after the response (one more exchange per hop, category ``edge_attr``).

Ranks on one host may sample each other's nodes themselves (:meth:`DistNeighborSampler.read_host_parts`,
``--host-graph``): the owners' CSCs are read from the partition folder, and drawn with this rank's
stream and the owner's node keys, the neighbours are the owners' answers, without asking them; when
every rank shares the host, sampling exchanges nothing.

Exchange modes (see :mod:`gnnscale.history.halo`): ``exact`` is the above; ``historical``
expands only owned nodes (remote nodes reached before the last hop become historical leaves,
``Block.num_hist``), so sampling never communicates; ``local`` drops the cross-partition
edges altogether.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import torch

from gnnscale.errors import SamplerError
from gnnscale.partitioning.book import PartitionBook
from gnnscale.partitioning.routing import Route
from gnnscale.samplers.block import MiniBatch
from gnnscale.samplers.kernels import Kernels
from gnnscale.samplers.typed import TypedGraph, sample_relations, split_counts
from gnnscale.samplers.local import (
    SamplingKeys,
    build_minibatch,
    check_edge_attr,
    check_edge_weight,
    check_fanouts,
    check_labor,
    check_replace,
    check_seeds,
    gather_edge_attr,
    packed_edges,
    sampling_variant,
)


MODES = ("exact", "historical", "local")


@dataclass(frozen=True)
class HostGraph:
    """Another rank's part, read on this host: its CSC over its owned nodes (int64 ``indptr``
    [n_k + 1], ``indices`` [E_k] global ids), its nodes' stream keys (int64 ``owned_keys`` [n_k],
    their original ids) and, for a sampler with edge attributes, its in-edges' rows (float32
    ``edge_attr`` [E_k, De], aligned with ``indices``)."""

    indptr: torch.Tensor
    indices: torch.Tensor
    owned_keys: torch.Tensor
    edge_attr: torch.Tensor | None = None
    source_keys: torch.Tensor | None = None  # layer-neighbour sampling: int64 [E_k] original ids of ``indices``


class Exchange(Protocol):
    """What the sampler needs of a communicator (the engine's ``gnnscale.process.comm.Communicator``):
    its place and one all-to-all of per-rank tensors, counted under a category. An
    ``exchange_flat(flat, sizes, category) -> (out, recv_sizes)`` is used when present (edge
    attribute rows go without a per-rank list), ``exchange`` otherwise."""

    rank: int
    world_size: int

    def exchange(self, send: Sequence[torch.Tensor], category: str) -> list[torch.Tensor]: ...


def _owned_edges_only(indptr, indices, book, rank, edge_weight, etype=None):
    """The CSC without in-edges from other parts (``local`` mode); ``etype``: the kept edges'
    relations too (typed graphs)."""
    keep = book.owner(indices) == rank
    deg = torch.diff(indptr)
    row = torch.repeat_interleave(torch.arange(deg.numel(), device=indptr.device), deg, output_size=indices.numel())
    new_deg = torch.bincount(row[keep], minlength=deg.numel())
    new_ptr = torch.zeros_like(indptr)
    new_ptr[1:] = torch.cumsum(new_deg, 0)
    return (new_ptr, indices[keep], (edge_weight[keep] if edge_weight is not None else None),
            (etype[keep] if etype is not None else None))


class DistNeighborSampler:
    """Neighbor sampling (uniform or weighted, with or without replacement) over a partitioned graph.

    Args:
        indptr: int64 [n_owned + 1] CSC pointers of this rank's owned nodes (local rows).
        indices: int64 [E_owned] in-neighbors in global (relabeled) ids.
        book: the partition book (owner of every global id).
        comm: this rank's communicator (``comm.rank`` is the part this rank owns).
        fanouts: neighbors per hop starting at the seeds; -1 = all.
        seed: base seed of the random streams (the same on every rank).
        owned_keys: int64 [n_owned] stream identity of each owned node (its original id);
            default: its global id.
        backend: ``"auto"``, ``"numba"`` or ``"torch"`` kernels (identical results).
        replace: sample with replacement (see :class:`~gnnscale.samplers.local.NeighborSampler`).
        edge_weight: optional float [E_owned] non-negative weights aligned with this rank's
            ``indices``; owners apply them when sampling their nodes for any requester.
        mode: ``"exact"`` (sampling crosses partitions), ``"historical"`` (owned nodes only
            are expanded; no collectives) or ``"local"`` (cross-partition edges dropped; no
            collectives). An owned node draws the same neighbors in ``exact`` and
            ``historical`` mode.
        typed: a typed graph (:class:`~gnnscale.samplers.typed.TypedGraph`; its
            ``rel_indptr`` over this rank's CSC), sampled by relation in ``exact`` mode (the
            owner draws every relation of a requested node in the same exchange) or
            ``historical`` mode (owned nodes only, the same draws).
        edge_attr: optional float32 [E_owned, De] attributes of this rank's in-edges, aligned
            with ``indices`` (a tensor, or a numpy array such as a memory map, used without a
            copy). Every block then carries ``edge_attr``, the rows of its edges in
            ``edge_index`` order: owners gather the rows of the edges they drew for each
            requester and send them right after the hop's response (category ``edge_attr``,
            one more exchange per hop in ``exact`` mode); ``historical`` and ``local`` mode
            read their own rows (``local`` mode maps the kept edges to their rows). The draws
            are the same with or without it. In ``exact`` mode the compiled kernels read the
            rows beside the neighbor ids from a packed copy (``E_owned * (8 + 4 De)`` bytes).
    """

    def __init__(
        self,
        indptr: torch.Tensor,
        indices: torch.Tensor,
        book: PartitionBook,
        comm: Exchange,
        fanouts: Sequence[int],
        seed: int = 0,
        owned_keys: torch.Tensor | None = None,
        backend: str = "auto",
        replace: bool = False,
        edge_weight: torch.Tensor | None = None,
        mode: str = "exact",
        typed: TypedGraph | None = None,
        edge_attr: torch.Tensor | np.ndarray | None = None,
        labor: bool = False,
        source_keys: torch.Tensor | None = None,
    ) -> None:
        if mode not in MODES:
            raise SamplerError(f"sampling mode must be one of {', '.join(MODES)}; found {mode!r}")
        if typed is not None and mode == "local":
            raise SamplerError(f"typed graphs are sampled in exact or historical mode; found mode {mode!r}")
        self.mode = mode
        self.edge_attr = check_edge_attr(edge_attr, indices.numel())
        self.edge_map = None  # local mode: row of edge_attr of each kept edge
        self.kept = None  # local mode: bool [E_owned] the edges kept
        if mode == "local":
            if self.edge_attr is not None:
                self.edge_map = torch.nonzero(book.owner(indices) == comm.rank).flatten()
            self.kept = book.owner(indices) == comm.rank  # the edges kept (their source keys too)
            indptr, indices, edge_weight, _ = _owned_edges_only(indptr, indices, book, comm.rank, edge_weight)
        self.indptr = indptr
        self.indices = indices
        self.book = book
        self.comm = comm
        self.typed = typed
        self.fanouts = check_fanouts([max(h) for h in typed.fanouts] if typed is not None else fanouts)
        self.keys = SamplingKeys(seed)
        self.offset = int(book.offsets[comm.rank])
        n_owned = indptr.numel() - 1
        self.owned_keys = owned_keys if owned_keys is not None else torch.arange(n_owned) + self.offset
        self.kernels = Kernels(book.num_nodes, indptr.device, backend, held=(self.offset, self.offset + n_owned))
        self.replace = check_replace(replace)
        self.edge_weight = check_edge_weight(edge_weight, indices.numel(), indices.device)
        self.variant = sampling_variant(self.replace, self.edge_weight)
        self.labor = check_labor(labor, self.replace, self.edge_weight)
        self.source_keys = None
        if self.labor and (source_keys is not None or owned_keys is None):
            self.set_source_keys(indices if source_keys is None else source_keys, local_mode_kept=True)
        # exact mode draws this part's edges with their rows beside the ids (packed_edges); the
        # other modes gather the rows of every hop's positions after the last hop
        self.packed = packed_edges(self.kernels, indices, self.edge_attr, self.variant, typed) \
            if mode == "exact" and not self.labor else None
        self.host: dict[int, HostGraph] = {}  # read_host_parts: other ranks' parts on this host
        self.host_complete = False

    def set_source_keys(self, source_keys: torch.Tensor, host: dict | None = None,
                        local_mode_kept: bool = True) -> None:
        """Layer-neighbour sampling: the original id of the source of every in-edge of this part
        (int64 [E_owned], aligned with the part's ``indices`` as given to the constructor; local
        mode keeps those of the edges it kept) and of every host part's (``{rank: int64 [E_k]}``,
        stored on its :class:`HostGraph`)."""
        if not self.labor:
            raise SamplerError("set_source_keys: this sampler does not sample layer-neighbours (labor=False)")
        keys = source_keys.to(torch.int64)
        if local_mode_kept and getattr(self, "kept", None) is not None and keys.numel() == self.kept.numel():
            keys = keys[self.kept]
        if keys.numel() != self.indices.numel():
            raise SamplerError(f"source_keys must hold one original id per in-edge ({self.indices.numel()}); found "
                               f"{keys.numel()}")
        self.source_keys = keys
        for k, sk in (host or {}).items():
            from dataclasses import replace as _replace

            self.host[k] = _replace(self.host[k], source_keys=sk.to(torch.int64))

    def _variant(self, source_keys: torch.Tensor | None) -> dict:
        """The kernels' variant keywords for a CSC whose sources' original ids are ``source_keys``."""
        if not self.labor:
            return self.variant
        if source_keys is None:
            raise SamplerError("layer-neighbour sampling needs the original ids of the sources of every CSC it "
                               "draws from; call set_source_keys (gnnscale.data.open_data does)")
        return {"labor": source_keys}

    def read_host_parts(self, parts: dict[int, HostGraph], complete: bool) -> None:
        """Sample the nodes of ``parts`` (``{rank: HostGraph}``, other ranks' parts read on this
        host) here, with the step's stream and their owners' node keys: the same draws as the
        owners', without a request. ``complete``: every rank reads every other rank's part (the
        same value on every rank); then a hop runs no exchange at all, else the exchanges run as
        before with nothing asked of the parts read here. Exact mode, untyped, unweighted."""
        if self.mode != "exact" or self.typed is not None or self.edge_weight is not None:
            raise SamplerError(f"read_host_parts: expected an untyped, unweighted sampler in exact mode; found mode "
                               f"{self.mode!r}, typed {self.typed is not None}, weighted {self.edge_weight is not None}")
        P, rank = self.comm.world_size, self.comm.rank
        if complete and sorted(parts) != [k for k in range(P) if k != rank]:
            raise SamplerError(f"read_host_parts: complete=True needs every other rank's part; found {sorted(parts)} "
                               f"of world size {P}")
        for k, g in parts.items():
            n = self.book.part_size(k) if 0 <= k < P and k != rank else -1
            if n < 0 or tuple(g.indptr.shape) != (n + 1,) or tuple(g.owned_keys.shape) != (n,) \
                    or int(g.indptr[-1]) != g.indices.numel():
                raise SamplerError(
                    f"rank {rank}: host part {k} does not fit the partition book (world size {P}, part size {n}): "
                    f"indptr {tuple(g.indptr.shape)}, keys {tuple(g.owned_keys.shape)}, {g.indices.numel()} edges. "
                    "Read the parts of the folder the run was started on.")
            if self.edge_attr is not None and (g.edge_attr is None or tuple(g.edge_attr.shape)
                                               != (g.indices.numel(), self.edge_attr.shape[1])):
                raise SamplerError(f"rank {rank}: host part {k} needs edge features [{g.indices.numel()}, "
                                   f"{self.edge_attr.shape[1]}]; found "
                                   f"{None if g.edge_attr is None else tuple(g.edge_attr.shape)}")
        self.host = dict(parts)
        self.host_complete = bool(complete)

    def _sample_host(self, k: int, ids: torch.Tensor, hop: int, epoch: int, step: int) -> tuple[torch.Tensor, ...]:
        """(counts, nbrs[, edge rows]) of rank ``k``'s ids (int64 [m] global), drawn here as rank
        ``k`` would draw them."""
        g = self.host[k]
        with_attr = self.edge_attr is not None
        out = self._draw(g.indptr, g.indices, g.owned_keys, int(self.book.offsets[k]), ids, self.fanouts[hop],
                         self.keys(epoch, step, hop), self.kernels, with_attr, g.source_keys)
        return (out[0], out[1], gather_edge_attr(g.edge_attr, out[2])) if with_attr else (out[0], out[1], None)

    def sample(self, seeds: torch.Tensor, epoch: int = 0, step: int = 0) -> MiniBatch:
        """Sample the computation graph of ``seeds`` (int64 [B] unique global ids).

        Every rank must call this the same number of times per epoch (collectives inside);
        an empty ``seeds`` is allowed.
        """
        check_seeds(seeds, self.book.num_nodes)
        if self.mode != "exact":  # only owned nodes are expanded: no collectives
            leaf = (lambda ids: self.book.owner(ids) != self.comm.rank) if self.mode == "historical" else None

            def own_fn(dst: torch.Tensor, hop: int) -> tuple[torch.Tensor, ...]:
                if self.typed is not None:  # by relation: (counts, nbrs, edge_type)
                    return self.sample_owned_typed(dst, hop, self.keys(epoch, step, hop))
                out = self._sample_own(dst, hop, epoch, step)
                return out if self.edge_attr is None else (out[0], out[1], None, out[2])

            mb = build_minibatch(seeds, len(self.fanouts), own_fn, self.kernels.relabel, leaf=leaf,
                                 node_type=self.typed.node_type if self.typed is not None else None,
                                 gather_edges=None if self.edge_attr is None else self._attr_rows)
            mb.stats["remote_frontier_ids"] = mb.stats["host_frontier_ids"] = 0
            return mb
        remote_ids, host_ids = [0], [0]

        def hop_fn(dst: torch.Tensor, hop: int) -> tuple[torch.Tensor, ...]:
            counts, nbrs, rows, n_remote, n_host = self._hop(dst, hop, epoch, step)
            remote_ids[0] += n_remote
            host_ids[0] += n_host
            return (counts, nbrs) if rows is None else (counts, nbrs, None, rows)

        if self.typed is not None:
            def typed_hop(dst: torch.Tensor, hop: int) -> tuple[torch.Tensor, ...]:
                counts, nbrs, etype, rows, n_remote = self._typed_hop(dst, hop, epoch, step)
                remote_ids[0] += n_remote
                return (counts, nbrs, etype) if rows is None else (counts, nbrs, etype, rows)

            mb = build_minibatch(seeds, len(self.fanouts), typed_hop, self.kernels.relabel,
                                 node_type=self.typed.node_type)
        else:
            mb = build_minibatch(seeds, len(self.fanouts), hop_fn, self.kernels.relabel)
        mb.stats["remote_frontier_ids"] = remote_ids[0]  # asked of their owners
        mb.stats["host_frontier_ids"] = host_ids[0]  # other ranks' nodes sampled here (read_host_parts)
        return mb

    def _sample_own(self, dst: torch.Tensor, hop: int, epoch: int, step: int) -> tuple[torch.Tensor, ...]:
        """Neighbors of owned ids ``dst`` (int64 [k] global) drawn with the step's stream for ``hop``
        (and their CSC edge positions when the sampler has edge attributes)."""
        return self.sample_owned(dst, self.fanouts[hop], self.keys(epoch, step, hop),
                                 return_edges=self.edge_attr is not None)

    def sample_owned(
        self, dst: torch.Tensor, fanout: int, key, kernels: Kernels | None = None, return_edges: bool = False
    ) -> tuple[torch.Tensor, ...]:
        """(counts int64 [k], nbrs int64 [sum counts] global ids): up to ``fanout`` in-neighbors of
        each owned id in ``dst`` (int64 [k] global), drawn with stream ``key`` (from ``self.keys``)
        and this sampler's variant (replacement, edge weights). No collectives.

        ``kernels``: other kernels than the sampler's own, for a caller in another thread (the
        compiled relabeler keeps a table per Kernels). ``return_edges``: also the drawn edges'
        positions in this sampler's CSC (rows of its edge attributes via :meth:`_attr_rows`).
        """
        return self._draw(self.indptr, self.indices, self.owned_keys, self.offset, dst, fanout, key,
                          kernels or self.kernels, return_edges, self.source_keys)

    def _draw(self, indptr, indices, keys, offset: int, ids: torch.Tensor, fanout: int, key, kernels: Kernels,
              return_edges: bool, source_keys: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        """Draw up to ``fanout`` in-neighbours of ``ids`` (int64 [k] global) from one part's CSC
        (rows ``ids - offset``; ``keys`` its nodes' stream keys), with stream ``key`` and this
        sampler's variant: (counts, nbrs[, CSC edge positions])."""
        rows = ids - offset
        kw = {"return_edges": True} if return_edges else {}
        return kernels.sample(indptr, indices, rows, keys[rows], fanout, key, **kw, **self._variant(source_keys))

    def _draw_own(self, ids: torch.Tensor, fanout: int, key, with_rows: bool) -> tuple[torch.Tensor, ...]:
        """(counts, nbrs[, their edge rows float32 [M, De]]) of owned ids (int64 [k] global) with
        stream ``key``: the rows read beside the ids from the packed edges, or gathered."""
        if with_rows and self.packed is not None:
            rows = ids - self.offset
            return self.kernels.sample_packed(self.indptr, self.packed, rows, self.owned_keys[rows], fanout, key)
        out = self._draw(self.indptr, self.indices, self.owned_keys, self.offset, ids, fanout, key, self.kernels,
                         with_rows, self.source_keys)
        return (out[0], out[1], self._attr_rows(out[2])) if with_rows else out

    def _attr_rows(self, edges: torch.Tensor) -> torch.Tensor:
        """float32 [M, De]: edge attribute rows of CSC edge positions ``edges`` (of this sampler's CSC)."""
        return gather_edge_attr(self.edge_attr, edges if self.edge_map is None else self.edge_map[edges])

    def edge_rows(self, edges: torch.Tensor) -> torch.Tensor:
        """float32 [M, De]: the edge attributes of the edges :meth:`sample_owned` returned with
        ``return_edges=True`` (int64 [M] positions in this sampler's CSC)."""
        return self._attr_rows(edges)

    def _send_rows(self, rows: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
        """Send ``rows`` (float32 [sum sizes, De], requester 0's first) to their requesters in one
        exchange (category ``edge_attr``); returns the rows received from each owner."""
        flat = getattr(self.comm, "exchange_flat", None)
        if flat is not None:
            out, got = flat(rows, torch.tensor(sizes, dtype=torch.int64), "edge_attr")
            return list(torch.split(out, got.tolist()))
        return self.comm.exchange(list(torch.split(rows, sizes)), "edge_attr")

    def _hop(self, dst: torch.Tensor, hop: int, epoch: int, step: int):
        comm, rank, P = self.comm, self.comm.rank, self.comm.world_size
        route = Route.build(self.book.owner(dst), P)
        req = route.split(dst)
        own = req[rank]
        req[rank] = own.new_empty(0)  # served locally, never sent
        here = {k: req[k] for k in self.host}  # other ranks' parts read on this host: sampled here
        for k in here:
            req[k] = own.new_empty(0)
        with_attr = self.edge_attr is not None
        back = back_rows = None
        if not self.host_complete:
            back, back_rows = self._serve(req, hop, epoch, step)
        o_out = self._draw_own(own, self.fanouts[hop], self.keys(epoch, step, hop), with_attr)
        counts_list, nbrs_list, rows_list = [], [], []
        for r in range(P):  # loop over ranks (a handful), not over nodes
            if r == rank:
                counts_list.append(o_out[0])
                nbrs_list.append(o_out[1])
                if with_attr:
                    rows_list.append(o_out[2])
            elif r in here:
                c, nb, rows = self._sample_host(r, here[r], hop, epoch, step)
                counts_list.append(c)
                nbrs_list.append(nb)
                if with_attr:
                    rows_list.append(rows)
            else:
                n_r = int(route.counts[r])
                counts_list.append(back[r][:n_r])
                nbrs_list.append(back[r][n_r:])
                if with_attr:
                    rows_list.append(back_rows[r])
        counts, nbrs = route.merge_segments(counts_list, nbrs_list)
        rows = route.merge_segments(counts_list, rows_list)[1] if with_attr else None
        n_here = sum(int(v.numel()) for v in here.values())
        return counts, nbrs, rows, int(dst.numel() - own.numel()) - n_here, n_here

    def _serve(self, req: list[torch.Tensor], hop: int, epoch: int, step: int):
        """One hop's exchanges: send ``req[r]`` (ids rank r owns) to each owner, serve what the
        others ask of this rank, each id drawn with the step's stream key (the same whoever
        asks); returns the answers per owner (counts then neighbours) and, with edge attributes,
        their rows."""
        comm = self.comm
        got = comm.exchange(req, "sample_request")
        sizes = torch.tensor([g.numel() for g in got])
        served = torch.cat(got)
        with_attr = self.edge_attr is not None
        s_out = self._draw_own(served, self.fanouts[hop], self.keys(epoch, step, hop), with_attr)
        s_counts, s_nbrs = s_out[0], s_out[1]
        per_req_counts = list(torch.split(s_counts, sizes.tolist()))
        edge_sizes = [int(c.sum()) for c in per_req_counts]
        per_req_nbrs = list(torch.split(s_nbrs, edge_sizes))
        reply = [torch.cat([c, v]) for c, v in zip(per_req_counts, per_req_nbrs)]
        back = comm.exchange(reply, "sample_response")
        # Edge attributes: the served edges' rows, in the order of the answers just sent.
        back_rows = self._send_rows(s_out[2], edge_sizes) if with_attr else None
        return back, back_rows

    def _sample_typed(self, ids: torch.Tensor, hop: int, key,
                      kernels: Kernels | None = None) -> tuple[torch.Tensor, ...]:
        """(counts_kr int64 [k, R], nbrs grouped by id then relation) of owned global ids ``ids``,
        then their CSC edge positions when the sampler has edge attributes."""
        rows = ids - self.offset
        return sample_relations((kernels or self.kernels).sample, self.typed, self.indices, rows,
                                self.typed.node_type(ids), self.owned_keys[rows], hop, key,
                                self._variant(self.source_keys),
                                return_edges=self.edge_attr is not None)

    def sample_owned_typed(self, dst: torch.Tensor, hop: int, key,
                           kernels: Kernels | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(counts int64 [k], nbrs int64 [sum counts] global ids, edge_type int64 [sum counts]):
        the in-neighbours of owned ids ``dst`` (int64 [k] global) drawn by relation with hop
        ``hop``'s fan-outs and stream ``key``, as :meth:`_typed_hop` draws them for their owner
        (historical mode's hops and refresh on a typed graph). No collectives."""
        kr, nbrs = self._sample_typed(dst, hop, key, kernels)[:2]
        counts, etype = split_counts(kr)
        return counts, nbrs, etype

    def _typed_hop(self, dst: torch.Tensor, hop: int, epoch: int, step: int):
        """One hop by relation: as :meth:`_hop`, each answer being the counts per (id, relation)
        then the neighbours; the relation of each neighbour travels folded into its id
        (``id * R + relation``) through the merge back into request order."""
        comm, rank, P = self.comm, self.comm.rank, self.comm.world_size
        R = self.typed.num_relations
        route = Route.build(self.book.owner(dst), P)
        req = route.split(dst)
        own = req[rank]
        req[rank] = own.new_empty(0)
        got = comm.exchange(req, "sample_request")
        sizes = [g.numel() for g in got]
        key = self.keys(epoch, step, hop)  # the same stream for every requester
        served = torch.cat(got)
        with_attr = self.edge_attr is not None
        s_out = self._sample_typed(served, hop, key)
        s_kr, s_nbrs = s_out[0], s_out[1]
        kr_per_req = list(torch.split(s_kr, sizes))
        edge_sizes = [int(c.sum()) for c in kr_per_req]
        nbrs_per_req = list(torch.split(s_nbrs, edge_sizes))
        back = comm.exchange([torch.cat([c.flatten(), v]) for c, v in zip(kr_per_req, nbrs_per_req)],
                             "sample_response")
        back_rows = self._send_rows(self._attr_rows(s_out[2]), edge_sizes) if with_attr else None
        o_out = self._sample_typed(own, hop, key)
        counts_list, folded_list, rows_list = [], [], []
        for r in range(P):  # loop over ranks (a handful), not over nodes
            if r == rank:
                kr, nb = o_out[0], o_out[1]
                if with_attr:
                    rows_list.append(self._attr_rows(o_out[2]))
            else:
                n_r = int(route.counts[r])
                kr, nb = back[r][: n_r * R].view(n_r, R), back[r][n_r * R:]
                if with_attr:
                    rows_list.append(back_rows[r])
            counts, etype = split_counts(kr)
            counts_list.append(counts)
            folded_list.append(nb * R + etype)
        counts, folded = route.merge_segments(counts_list, folded_list)
        rows = route.merge_segments(counts_list, rows_list)[1] if with_attr else None
        return (counts, torch.div(folded, R, rounding_mode="floor"), folded % R, rows,
                int(dst.numel() - own.numel()))
