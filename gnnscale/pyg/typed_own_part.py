"""A typed folder's PyG graph store that holds only this rank's part, and the sampler that asks the owners.

:class:`~gnnscale.pyg.typed_stores.TypedPartitionGraphStore` (the whole-topology store) gives every
rank every relation (its COO, CSC and ``e_id``: ``32 E`` bytes). :class:`TypedOwnPartGraphStore` keeps
rank r's part only: per relation ``(src, rel, dst)`` the in-edges of the ``dst`` nodes rank r owns
(CSC rows: their per-type new ids less the part's first; sources as original per-type ids, each
node's in-edges by source id as the whole store orders them; their ``e_id``: ``16 E_r`` bytes in
all) and the per-type id maps every rank needs (``16 N`` bytes). :class:`TypedOwnPartSampler` is
:class:`gnnscale.pyg.hetero.HeteroGnnscaleSampler` with each hop's draws
(:meth:`~gnnscale.pyg.hetero.HeteroGnnscaleSampler._draw_hop`) made by the nodes' owners through the
untyped own-part store's one exchange (:func:`gnnscale.pyg.own_part.owner_draws`: a request per node,
``(key * L + hop) * R + relation``, after the batch's pass and step; the answer its counts,
neighbours and ``e_id``), on the same kernels with the same keys (seed, pass, step, hop, relation and
the node's original per-type id), so every batch equals the whole-topology store's, which equals one
process's. Negatives that are edges are found by the owners of their destinations, per relation
(:class:`gnnscale.samplers.link.EdgeFilter`).

``e_id`` is the whole store's: the column of the relation's COO sorted by (source, target), which
rank r finds for its edges without the others' (each rank counts, once, how many of its keys lie below
each of another rank's, one rank at a time: ``graph`` bytes, ``8 E`` in all), or after
:meth:`TypedOwnPartGraphStore.name_edges` the column of the ``HeteroData``'s ``edge_index``.

:func:`open_typed_graph_store` picks the store (:func:`gnnscale.pyg.own_part.choose_graph_store`:
``"auto"`` by size) and says which in one line.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import HeteroData
from torch_geometric.data.graph_store import EdgeAttr

from gnnscale.errors import PartitionError, SamplerValueError
from gnnscale.partitioning.manifest import load_meta, part_dir_name
from gnnscale.partitioning.validate import load_array
from gnnscale.pyg.hetero import HeteroGnnscaleSampler
from gnnscale.pyg.typed_inputs import fanout_hops, hetero_fanouts
from gnnscale.pyg.own_part import _reorder, choose_graph_store, gather_hosts, owner_draws
from gnnscale.pyg.stores import _check_world, require_graph_files
from gnnscale.pyg.typed_stores import _GRAPH_FILES, _SPLITS, TypedPartitionGraphStore
from gnnscale.samplers.link import EdgeFilter
from gnnscale.samplers.rng import stream_key

log = logging.getLogger("gnnscale.pyg")


def open_typed_graph_store(folder: str | Path, comm, graph_store: str = "auto"):
    """The typed folder's graph store chosen by :func:`~gnnscale.pyg.own_part.choose_graph_store`, said in one
    line (log info): :class:`TypedOwnPartGraphStore` or the whole-topology
    :class:`~gnnscale.pyg.typed_stores.TypedPartitionGraphStore`."""
    kind, line = choose_graph_store(load_meta(Path(folder)), comm.world_size, graph_store)
    if comm.rank == 0:
        log.info("gnnscale.pyg: %s", line)
    return TypedOwnPartGraphStore(folder, comm) if kind == "own" else TypedPartitionGraphStore(folder, comm)


def _global_ranks(comm, keys: torch.Tensor) -> torch.Tensor:
    """int64 [k]: for sorted keys int64 [k] of this rank, how many keys of every other rank lie below each
    (collective: one rank's keys at a time, ``P - 1`` rounds of two ``graph`` exchanges)."""
    rank, P = comm.rank, comm.world_size
    below = torch.zeros(keys.numel(), dtype=torch.int64)
    empty = torch.empty(0, dtype=torch.int64)
    for k in range(1, P):  # loop over ranks (a handful)
        to, frm = (rank + k) % P, (rank - k) % P
        theirs = comm.exchange([keys if r == to else empty for r in range(P)], "graph")[frm]
        counts = torch.searchsorted(keys, theirs)  # of mine below each of theirs
        below += comm.exchange([counts if r == frm else empty for r in range(P)], "graph")[to]
    return below


class TypedOwnPartGraphStore(TypedPartitionGraphStore):
    """Rank r's part of a typed partition folder (format 2) in original per-type ids (module docstring).

    Args:
        parts_dir: the folder: every part, or meta.json and this host's parts (only part r is read).
        comm: this rank's communicator (rank p owns part p). The ranks tell each other which parts their
            folders hold (one ``control`` gather) and send every other rank their part's original ids
            and split masks once (``2 n_r`` int64 each, bytes under ``graph``).

    Attributes (besides :class:`~gnnscale.pyg.typed_stores.TypedPartitionGraphStore`'s names, maps and
    book): rank; type_books: per node type its per-type :class:`~gnnscale.partitioning.book.PartitionBook`;
    ``relation_csc()``: ``{relation: (indptr int64 [n_dst_r + 1], sources int64 [E_r^rel], e_id int64
    [E_r^rel])}`` over the ``dst`` nodes of part r; num_edges: ``{relation: E}`` of the whole graph.
    """

    def __init__(self, parts_dir: str | Path, comm) -> None:
        super(TypedPartitionGraphStore, self).__init__()
        meta, type_ptr = self._read_meta(parts_dir, "OwnPartGraphStore")
        P, rank = int(meta["num_parts"]), comm.rank
        _check_world(P, comm.world_size, self.parts_dir)
        self.comm, self.rank = comm, rank
        self.type_books = {t: self.book.type_book(i) for i, t in enumerate(self.node_types)}
        self.hosts = gather_hosts(comm, self.parts_dir, meta)
        pdir = self.parts_dir / part_dir_name(rank)
        require_graph_files(pdir, _GRAPH_FILES, "the typed own-part graph store")
        n = self.book.book.part_size(rank)
        indptr = load_array(pdir / "indptr.npy", np.int64, (n + 1,), mmap="r")
        src_new = torch.from_numpy(load_array(pdir / "indices.npy", np.int64, (int(indptr[-1]),), mmap=False))
        rel = torch.from_numpy(load_array(pdir / "etype.npy", np.int16, (src_new.numel(),), mmap=False)
                               .astype(np.int64))
        orig = load_array(pdir / "orig_ids.npy", np.int64, (n,), mmap=False)
        bits = np.zeros(n, dtype=np.int64)
        for i, name in enumerate(_SPLITS):  # loop over the 3 splits
            bits |= load_array(pdir / f"{name}.npy", np.bool_, (n,), mmap="r").astype(np.int64) << i
        mine = torch.from_numpy(np.concatenate([orig, bits]))
        packs = comm.exchange([mine] * comm.world_size, "graph") if comm.world_size > 1 else [mine]
        sizes = [self.book.book.part_size(p) for p in range(P)]
        bad = [p for p in range(P) if packs[p].numel() != 2 * sizes[p]]
        if bad:
            raise PartitionError(f"part {bad[0]}'s ids as sent by its owner hold {packs[bad[0]].numel()} values, "
                                 f"expected 2 * {sizes[bad[0]]}; the hosts' folders are not one partition: copy it "
                                 "again.")
        self._sent_masks = {p: packs[p][sizes[p]:].numpy() for p in range(P) if p != rank}
        old_h = torch.cat([packs[p][:sizes[p]] for p in range(P)])  # homogeneous original id of each new id
        del packs, mine
        self._id_maps(old_h, type_ptr)
        # part r's in-edges by relation: targets (per-type new ids), sources and targets as original per-type ids
        offset = int(self.book.book.offsets[rank])
        dst_new = offset + torch.repeat_interleave(torch.arange(n), torch.from_numpy(np.diff(indptr)),
                                                   output_size=src_new.numel())
        dst_pt = self.book.map_to_per_ntype(dst_new)[1]
        src_orig = old_h[src_new]
        del dst_new, src_new
        index = {t: i for i, t in enumerate(self.node_types)}
        R = len(self.edge_types)
        per_rel = torch.bincount(rel, minlength=R)
        totals = comm.all_reduce(per_rel.clone(), category="graph") if comm.world_size > 1 else per_rel
        self.num_edges = {et: int(c) for et, c in zip(self.edge_types, totals.tolist())}
        order = torch.argsort(rel, stable=True)
        self._csc, self._keys, self._coo, base = {}, {}, {}, 0  # no COO: the whole edge_index is not here
        all_keys = []
        for et, at in zip(self.edge_types, torch.split(order, per_rel.tolist())):  # loop over relations
            ts, td = index[et[0]], index[et[2]]
            lo, hi = (int(v) for v in self.book.type_offsets[td, rank:rank + 2])
            row = dst_pt[at] - lo
            s = src_orig[at] - type_ptr[ts]
            d = old_h[offset + self.book.type_starts[rank, td] + row] - type_ptr[td]
            by = torch.argsort(row * max(self.num_nodes[et[0]], 1) + s, stable=True)  # CSC: by target, then source
            row, s, d = row[by], s[by], d[by]
            ptr = torch.zeros(hi - lo + 1, dtype=torch.int64)
            ptr[1:] = torch.cumsum(torch.bincount(row, minlength=hi - lo), 0)
            self._keys[et] = s * max(self.num_nodes[et[2]], 1) + d  # the whole store's COO order, CSC order here
            self._csc[et] = (ptr, s, None)
            all_keys.append(base + self._keys[et])
            base += self.num_nodes[et[0]] * max(self.num_nodes[et[2]], 1)
        del dst_pt, src_orig, old_h, rel, order
        # e_id: the COO column, every rank's keys below it (a repeated edge: its copies in CSC order)
        keys = torch.cat(all_keys) if all_keys else torch.empty(0, dtype=torch.int64)
        srt, pos = torch.sort(keys, stable=True)
        rank_of = torch.empty_like(pos)
        rank_of[pos] = torch.arange(pos.numel())  # position of each key in sorted order: mine below, copies first
        if comm.world_size > 1:
            theirs = _global_ranks(comm, srt)
            rank_of += theirs[rank_of]
        rel_start = torch.cumsum(totals, 0) - totals
        for (et, (ptr, s, _)), at, first in zip(self._csc.items(), torch.split(rank_of, per_rel.tolist()),
                                                rel_start.tolist()):  # loop over relations
            self._csc[et] = (ptr, s, at - first)

    def held_edges(self) -> int:
        """Edges this rank holds (its part's in-edges, every relation)."""
        return sum(int(c[1].numel()) for c in self._csc.values())

    def typed_owner_sampler(self, num_neighbors, seed: int = 0, replace: bool = False, backend: str = "auto",
                            disjoint: bool = False, subgraph_type: str = "directional") -> "TypedOwnPartSampler":
        """The sampler of this store (:func:`gnnscale.pyg.sampler_for` calls it; ``num_neighbors`` in PyG's
        typed forms)."""
        return TypedOwnPartSampler(self, hetero_fanouts(num_neighbors, self.edge_types), seed=seed, replace=replace,
                                   backend=backend, disjoint=disjoint, subgraph_type=subgraph_type,
                                   num_hops=fanout_hops(num_neighbors))

    def name_edges(self, data: HeteroData) -> None:
        """``e_id`` as the column of ``data[relation].edge_index`` (``data``: the HeteroData partitioned into
        this folder; a repeated edge is named by its first column), as the whole store's."""
        for et, (ptr, s, _) in self._csc.items():  # loop over relations
            ei = data[et].edge_index.to(torch.int64)
            key = ei[0] * max(self.num_nodes[et[2]], 1) + ei[1]
            srt, by = torch.sort(key, stable=True)
            unique = int(torch.unique_consecutive(srt).numel()) if srt.numel() else 0
            at = torch.searchsorted(srt, self._keys[et]).clamp_(max=max(srt.numel() - 1, 0))
            if unique != self.num_edges[et] or (at.numel() and not torch.equal(srt[at], self._keys[et])):
                raise PartitionError(f"the folder {self.parts_dir} does not hold the edges of relation {et} of the "
                                     "HeteroData given; partition that HeteroData into a new folder.")
            self._csc[et] = (ptr, s, by[at])

    def coo_of(self, edge_type: tuple) -> torch.Tensor:
        raise PartitionError("a TypedOwnPartGraphStore holds only its own part's in-edges, not a relation's whole "
                             "edge_index; sample it with gnnscale.pyg.sampler_for, or open the folder with "
                             "graph_store='whole'.")

    def _get_edge_index(self, edge_attr: EdgeAttr):
        self.coo_of(edge_attr.edge_type)


class _OwnerRelationEdges:
    """``has_edge(src, dst)`` of one relation over original per-type ids, each pair answered by its
    destination's owner (collective)."""

    def __init__(self, graph: TypedOwnPartGraphStore, et: tuple) -> None:
        ptr, s, _ = graph.relation_csc()[et]
        self.new_of_old = graph.new_of_old[et[2]]
        self.filter = EdgeFilter(ptr, s, book=graph.type_books[et[2]], comm=graph.comm,
                                 num_nodes=max(graph.num_nodes[et[0]], graph.num_nodes[et[2]], 1))

    def has_edge(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return self.filter.has_edge(src, self.new_of_old[dst])


class TypedOwnPartSampler(HeteroGnnscaleSampler):
    """:class:`~gnnscale.pyg.hetero.HeteroGnnscaleSampler` over a :class:`TypedOwnPartGraphStore`: every
    draw is its node owner's (module docstring); the batches are the whole-topology store's. A collective:
    every rank samples the same number of batches. Not ``subgraph_type="induced"`` (it needs every edge
    among the drawn nodes)."""

    def __init__(self, graph: TypedOwnPartGraphStore, fanouts: dict, seed: int = 0, replace: bool = False,
                 backend: str = "auto", disjoint: bool = False, subgraph_type: str = "directional",
                 num_hops: int = 0) -> None:
        if subgraph_type == "induced":
            raise SamplerValueError("subgraph_type='induced' needs every edge among the drawn nodes, and an own-part "
                                    "graph store holds its part's only; open the folder with graph_store='whole' "
                                    "or pass another subgraph_type.")
        super().__init__(None, graph.num_nodes, fanouts, seed=seed, replace=replace, backend=backend,
                         csc=graph.relation_csc(), disjoint=disjoint, subgraph_type=subgraph_type, num_hops=num_hops)
        self.graph, self.comm = graph, graph.comm

    def _any(self, flag: bool) -> bool:
        if self.comm.world_size == 1:
            return flag
        return bool(self.comm.all_reduce(torch.tensor([int(flag)], dtype=torch.int64), op="max")[0])

    def _filter(self, et: tuple) -> _OwnerRelationEdges:
        if et not in self._filters:
            self._filters[et] = _OwnerRelationEdges(self.graph, et)
        return self._filters[et]

    def sample_seeds(self, seeds, epoch, step, others=None, trees=None):
        # a batch alone in its step runs the step's first hops too, asking nothing: the ranks' exchanges stay in step
        levels = not (all(f in (-1, 0) for fs in self.fanouts.values() for f in fs)
                      and all(len(set(fs)) == 1 for fs in self.fanouts.values()))  # as _levels decides
        if not self.disjoint and levels and (others is None or not any(o.numel() for o in others.values())):
            for _ in range(self.num_hops - 1):
                self._draw_hop([], epoch, step, edges=False)
        return super().sample_seeds(seeds, epoch, step, others=others, trees=trees)

    def _draw_hop(self, groups, epoch, step, edges=True):
        """The owners' draws of ``groups`` (see :meth:`HeteroGnnscaleSampler._draw_hop`): one request and one
        response exchange for every relation and level together (collective; ``groups`` may be empty)."""
        g, L, R = self.graph, max(self.num_hops, 1), len(self.edge_types)
        owner, q = [], []
        for r, level, rows, ids in groups:  # a handful: relations x levels
            t = self.edge_types[r][2]
            owner.append(g.type_books[t].owner(g.new_of_old[t][rows]))
            q.append((ids * L + level) * R + r)
        empty = torch.empty(0, dtype=torch.int64)
        return owner_draws(self.comm, torch.cat(owner) if owner else empty, torch.cat(q) if q else empty,
                           [rows.numel() for _, _, rows, _ in groups], self._serve, epoch, step, edges)

    def _serve(self, q: torch.Tensor, epoch: int, step: int, edges: bool) -> tuple[torch.Tensor, ...]:
        """(counts int64 [m], nbrs, e_id or None) of requests ``q`` int64 [m] (``(key * L + level) * R + r``;
        ``key``: the node's draw id, its original per-type id or ``tree * N + node``) of nodes this rank owns."""
        g, L, R = self.graph, max(self.num_hops, 1), len(self.edge_types)
        group, key = q % (L * R), torch.div(q, L * R, rounding_mode="floor")
        kinds = torch.unique(group).tolist() if q.numel() else []
        counts_l, nbrs_l, eids_l, sels = [], [], [], []
        for kind in kinds:  # at most L * R (level, relation) groups: one kernel call each
            level, r = divmod(int(kind), R)
            et = self.edge_types[r]
            sel = torch.nonzero(group == kind).flatten()
            k = key[sel]
            t, lo = et[2], int(g.book.type_offsets[g.node_types.index(et[2]), g.rank])
            rows = g.new_of_old[t][k % self.num_nodes[t]] - lo
            ptr, s, e_id = self.csc[et]
            c, nb, pos = self.kernels.sample(ptr, s, rows, k, self.fanouts[et][level],
                                             stream_key(self.seed, epoch, step, 0, level, r), return_edges=True,
                                             **self.variants[et])
            counts_l.append(c), nbrs_l.append(nb), sels.append(sel)
            if edges:
                eids_l.append(e_id[pos])
        empty = torch.empty(0, dtype=torch.int64)
        if not kinds:
            return empty, empty, (empty if edges else None)
        if len(kinds) == 1:
            return counts_l[0], nbrs_l[0], (eids_l[0] if edges else None)
        inv = torch.argsort(torch.cat(sels))
        vals = [torch.cat(nbrs_l)] + ([torch.cat(eids_l)] if edges else [])
        counts, vals = _reorder(torch.cat(counts_l), vals, inv)
        return counts, vals[0], (vals[1] if edges else None)
