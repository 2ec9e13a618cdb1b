"""PyG's ``GraphStore`` / ``FeatureStore`` over a typed partition folder (format 2), for ``HeteroData`` loops.

A typed folder (``docs/typed_graphs.md`` section 2: what ``partition_graph`` writes for a
``HeteroData`` or a typed dataset) holds the homogeneous view with types; these stores give PyG
the ``HeteroData`` view back, every index an ORIGINAL per-type id (``data[t]``'s row), so
:func:`gnnscale.pyg.sampler_for` and PyG's own ``NodeLoader`` / ``LinkLoader`` yield the batches
of the ``HeteroData`` itself (same seed, same draws).

- :class:`TypedPartitionGraphStore`: every relation ``(src, rel, dst)`` of the folder in original
  per-type ids, read from every part's files (host reads, memory-mapped) or, for the parts a
  per-host folder lacks, sent once by their owners (bytes under ``graph``): its CSC over the
  ``dst`` nodes (in-edges by source id, as :func:`gnnscale.pyg.sampler.csc_of` orders a
  ``HeteroData``'s) and its COO sorted by (source, target). ``e_id`` is the column of that COO
  (``get_edge_index(edge_type=et, layout="coo")[:, e_id]``): the column of the ``HeteroData``'s
  ``edge_index`` when its relations' edges are sorted by (source, target) without repeats (as
  gnnscale's datasets give them), or after :meth:`TypedPartitionGraphStore.name_edges` (what
  :func:`gnnscale.pyg.start_run` does with the ``HeteroData`` it partitions).
- :class:`TypedPartitionFeatureStore`: per node type with features its ``x`` (float32
  [N_t, F_t]), and the target type's ``y``, for one rank, each read by the engine's row reader
  (:class:`gnnscale.data.rows.RowReader`): its own part's rows, the cache, other parts read from the
  folder on this host (the engine's host plan), else asked of their owners through the
  communicator (one :class:`gnnscale.data.DistFeatureStore` per type over its per-type ids; bytes
  under ``feature_request``/``feature`` and ``label_request``/``label``; every wait bounded by the
  communicator's timeout). Types without features have no tensor: a batch gives their ``n_id``
  (learn their rows, e.g. ``nn.Embedding``), as a ``HeteroData`` without ``x`` does. Without host
  reads a fetch is collective (every type in order on every rank, ids or not).

Memory: the graph store holds every relation's edges three times as int64 (CSC, its ``e_id``
and the COO); the feature store maps the files (rows are read as they are touched).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import FeatureStore, GraphStore, HeteroData, TensorAttr
from torch_geometric.data.graph_store import EdgeAttr

from gnnscale.data.feature_cache import CacheContext, CacheSize, choose_cache_ids
from gnnscale.data.host_parts import open_host_features, open_host_labels, plan_host_reads, present_parts
from gnnscale.data.rows import RowReader
from gnnscale.data.typed_store import TypedFeatureStore
from gnnscale.errors import PartitionError
from gnnscale.partitioning.book import PartitionBook, TypedPartitionBook
from gnnscale.partitioning.manifest import TYPED_FORMAT_VERSION, load_meta, part_dir_name
from gnnscale.partitioning.part import load_part
from gnnscale.partitioning.validate import load_array
from gnnscale.pyg.sampler import csc_of
from gnnscale.pyg.memory_stores import index_of
from gnnscale.pyg.stores import (PartitionGraphStore, ReadOnlyEdges, ReadOnlyRows, _check_world, require_graph_files,
                                 whole_folder)

_GRAPH_FILES = ("indptr.npy", "indices.npy", "etype.npy", "orig_ids.npy")
_SPLITS = ("train_mask", "val_mask", "test_mask")


def is_typed_folder(parts_dir: str | Path) -> bool:
    """Whether the partition folder ``parts_dir`` holds a typed graph (format 2)."""
    return int(load_meta(Path(parts_dir)).get("format_version", 1)) == TYPED_FORMAT_VERSION


def is_typed_stores(data: Any) -> bool:
    """Whether ``data`` is ``(feature_store, graph_store)`` over a typed folder."""
    return isinstance(data, tuple) and len(data) == 2 and isinstance(data[1], TypedPartitionGraphStore)


def hetero_digest(data: HeteroData) -> str:
    """The content digest of a ``HeteroData`` (:func:`gnnscale.datasets.inmemory.content_digest`), which
    :func:`gnnscale.pyg.start_run` records in the folder it partitions the graph into."""
    from gnnscale.datasets.inmemory import content_digest

    return content_digest(data)


def is_partition_of(meta: dict, digest: str, world: int) -> bool:
    """Whether a folder's ``meta`` (meta.json, or {}) is the graph of content ``digest`` cut into ``world``
    typed parts (so :func:`gnnscale.pyg.start_run` need not partition it again)."""
    return int(meta.get("format_version", 1)) == TYPED_FORMAT_VERSION and int(meta.get("num_parts", 0)) == world \
        and meta.get("content_digest") == digest


class TypedPartitionGraphStore(ReadOnlyEdges, GraphStore):
    """Every relation of a typed partition folder in original per-type ids (module docstring).

    Attributes:
        meta: the folder's meta.json; book: its TypedPartitionBook (new ids).
        node_types, edge_types, target_type: as ``HeteroData.metadata()`` and meta.json name them.
        num_nodes: ``{type: N_t}``; feature_dims: ``{type: F_t}`` (0: no features).
        old_of_new / new_of_old: ``{type: int64 [N_t]}`` per-type new id <-> original per-type id.
        hosts: per rank, the parts its folder holds (``list[frozenset[int]]``; None without ``comm``).

    Args:
        parts_dir: the folder: every part, or (with ``comm``) meta.json and this host's parts only.
        comm: this rank's communicator (rank p owns part p). With more than one rank the ranks tell
            each other which parts their folders hold (one ``control`` gather, with meta.json's
            digest) and each part a rank's folder lacks is sent once by its owner (exchanges under
            ``graph``, as :class:`gnnscale.pyg.stores.PartitionGraphStore` does: its in-degrees,
            original ids, split masks, sources and relations). Without ``comm`` every part must be
            in the folder.
    """

    chunk_values: int = PartitionGraphStore.chunk_values
    _from_owners = PartitionGraphStore._from_owners  # the untyped store's gather and exchange, over _pack

    def __init__(self, parts_dir: str | Path, comm=None) -> None:
        super().__init__()
        meta, type_ptr = self._read_meta(parts_dir, "PartitionGraphStore")
        P = int(meta["num_parts"])
        self.hosts: list[frozenset[int]] | None = None
        self._sent_masks: dict[int, np.ndarray] = {}
        sent: dict[int, torch.Tensor] = {}
        if comm is not None and comm.world_size > 1:
            _check_world(P, comm.world_size, self.parts_dir)
            self.hosts, sent = self._from_owners(comm, present_parts(self.parts_dir, meta))
        degs, idxs, olds, rels = [], [], [], []
        for p in range(P):  # loop over parts
            if p in sent:
                for out, a in zip((degs, olds, idxs, rels), self._unpack(p, sent[p])):
                    out.append(a)
                continue
            pdir = self.parts_dir / part_dir_name(p)
            size = self.book.book.part_size(p)
            require_graph_files(pdir, _GRAPH_FILES, "the typed PyG graph store")
            degs.append(np.diff(load_array(pdir / "indptr.npy", np.int64, (size + 1,), mmap="r")))
            idxs.append(load_array(pdir / "indices.npy", np.int64, (None,), mmap="r"))
            rels.append(load_array(pdir / "etype.npy", np.int16, (idxs[-1].shape[0],), mmap="r"))
            olds.append(load_array(pdir / "orig_ids.npy", np.int64, (size,), mmap="r"))
        old_h = torch.from_numpy(np.concatenate(olds))  # homogeneous original id of each new id
        self._id_maps(old_h, type_ptr)
        # every edge (source, target) in homogeneous original ids, grouped by relation (one stable sort)
        dst = old_h[torch.repeat_interleave(torch.arange(old_h.numel()), torch.from_numpy(np.concatenate(degs)))]
        src = old_h[torch.from_numpy(np.concatenate(idxs))]
        rel = torch.from_numpy(np.concatenate(rels).astype(np.int64))
        order = torch.argsort(rel, stable=True)
        sizes = torch.bincount(rel, minlength=len(self.edge_types)).tolist()
        index = {t: i for i, t in enumerate(self.node_types)}
        self._coo, self._csc = {}, {}
        for et, at in zip(self.edge_types, torch.split(order, sizes)):  # loop over relations
            s = src[at] - type_ptr[index[et[0]]]
            d = dst[at] - type_ptr[index[et[2]]]
            by = torch.argsort(s * max(self.num_nodes[et[2]], 1) + d)  # COO by (source, target)
            self._coo[et] = torch.stack([s[by], d[by]])
            self._csc[et] = csc_of(self._coo[et], self.num_nodes[et[2]], self.num_nodes[et[0]])  # perm: e_id

    def _read_meta(self, parts_dir: str | Path, untyped: str) -> tuple[dict, torch.Tensor]:
        """(meta.json, type_ptr int64 [T + 1]: each type's first id in the homogeneous view) of a typed folder,
        its names, book, node counts and feature widths set on this store (``untyped``: the store to name for
        an untyped folder). The typed stores' one reading of a folder's types."""
        self.parts_dir = Path(parts_dir)
        self.meta = meta = load_meta(self.parts_dir)
        if int(meta.get("format_version", 1)) != TYPED_FORMAT_VERSION or not meta.get("typed"):
            raise PartitionError(f"a typed graph store reads typed partition folders (format {TYPED_FORMAT_VERSION}); "
                                 f"{parts_dir} holds an untyped graph. Open it with {untyped} instead.")
        typed = meta["typed"]
        self.node_types = [str(t) for t in typed["node_types"]]
        self.edge_types = [tuple(e) for e in typed["edge_types"]]
        self.target_type = str(typed["target_type"])
        self.book = TypedPartitionBook(PartitionBook(meta["offsets"]), typed["type_starts"], typed["type_offsets"])
        counts = self.book.num_nodes_per_type()
        self.num_nodes = {t: int(c) for t, c in zip(self.node_types, counts.tolist())}
        self.feature_dims = {t: int(d) for t, d in zip(self.node_types, typed["feature_dims"])}
        type_ptr = torch.zeros(len(self.node_types) + 1, dtype=torch.int64)
        type_ptr[1:] = torch.cumsum(counts, 0)  # the homogeneous view: types in node_types order
        return meta, type_ptr

    def _id_maps(self, old_h: torch.Tensor, type_ptr: torch.Tensor) -> None:
        """``old_of_new`` / ``new_of_old`` per type from ``old_h`` int64 [N]: each new id's homogeneous original id."""
        ntype, tid = self.book.map_to_per_ntype(torch.arange(old_h.numel()))
        self.old_of_new, self.new_of_old = {}, {}
        for i, t in enumerate(self.node_types):  # loop over node types
            sel = ntype == i
            old = torch.empty(self.num_nodes[t], dtype=torch.int64)
            old[tid[sel]] = old_h[sel] - type_ptr[i]
            self.old_of_new[t] = old
            self.new_of_old[t] = torch.empty_like(old)
            self.new_of_old[t][old] = torch.arange(old.numel())

    def _packed_len(self, p: int) -> int:
        """The length of part ``p`` packed by :meth:`_pack` (from its indptr's last value)."""
        n = self.book.book.part_size(p)
        e = int(load_array(self.parts_dir / part_dir_name(p) / "indptr.npy", np.int64, (n + 1,), mmap="r")[-1])
        return 1 + 3 * n + 2 * e

    def _pack(self, p: int) -> torch.Tensor:
        """Part ``p`` from the folder as int64 [1 + 3 n + 2 E]: E, in-degrees [n], original ids [n], split
        masks [n] (bits: train 1, val 2, test 4), sources [E] (new ids) and relations [E]."""
        pdir = self.parts_dir / part_dir_name(p)
        n = self.book.book.part_size(p)
        deg = np.diff(load_array(pdir / "indptr.npy", np.int64, (n + 1,), mmap="r"))
        ind = load_array(pdir / "indices.npy", np.int64, (None,), mmap="r")
        rel = load_array(pdir / "etype.npy", np.int16, (ind.shape[0],), mmap="r").astype(np.int64)
        bits = np.zeros(n, dtype=np.int64)
        for i, name in enumerate(_SPLITS):  # loop over the 3 splits
            bits |= load_array(pdir / f"{name}.npy", np.bool_, (n,), mmap="r").astype(np.int64) << i
        orig = load_array(pdir / "orig_ids.npy", np.int64, (n,), mmap="r")
        return torch.from_numpy(np.concatenate([np.array([ind.shape[0]], dtype=np.int64), deg, orig, bits, ind, rel]))

    def _unpack(self, p: int, t: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(in-degrees, original ids, sources, relations) of a part packed by :meth:`_pack` (its masks kept
        for :meth:`split_mask`)."""
        n, a = self.book.book.part_size(p), t.numpy()
        e = int(a[0]) if a.size else -1
        if e < 0 or a.size != 1 + 3 * n + 2 * e or int(a[1:1 + n].sum()) != e:
            raise PartitionError(f"part {p} as sent by its owner holds {a.size} values, expected 1 + 3 * {n} + 2 E "
                                 "by the partition book; the hosts' folders are not one partition: copy it again.")
        self._sent_masks[p] = a[1 + 2 * n:1 + 3 * n]
        body = 1 + 3 * n
        return a[1:1 + n], a[1 + n:1 + 2 * n], a[body:body + e], a[body + e:body + 2 * e]

    def split_mask(self, part: int, name: str) -> np.ndarray:
        """bool [n_part] ``name`` (``train_mask``, ``val_mask``, ``test_mask``) of part ``part``: read from the
        folder, or as its owner sent it."""
        if part in self._sent_masks:
            return ((self._sent_masks[part] >> _SPLITS.index(name)) & 1).astype(np.bool_)
        return load_array(self.parts_dir / part_dir_name(part) / f"{name}.npy", np.bool_,
                          (self.book.book.part_size(part),), mmap="r")

    def metadata(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """``(node_types, edge_types)``, as ``HeteroData.metadata()`` (e.g. for ``to_hetero``)."""
        return list(self.node_types), list(self.edge_types)

    def relation_csc(self) -> dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """``{relation: (indptr int64 [N_dst + 1], indices int64 [E] source ids, e_id int64 [E])}`` (the
        sampler's input; :func:`gnnscale.pyg.sampler_for` looks for this method)."""
        return self._csc

    def coo_of(self, edge_type: tuple) -> torch.Tensor:
        """int64 [2, E] (source, target) original per-type ids of relation ``edge_type``; column q is
        ``e_id`` q unless :meth:`name_edges` renamed them."""
        return self._coo[edge_type]

    def name_edges(self, data: HeteroData) -> None:
        """``e_id`` as the column of ``data[relation].edge_index`` (``data``: the HeteroData partitioned
        into this folder; a repeated edge is named by its first column)."""
        for et, (indptr, indices, perm) in self._csc.items():  # loop over relations
            ei = data[et].edge_index.to(torch.int64)
            key = ei[0] * max(self.num_nodes[et[2]], 1) + ei[1]
            by = torch.argsort(key, stable=True)
            first = torch.ones(by.numel(), dtype=torch.bool)
            first[1:] = key[by][1:] != key[by][:-1]
            cols, coo = by[first], self._coo[et]
            if cols.numel() != coo.size(1) or not torch.equal(key[cols], coo[0] * max(self.num_nodes[et[2]], 1)
                                                                   + coo[1]):
                raise PartitionError(f"the folder {self.parts_dir} does not hold the edges of relation {et} of the "
                                     "HeteroData given; partition that HeteroData into a new folder.")
            self._csc[et] = (indptr, indices, cols[perm])

    def topology_bytes(self) -> int:
        """Bytes of the topology this store holds: every relation's arrays (COO, CSC, ``e_id``) and the id maps."""
        arrays = [t for c in self._csc.values() for t in c if t is not None] + list(self._coo.values()) + \
            list(self.old_of_new.values()) + list(self.new_of_old.values())
        return sum(int(t.numel()) * t.element_size() for t in arrays)

    def _get_edge_index(self, edge_attr: EdgeAttr):
        coo = self._coo.get(edge_attr.edge_type)
        return None if coo is None else (coo[0], coo[1])

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [EdgeAttr(et, "coo", size=(self.num_nodes[et[0]], self.num_nodes[et[2]])) for et in self.edge_types]


class TypedPartitionFeatureStore(ReadOnlyRows, FeatureStore):
    """``x`` per node type with features and the target type's ``y``, rows of original per-type ids,
    for rank ``comm.rank`` (module docstring).

    Args:
        graph: the folder's :class:`TypedPartitionGraphStore` (id maps, book; built with ``comm`` it
            knows which parts every rank's folder holds).
        comm: this rank's :class:`gnnscale.process.comm.Communicator` (rank r reads part r).
        host_reads: read the rows of the other parts on this host from the folder (the engine's
            host plan, as :class:`gnnscale.pyg.stores.PartitionFeatureStore`); True: they must be in
            the folder; False: asks every other part's owner through ``comm``. Fetches are
            collective unless every rank reads every other part on its host.
        cache_rows: keep this many other parts' rows of the types with features in a cache, chosen
            by the engine's ``degree`` cache policy over this part's in-edges (as ``gnnscale train
            --cache-policy degree`` on a typed part), filled once (collective); 0: none.
    """

    def __init__(self, graph: TypedPartitionGraphStore, comm, host_reads: bool | None = None,
                 cache_rows: int = 0) -> None:
        super().__init__()
        self.graph = graph
        self.comm = comm
        rank, world = comm.rank, comm.world_size
        book = graph.book
        P = book.num_parts
        _check_world(P, world, graph.parts_dir)
        self.part = part = load_part(graph.parts_dir, rank)
        index = {t: i for i, t in enumerate(graph.node_types)}
        self.typed = typed = TypedFeatureStore(part, comm)  # x per type: the engine's row readers
        self.stores = {t: typed.stores[index[t]] for t in graph.node_types if index[t] in typed.stores}
        tt = index[graph.target_type]
        self.y_book = book.type_book(tt)
        lo, hi = (int(v) for v in book.type_starts[rank, tt:tt + 2])
        self.y_local = part.y[lo:hi]  # the target type's rows of this part, by per-type new id
        self.labels = RowReader(self.y_local, self.y_book, comm, tuple(self.y_local.shape[1:]), self.y_local.dtype,
                                "label")
        # the engine's host plan: the other parts on this host, read by the files present
        files = tuple(f"x_t{index[t]}.npy" for t in self.stores) + ("y.npy",)
        (self.host_reads,), hosts = plan_host_reads(comm, graph.parts_dir, [(host_reads, files)],
                                                    whole_folder(graph, comm))
        self.read = list(hosts.peers) if self.host_reads else []
        if self.host_reads:
            counts = book.part_type_counts()
            for t, store in self.stores.items():  # loop over node types with features
                store.read_host_parts(open_host_features(graph.parts_dir, book.book, hosts, graph.feature_dims[t],
                                                         f"x_t{index[t]}.npy", counts[:, index[t]]), hosts.complete)
            starts = book.type_starts
            self.labels.read_host_parts(open_host_labels(graph.parts_dir, hosts, {
                k: (int(starts[k, tt]), int(starts[k, tt + 1])) for k in hosts.peers}), hosts.complete)
        if cache_rows and self.stores:  # the engine's cache chooser (its registered degree policy)
            read_here = torch.zeros(world, dtype=torch.bool)
            read_here[self.read] = True
            ctx = CacheContext(part, part.book.num_nodes, has_rows=typed.has_rows, read_here=read_here)
            typed.fill_cache(choose_cache_ids("degree", ctx, CacheSize(rows=int(cache_rows)), typed.feature_dim * 4))

    @property
    def stats(self) -> dict:
        """Rows by where they came from (``local_rows``, ``cache_hits``, ``host_rows``, ``remote_rows``),
        summed over the types."""
        return self.typed.stats

    def fetch_x(self, node_type: str, ids: torch.Tensor) -> torch.Tensor:
        """float32 [k, F_t] rows of original per-type ids int64 [k] of ``node_type``."""
        return self.stores[node_type].fetch(self.graph.new_of_old[node_type][ids])

    def fetch_y(self, ids: torch.Tensor) -> torch.Tensor:
        """Targets of original ids int64 [k] of the target type (the folder's y dtype)."""
        return self.labels.read(self.graph.new_of_old[self.graph.target_type][ids])

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor | None:
        t = attr.group_name
        index = index_of(attr)
        if t not in self.graph.num_nodes:
            return None
        ids = torch.arange(self.graph.num_nodes[t]) if index is None else torch.as_tensor(index).to(torch.int64)
        if attr.attr_name == "x" and t in self.stores:
            return self.fetch_x(t, ids)
        if attr.attr_name == "y" and t == self.graph.target_type:
            return self.fetch_y(ids)
        return None

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        t = attr.group_name
        if attr.attr_name == "x" and t in self.stores:
            return (self.graph.num_nodes[t], self.graph.feature_dims[t])
        if attr.attr_name == "y" and t == self.graph.target_type:
            return (self.graph.num_nodes[t],) + tuple(self.y_local.shape[1:])
        return None

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [TensorAttr(group_name=t, attr_name="x") for t in self.stores] + \
            [TensorAttr(group_name=self.graph.target_type, attr_name="y")]

    def mask_ids(self, name: str) -> tuple[str, torch.Tensor]:
        """``(target type, original per-type ids sorted)`` of every part's nodes in ``train_mask`` /
        ``val_mask`` / ``test_mask`` (one bool per node: read from the folder, or as the part's owner sent it)."""
        g = self.graph
        tt = g.node_types.index(g.target_type)
        new = []
        for k in range(g.book.num_parts):  # loop over parts
            lo, hi = int(g.book.type_starts[k, tt]), int(g.book.type_starts[k, tt + 1])
            mask = g.split_mask(k, name)[lo:hi]
            new.append(torch.from_numpy(np.flatnonzero(mask)) + int(g.book.type_offsets[tt, k]))
        return g.target_type, torch.sort(g.old_of_new[g.target_type][torch.cat(new)]).values
