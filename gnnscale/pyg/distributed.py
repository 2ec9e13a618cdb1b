"""PyG's deprecated ``torch_geometric.distributed`` API, on gnnscale: scripts written against it run
with their import lines changed (``from gnnscale.pyg.distributed import DistContext, ...``).

PyG 2.7 deprecated and then removed ``torch_geometric.distributed`` (its loaders sampled through
RPC workers). The names its scripts use are here, over torchrun (or the script's own
``torch.distributed.init_process_group``) and gloo instead of PyG's RPC, built on
:func:`gnnscale.pyg.start_run`'s machinery (:mod:`gnnscale.pyg.run`): a gnnscale partition
folder, its PyG stores (:mod:`gnnscale.pyg.stores`; typed folders: :mod:`gnnscale.pyg.typed_stores`),
the keyed samplers and the engine's exchanges. No second data stack.

- :class:`DistContext`: PyG's dataclass (``rank``, ``global_rank``, ``world_size``,
  ``global_world_size``, ``group_name``, ``role``); checked against the process group when the
  first loader is made (a mismatch is one line).
- :meth:`LocalGraphStore.from_partition` / :meth:`LocalFeatureStore.from_partition` ``(root, pid)``:
  a gnnscale partition folder (``gnnscale partition`` or :class:`Partitioner`); part ``pid`` is
  this rank's (rank r opens part r). They open when the first loader is made, after the script's
  process group: until then they hold the folder and PyG's ``meta`` (``num_parts``,
  ``is_hetero``, ``node_types``, ``edge_types``). ``feature_store.labels = tensor`` (PyG's labels by
  node id) replaces ``y`` in every batch, as PyG's loaders take it.
- :class:`DistNeighborLoader` / :class:`DistLinkNeighborLoader`: PyG's arguments. Each rank passes
  its own seeds (``input_nodes`` / ``edge_label_index``, as PyG's scripts do: each rank's share of
  the split); the loader's seeds are their union (rank order; identical seeds on every rank count
  once), cut as :meth:`gnnscale.pyg.run.DistRun.node_loader` cuts a pass: every rank gets the same
  number of batches (a collective fetch per batch needs that; PyG's RPC loaders did not, and a
  rank with fewer hung in DDP), rank r takes batches r, r + N, ... of one process's pass, and a
  step's N batches draw what one process's batch of their seeds draws. ``batch.input_id`` holds
  positions in that union. ``device``: batches are moved there.
- :class:`Partitioner` ``(data, num_parts, root, recursive=False)``, ``generate_partition()``:
  ``gnnscale partition`` (:func:`gnnscale.partitioning.partition_graph`, METIS) into ``root``.

Arguments only PyG's RPC needs (``master_addr``, ``master_port``, ``concurrency``,
``num_rpc_threads``, ``async_sampling``, ``rpc_worker_names``, ``worker_concurrency``,
``filter_per_worker``, ``num_workers``, ``persistent_workers``: sampling runs in the training
process) are accepted and ignored with one debug line (logger ``gnnscale.pyg.distributed``).
With ``time_attr`` (``input_time`` / ``edge_label_time``, each rank's own, their union as the
seeds'; ``temporal_strategy``) the loaders sample in time over a temporal folder, typed or not
(:mod:`gnnscale.pyg.run_temporal`, :mod:`gnnscale.pyg.run_typed_temporal`; batches carry
``edge_time``). ``with loader as iterator`` gives the loader (PyG's RPC workers have no counterpart).
What would change the batches and is not offered (``dist_sampler``, ``Partitioner(recursive=True)``)
is refused in one line.
"""
from __future__ import annotations

import atexit
import logging
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Callable

import torch
from torch_geometric.data import HeteroData

from gnnscale.errors import PartitionError, RuntimeSetupError, SamplerError
from gnnscale.partitioning.manifest import load_meta
from gnnscale.process.comm import Communicator
from gnnscale.process.groups import init_distributed as join_group
from gnnscale.process.groups import new_group
from gnnscale.process.health import Health
from gnnscale.pyg.checks import check_seeds
from gnnscale.pyg import run_temporal
from gnnscale.pyg.rank_loaders import RankBatches, RankLinkLoader, RankNodeLoader
from gnnscale.pyg.run_typed_temporal import EdgeTimes
from gnnscale.pyg.run import DistRun, open_folder
from gnnscale.pyg.world import mark_joined

log = logging.getLogger("gnnscale.pyg.distributed")

__all__ = ["DistContext", "DistLinkNeighborLoader", "DistNeighborLoader", "DistRole", "LocalFeatureStore",
           "LocalGraphStore", "Partitioner"]

# PyG's RPC arguments: accepted, ignored (one debug line per loader naming those given)
RPC_ONLY = ("master_addr", "master_port", "concurrency", "num_rpc_threads", "async_sampling", "rpc_worker_names",
            "worker_concurrency", "filter_per_worker", "num_workers", "persistent_workers")

DEFAULT_TIMEOUT = 300.0  # seconds a collective or wait may take (GNNSCALE_PYG_TIMEOUT overrides)


class DistRole(Enum):
    """PyG's process roles (one: a worker)."""
    WORKER = 1


@dataclass
class DistContext:
    """PyG's context of the current process (its fields; the role is always a worker)."""
    rank: int
    global_rank: int
    world_size: int
    global_world_size: int
    group_name: str
    role: DistRole = DistRole.WORKER

    @property
    def worker_name(self) -> str:
        return f"{self.group_name}-{self.rank}"


_SESSION: dict[str, Any] = {}  # this process's run: "comm", "health", "timeout"; per folder: "run:<folder>"


def _timeout() -> float:
    return float(os.environ.get("GNNSCALE_PYG_TIMEOUT", DEFAULT_TIMEOUT))


def _session(ctx: DistContext | None) -> tuple[Communicator, Health | None, float]:
    """This process's communicator, made once: over the group the script joined itself
    (``torch.distributed.init_process_group``, as PyG's examples do; a group of its own with the
    bounded timeout for gnnscale's collectives) or, without one, torchrun's (as :func:`start_run`)."""
    if "comm" not in _SESSION:
        import torch.distributed as dist

        timeout = _timeout()
        if dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
            group = new_group(timeout) if world > 1 else None
        else:
            info = join_group(timeout=timeout)
            rank, world, group = info.rank, info.world_size, None
        if ctx is not None and (int(ctx.rank) != rank or int(ctx.world_size) != world):
            raise RuntimeSetupError(
                f"DistContext(rank={ctx.rank}, world_size={ctx.world_size}) is not this process: the process group "
                f"says rank {rank} of {world}. Pass the group's rank and size (under torchrun: RANK, WORLD_SIZE).")
        mark_joined(world)
        # the heartbeat needs torchrun's store (MASTER_ADDR/MASTER_PORT); a script's own tcp:// group has none
        under_torchrun = world > 1 and "TORCHELASTIC_RESTART_COUNT" in os.environ and "MASTER_ADDR" in os.environ
        health = Health(rank, world, timeout).start() if under_torchrun else None
        if health is not None:
            atexit.register(health.stop)
        _SESSION.update(comm=Communicator(rank, world, group=group, timeout=timeout, health=health), health=health,
                        timeout=timeout)
    elif ctx is not None:
        comm = _SESSION["comm"]
        if int(ctx.rank) != comm.rank or int(ctx.world_size) != comm.world_size:
            raise RuntimeSetupError(f"DistContext(rank={ctx.rank}, world_size={ctx.world_size}) is not this process "
                                    f"(rank {comm.rank} of {comm.world_size}); pass the group's rank and size.")
    return _SESSION["comm"], _SESSION["health"], _SESSION["timeout"]


def _meta(root: Path) -> dict:
    """PyG's partition ``meta`` of a gnnscale folder."""
    if not (root / "meta.json").is_file():
        raise PartitionError(f"{root} is not a gnnscale partition folder (no meta.json); cut one with gnnscale "
                             "partition or gnnscale.pyg.distributed.Partitioner(data, num_parts, root).")
    meta = load_meta(root)
    typed = meta.get("typed") or None
    return {"num_parts": int(meta["num_parts"]), "is_hetero": typed is not None,
            "node_types": list(typed["node_types"]) if typed else None,
            "edge_types": [tuple(e) for e in typed["edge_types"]] if typed else None,
            "is_sorted": True}


class _Local:
    """What ``from_partition`` returns: the folder and this rank's part, opened (with the rest of
    the run) when the first loader is made; afterwards attributes are the opened store's."""

    _store_index = 0  # 0: the feature store of the run's (features, graph) pair, 1: the graph store

    def __init__(self, root: str | os.PathLike, pid: int) -> None:
        self.root, self.pid = Path(root), int(pid)
        self.meta = _meta(self.root)
        self.gnnscale_meta = load_meta(self.root)  # the folder's own meta.json
        if not 0 <= self.pid < self.meta["num_parts"]:
            raise PartitionError(f"{self.root} holds parts 0..{self.meta['num_parts'] - 1}; found pid {pid}. Pass "
                                 "this rank's part (rank r opens part r).")
        self._run: DistRun | None = None

    @classmethod
    def from_partition(cls, root: str, pid: int):
        """This rank's part ``pid`` of the gnnscale partition folder ``root`` (PyG's call)."""
        return cls(root, pid)

    def open(self, ctx: DistContext | None) -> DistRun:
        """The run over this folder (made once per process and folder)."""
        comm, health, timeout = _session(ctx)  # checks ctx against the group every time
        if self._run is None:
            if self.pid != comm.rank:
                raise PartitionError(f"rank {comm.rank} opens part {comm.rank} of {self.root}; found from_partition(..., "
                                     f"{self.pid}). Pass the rank as pid (PyG's node_rank).")
            key = f"run:{self.root.resolve()}"
            if key not in _SESSION:
                _SESSION[key] = open_folder(self.root, comm, health, timeout)
            self._run = _SESSION[key]
        return self._run

    def __getattr__(self, name: str) -> Any:
        run = self.__dict__.get("_run")
        if run is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__}.{name}: the store opens when the first loader is made")
        return getattr(run.data[self._store_index], name)


class LocalGraphStore(_Local):
    """PyG's ``LocalGraphStore.from_partition(root, pid)`` over a gnnscale partition folder (its
    graph store, :class:`gnnscale.pyg.stores.PartitionGraphStore`, once a loader opens it)."""

    _store_index = 1


class LocalFeatureStore(_Local):
    """PyG's ``LocalFeatureStore.from_partition(root, pid)`` over a gnnscale partition folder (its
    feature store once a loader opens it). ``labels``: PyG's labels by node id (a tensor over every
    node, or the target type's for a typed folder); set, they are each batch's ``y``."""

    _store_index = 0
    labels: torch.Tensor | None = None


def _pair(data: Any) -> tuple[LocalFeatureStore, LocalGraphStore]:
    if not (isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], LocalFeatureStore)
            and isinstance(data[1], LocalGraphStore)):
        raise SamplerError(f"data must be (LocalFeatureStore, LocalGraphStore) from from_partition(root, rank); "
                           f"found {type(data).__name__}. Pass (feature_store, graph_store) as PyG's scripts do.")
    features, graph = data
    if features.root.resolve() != graph.root.resolve() or features.pid != graph.pid:
        raise SamplerError(f"the feature store ({features.root}, part {features.pid}) and the graph store "
                           f"({graph.root}, part {graph.pid}) are of different folders or parts; open both from one.")
    return features, graph


def _ignore(kind: str, given: dict) -> None:
    names = sorted(k for k in given if k in RPC_ONLY)
    if names:
        log.debug("%s: %s only configure PyG's RPC sampling; ignored (gnnscale samples in this process over the "
                  "process group)", kind, ", ".join(names))
    for k in names:
        given.pop(k)


def _refuse(kind: str, **given: Any) -> None:
    for name, value in given.items():
        if value is not None:
            raise SamplerError(f"{kind}: {name} is not offered by gnnscale's drop-in (found {type(value).__name__}); "
                               f"leave it out.")


def _union(comm: Communicator, mine: torch.Tensor, dim: int = -1) -> tuple[torch.Tensor, int]:
    """Every rank's seeds concatenated in rank order (``dim``: the axis of the seeds) and where this
    rank's start; seeds identical on every rank count once (offset 0)."""
    if comm.world_size == 1:
        return mine, 0
    every = comm.all_gather_object(mine)
    if all(t.shape == mine.shape and torch.equal(t, mine) for t in every):
        return mine, 0
    start = sum(int(t.size(dim)) for t in every[:comm.rank])
    return torch.cat(every, dim=dim), start


class _Moves:
    """Iteration: PyG's ``labels`` as ``y``, ``input_id`` made this rank's, batches moved to ``device``."""

    _labels: Callable[[], torch.Tensor | None]
    _device: torch.device | None = None
    _target: str | None = None

    def __enter__(self):  # PyG's DistLoader: ``with loader as iterator`` (its RPC workers; nothing to start here)
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def _keyed(self, batches, epoch):  # type: ignore[override]
        for batch in super()._keyed(batches, epoch):  # type: ignore[misc]
            labels = self._labels()
            if labels is not None:
                store = batch[self._target] if self._target is not None else batch
                store.y = labels[store.n_id]
            yield batch if self._device is None else batch.to(self._device)


class DistNeighborLoader(_Moves, EdgeTimes, RankNodeLoader):
    """PyG's ``DistNeighborLoader`` (its arguments; RPC's ignored): this rank's batches of the
    union of the ranks' ``input_nodes`` (node ids, a bool mask, None for every node; a typed folder:
    ``(node type, ids)``) over the partition folder of ``data``."""

    def __init__(self, data: Any, num_neighbors: Any, master_addr: Any = None, master_port: Any = None,
                 current_ctx: DistContext | None = None, input_nodes: Any = None, input_time: Any = None,
                 dist_sampler: Any = None, replace: bool = False, subgraph_type: Any = "directional",
                 disjoint: bool = False, temporal_strategy: str = "uniform", time_attr: str | None = None,
                 transform: Callable | None = None, concurrency: int = 1, num_rpc_threads: int = 16,
                 filter_per_worker: bool | None = False, async_sampling: bool = True,
                 device: torch.device | str | None = None, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, seed: int = 0, **kwargs: Any) -> None:
        _ignore("DistNeighborLoader", dict(kwargs, master_addr=master_addr, master_port=master_port,
                                           concurrency=concurrency, num_rpc_threads=num_rpc_threads,
                                           async_sampling=async_sampling, filter_per_worker=filter_per_worker))
        for k in RPC_ONLY:
            kwargs.pop(k, None)
        _refuse("DistNeighborLoader", dist_sampler=dist_sampler)
        features, graph = _pair(data)
        run = graph.open(current_ctx)
        features.open(current_ctx)
        typed = isinstance(input_nodes, tuple)
        target, mine = (input_nodes if typed else (None, input_nodes))
        num = run.data[1].num_nodes
        num = num[target] if isinstance(num, dict) else num
        ids = torch.arange(int(num)) if mine is None else check_seeds(mine, int(num))
        union, _ = _union(run.comm, ids)
        if typed:
            union = (target, union)
        elif graph.meta["is_hetero"]:
            raise SamplerError("on a typed folder input_nodes is (node type, ids); found ids alone. Pass e.g. "
                               f"({graph.gnnscale_meta['typed']['target_type']!r}, train_idx).")
        args = dict(kwargs, transform=transform, subgraph_type=subgraph_type, disjoint=disjoint)
        if time_attr is not None or input_time is not None:  # in time: gnnscale.pyg.run_temporal's loader
            if input_time is not None:
                input_time, _ = _union(run.comm, torch.as_tensor(input_time))
            args.update(time_attr=time_attr, input_time=input_time, temporal_strategy=temporal_strategy)
            run_temporal.node_loader(run, (RankBatches, RankNodeLoader), num_neighbors, union, batch_size, shuffle,
                                     drop_last, seed, replace, args, into=self)
        else:
            run._node(self, num_neighbors, union, batch_size, shuffle, drop_last, seed, replace, args)
        self._labels = lambda: features.labels
        self._target = target
        self._device = None if device is None or torch.device(device).type == "cpu" else torch.device(device)


class DistLinkNeighborLoader(_Moves, EdgeTimes, RankLinkLoader):
    """PyG's ``DistLinkNeighborLoader`` (its arguments; RPC's ignored): this rank's batches of the
    union of the ranks' ``edge_label_index`` (int64 [2, B] node ids; a typed folder: ``(relation,
    pairs)``) and ``edge_label``, negatives as :class:`gnnscale.pyg.LinkNeighborLoader` draws them."""

    def __init__(self, data: Any, num_neighbors: Any, master_addr: Any = None, master_port: Any = None,
                 current_ctx: DistContext | None = None, edge_label_index: Any = None, edge_label: Any = None,
                 edge_label_time: Any = None, dist_sampler: Any = None, replace: bool = False,
                 subgraph_type: Any = "directional", disjoint: bool = False, temporal_strategy: str = "uniform",
                 neg_sampling: Any = None, neg_sampling_ratio: float | None = None, time_attr: str | None = None,
                 transform: Callable | None = None, concurrency: int = 1, num_rpc_threads: int = 16,
                 filter_per_worker: bool | None = False, async_sampling: bool = True,
                 device: torch.device | str | None = None, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, seed: int = 0, **kwargs: Any) -> None:
        _ignore("DistLinkNeighborLoader", dict(kwargs, master_addr=master_addr, master_port=master_port,
                                               concurrency=concurrency, num_rpc_threads=num_rpc_threads,
                                               async_sampling=async_sampling, filter_per_worker=filter_per_worker))
        for k in RPC_ONLY:
            kwargs.pop(k, None)
        _refuse("DistLinkNeighborLoader", dist_sampler=dist_sampler)
        features, graph = _pair(data)
        run = graph.open(current_ctx)
        features.open(current_ctx)
        typed = isinstance(edge_label_index, tuple)
        relation, pairs = edge_label_index if typed else (None, edge_label_index)
        if not isinstance(pairs, torch.Tensor) or pairs.dim() != 2 or pairs.size(0) != 2:
            raise SamplerError(f"edge_label_index must be int64 [2, B] node ids (typed: (relation, pairs)); found "
                               f"{type(pairs).__name__}{list(pairs.shape) if isinstance(pairs, torch.Tensor) else ''}.")
        pairs, start = _union(run.comm, pairs.long(), dim=1)
        if edge_label is not None:
            edge_label, _ = _union(run.comm, edge_label)
        args = dict(kwargs, transform=transform, subgraph_type=subgraph_type, disjoint=disjoint)
        index = (relation, pairs) if typed else pairs
        if time_attr is not None or edge_label_time is not None:  # in time: gnnscale.pyg.run_temporal's loader
            if edge_label_time is not None:
                edge_label_time, _ = _union(run.comm, torch.as_tensor(edge_label_time))
            args.update(time_attr=time_attr, edge_label_time=edge_label_time, temporal_strategy=temporal_strategy)
            run_temporal.link_loader(run, (RankBatches, RankLinkLoader), num_neighbors, index, edge_label,
                                     neg_sampling, neg_sampling_ratio, batch_size, shuffle, drop_last, seed, replace,
                                     args, into=self)
        else:
            run._link(self, num_neighbors, index, edge_label, neg_sampling, neg_sampling_ratio, batch_size, shuffle,
                      drop_last, seed, replace, args)
        self._labels = lambda: features.labels
        self._target = graph.gnnscale_meta["typed"]["target_type"] if graph.meta["is_hetero"] else None
        self._device = None if device is None or torch.device(device).type == "cpu" else torch.device(device)


class Partitioner:
    """PyG's ``Partitioner(data, num_parts, root, recursive=False)``: ``generate_partition()`` is
    ``gnnscale partition`` (METIS, :func:`gnnscale.partitioning.partition_graph`) of ``data`` (a
    ``Data``; a ``HeteroData`` cut typed) into ``root``, the folder ``from_partition`` opens."""

    def __init__(self, data: Any, num_parts: int, root: str, recursive: bool = False) -> None:
        if recursive:
            raise PartitionError("Partitioner(recursive=True): gnnscale cuts with multilevel k-way METIS only; "
                                 "leave recursive out.")
        self.data, self.num_parts, self.root = data, int(num_parts), str(root)

    def generate_partition(self) -> None:
        from gnnscale.partitioning.api import partition_graph
        from gnnscale.pyg.typed_stores import hetero_digest

        extra = {"content_digest": hetero_digest(self.data)} if isinstance(self.data, HeteroData) else None
        partition_graph(self.data, self.num_parts, self.root, method="metis", extra_meta=extra)
