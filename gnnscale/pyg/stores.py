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
  ``edge_index`` when the folder stores ``edge_ids.npy`` (graphs with edge features, and temporal
  folders since 25b73c5), else the
  position in this store's own edge list (``get_edge_index(layout="coo")[:, e_id]``).
- :class:`PartitionFeatureStore`: ``x`` and ``y`` rows of original ids for one rank, each read by the
  engine's row reader (:class:`gnnscale.data.rows.RowReader`: ``x`` through
  :class:`gnnscale.data.DistFeatureStore`): its own part's rows, then the cache, then other parts
  read from the folder on this host (the engine's host plan, :func:`gnnscale.data.host_parts.plan_host_reads`),
  else asked of their owners through the communicator (bytes counted under
  ``feature_request``/``feature`` and ``label_request``/``label``). Without host
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
from gnnscale.data.feature_cache import CacheContext, CacheSize, choose_cache_ids
from gnnscale.data.host_parts import HostRanks, open_host_features, open_host_labels, plan_host_reads, present_parts
from gnnscale.data.rows import RowReader
from gnnscale.errors import PartitionError, SamplerError, SamplerValueError
from gnnscale.partitioning.book import PartitionBook
from gnnscale.partitioning.manifest import load_meta, part_dir_name
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


def require_graph_files(pdir: Path, files: tuple[str, ...], store: str) -> None:
    """A part's graph files read without a communicator must be in the folder: else one line saying how to fix it."""
    missing = [f for f in files if not (pdir / f).is_file()]
    if missing:
        raise PartitionError(f"{store} reads every part's graph from the folder without a communicator; {pdir} lacks "
                             f"{missing[0]}. Copy the whole partition folder to every host, or pass comm= "
                             "(start_run does) to get it from its owner.")


def whole_folder(graph, comm) -> HostRanks | None:
    """The host plan's ranks when the graph store was opened without a communicator (``graph.hosts``
    None: every part is in the folder, every rank taken to read it whole); None: gather them."""
    if graph.hosts is not None or comm.world_size == 1:
        return None
    return HostRanks(tuple(k for k in range(comm.world_size) if k != comm.rank), True)


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

    def mask_ids(self, name: str) -> torch.Tensor:
        """Original ids (sorted) of every part's nodes in ``train_mask``/``val_mask``/``test_mask``
        (one bool per node: read from the folder, or as the part's owner sent it)."""
        masks = [self.split_mask(k, name) for k in range(self.book.num_parts)]
        new = torch.nonzero(torch.from_numpy(np.concatenate(masks))).flatten()
        return torch.sort(self.old_of_new[new]).values

    def new_ids(self, orig: torch.Tensor) -> torch.Tensor:
        """int64 new ids (the folder's, the row readers') of original ids ``orig``."""
        return self.new_of_old[orig]

    def csc(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # type: ignore[override]
        """(indptr, indices, perm) over original ids (the sampler's input)."""
        return self.indptr, self.indices, self.perm

    def in_degrees(self) -> torch.Tensor:
        """int64 [N] every node's in-degree, by original id."""
        return self.indptr[1:] - self.indptr[:-1]

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
        graph: the folder's :class:`PartitionGraphStore` or
            :class:`gnnscale.pyg.own_part.OwnPartGraphStore` (id maps, book; built with ``comm`` it
            knows which parts every rank's folder holds).
        comm: this rank's :class:`gnnscale.process.comm.Communicator` (rank r reads part r).
        host_reads: read the rows of the other parts on this host from the folder
            (:func:`gnnscale.data.host_parts.plan_host_reads`, the engine's plan; default: when every
            rank's folder holds every part on its host, else every part's rows are asked of their
            owners); True: they must be in the folder; False: asks every other part's owner through
            ``comm``. Fetches are collective unless every rank reads every other part on its host.
        cache_rows: keep this many rows of parts read neither here nor from the host in a cache, chosen
            by the engine's ``degree`` cache policy (:mod:`gnnscale.data.feature_cache`: the remote nodes
            most of this part's in-edges come from), filled once (collective); 0: none.
    """

    def __init__(self, graph: PartitionGraphStore, comm, host_reads: bool | None = None, cache_rows: int = 0) -> None:
        super().__init__()
        self.graph = graph
        self.comm = comm
        _check_world(self.graph.book.num_parts, comm.world_size, graph.parts_dir)
        self.part = part = load_part(graph.parts_dir, comm.rank)
        self.feature_dim = int(self.part.x.shape[1])
        self.store = DistFeatureStore(part, graph.book, comm, self.feature_dim)  # x: the engine's row reader
        self.y_local = part.y
        self.labels = RowReader(part.y, graph.book, comm, tuple(part.y.shape[1:]), part.y.dtype, "label")
        # the engine's host plan: the other parts on this host, read by the files present
        (self.host_reads,), hosts = plan_host_reads(comm, graph.parts_dir, [(host_reads, ("x.npy", "y.npy"))],
                                                    whole_folder(graph, comm))
        if self.host_reads:
            self.store.read_host_parts(open_host_features(graph.parts_dir, graph.book, hosts, self.feature_dim),
                                       hosts.complete)
            self.labels.read_host_parts(open_host_labels(graph.parts_dir, hosts), hosts.complete)
        if cache_rows:  # the engine's cache chooser (its registered degree policy), parts read here left out
            read_here = torch.zeros(comm.world_size, dtype=torch.bool)
            read_here[list(hosts.peers) if self.host_reads else []] = True
            ctx = CacheContext(part, graph.num_nodes, read_here=read_here)
            self.store.fill_cache(choose_cache_ids("degree", ctx, CacheSize(rows=int(cache_rows)), self.store.row_bytes))

    @property
    def stats(self) -> dict:
        """Rows by where they came from (``local_rows``, ``cache_hits``, ``host_rows``, ``remote_rows``)."""
        return self.store.stats

    def fetch_x(self, ids: torch.Tensor) -> torch.Tensor:
        """float32 [k, F] rows of original ids int64 [k]."""
        return self.store.fetch(self.graph.new_ids(ids))

    def fetch_y(self, ids: torch.Tensor) -> torch.Tensor:
        """Targets of original ids int64 [k] (the folder's y dtype)."""
        return self.labels.read(self.graph.new_ids(ids))

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
        (the graph store's :meth:`PartitionGraphStore.mask_ids`)."""
        return self.graph.mask_ids(name)


def sampler_for(data: Any, num_neighbors: Any, seed: int = 0, replace: bool = False, backend: str = "auto",
                disjoint: bool = False, subgraph_type: Any = "directional"):
    """gnnscale's PyG sampler of ``data``: a ``Data``, a ``HeteroData`` or ``(feature_store, graph_store)``
    (a :class:`PartitionGraphStore`, or a :class:`MemoryGraphStore` / any PyG GraphStore with COO, CSR
    or CSC edges: :func:`gnnscale.pyg.memory_stores.graph_of_stores`). ``disjoint`` and
    ``subgraph_type`` as :class:`gnnscale.pyg.NeighborLoader`'s (the same checks and samplers; an
    in-memory graph's or a user's stores' sampler is the plain loader's)."""
    refuse_unjoined_world("sampler_for")
    from gnnscale.pyg.hetero import HeteroGnnscaleSampler
    from gnnscale.pyg.checks import check_num_neighbors
    from gnnscale.pyg.loaders import _graph, _sampler, check_layout
    from gnnscale.pyg.typed_inputs import fanout_hops, hetero_fanouts
    from gnnscale.pyg.sampler import GnnscaleSampler

    subgraph_type = check_layout(subgraph_type, disjoint)
    layout = dict(disjoint=disjoint, subgraph_type=subgraph_type)
    if not isinstance(data, (Data, HeteroData)) and \
            not (isinstance(data, tuple) and len(data) == 2 and isinstance(data[1], GraphStore)):
        raise SamplerError(f"gnnscale.pyg samples a Data, a HeteroData or (FeatureStore, GraphStore); found "
                           f"{type(data).__name__}. Pass one of those.")
    gs = data[1] if isinstance(data, tuple) else None
    if callable(getattr(gs, "typed_owner_sampler", None)):  # a typed folder, each rank its part (pyg.typed_own_part)
        return gs.typed_owner_sampler(num_neighbors, seed=seed, replace=replace, backend=backend, **layout)
    if callable(getattr(gs, "owner_sampler", None)):  # each rank its own part (gnnscale.pyg.own_part)
        if subgraph_type == "induced":
            raise SamplerValueError("subgraph_type='induced' needs every edge among the drawn nodes, and an own-part "
                                    "graph store holds its part's only; open the folder with graph_store='whole' "
                                    "or pass another subgraph_type.")
        return gs.owner_sampler(check_num_neighbors(num_neighbors), seed=seed, replace=replace, backend=backend,
                                **layout)
    if isinstance(gs, PartitionGraphStore):
        return GnnscaleSampler(None, gs.num_nodes, check_num_neighbors(num_neighbors), seed=seed, replace=replace,
                               backend=backend, csc=gs.csc(), **layout)
    if callable(getattr(gs, "relation_csc", None)):  # a typed folder's store (gnnscale.pyg.typed_stores)
        csc = gs.relation_csc()
        return HeteroGnnscaleSampler(None, gs.num_nodes, hetero_fanouts(num_neighbors, list(csc)), seed=seed,
                                     replace=replace, backend=backend, csc=csc, num_hops=fanout_hops(num_neighbors),
                                     **layout)
    # in memory, or any user's store (COO, CSR or CSC edges): the plain loaders' sampler
    edge_index, num_nodes = _graph(data)
    return _sampler(data, edge_index, num_nodes, num_neighbors, seed, replace, backend, disjoint, None, subgraph_type)
