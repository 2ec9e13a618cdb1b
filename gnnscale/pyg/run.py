"""A PyG user's own loop on several processes: ``torchrun --nproc-per-node N my_loop.py``.

::

    run = gnnscale.pyg.start_run("parts/cora-2", timeout=120)   # or (data, parts_dir=...)
    loader = run.node_loader([10, 10], input_nodes="train", batch_size=32, shuffle=True, seed=0)
    model = run.ddp(GraphSAGE(...))                                  # DDP over the run's group
    for batch in loader: ...                                          # the plain PyG loop
    acc = run.accuracy(model, run.node_loader([-1, -1], input_nodes="test", batch_size=512))

:func:`start_run` joins the group torchrun describes with the run's timeout (every
collective bounded by it) and starts the engine's heartbeat (a collective that fails names the
silent rank and its last phase), then opens this rank's part: PyG stores over the folder
(:mod:`gnnscale.pyg.stores`; rank r reads part r, the folder must hold exactly ``WORLD_SIZE``
parts: all of them, or on several hosts meta.json and the parts of the host's ranks, the others'
graphs then sent once by their owners to the whole-topology store; the own-part store,
:mod:`gnnscale.pyg.own_part`, keeps part r's topology only: ``graph_store``, chosen by size and
said in one line). Given a ``Data`` and ``parts_dir``, rank 0 partitions it there first (the others
wait, bounded); a ``HeteroData`` and ``parts_dir`` likewise, and a typed folder opens as the typed
stores of :mod:`gnnscale.pyg.typed_stores` (the own part's: :mod:`gnnscale.pyg.typed_own_part`).
Given a ``Data`` or a ``HeteroData`` without a folder, every rank holds the graph in memory.

Batches: one pass cuts the split's seeds into the batches one process would make (shuffled by a
generator seeded with ``seed``: one ``randperm`` per pass, as PyG's ``shuffle=True`` with
:class:`gnnscale.pyg.NeighborLoader`'s ``seed``), and rank r takes batches r, r + N, r + 2N, ...
Every rank gets ``ceil(batches / N)`` of them (the last ones wrap around to the pass's first, as
PyG's ``DistributedSampler`` pads): DDP's all-reduces and the stores' exchanges stay in step.

A step of N processes trains N batches (DDP averages their gradients): ``batch_size=B // N``
keeps a step's seeds those of one process's batch of B (its N consecutive parts; B divisible by
N), the same number of steps per pass, and, the parts being equal, DDP's mean of the processes'
mean losses the mean over the step's seeds. The draws are the step's, as in the engine
(:mod:`gnnscale.pyg.steps`): keyed by (seed, pass, the step, hop) and each node's original id,
never by the rank, and each rank knowing the step's other seeds, so the union of the N batches'
subgraphs (nodes, edges, negatives; typed graphs too) is one process's batch of B, and a model
without random layers takes the same step (float32 sums aside).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkLoader, NodeLoader

from gnnscale.errors import PartitionError, RuntimeSetupError, SamplerError
from gnnscale.partitioning.manifest import load_meta
from gnnscale.process.comm import Communicator
from gnnscale.process.groups import init_distributed as join_group
from gnnscale.process.groups import shutdown_distributed
from gnnscale.process.health import Health
from gnnscale.pyg.hetero import HeteroGnnscaleSampler
from gnnscale.pyg import run_temporal
from gnnscale.pyg.checks import check_seeds, given_as_mask
from gnnscale.pyg.own_part import GRAPH_STORES, choose_graph_store, open_graph_store
from gnnscale.pyg.sampler import GnnscaleSampler
from gnnscale.pyg.steps import StepBook
from gnnscale.pyg.stores import PartitionFeatureStore, sampler_for
from gnnscale.pyg.typed_own_part import open_typed_graph_store
from gnnscale.pyg.typed_stores import (TypedPartitionFeatureStore, hetero_digest, is_partition_of, is_typed_folder,
                                       is_typed_stores)
from gnnscale.pyg.rank_loaders import RankBatches, RankLinkLoader, RankNodeLoader
from gnnscale.pyg.world import mark_joined
from gnnscale.tasks.scores import LinkMetrics

_REFUSED = ("num_workers", "persistent_workers", "batch_sampler", "sampler", "generator")
_TIMED = ("time_attr", "input_time", "edge_label_time", "temporal_strategy", "time_window", "time_cut")


class DistRun:
    """One rank of a run: the group, the stores, loaders over this rank's batches, DDP, evaluation.

    Attributes: ``rank``, ``world_size``, ``comm`` (the engine's Communicator: bytes by category in
    ``comm.stats``), ``health``, ``data`` (what the loaders read: ``(feature_store, graph_store)``
    or the in-memory graph), ``feature_store`` / ``graph_store`` (None in memory), ``timeout``.
    """

    def __init__(self, rank: int, world_size: int, comm: Communicator, health: Health | None, data: Any,
                 timeout: float, masks: Callable[[str], torch.Tensor] | None = None) -> None:
        self.rank, self.world_size, self.comm, self.health, self.data = rank, world_size, comm, health, data
        self.timeout = float(timeout)
        self._masks = masks
        stores = isinstance(data, tuple)
        self.feature_store = data[0] if stores else None
        self.graph_store = data[1] if stores else None

    # -- seeds -----------------------------------------------------------------------------------
    def split(self, name: str) -> Any:
        """The seeds of split ``name`` (``"train"``, ``"val"``, ``"test"``): int64 original ids sorted
        (a HeteroData: ``(target type, ids)``, the type the one holding ``{name}_mask``)."""
        if isinstance(self.data, HeteroData):
            for t in self.data.node_types:
                if f"{name}_mask" in self.data[t]:
                    return t, torch.nonzero(self.data[t][f"{name}_mask"]).flatten()
        elif isinstance(self.data, Data) and f"{name}_mask" in self.data:
            return torch.nonzero(self.data[f"{name}_mask"]).flatten()
        elif self._masks is not None:
            return self._masks(f"{name}_mask")
        raise SamplerError(f"the graph has no {name}_mask; pass input_nodes as node ids (int64 tensor) instead.")

    def _options(self, kwargs: dict) -> None:
        for name in _REFUSED:
            if name in kwargs and kwargs[name] not in (None, 0, False):
                raise SamplerError(f"rank loaders do not support {name}={kwargs[name]!r} yet (their batches are cut "
                                   f"per pass in this process, and the stores' fetches are collective); leave "
                                   f"{name} out.")
            kwargs.pop(name, None)

    def node_loader(self, num_neighbors: Any, input_nodes: Any = "train", batch_size: int = 1,
                    shuffle: bool = False, drop_last: bool = False, seed: int = 0, replace: bool = False,
                    data: Any = None, subgraph_type: Any = "directional", disjoint: bool = False,
                    **kwargs: Any) -> RankNodeLoader:
        """PyG's ``NodeLoader`` over this rank's batches of ``input_nodes`` (a split's name, original
        ids (repeats allowed: each copy a seed row) or a bool mask over the nodes, or for a HeteroData
        ``(type, ids or mask)``), on gnnscale's sampler; PyG's batches (a mask's: ``input_id`` the seeds'
        node ids, as PyG's). ``subgraph_type`` and ``disjoint`` as :class:`gnnscale.pyg.NeighborLoader`'s
        (the same sampler). ``data``: another graph than the run's (in memory, e.g. an evaluation
        split's)."""
        self._options(kwargs)
        kwargs.update(subgraph_type=subgraph_type, disjoint=disjoint)
        if any(kwargs.get(name) is not None for name in _TIMED):  # in time: gnnscale.pyg.run_temporal
            return run_temporal.node_loader(self, (RankBatches, RankNodeLoader), num_neighbors, input_nodes,
                                            batch_size, shuffle, drop_last, seed, replace, kwargs, data)
        return self._node(None, num_neighbors, input_nodes, batch_size, shuffle, drop_last, seed, replace, kwargs,
                          data)

    def _node(self, into: RankNodeLoader | None, num_neighbors: Any, input_nodes: Any, batch_size: int,
              shuffle: bool, drop_last: bool, seed: int, replace: bool, kwargs: dict,
              data: Any = None) -> RankNodeLoader:
        """:meth:`node_loader`'s loader, or ``into`` (a subclass's instance, :mod:`gnnscale.pyg.distributed`)
        made it; ``kwargs``' ``subgraph_type`` / ``disjoint`` go to the sampler."""
        data = self.data if data is None else data
        sampler = sampler_for(data, num_neighbors, seed=seed, replace=replace,
                              subgraph_type=kwargs.pop("subgraph_type", "directional"),
                              disjoint=kwargs.pop("disjoint", False))
        # a split's name, else PyG's forms (ids, a bool mask; typed: (type, ids or mask)) as node ids
        nodes = self.split(input_nodes) if isinstance(input_nodes, str) else check_seeds(input_nodes,
                                                                                           sampler.num_nodes)
        count = (nodes[1] if isinstance(nodes, tuple) else nodes).numel()
        args = dict(input_nodes=nodes, batch_sampler=RankBatches(count, batch_size, shuffle, drop_last, seed, self.rank,
                                                                 self.world_size), **kwargs)
        loader = RankNodeLoader(data, sampler, **args) if into is None else into
        if into is not None:
            RankNodeLoader.__init__(into, data, sampler, **args)
        loader._sampler, loader._epoch, loader._health, loader._seed = sampler, 0, self.health, int(seed)
        loader._mask_ids = given_as_mask(input_nodes)
        loader._watch = 2 * self.timeout if self.world_size > 1 else 0.0
        self._share_steps(loader, sampler, loader.input_data.node, loader.input_data.input_id)
        return loader

    def _share_steps(self, loader: Any, sampler: Any, inputs: torch.Tensor, input_id: torch.Tensor | None) -> None:
        """N processes: key each batch's draws by its global step (:mod:`gnnscale.pyg.steps`), so a
        step's N batches draw what one process's batch of their seeds draws (typed graphs too)."""
        if self.world_size > 1 and isinstance(sampler, (GnnscaleSampler, HeteroGnnscaleSampler)):
            sampler.steps = loader.batch_sampler.book = StepBook(self.world_size, inputs, input_id)

    def link_loader(self, num_neighbors: Any, edge_label_index: torch.Tensor, edge_label: torch.Tensor | None = None,
                    neg_sampling: Any = None, neg_sampling_ratio: float | None = None, batch_size: int = 1,
                    shuffle: bool = False, drop_last: bool = False, seed: int = 0, replace: bool = False,
                    data: Any = None, subgraph_type: Any = "directional", disjoint: bool = False,
                    **kwargs: Any) -> RankLinkLoader:
        """PyG's ``LinkLoader`` over this rank's batches of ``edge_label_index`` (int64 [2, B], original
        ids; a HeteroData: ``(relation, pairs)``, binary negatives only); negatives as
        :class:`gnnscale.pyg.LinkNeighborLoader` draws them (never real edges). ``data``: another
        graph than the run's (in memory, e.g. a link split's test graph). ``subgraph_type`` and
        ``disjoint`` as :class:`gnnscale.pyg.LinkNeighborLoader`'s (the same sampler)."""
        self._options(kwargs)
        kwargs.update(subgraph_type=subgraph_type, disjoint=disjoint)
        if any(kwargs.get(name) is not None for name in _TIMED):  # in time: gnnscale.pyg.run_temporal
            return run_temporal.link_loader(self, (RankBatches, RankLinkLoader), num_neighbors, edge_label_index,
                                            edge_label, neg_sampling, neg_sampling_ratio, batch_size, shuffle,
                                            drop_last, seed, replace, kwargs, data)
        return self._link(None, num_neighbors, edge_label_index, edge_label, neg_sampling, neg_sampling_ratio,
                          batch_size, shuffle, drop_last, seed, replace, kwargs, data)

    def _link(self, into: RankLinkLoader | None, num_neighbors: Any, edge_label_index: Any, edge_label: Any,
              neg_sampling: Any, neg_sampling_ratio: float | None, batch_size: int, shuffle: bool, drop_last: bool,
              seed: int, replace: bool, kwargs: dict, data: Any = None) -> RankLinkLoader:
        """:meth:`link_loader`'s loader, or ``into`` (a subclass's instance) made it; ``kwargs``'
        ``subgraph_type`` / ``disjoint`` go to the sampler."""
        data = self.data if data is None else data
        sampler = sampler_for(data, num_neighbors, seed=seed, replace=replace,
                              subgraph_type=kwargs.pop("subgraph_type", "directional"),
                              disjoint=kwargs.pop("disjoint", False))
        if isinstance(data, HeteroData) or is_typed_stores(data):  # (relation, pairs)
            if not (isinstance(edge_label_index, tuple) and len(edge_label_index) == 2):
                raise SamplerError(f"on a HeteroData edge_label_index is (relation, pairs int64 [2, B]); found "
                                   f"{type(edge_label_index).__name__}. Pass e.g. (('paper', 'cites', 'paper'), "
                                   "pairs).")
            pairs, count = edge_label_index, int(edge_label_index[1].size(1))
        else:  # stores: (None, pairs)
            pairs = (None, edge_label_index) if isinstance(data, tuple) else edge_label_index
            count = int(edge_label_index.size(1))
        args = dict(edge_label_index=pairs, edge_label=edge_label, neg_sampling=neg_sampling,
                    neg_sampling_ratio=neg_sampling_ratio,
                    batch_sampler=RankBatches(count, batch_size, shuffle, drop_last, seed, self.rank, self.world_size),
                    **kwargs)
        loader = RankLinkLoader(data, sampler, **args) if into is None else into
        if into is not None:
            RankLinkLoader.__init__(into, data, sampler, **args)
        loader._sampler, loader._epoch, loader._health, loader._seed = sampler, 0, self.health, int(seed)
        loader._watch = 2 * self.timeout if self.world_size > 1 else 0.0
        self._share_steps(loader, sampler, torch.stack([loader.input_data.row, loader.input_data.col]),
                          loader.input_data.input_id)
        return loader

    # -- model -------------------------------------------------------------------------------------
    def ddp(self, model: torch.nn.Module, **kwargs: Any) -> torch.nn.Module:
        """``model`` in DDP over this run's group (gradients averaged, their bytes counted under
        ``gradient``); the model itself with one process. Run one forward first for lazy modules
        (``to_hetero``, ``-1`` channels). On a HeteroData ``find_unused_parameters`` defaults to True
        (``to_hetero``'s last layer has outputs for every node type; the loss reads one)."""
        if self.world_size == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel

        kwargs.setdefault("find_unused_parameters", isinstance(self.data, HeteroData) or is_typed_stores(self.data))
        wrapped = DistributedDataParallel(model, **kwargs)
        wrapped.register_comm_hook(state=None, hook=self.comm.ddp_comm_hook())
        return wrapped

    # -- evaluation over every rank ----------------------------------------------------------------
    def all_sum(self, values: Sequence[float]) -> list[float]:
        """The sum over ranks of each value (one bounded all-reduce, ``control`` bytes)."""
        t = torch.tensor([float(v) for v in values], dtype=torch.float64)
        return self.comm.all_reduce(t).tolist() if self.world_size > 1 else t.tolist()

    @torch.no_grad()
    def accuracy(self, model: torch.nn.Module, loader: NodeLoader, node_type: str | None = None,
                 forward: Callable[[Any], torch.Tensor] | None = None) -> float:
        """Accuracy over every rank's seeds of ``loader`` (each seed counted once: the pass's padded
        repeats are left out), the model in eval mode. Logits: ``forward(batch)`` when given, else
        ``model(batch.x, batch.edge_index)`` (a HeteroData: ``model(batch.x_dict,
        batch.edge_index_dict)[node_type]``); their first ``batch_size`` rows are the seeds'."""
        was = model.training
        model.eval()
        right = total = 0
        for k, batch in enumerate(loader):
            if loader.batch_sampler.is_repeat(k):  # padding: another rank counts this batch
                continue
            store = batch[node_type] if node_type else batch
            if forward is not None:
                out = forward(batch)
            elif node_type:
                out = model(batch.x_dict, batch.edge_index_dict)[node_type]
            else:
                out = model(batch.x, batch.edge_index)
            b, y = store.batch_size, store.y
            right += int((out[:b].argmax(-1) == y[:b]).sum())
            total += b
        model.train(was)
        right, total = self.all_sum([right, total])
        return right / max(total, 1)

    @torch.no_grad()
    def link_metrics(self, model: torch.nn.Module, loader: LinkLoader, score: Callable[[Any], Any],
                     metric: str = "mrr") -> dict[str, float | None]:
        """A link metric over every rank's pairs of ``loader`` (padded repeats left out), the model in
        eval mode, with the engine's bounded-memory accumulator (:class:`gnnscale.tasks.scores.LinkMetrics`:
        OGB's and scikit-learn's figures, the same bits on 1 or N processes).

        Args:
            loader: a link loader of this run (:meth:`link_loader`).
            score: ``score(batch)``. For ``metric="mrr"`` (a ``neg_sampling="triplet"`` loader):
                ``(pos, neg)``, float [B] scores of the batch's positives and float [B, K] of each
                one's negatives (PyG's ``src_index``, ``dst_pos_index``, ``dst_neg_index``). For
                ``"auc"`` and ``"hits@K"`` (a binary loader): float [B'] scores of
                ``batch.edge_label_index``, split by ``batch.edge_label`` (negatives shared, as OGB).
            metric: ``"mrr"``, ``"hits@K"`` (e.g. ``"hits@50"``) or ``"auc"`` (also gives ``"ap"``).

        Memory: mrr keeps int64 [2 K + 1] counts, hits@K the positives' scores and the top K
        negatives, auc every score of the split (all gathered on every rank).

        Returns:
            ``{"mrr": ...}``, ``{"hits@K": ...}`` or ``{"auc": ..., "ap": ...}`` on every rank.
        """
        acc = LinkMetrics(metric)
        was = model.training
        model.eval()
        for k, batch in enumerate(loader):
            if loader.batch_sampler.is_repeat(k):  # padding: another rank scores this batch
                continue
            out = score(batch)
            if acc.kind == "mrr":
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise SamplerError(f"metric='mrr' needs score(batch) to return (pos float [B], neg float [B, K]) "
                                       f"from a neg_sampling='triplet' loader; found {type(out).__name__}.")
                acc.add_ranked(*out)
                continue
            if not isinstance(out, torch.Tensor) or "edge_label" not in batch:
                raise SamplerError(f"metric={metric!r} needs score(batch) to return float [B] scores of "
                                   "batch.edge_label_index from a binary loader (neg_sampling_ratio=...); found "
                                   f"{type(out).__name__}{'' if 'edge_label' in batch else ' and no edge_label'}.")
            out = out.detach().flatten()
            label = batch.edge_label.flatten()
            acc.add_pos(out[label == 1])
            acc.add_neg(out[label == 0])
        model.train(was)
        return acc.result(self.comm if self.world_size > 1 else None)

    def link_auc(self, model: torch.nn.Module, loader: LinkLoader, score: Callable[[Any], torch.Tensor]) -> float:
        """ROC AUC over every rank's pairs of ``loader``: :meth:`link_metrics` with ``metric="auc"``."""
        return self.link_metrics(model, loader, score, "auc")["auc"]

    def close(self) -> None:
        """Stop the heartbeat and leave the group (every rank, at the end)."""
        if self.health is not None:
            self.health.stop()
        if self.world_size > 1:
            try:
                self.comm.barrier()
            finally:
                # bounded: once seen, a rank whose peer had left waited in torch's teardown past the timeout
                shutdown_distributed(timeout=self.timeout)


def _wait_for(path: Path, timeout: float) -> None:
    """Wait (bounded) until ``path`` exists: rank 0 writes the partition folder."""
    end = time.monotonic() + timeout
    while not path.is_file():
        if time.monotonic() > end:
            raise RuntimeSetupError(f"{path} did not appear within {timeout:.0f} s: rank 0 partitions the graph "
                                    "there first; check rank 0's error, or raise timeout.")
        time.sleep(0.1)


def start_run(source: str | Path | Data | HeteroData, parts_dir: str | Path | None = None,
                     timeout: float = 300.0, host_reads: bool | None = None, cache_rows: int = 0,
                     method: str = "metis", graph_store: str = "auto") -> DistRun:
    """Join the run (torchrun's environment; one process without it) and open this rank's data.

    Args:
        source: a partition folder (format 1, exactly ``WORLD_SIZE`` parts: every part, or this
            host's ranks' parts and meta.json), a ``Data`` (with
            ``parts_dir``: rank 0 partitions it there into ``WORLD_SIZE`` parts unless a folder of
            that many parts is there already; without: every rank holds it in memory) or a
            ``HeteroData`` (with ``parts_dir``: rank 0 partitions it there, typed, unless the folder
            holds this graph's content in ``WORLD_SIZE`` parts; without: held in memory by every
            rank). A typed folder (format 2) too may hold only this host's parts and meta.json.
        timeout: seconds every collective and wait may take (the engine's ``--timeout``).
        host_reads, cache_rows: of :class:`gnnscale.pyg.stores.PartitionFeatureStore` (a typed folder:
            :class:`gnnscale.pyg.typed_stores.TypedPartitionFeatureStore`).
        method: the partitioner when ``source`` is a Data or HeteroData to partition.
        graph_store: ``"own"`` (each rank holds its part's topology only, the other parts' nodes
            sampled by their owners: :mod:`gnnscale.pyg.own_part`), ``"whole"`` (every rank the whole
            topology) or ``"auto"`` (whole while it takes at most 1 GiB, said in one line; typed
            folders: whole). The batches are the same.
    """
    if graph_store not in GRAPH_STORES:
        choose_graph_store({}, 1, graph_store)  # the one line, before the group is joined
    if graph_store != "auto" and isinstance(source, (Data, HeteroData)) and parts_dir is None:
        raise SamplerError(f"graph_store={graph_store!r} chooses how a partition folder's topology is held; a graph "
                           "in memory without parts_dir has none (every process holds it). Pass parts_dir=..., or "
                           "leave graph_store out.")
    info = join_group(timeout=float(timeout))
    rank, world = info.rank, info.world_size
    mark_joined(world)  # this process's loaders, samplers and stores are the run's from here on
    health = Health(rank, world, float(timeout)).start() if world > 1 else None
    comm = Communicator(rank, world, timeout=float(timeout), health=health)
    if isinstance(source, (Data, HeteroData)) and parts_dir is None:
        return DistRun(rank, world, comm, health, source, timeout)
    if isinstance(source, (Data, HeteroData)):
        folder = Path(parts_dir)
        meta = folder / "meta.json"
        if rank == 0:
            old = load_meta(folder) if meta.is_file() else {}
            typed = {"content_digest": hetero_digest(source)} if isinstance(source, HeteroData) else None
            if typed is not None:  # a typed folder of this graph's content
                fresh = is_partition_of(old, typed["content_digest"], world)
            else:
                fresh = int(old.get("num_parts", 0)) == world and int(old.get("num_nodes", -1)) == source.num_nodes \
                    and int(old.get("feature_dim", -1)) == int(source.x.size(1) if source.x is not None else 0)
            if not fresh:
                from gnnscale.partitioning.api import partition_graph

                if meta.is_file():
                    meta.unlink()
                partition_graph(source, world, folder, method=method, extra_meta=typed)
        comm.barrier()
        _wait_for(meta, timeout)
    else:
        folder = Path(source)
        if not (folder / "meta.json").is_file():
            raise PartitionError(f"{folder} is not a partition folder (no meta.json); partition the graph first "
                                 "(gnnscale partition ... or gnnscale.partitioning.partition_graph).")
    return open_folder(folder, comm, health, timeout, source=source, host_reads=host_reads, cache_rows=cache_rows,
                       graph_store=graph_store)


def open_folder(folder: Path, comm: Communicator, health: Health | None, timeout: float, source: Any = None,
                host_reads: bool | None = None, cache_rows: int = 0, graph_store: str = "auto") -> DistRun:
    """This rank's run over a partition folder (``comm``'s rank opens its part): PyG stores over
    it, typed ones for a typed folder (``source``: the ``HeteroData`` it was cut from, naming its
    relations' edge ids); ``graph_store`` as :func:`start_run`'s. :func:`start_run` and
    :mod:`gnnscale.pyg.distributed` open folders so."""
    rank, world = comm.rank, comm.world_size
    if is_typed_folder(folder):  # a HeteroData's: per node type and relation
        typed_graph = open_typed_graph_store(folder, comm, graph_store)  # own part or whole, by size
        if isinstance(source, HeteroData) and not typed_graph.meta.get("temporal"):
            typed_graph.name_edges(source)  # e_id: the columns of its relations' edge_index
        # (a temporal folder's loaders in time read e_id from edge_ids.npy: every event kept, repeats too)
        typed_features = TypedPartitionFeatureStore(typed_graph, comm, host_reads=host_reads, cache_rows=cache_rows)
        return DistRun(rank, world, comm, health, (typed_features, typed_graph), timeout,
                       masks=typed_features.mask_ids)
    graph = open_graph_store(folder, comm, graph_store)  # whole: the parts this host lacks from their owners
    features = PartitionFeatureStore(graph, comm, host_reads=host_reads, cache_rows=cache_rows)
    return DistRun(rank, world, comm, health, (features, graph), timeout, masks=features.mask_ids)
