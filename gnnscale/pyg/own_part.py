"""A PyG graph store that holds only this rank's part, and the sampler that asks the owners.

:class:`PartitionGraphStore` (the whole-topology store) gives every rank the whole CSC: fast
(every draw is local) but ``16 E + 24 N`` bytes per rank. :class:`OwnPartGraphStore` keeps rank r's
part only: its in-edges (``8 E_r`` bytes, each source's original id packed with its new id) and
part-sized id maps (:mod:`gnnscale.pyg.id_maps`: its nodes' original ids, and the new ids of its home
range of original ids, ``8 N / P`` bytes); no array sized by the graph's node count N.
:class:`OwnPartSampler` is :class:`gnnscale.pyg.sampler.GnnscaleSampler` with its
draws (:meth:`~gnnscale.pyg.sampler.GnnscaleSampler._draw`) made by the nodes' owners: a batch asks
the homes for its step's seeds' new ids (``id_request`` / ``id_response``), then every hop sends each
frontier node to its owner (one ``int64`` per node: its new id, plus ``tree * N`` when disjoint, and
the hop whose fan-out and stream it draws, after the batch's pass and step, ``sample_request``) and
the owner answers with the counts, the neighbours (packed: their original and new ids, so the next
hop knows their owners) and the edges' ``e_id`` (``sample_response``): the engine's distributed
sampler exchange (:mod:`gnnscale.samplers.distributed`), on the same kernels with the same keys
(seed, pass, step, hop and the node's original id), so every batch equals the whole-topology
store's, which equals one process's (:mod:`gnnscale.pyg.steps`). Negatives that are edges are found
by the owners of their destinations (:class:`gnnscale.samplers.link.EdgeFilter`).

Every hop is a collective: each rank runs the same exchanges per batch (a batch alone in its
step runs the step's first hops with nothing to ask); the rank loaders give every rank the same
number of batches. Per-host folders: a rank reads its own part only; of the others it gets their
ids, split masks and in-degrees (3 int64 per node, once, in rounds), never their edges, and keeps
of them what its home range and its own nodes' ``e_id`` starts need.

:func:`open_graph_store` picks the store (``graph_store="auto"``: the whole topology while its
arrays take at most :data:`WHOLE_TOPOLOGY_BYTES`, else the own part) and says which in one line.
Typed folders (format 2) likewise: :mod:`gnnscale.pyg.typed_own_part` (per relation, the same exchange).
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import GraphStore
from torch_geometric.data.graph_store import EdgeAttr

from gnnscale.errors import PartitionError, SamplerError
from gnnscale.partitioning.book import PartitionBook
from gnnscale.partitioning.manifest import load_meta, part_dir_name
from gnnscale.partitioning.routing import Route
from gnnscale.partitioning.validate import load_array
from gnnscale.pyg.id_maps import BatchIds, HomeRanges, IdDirectory, check_packable, pack_range, unpack
from gnnscale.pyg.sampler import GnnscaleSampler
from gnnscale.pyg.stores import (_SPLITS, PartitionGraphStore, ReadOnlyEdges, _check_world, _meta_digest,
                                 present_parts, require_graph_files)
from gnnscale.samplers.link import EdgeFilter
from gnnscale.samplers.rng import stream_key

log = logging.getLogger("gnnscale.pyg")

GRAPH_STORES = ("auto", "own", "whole")
WHOLE_TOPOLOGY_BYTES = 1 << 30
"""``graph_store="auto"`` keeps the whole topology on every rank while its arrays (``16 E + 24 N``
bytes: sources and edge ids per edge, pointers and both id maps per node) take at most this (1 GiB):
its draws are local, the own part's cross the network."""


def whole_topology_bytes(meta: dict) -> int:
    """Bytes of the whole-topology store's arrays for a folder's meta.json: ``16 E + 24 N`` untyped, ``32 E +
    24 N`` typed (:class:`~gnnscale.pyg.typed_stores.TypedPartitionGraphStore`: each relation's COO, CSC
    sources and ``e_id``)."""
    return (32 if is_typed_meta(meta) else 16) * int(meta["num_edges"]) + 24 * int(meta["num_nodes"])


def is_typed_meta(meta: dict) -> bool:
    """Whether a folder's meta.json is a typed graph's (format 2)."""
    return int(meta.get("format_version", 1)) != 1 or bool(meta.get("typed"))


def choose_graph_store(meta: dict, world: int, graph_store: str = "auto") -> tuple[str, str]:
    """(``"own"`` or ``"whole"``, the one line saying why) for a folder's meta.json (untyped or typed) on
    ``world`` ranks."""
    if graph_store not in GRAPH_STORES:
        raise SamplerError(f"graph_store must be one of {', '.join(GRAPH_STORES)}; found {graph_store!r}. Pass "
                           "graph_store='own' (each rank its part), 'whole' (every rank the whole topology) or 'auto'.")
    size = whole_topology_bytes(meta)
    gib = f"{size / (1 << 30):.2f} GiB"
    if graph_store != "auto":
        return graph_store, (f"graph store {graph_store!r} (as asked; the whole topology takes {gib} per rank)")
    if world == 1 or size <= WHOLE_TOPOLOGY_BYTES:
        why = "one process" if world == 1 else f"the whole topology takes {gib} <= {WHOLE_TOPOLOGY_BYTES >> 30} GiB"
        return "whole", f"graph store 'whole' ({why}; graph_store='own' keeps each rank's part only)"
    return "own", (f"graph store 'own': each rank holds its part only (the whole topology would take {gib} > "
                   f"{WHOLE_TOPOLOGY_BYTES >> 30} GiB per rank; graph_store='whole' keeps it all)")


def open_graph_store(folder: str | Path, comm, graph_store: str = "auto"):
    """The untyped folder's graph store chosen by :func:`choose_graph_store`, said in one line (log info);
    a typed folder's: :func:`gnnscale.pyg.typed_own_part.open_typed_graph_store`."""
    kind, line = choose_graph_store(load_meta(Path(folder)), comm.world_size, graph_store)
    if comm.rank == 0:
        log.info("gnnscale.pyg: %s", line)
    return OwnPartGraphStore(folder, comm) if kind == "own" else PartitionGraphStore(folder, comm)


def gather_hosts(comm, parts_dir: Path, meta: dict) -> list[frozenset[int]] | None:
    """Per rank, the parts its folder holds (one ``control`` gather with meta.json's digest; None on one
    process), each rank's own part among them, else one line (the own-part stores, untyped and typed)."""
    if comm.world_size == 1:
        return None
    got = comm.all_gather_object((present_parts(parts_dir, meta), _meta_digest(meta)), "control")
    other = [r for r, (_, d) in enumerate(got) if d != got[0][1]]
    if other:
        raise PartitionError(f"rank {other[0]}'s partition folder holds another meta.json than rank 0's "
                             "(another partition); copy one partition's meta.json and parts to every host.")
    hosts = [frozenset(h) for h, _ in got]
    lost = [r for r, h in enumerate(hosts) if r not in h]
    if lost:
        raise PartitionError(f"rank {lost[0]}'s partition folder lacks its own part ({part_dir_name(lost[0])}, "
                             "or one of its files); rank r opens part r: copy meta.json and the parts of a "
                             "host's ranks to that host's folder.")
    return hosts


def _reorder(counts: torch.Tensor, values: list[torch.Tensor], inv: torch.Tensor
             ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Segments put in another order: segment ``j`` of the result is segment ``inv[j]`` of ``values``
    (each cut by ``counts`` int64 [k])."""
    starts = torch.cumsum(counts, 0) - counts
    c = counts[inv]
    total = int(c.sum())
    at = torch.cumsum(c, 0) - c
    idx = torch.repeat_interleave(starts[inv] - at, c, output_size=total) + torch.arange(total)
    return c, [v[idx] for v in values]


class OwnPartGraphStore(ReadOnlyEdges, GraphStore):
    """Rank r's part of a partition folder (format 1) in original ids (see the module's docstring).

    Args:
        parts_dir: the folder: every part, or meta.json and this host's parts (only part r is read).
        comm: this rank's :class:`gnnscale.process.comm.Communicator` (rank p owns part p). The ranks
            tell each other which parts their folders hold (one ``control`` gather, with meta.json's
            digest) and send every other rank their part's original ids, split masks and in-degrees
            once (``3 n_r`` int64 each, in rounds of at most ``chunk_values`` values, bytes under
            ``graph``); a rank keeps of them what its home range of original ids needs
            (:mod:`gnnscale.pyg.id_maps`) and its own nodes' first ``e_id``.

    Attributes:
        meta, book, num_nodes, hosts, as :class:`~gnnscale.pyg.stores.PartitionGraphStore`; rank, offset;
        orig int64 [n_r] (its nodes' original ids); indptr int64 [n_r + 1] and indices int64 [E_r]:
        the CSC of part r's nodes (rows: new id - offset), each node's in-edges by original source id,
        each source packed with its new id (:func:`gnnscale.pyg.id_maps.pack`); edge_ids int64 [E_r]
        (the folder's ``edge_ids.npy``) or edge_start int64 [n_r] (each node's first edge in the whole
        store's original-id CSC: ``e_id`` = it + the position in the node's in-edges); directory (the
        home range's new ids, :class:`~gnnscale.pyg.id_maps.IdDirectory`); batch_ids (the last batch's
        id pairs, :class:`~gnnscale.pyg.id_maps.BatchIds`, set by the sampler). Nothing is sized by N.
    """

    chunk_values: int = 1 << 21
    """int64 values each rank sends every other rank per round at opening (16 MiB)."""

    def __init__(self, parts_dir: str | Path, comm) -> None:
        super().__init__()
        self.parts_dir = Path(parts_dir)
        self.meta = meta = load_meta(self.parts_dir)
        if is_typed_meta(meta):
            raise PartitionError(f"OwnPartGraphStore reads untyped folders (format 1); {parts_dir} holds a typed "
                                 "graph. Open it with gnnscale.pyg.TypedOwnPartGraphStore (start_run does).")
        self.comm = comm
        P = int(meta["num_parts"])
        rank, world = comm.rank, comm.world_size
        _check_world(P, world, self.parts_dir)
        self.book = PartitionBook(meta["offsets"])
        n_all = self.num_nodes = int(self.book.num_nodes)
        check_packable(n_all, str(self.parts_dir))
        self.rank, self.offset = rank, int(self.book.offsets[rank])
        self.hosts = gather_hosts(comm, self.parts_dir, meta)
        pdir = self.parts_dir / part_dir_name(rank)
        require_graph_files(pdir, ("indptr.npy", "indices.npy", "orig_ids.npy"), "the own-part graph store")
        n = self.book.part_size(rank)
        self.indptr = torch.from_numpy(load_array(pdir / "indptr.npy", np.int64, (n + 1,), mmap=False))
        orig = load_array(pdir / "orig_ids.npy", np.int64, (n,), mmap=False)
        self.orig = torch.from_numpy(orig)
        bits = np.zeros(n, dtype=np.int64)
        for i, name in enumerate(_SPLITS):
            bits |= load_array(pdir / f"{name}.npy", np.bool_, (n,), mmap="r").astype(np.int64) << i
        deg = np.diff(self.indptr.numpy())
        self.edge_ids = self.edge_start = None
        if (pdir / "edge_ids.npy").is_file():
            self.edge_ids = torch.from_numpy(load_array(pdir / "edge_ids.npy", np.int64, (None,), mmap=False))
        src = load_array(pdir / "indices.npy", np.int64, (int(self.indptr[-1]),), mmap="r")
        self.homes = homes = HomeRanges(n_all, world)
        lo, hi = homes.span(rank)
        new_of_home = np.full(hi - lo, -1, dtype=np.int64)
        self._home_bits = np.zeros(hi - lo, dtype=np.int8)
        packed = np.full(src.shape[0], -1, dtype=np.int64)
        sorted_orig = np.sort(orig)
        before = np.zeros(n, dtype=np.int64) if self.edge_ids is None else None  # by sorted_orig

        def absorb(p: int, first: int, o: np.ndarray, b: np.ndarray, d: np.ndarray) -> None:
            """Nodes ``first ..`` of part ``p`` (original ids, split bits, in-degrees): their new ids
            into the home range, their ids into the sources, their degrees into own nodes' e_id starts."""
            new = int(self.book.offsets[p]) + first
            at = np.flatnonzero((o >= lo) & (o < hi))
            new_of_home[o[at] - lo] = new + at
            self._home_bits[o[at] - lo] = b[at]
            pack_range(src, packed, new, o)
            if before is not None and o.size:
                order = np.argsort(o, kind="stable")
                cum = np.cumsum(d[order])
                k = np.searchsorted(o[order], sorted_orig)  # nodes of the slice below each own node
                before[k > 0] += cum[k[k > 0] - 1]

        absorb(rank, 0, orig, bits, deg)
        if world > 1:
            step = max(int(self.chunk_values) // 3, 1)
            sizes = [self.book.part_size(p) for p in range(P)]
            empty = torch.empty(0, dtype=torch.int64)
            for i in range(-(-max(sizes) // step)):  # the same rounds on every rank
                a, b = min(i * step, n), min((i + 1) * step, n)
                mine = torch.from_numpy(np.concatenate([orig[a:b], bits[a:b], deg[a:b]]))
                got = comm.exchange([empty if r == rank else mine for r in range(world)], "graph")
                for p in range(P):
                    if p == rank:
                        continue
                    k = min((i + 1) * step, sizes[p]) - min(i * step, sizes[p])
                    t = got[p].numpy()
                    if t.size != 3 * k:
                        raise PartitionError(f"part {p}'s ids as sent by its owner hold {t.size} values in round {i}, "
                                             f"expected 3 * {k}; the hosts' folders are not one partition: copy it "
                                             "again.")
                    absorb(p, i * step, t[:k], t[k:2 * k], t[2 * k:])
                del got
        if (new_of_home < 0).any() or (packed < 0).any():
            raise PartitionError(f"{self.parts_dir}: the parts' orig_ids.npy are not a numbering of [0, {n_all}) or "
                                 f"part {rank}'s sources lie outside it; partition the graph again.")
        self.directory = IdDirectory(homes, comm, torch.from_numpy(new_of_home))
        self.indices = torch.from_numpy(packed)  # original source ids, each packed with its new id
        if before is not None:  # the whole store's e_id: the position in the original-id CSC
            start = np.empty(n, dtype=np.int64)
            start[np.argsort(orig, kind="stable")] = before
            self.edge_start = torch.from_numpy(start)
        self.batch_ids: BatchIds | None = None
        self._maps: tuple[torch.Tensor, torch.Tensor] | None = None

    def new_ids(self, orig: torch.Tensor) -> torch.Tensor:
        """int64 new ids of original ids ``orig``: the last batch's nodes from what its draws told (no
        exchange); other ids are asked of their homes, a collective on several ranks (every rank asks)."""
        orig = torch.as_tensor(orig).to(torch.int64).reshape(-1)
        if self.batch_ids is not None:
            known, new = self.batch_ids.find(orig)
            if bool(known.all()):
                return new
        return self.directory.lookup(orig)

    def _whole_maps(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(old_of_new, new_of_old) int64 [N] each, built at the first call from every part's original ids
        (a collective: ``n_r`` int64 to every rank under ``graph``); only the temporal rank sampler asks."""
        if self._maps is None:
            got = self.comm.exchange([self.orig] * self.comm.world_size, "graph") if self.comm.world_size > 1 \
                else [self.orig]
            old_of_new = torch.cat(got)
            new_of_old = torch.empty_like(old_of_new)
            new_of_old[old_of_new] = torch.arange(self.num_nodes)
            self._maps = old_of_new, new_of_old
        return self._maps

    @property
    def old_of_new(self) -> torch.Tensor:
        """int64 [N], built on first use (:meth:`_whole_maps`: a collective; not by the untimed loaders)."""
        return self._whole_maps()[0]

    @property
    def new_of_old(self) -> torch.Tensor:
        """int64 [N], built on first use (:meth:`_whole_maps`: a collective; not by the untimed loaders)."""
        return self._whole_maps()[1]

    def in_degrees(self) -> torch.Tensor:
        """int64 [N] every node's in-degree, by original id (built at each call from every part's:
        a collective on several ranks)."""
        mine = torch.cat([self.orig, self.indptr[1:] - self.indptr[:-1]])
        got = self.comm.exchange([mine] * self.comm.world_size, "graph") if self.comm.world_size > 1 else [mine]
        deg = torch.zeros(self.num_nodes, dtype=torch.int64)
        for t in got:  # one per rank
            k = t.numel() // 2
            deg[t[:k]] = t[k:]
        return deg

    def mask_ids(self, name: str) -> torch.Tensor:
        """Original ids (sorted) of every part's nodes in ``train_mask``/``val_mask``/``test_mask``: each
        home's ids of its range, gathered (a collective on several ranks, bytes under ``split``)."""
        lo = self.homes.span(self.rank)[0]
        mine = torch.from_numpy(np.flatnonzero((self._home_bits >> _SPLITS.index(name)) & 1) + lo)
        if self.comm.world_size == 1:
            return mine
        return torch.cat(self.comm.exchange([mine] * self.comm.world_size, "split"))

    def split_mask(self, part: int, name: str) -> np.ndarray:
        """bool [n_r] ``name`` (``train_mask``, ``val_mask``, ``test_mask``) of this rank's part (the only
        part it holds; every part's ids: :meth:`mask_ids`)."""
        if part != self.rank:
            raise PartitionError(f"an OwnPartGraphStore holds its own part's masks only (part {self.rank}); asked for "
                                 f"part {part}. Use mask_ids(name) for every part's nodes.")
        return load_array(self.parts_dir / part_dir_name(part) / f"{name}.npy", np.bool_,
                          (self.book.part_size(part),), mmap="r")

    def owner_sampler(self, fanouts: list[int], seed: int = 0, replace: bool = False, backend: str = "auto",
                      disjoint: bool = False, subgraph_type: str = "directional") -> "OwnPartSampler":
        """The sampler of this store (:func:`gnnscale.pyg.sampler_for` calls it; not ``induced``)."""
        return OwnPartSampler(self, fanouts, seed=seed, replace=replace, backend=backend, disjoint=disjoint,
                              subgraph_type=subgraph_type)

    def _get_edge_index(self, edge_attr: EdgeAttr):
        raise PartitionError("an OwnPartGraphStore holds only its own part's in-edges, not the whole edge_index; "
                             "sample it with gnnscale.pyg.sampler_for, or open the folder with graph_store='whole'.")

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [EdgeAttr(None, "coo", size=(self.num_nodes, self.num_nodes))]


class _OwnerEdges:
    """``has_edge(src, dst)`` over original ids, each pair answered by its destination's owner (collective)."""

    def __init__(self, graph: OwnPartGraphStore) -> None:
        self.graph = graph
        self.filter = EdgeFilter(graph.indptr, unpack(graph.indices)[0], book=graph.book, comm=graph.comm,
                                 num_nodes=graph.num_nodes)

    def has_edge(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return self.filter.has_edge(src, self.graph.directory.lookup(torch.as_tensor(dst)))


class OwnPartSampler(GnnscaleSampler):
    """:class:`~gnnscale.pyg.sampler.GnnscaleSampler` over an :class:`OwnPartGraphStore`: every draw is
    its node owner's (module docstring); the batches are the whole-topology store's. A collective:
    every rank samples the same number of batches."""

    def __init__(self, graph: OwnPartGraphStore, fanouts: list[int], seed: int = 0, replace: bool = False,
                 backend: str = "auto", disjoint: bool = False, subgraph_type: str = "directional") -> None:
        # relabeled ids are original ids, not this part's range: the relabeler hashes them all (batch-sized)
        super().__init__(None, graph.num_nodes, fanouts, seed=seed, replace=replace, backend=backend,
                         csc=(graph.indptr, graph.indices, None), disjoint=disjoint, subgraph_type=subgraph_type,
                         held=(0, 0))
        self.graph = graph
        self.comm = graph.comm
        self.met = BatchIds()

    def edge_filter(self) -> _OwnerEdges:
        if self._filter is None:
            self._filter = _OwnerEdges(self.graph)
        return self._filter

    def _any(self, flag: bool) -> bool:
        if self.comm.world_size == 1:
            return flag
        return bool(self.comm.all_reduce(torch.tensor([int(flag)], dtype=torch.int64), op="max")[0])

    def sample(self, seeds, epoch, step, others=None, trees=None):
        # the new ids of the step's seeds from their homes (one collective); the draws tell the rest
        asked = seeds.to(torch.int64) if others is None else torch.cat([seeds.to(torch.int64), others.to(torch.int64)])
        self.met.clear()
        self.met.add(asked, self.graph.directory.lookup(asked))
        # a batch alone in its step runs the step's first hops too, asking nothing: the ranks' exchanges stay in step
        if not self.disjoint and (others is None or not others.numel()) and any(f != -1 for f in self.fanouts):
            for hop in range(len(self.fanouts) - 1):
                self._draw([], epoch, step, edges=False)
        out = super().sample(seeds, epoch, step, others=others, trees=trees)
        self.graph.batch_ids = self.met  # the batch's rows are read by these new ids
        return out

    def _serve(self, q: torch.Tensor, epoch: int, step: int, edges: bool) -> tuple[torch.Tensor, ...]:
        """(counts int64 [m], nbrs (packed ids), edge ids or None) of requests ``q`` int64 [m] (``v * L + level``,
        ``v``: the node's new id, plus ``tree * N`` when disjoint) of nodes this rank owns; each is drawn with
        its draw id as the key (its original id, or ``tree * N + node``)."""
        g, L, N = self.graph, len(self.fanouts), self.num_nodes
        level, v = q % L, torch.div(q, L, rounding_mode="floor")
        new = v % N
        rows = new - g.offset
        key = v - new + g.orig[rows]
        parts = torch.unique(level).tolist() if q.numel() else [0]
        sels = [None] if len(parts) == 1 else [torch.nonzero(level == lv).flatten() for lv in parts]
        counts_l, nbrs_l, eids_l = [], [], []
        for lv, sel in zip(parts, sels):  # at most L levels: one kernel call each
            r, k = (rows, key) if sel is None else (rows[sel], key[sel])
            out = self.kernels.sample(g.indptr, g.indices, r, k, self.fanouts[lv],
                                      stream_key(self.seed, epoch, step, 0, lv), return_edges=edges, **self.variant)
            counts_l.append(out[0])
            nbrs_l.append(out[1])
            if edges:
                pos = out[2]
                if g.edge_ids is not None:
                    eids_l.append(g.edge_ids[pos])
                else:
                    at = torch.repeat_interleave(r, out[0], output_size=pos.numel())
                    eids_l.append(g.edge_start[at] + (pos - g.indptr[at]))
        if len(parts) == 1:
            return counts_l[0], nbrs_l[0], (eids_l[0] if edges else None)
        inv = torch.argsort(torch.cat(sels))
        vals = [torch.cat(nbrs_l)] + ([torch.cat(eids_l)] if edges else [])
        counts, vals = _reorder(torch.cat(counts_l), vals, inv)
        return counts, vals[0], (vals[1] if edges else None)

    def _draw(self, groups, epoch, step, edges=True):
        """The owners' draws of ``groups`` (see :meth:`GnnscaleSampler._draw`): one request and one response
        exchange for every group together (collective; ``groups`` may be empty)."""
        g, L = self.graph, len(self.fanouts)
        empty = torch.empty(0, dtype=torch.int64)
        at = torch.cat([a for _, a, _ in groups]) if groups else empty
        ids = torch.cat([i for _, _, i in groups]) if groups else empty
        lv = torch.cat([torch.full((a.numel(),), lv, dtype=torch.int64) for lv, a, _ in groups]) if groups else empty
        new = self.met.get(at)
        out = owner_draws(self.comm, g.book.owner(new), (ids - at + new) * L + lv, [a.numel() for _, a, _ in groups],
                          self._serve, epoch, step, edges)
        if not groups:
            return out
        orig, new = unpack(torch.cat([nb for _, nb, _ in out]))
        self.met.add(orig, new)
        cut = torch.split(orig, [int(nb.numel()) for _, nb, _ in out])
        return [(c, o, e) for (c, _, e), o in zip(out, cut)]


def owner_draws(comm, owner: torch.Tensor, q: torch.Tensor, sizes: list[int], serve, epoch: int, step: int,
                edges: bool) -> list[tuple[torch.Tensor, ...]]:
    """Requests ``q`` int64 [m] drawn by their owners (``owner`` int64 [m], a rank each), cut into groups of
    ``sizes``: per group ``(counts, nbrs, e_id or None without edges)``. One ``sample_request`` and one
    ``sample_response`` exchange (a collective: ``q`` may be empty); each request list opens with its batch's
    (pass, step), and ``serve(q, epoch, step, edges)`` answers, on its owner, the requests of nodes it owns
    (the untyped and the typed own-part samplers' one protocol)."""
    rank, P = comm.rank, comm.world_size
    empty = torch.empty(0, dtype=torch.int64)
    route = Route.build(owner, P)
    req = route.split(q)
    own = req[rank]
    # each request opens with its batch's (pass, step): a rank's batch alone in its step serves the
    # others' requests with their step's streams, not its own
    head = torch.tensor([epoch, step], dtype=torch.int64)
    req = [empty if r == rank else torch.cat([head, t]) for r, t in enumerate(req)]
    if P > 1:
        got = comm.exchange(req, "sample_request")
        counts = [max(t.numel() - 2, 0) for t in got]
        served = [serve(t[2:], int(t[0]), int(t[1]), edges) for t in got if t.numel()]
        c, nb = torch.cat([s_[0] for s_ in served]), torch.cat([s_[1] for s_ in served])
        ed = torch.cat([s_[2] for s_ in served]) if edges else None
        per_c = list(torch.split(c, counts))
        per_e = [int(x.sum()) for x in per_c]
        per_nb = torch.split(nb, per_e)
        per_ed = torch.split(ed, per_e) if edges else [empty] * P
        back = comm.exchange([torch.cat([c_, n_, e_]) for c_, n_, e_ in zip(per_c, per_nb, per_ed)],
                             "sample_response")
    c_own, nb_own, ed_own = serve(own, epoch, step, edges)
    counts_l, nbrs_l, eids_l = [], [], []
    for r in range(P):  # loop over ranks (a handful), not over nodes
        if r == rank:
            counts_l.append(c_own), nbrs_l.append(nb_own), eids_l.append(ed_own if edges else empty)
            continue
        n_r = int(route.counts[r])
        c_r = back[r][:n_r]
        m = int(c_r.sum())
        counts_l.append(c_r), nbrs_l.append(back[r][n_r:n_r + m]), eids_l.append(back[r][n_r + m:])
    counts, nbrs = route.merge_segments(counts_l, nbrs_l)
    eids = route.merge_segments(counts_l, eids_l)[1] if edges else None
    out, a, e = [], 0, 0
    for k in sizes:  # cut back into the groups (a handful)
        c = counts[a:a + k]
        m = int(c.sum())
        out.append((c, nbrs[e:e + m], eids[e:e + m] if edges else None))
        a, e = a + k, e + m
    return out
