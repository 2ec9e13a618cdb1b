"""PyG's ``FeatureStore`` / ``GraphStore`` over a partition folder, and the sampler of any PyG data.

PyG's ``NodeLoader`` / ``LinkLoader`` take ``data=(feature_store, graph_store)`` (the remote
backend: cuGraph-PyG's shape); with :func:`gnnscale.pyg.sampler_for` as their sampler they yield
the same batches as on the ``Data`` itself. Every index is an ORIGINAL node id.

- In memory: :mod:`gnnscale.pyg.memory_stores` (``memory_stores(data)``).
- :class:`PartitionGraphStore`: the graph of a partition folder (format 1), in original ids: every
  part's CSC read from the folder (host reads: memory-mapped, as the engine's ``--host-graph``) or,
  for the parts a per-host folder lacks, sent once by their owners through the communicator
  (bytes under ``graph``; every rank holds the whole topology), each node's in-edges by original
  source id, as :func:`gnnscale.pyg.sampler.csc_of` orders a
  ``Data``'s, so a node's draws equal the in-memory sampler's. ``e_id`` is the column of the input
  ``edge_index`` when the folder stores ``edge_ids.npy`` (graphs with edge features), else the
  position in this store's own edge list (``get_edge_index(layout="coo")[:, e_id]``).
- :class:`PartitionFeatureStore`: ``x`` and ``y`` rows of original ids for one rank: its own part's
  rows, then the cache, then other parts read from the folder on this host (host reads: the parts
  the host's folder holds), else asked of their owners through the communicator (:class:`gnnscale.data.DistFeatureStore`; bytes
  counted under ``feature_request``/``feature`` and ``label_request``/``label``). Without host
  reads a fetch is collective: every rank fetches once per batch (the rank loaders of
  :mod:`gnnscale.pyg.run` give every rank the same number of batches).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData, TensorAttr
from torch_geometric.data.graph_store import EdgeAttr

from gnnscale.data.feature_store import DistFeatureStore
from gnnscale.data.owner_rows import ask_owners
from gnnscale.errors import PartitionError, SamplerError
from gnnscale.partitioning.book import PartitionBook
from gnnscale.partitioning.feature_dtype import file_dtype, meta_feature_dtype
from gnnscale.partitioning.manifest import load_meta, part_dir_name, part_files
from gnnscale.partitioning.part import load_part
from gnnscale.partitioning.validate import load_array
from gnnscale.pyg.memory_stores import index_of
from gnnscale.pyg.world import refuse_unjoined_world


_GRAPH_FILES = ("indptr.npy", "indices.npy", "orig_ids.npy")
_SPLITS = ("train_mask", "val_mask", "test_mask")


def _check_world(parts: int, world: int, parts_dir: Path) -> None:
    """Rank r opens part r: the folder must hold one part per process."""
    if parts != world:
        raise PartitionError(f"{parts_dir} holds {parts} parts but {world} processes were started; start "
                             f"{parts} (torchrun --nproc-per-node {parts}) or partition into {world} parts.")


def present_parts(parts_dir: Path, meta: dict) -> list[int]:
    """The parts whose every file (:func:`gnnscale.partitioning.manifest.part_files`) is in ``parts_dir``:
    all of them in a whole folder, this host's in a per-host one (meta.json and its ranks' parts)."""
    files = part_files(meta)
    return [p for p in range(int(meta["num_parts"]))
            if all((parts_dir / part_dir_name(p) / f).is_file() for f in files)]


def require_graph_files(pdir: Path, files: tuple[str, ...], store: str) -> None:
    """A part's graph files read without a communicator must be in the folder: else one line saying how to fix it."""
    missing = [f for f in files if not (pdir / f).is_file()]
    if missing:
        raise PartitionError(f"{store} reads every part's graph from the folder without a communicator; {pdir} lacks "
                             f"{missing[0]}. Copy the whole partition folder to every host, or pass comm= "
                             "(start_run does) to get it from its owner.")


def host_plan(graph, rank: int, world: int, P: int, host_reads: bool | None) -> tuple[list[int], bool, bool]:
    """Which other parts rank ``rank`` reads from its host's folder: ``(parts read, host reads on, complete)``,
    complete when every rank's host holds every part (fetches are then not collective). The hosts' parts
    come from the graph store's gather (``graph.hosts``), else this folder's are taken as every rank's."""
    others = [k for k in range(world) if k != rank]
    hosts = graph.hosts or [frozenset(present_parts(graph.parts_dir, graph.meta))] * world
    if host_reads and len(hosts[rank]) < P:
        raise PartitionError(f"host_reads=True needs every part's files in {graph.parts_dir}; it holds "
                             f"{len(hosts[rank])} of {P}. Copy the whole folder, or leave host_reads out (the "
                             "missing parts are asked of their owners).")
    read = [k for k in others if k in hosts[rank]] if host_reads is not False else []
    return read, bool(read) or (host_reads is not False and not others), \
        host_reads is not False and all(len(h) == P for h in hosts)


def _meta_digest(meta: dict) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()


class ReadOnlyEdges:
    """A GraphStore over a partition folder: its edges are the folder's (written once, read-only)."""

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        raise PartitionError(f"a {type(self).__name__} is read-only (its edges are the folder's); "
                             "partition the changed graph again.")

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        return False


class ReadOnlyRows:
    """A FeatureStore over a partition folder: its rows are the folder's, and a batch's attributes
    are fetched one by one in the order asked (the same on every rank: the fetches are collective)."""

    def _multi_get_tensor(self, attrs: list[TensorAttr]) -> list[torch.Tensor | None]:
        return [self._get_tensor(a) for a in attrs]

    def _put_tensor(self, tensor: torch.Tensor, attr: TensorAttr) -> bool:
        raise PartitionError(f"a {type(self).__name__} is read-only (its rows are the folder's); "
                             "partition the changed graph again.")

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return False


class PartitionGraphStore(ReadOnlyEdges, GraphStore):
    """The whole graph of a partition folder (format 1) in original ids (see the module's docstring).

    Args:
        parts_dir: the folder: every part (host reads), or meta.json and this host's parts only.
        comm: this rank's :class:`gnnscale.process.comm.Communicator` (rank p owns part p). With
            more than one rank the ranks first tell each other (one ``control`` gather) which parts
            their folders hold and check that their meta.json are one partition's; each part a
            rank's folder lacks is then sent by its owner once (exchanges of at most
            ``chunk_values`` values per receiver, bytes under ``graph``: its CSC, original ids,
            edge ids and split masks). Without ``comm`` every part must be in the folder.

    Attributes:
        meta: the folder's meta.json; book: its PartitionBook (new ids).
        num_nodes: N. old_of_new / new_of_old: int64 [N] id maps.
        indptr int64 [N + 1], indices int64 [E] (original source ids), perm int64 [E] (``e_id``
        of each CSC position): the CSC over original target ids.
        hosts: per rank, the parts its folder holds (``list[frozenset[int]]``; None without ``comm``).
    """

    chunk_values: int = 1 << 23
    """int64 values a part's owner sends each receiver per exchange round: beside the packed part its
    send buffer holds at most (ranks lacking the part) x 64 MiB."""

    def __init__(self, parts_dir: str | Path, comm=None) -> None:
        super().__init__()
        self.parts_dir = Path(parts_dir)
        self.meta = meta = load_meta(self.parts_dir)
        if int(meta.get("format_version", 1)) != 1 or meta.get("typed"):
            raise PartitionError(f"PartitionGraphStore reads untyped folders (format 1); {parts_dir} holds a typed "
                                 "graph. Open it with gnnscale.pyg.TypedPartitionGraphStore (start_run does).")
        P = int(meta["num_parts"])
        self.book = PartitionBook(meta["offsets"])
        n = self.num_nodes = int(self.book.num_nodes)
        here = present_parts(self.parts_dir, meta)
        self.hosts: list[frozenset[int]] | None = None
        self._sent_masks: dict[int, np.ndarray] = {}
        sent: dict[int, torch.Tensor] = {}
        if comm is not None and comm.world_size > 1:
            _check_world(P, comm.world_size, self.parts_dir)
            self.hosts, sent = self._from_owners(comm, here)
        ptrs, idxs, olds, eids = [], [], [], []
        for p in range(P):
            if p in sent:
                deg, orig, ind, eid = self._unpack(p, sent[p])
                ptrs.append(deg), olds.append(orig), idxs.append(ind)
                if eid is not None:
                    eids.append(eid)
                continue
            pdir = self.parts_dir / part_dir_name(p)
            size = self.book.part_size(p)
            require_graph_files(pdir, _GRAPH_FILES, "the PyG graph store")
            ptrs.append(np.diff(load_array(pdir / "indptr.npy", np.int64, (size + 1,), mmap="r")))
            idxs.append(load_array(pdir / "indices.npy", np.int64, (None,), mmap="r"))
            olds.append(load_array(pdir / "orig_ids.npy", np.int64, (size,), mmap="r"))
            if (pdir / "edge_ids.npy").is_file():
                eids.append(load_array(pdir / "edge_ids.npy", np.int64, (None,), mmap="r"))
        old_of_new = torch.from_numpy(np.concatenate(olds))
        self.old_of_new = old_of_new
        self.new_of_old = torch.empty_like(old_of_new)
        self.new_of_old[old_of_new] = torch.arange(n)
        deg_new = torch.from_numpy(np.concatenate(ptrs))  # in-degree by new id
        start_new = torch.zeros(n + 1, dtype=torch.int64)
        start_new[1:] = torch.cumsum(deg_new, 0)
        deg = deg_new[self.new_of_old]  # by original id
        self.indptr = torch.zeros(n + 1, dtype=torch.int64)
        self.indptr[1:] = torch.cumsum(deg, 0)
        e = int(self.indptr[-1])
        # CSC position q of original node o's segment -> its position in the new-id CSC
        seg = torch.repeat_interleave(torch.arange(n), deg)
        pos = start_new[self.new_of_old][seg] + (torch.arange(e) - self.indptr[:-1][seg])
        src_new = torch.from_numpy(np.concatenate(idxs))
        self.indices = old_of_new[src_new[pos]]
        self.perm = torch.from_numpy(np.concatenate(eids))[pos] if len(eids) == P else torch.arange(e)
        self._coo = None

    def _from_owners(self, comm, here: list[int]) -> tuple[list[frozenset[int]], dict[int, torch.Tensor]]:
        """Which parts every rank's folder holds (one ``control`` gather, with meta.json's digest and
        each own part's packed length), and the packed parts (:meth:`_pack`) this rank's folder lacks,
        each sent by its owner (exchanges under ``graph``, ``chunk_values`` values per receiver each;
        none when every folder is whole). Collective."""
        me = comm.rank
        got = comm.all_gather_object((here, _meta_digest(self.meta), self._packed_len(me) if me in here else 0),
                                     "control")
        other = [r for r, (_, d, _) in enumerate(got) if d != got[0][1]]
        if other:
            raise PartitionError(f"rank {other[0]}'s partition folder holds another meta.json than rank 0's (another "
                                 "partition); copy one partition's meta.json and parts to every host.")
        hosts = [frozenset(h) for h, _, _ in got]
        lost = [r for r, h in enumerate(hosts) if r not in h]
        if lost:
            raise PartitionError(f"rank {lost[0]}'s partition folder lacks its own part ({part_dir_name(lost[0])}, or "
                                 f"one of its files); rank r opens part r: copy meta.json and the parts of a host's "
                                 "ranks to that host's folder.")
        P, lens = len(hosts), [int(n) for _, _, n in got]
        needed = [p for p in range(P) if any(p not in h for h in hosts)]
        if not needed:
            return hosts, {}
        empty = torch.empty(0, dtype=torch.int64)
        takers = [r != me and me not in hosts[r] for r in range(P)]
        mine = self._pack(me) if any(takers) else empty
        out = {p: torch.empty(lens[p], dtype=torch.int64) for p in range(P) if p not in hosts[me]}
        step = int(self.chunk_values)
        for i in range(max(-(-lens[p] // step) for p in needed)):  # the same rounds on every rank
            piece = mine[i * step:(i + 1) * step]
            recv = comm.exchange([piece if take else empty for take in takers], "graph")
            for p, t in out.items():
                t[i * step:i * step + recv[p].numel()] = recv[p]
        return hosts, out

    def _packed_len(self, p: int) -> int:
        """The length of part ``p`` packed by :meth:`_pack` (from its indptr's last value)."""
        pdir = self.parts_dir / part_dir_name(p)
        n = self.book.part_size(p)
        e = int(load_array(pdir / "indptr.npy", np.int64, (n + 1,), mmap="r")[-1])
        return 2 + 3 * n + e * (2 if (pdir / "edge_ids.npy").is_file() else 1)

    def _pack(self, p: int) -> torch.Tensor:
        """Part ``p`` from the folder as int64 [2 + 3 n + E (+ E)]: E, whether edge ids follow, in-degrees
        [n], original ids [n], split masks [n] (bits: train 1, val 2, test 4), sources [E] (new ids)
        and, when the folder has them, edge ids [E]."""
        pdir = self.parts_dir / part_dir_name(p)
        n = self.book.part_size(p)
        deg = np.diff(load_array(pdir / "indptr.npy", np.int64, (n + 1,), mmap="r"))
        ind = load_array(pdir / "indices.npy", np.int64, (None,), mmap="r")
        eid = [load_array(pdir / "edge_ids.npy", np.int64, (ind.shape[0],), mmap="r")] \
            if (pdir / "edge_ids.npy").is_file() else []
        bits = np.zeros(n, dtype=np.int64)
        for i, name in enumerate(_SPLITS):
            bits |= load_array(pdir / f"{name}.npy", np.bool_, (n,), mmap="r").astype(np.int64) << i
        orig = load_array(pdir / "orig_ids.npy", np.int64, (n,), mmap="r")
        head = np.array([ind.shape[0], len(eid)], dtype=np.int64)
        return torch.from_numpy(np.concatenate([head, deg, orig, bits, ind, *eid]))

    def _unpack(self, p: int, t: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """(in-degrees, original ids, sources, edge ids or None) of a part packed by :meth:`_pack`
        (its masks kept for :meth:`split_mask`)."""
        n, a = self.book.part_size(p), t.numpy()
        e, has = (int(a[0]), int(a[1])) if a.size >= 2 else (-1, 0)
        if e < 0 or a.size != 2 + 3 * n + e * (1 + has) or int(a[2:2 + n].sum()) != e:
            raise PartitionError(f"part {p} as sent by its owner holds {a.size} values, expected 2 + 3 * {n} + "
                                 f"E (+ E) by the partition book; the hosts' folders are not one partition: copy it "
                                 "again.")
        self._sent_masks[p] = a[2 + 2 * n:2 + 3 * n]
        body = 2 + 3 * n
        return a[2:2 + n], a[2 + n:2 + 2 * n], a[body:body + e], a[body + e:body + 2 * e] if has else None

    def split_mask(self, part: int, name: str) -> np.ndarray:
        """bool [n_part] ``name`` (``train_mask``, ``val_mask``, ``test_mask``) of part ``part``: read
        from the folder, or as its owner sent it."""
        if part in self._sent_masks:
            return ((self._sent_masks[part] >> _SPLITS.index(name)) & 1).astype(np.bool_)
        return load_array(self.parts_dir / part_dir_name(part) / f"{name}.npy", np.bool_,
                          (self.book.part_size(part),), mmap="r")

    def csc(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # type: ignore[override]
        """(indptr, indices, perm) over original ids (the sampler's input)."""
        return self.indptr, self.indices, self.perm

    def coo_of(self, edge_type: Any = None) -> torch.Tensor:
        """int64 [2, E] (source, target) original ids, column ``e_id`` the edge ``e_id`` names when the
        folder has no ``edge_ids.npy`` (else in CSC order; ``perm`` names each column)."""
        if self._coo is None:
            dst = torch.repeat_interleave(torch.arange(self.num_nodes), self.indptr[1:] - self.indptr[:-1])
            coo = torch.stack([self.indices, dst])
            if torch.equal(self.perm, torch.arange(self.perm.numel())):
                self._coo = coo
            else:
                self._coo = coo[:, torch.argsort(self.perm)]
        return self._coo

    def _get_edge_index(self, edge_attr: EdgeAttr):
        coo = self.coo_of()
        return coo[0], coo[1]

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [EdgeAttr(None, "coo", size=(self.num_nodes, self.num_nodes))]


class PartitionFeatureStore(ReadOnlyRows, FeatureStore):
    """``x`` (float32 [N, F]) and ``y`` rows of original ids for rank ``comm.rank`` (module docstring).

    Args:
        graph: the folder's :class:`PartitionGraphStore` (id maps, book; built with ``comm`` it
            knows which parts every rank's folder holds).
        comm: this rank's :class:`gnnscale.process.comm.Communicator` (rank r reads part r).
        host_reads: read other parts' rows from the folder (default: those of the parts this
            host's folder holds; the rest are asked of their owners); True: every part's, which
            must be in the folder; False: asks every other part's owner through ``comm``.
            Fetches are collective unless every rank reads every other part on its host.
        cache_rows: keep this many rows of parts read neither here nor from the host (the highest
            in-degree first) in a cache, filled once (collective); 0: none.
    """

    def __init__(self, graph: PartitionGraphStore, comm, host_reads: bool | None = None, cache_rows: int = 0) -> None:
        super().__init__()
        self.graph = graph
        self.comm = comm
        rank, world = comm.rank, comm.world_size
        P = self.graph.book.num_parts
        _check_world(P, world, graph.parts_dir)
        self.part = load_part(graph.parts_dir, rank)
        self.feature_dim = int(self.part.x.shape[1])
        self.store = DistFeatureStore(self.part, graph.book, comm, self.feature_dim)
        read, self.host_reads, complete = host_plan(graph, rank, world, P, host_reads)
        self.y_local = self.part.y
        self.y_all = None
        self.y_host: dict[int, torch.Tensor] = {}
        if read:  # as stored (float32, or the folder's 16-bit feature_dtype)
            stored = file_dtype(meta_feature_dtype(graph.meta))
            self.store.read_host_parts({k: load_array(graph.parts_dir / part_dir_name(k) / "x.npy", stored,
                                                      (graph.book.part_size(k), self.feature_dim), mmap="r")
                                        for k in read}, complete=complete)
            self.y_host = {k: torch.from_numpy(np.array(np.load(graph.parts_dir / part_dir_name(k) / "y.npy",
                                                                mmap_mode="r"))) for k in read}
        if complete:
            self.y_all = torch.cat([self.y_local if k == rank else self.y_host[k] for k in range(world)])
        if cache_rows:
            deg = graph.indptr[1:] - graph.indptr[:-1]
            held = torch.zeros(world, dtype=torch.bool)
            held[[rank, *read]] = True
            remote = torch.nonzero(~held[graph.book.owner(graph.new_of_old)]).flatten()  # original ids
            top = remote[torch.argsort(deg[remote], descending=True, stable=True)[: int(cache_rows)]]
            self.store.fill_cache(graph.new_of_old[top])

    @property
    def stats(self) -> dict:
        """Rows by where they came from (``local_rows``, ``cache_hits``, ``host_rows``, ``remote_rows``)."""
        return self.store.stats

    def fetch_x(self, ids: torch.Tensor) -> torch.Tensor:
        """float32 [k, F] rows of original ids int64 [k]."""
        return self.store.fetch(self.graph.new_of_old[ids])

    def fetch_y(self, ids: torch.Tensor) -> torch.Tensor:
        """Targets of original ids int64 [k] (the folder's y dtype)."""
        new = self.graph.new_of_old[ids]
        if self.y_all is not None:
            return self.y_all[new]
        owner = self.graph.book.owner(new)
        out = torch.empty((new.numel(),) + tuple(self.y_local.shape[1:]), dtype=self.y_local.dtype)
        mine = owner == self.comm.rank
        out[mine] = self.y_local[new[mine] - self.part.offset]
        for k, y in self.y_host.items():  # parts read on this host (a few)
            at = owner == k
            out[at] = y[new[at] - int(self.graph.book.offsets[k])]
            mine |= at
        need = torch.nonzero(~mine).flatten()
        return ask_owners(self.comm, new, owner, need, self.y_local, self.part.offset, out, "label_request", "label")

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor | None:
        index = index_of(attr)
        ids = torch.arange(self.graph.num_nodes) if index is None else torch.as_tensor(index).to(torch.int64)
        if attr.attr_name == "x":
            return self.fetch_x(ids)
        if attr.attr_name == "y":
            return self.fetch_y(ids)
        return None

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        if attr.attr_name == "x":
            return (self.graph.num_nodes, self.feature_dim)
        if attr.attr_name == "y":
            return (self.graph.num_nodes,) + tuple(self.y_local.shape[1:])
        return None

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [TensorAttr(group_name=None, attr_name="x"), TensorAttr(group_name=None, attr_name="y")]

    def mask_ids(self, name: str) -> torch.Tensor:
        """Original ids (sorted) of every part's nodes in ``train_mask``/``val_mask``/``test_mask``
        (one bool per node: read from the folder, or as the part's owner sent it)."""
        masks = [self.graph.split_mask(k, name) for k in range(self.graph.book.num_parts)]
        new = torch.nonzero(torch.from_numpy(np.concatenate(masks))).flatten()
        return torch.sort(self.graph.old_of_new[new]).values


def sampler_for(data: Any, num_neighbors: Any, seed: int = 0, replace: bool = False, backend: str = "auto"):
    """gnnscale's PyG sampler of ``data``: a ``Data``, a ``HeteroData`` or ``(feature_store, graph_store)``
    (a :class:`PartitionGraphStore`, or a :class:`MemoryGraphStore` / any PyG GraphStore with COO edges
    and the feature store's sizes giving the node counts)."""
    refuse_unjoined_world("sampler_for")
    from gnnscale.pyg.hetero import HeteroGnnscaleSampler, check_hetero_data, hetero_fanouts
    from gnnscale.pyg.loaders import check_data, check_num_neighbors
    from gnnscale.pyg.sampler import GnnscaleSampler

    if isinstance(data, HeteroData):
        edge_index, num_nodes = check_hetero_data(data)
        return HeteroGnnscaleSampler(edge_index, num_nodes, hetero_fanouts(num_neighbors, list(edge_index)),
                                     seed=seed, replace=replace, backend=backend)
    if isinstance(data, Data):
        edge_index, n = check_data(data)
        return GnnscaleSampler(edge_index, n, check_num_neighbors(num_neighbors), seed=seed, replace=replace,
                               backend=backend)
    if not (isinstance(data, tuple) and len(data) == 2 and isinstance(data[1], GraphStore)):
        raise SamplerError(f"gnnscale.pyg samples a Data, a HeteroData or (FeatureStore, GraphStore); found "
                           f"{type(data).__name__}. Pass one of those.")
    fs, gs = data
    if isinstance(gs, PartitionGraphStore):
        return GnnscaleSampler(None, gs.num_nodes, check_num_neighbors(num_neighbors), seed=seed, replace=replace,
                               backend=backend, csc=gs.csc())
    if callable(getattr(gs, "relation_csc", None)):  # a typed folder's store (gnnscale.pyg.typed_stores)
        csc = gs.relation_csc()
        return HeteroGnnscaleSampler(None, gs.num_nodes, hetero_fanouts(num_neighbors, list(csc)), seed=seed,
                                     replace=replace, backend=backend, csc=csc)
    attrs = gs.get_all_edge_attrs()
    if len(attrs) == 1 and attrs[0].edge_type is None:
        row, col = gs.get_edge_index(edge_type=None, layout="coo")
        n = attrs[0].size[0] if attrs[0].size else max(s[0] for a in fs.get_all_tensor_attrs()
                                                       if (s := fs.get_tensor_size(a)))
        return GnnscaleSampler(torch.stack([row, col]), int(n), check_num_neighbors(num_neighbors), seed=seed,
                               replace=replace, backend=backend)
    edge_index = {a.edge_type: torch.stack(gs.get_edge_index(edge_type=a.edge_type, layout="coo")) for a in attrs}
    num_nodes = {}
    for a in fs.get_all_tensor_attrs():
        num_nodes[a.group_name] = fs.get_tensor_size(a)[0]
    for a in attrs:
        if a.size:
            num_nodes.setdefault(a.edge_type[0], a.size[0])
            num_nodes.setdefault(a.edge_type[2], a.size[1])
    return HeteroGnnscaleSampler(edge_index, num_nodes, hetero_fanouts(num_neighbors, list(edge_index)), seed=seed,
                                 replace=replace, backend=backend)
