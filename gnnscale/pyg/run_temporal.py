"""Time-respecting rank loaders: :meth:`gnnscale.pyg.run.DistRun.node_loader` / ``link_loader`` with
PyG's time arguments (``time_attr``, ``input_time``, ``edge_label_time``, ``temporal_strategy``, plus
``time_window`` and ``time_cut``) in a user's own loop on several processes (docs/temporal.md).

Over a temporal partition folder (meta.json ``temporal``: each part's in-edges a T-CSR with
``edge_time.npy``), the draws are the engine's distributed temporal sampler's
(:class:`gnnscale.samplers.temporal.DistTemporalSampler`): at every hop each frontier node goes, with
its tree's seed time, to its owner, which draws among its in-edges before that time and answers with
the neighbours, the edges' times and their ids (``sample_request`` / ``sample_response``). The keys
are the plain temporal loader's (:class:`gnnscale.pyg.temporal.TemporalGnnscaleSampler`: seed, pass,
step, hop, the node's original id and the seed's time) and a T-CSR orders each node's in-edges by
(time, original edge column) in both, so with ``batch_size=B // N`` a step's N batches are, tree for
tree, one process's plain temporal batch of B (:mod:`gnnscale.pyg.steps`), on either graph store.
Negatives are the plain sampler's (keyed by the step), filtered against the graph's edges by the
owners of their destinations. Every batch carries ``edge_time`` (aligned with ``edge_index``).

A typed temporal folder (a ``HeteroData`` with times, partitioned) is sampled the same way relation by
relation (:mod:`gnnscale.pyg.run_typed_temporal`). A graph in memory (``start_run(data)`` without
``parts_dir``, or ``data=``; a ``Data`` or a ``HeteroData``) samples with the one-process temporal
sampler, its steps shared the same way. Refused in one line: a folder without times, ``time_attr`` naming anything but a folder's edge times
(``edge_time``, or PyG's ``time``; a folder holds no node times), a folder's node loader without
``input_time``, a link loader without ``edge_label_time``, ``subgraph_type`` other than
``'directional'`` and ``replace=True`` (``disjoint`` is True in time, PyG's rule).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data import HeteroData

from gnnscale.errors import SamplerError
from gnnscale.partitioning.manifest import part_dir_name
from gnnscale.partitioning.validate import load_array
from gnnscale.pyg.layout import shown
from gnnscale.pyg import run_typed_temporal
from gnnscale.pyg.checks import check_input_nodes, check_seeds, given_as_mask
from gnnscale.pyg.typed_stores import is_typed_stores
from gnnscale.pyg.sampler import GnnscaleSampler
from gnnscale.pyg.temporal import TemporalGnnscaleSampler
from gnnscale.samplers.link import EdgeFilter
from gnnscale.samplers.rng import stream_key
from gnnscale.samplers.temporal import DistTemporalSampler, check_temporal_options

TIMED = ("time_attr", "input_time", "edge_label_time", "temporal_strategy", "time_window", "time_cut")
FOLDER_TIME_NAMES = ("edge_time", "time")  # a folder's per-edge times: the writer's name and PyG's


def is_timed(kwargs: dict) -> bool:
    """Whether a rank loader's keyword arguments ask for time."""
    return any(kwargs.get(name) is not None for name in TIMED)


class RankTemporalSampler(TemporalGnnscaleSampler):
    """The plain temporal sampler's batches, every draw made by the node's owner (module docstring).

    Args:
        graph: the run's untyped graph store (whole or own part: ``parts_dir``, ``meta``, ``book``,
            ``new_of_old``, ``old_of_new``); comm: the run's communicator; fanouts, seed, strategy,
            window, cut: the draws'.

    A collective: every rank samples the same number of batches (the rank loaders give them that).
    """

    def __init__(self, graph: Any, comm: Any, fanouts: list[int], seed: int, strategy: str, window: int,
                 cut: str) -> None:
        meta, rank = graph.meta, comm.rank
        pdir = graph.parts_dir / part_dir_name(rank)
        n = graph.book.part_size(rank)
        indptr = torch.from_numpy(load_array(pdir / "indptr.npy", np.int64, (n + 1,), mmap=False))
        e = int(indptr[-1])
        indices = torch.from_numpy(load_array(pdir / "indices.npy", np.int64, (e,), mmap=False))
        edge_time = torch.from_numpy(load_array(pdir / "edge_time.npy", np.int64, (e,), mmap=False))
        edge_ids = torch.from_numpy(load_array(pdir / "edge_ids.npy", np.int64, (e,), mmap=False))
        orig = torch.from_numpy(load_array(pdir / "orig_ids.npy", np.int64, (n,), mmap=False))
        self.dist = DistTemporalSampler(indptr, indices, edge_time, orig, graph.book, comm, fanouts, seed=seed,
                                        strategy=strategy, window=window, cut=cut, disjoint=True, edge_ids=edge_ids)
        self.strategy, self.window, self.strict = check_temporal_options(strategy, window, cut)
        # the base's CSC: this part's in-edges, sources as original ids (the negatives' owner filter)
        GnnscaleSampler.__init__(self, None, int(meta["num_nodes"]), fanouts, seed=seed, disjoint=True,
                                 csc=(indptr, graph.old_of_new[indices], edge_ids))
        self.graph, self.comm = graph, comm
        self.edge_time = self.node_time = None
        self._times = self._seed_times = self._pos_times = self._time_order = None
        self._edge_times: list[torch.Tensor] = []

    def _hop(self, frontier: torch.Tensor, hop: int, epoch: int, step: int, levels: bool):
        n = self.num_nodes
        tree = torch.div(frontier, n, rounding_mode="floor")
        at = frontier - tree * n
        # the key travels with each node: a rank's batch may be of another step than its peers' (a pass's
        # last step of one batch, beside a padding repeat), and the owner draws with the asker's key
        key = torch.full((frontier.numel(),), stream_key(self.seed, epoch, step, 0, hop), dtype=torch.int64)
        counts, nbrs, etime, edges = self.dist.draw_hop(self.graph.new_of_old[at], self._times[tree].contiguous(),
                                                        self.fanouts[hop], key)
        c = counts.numpy()
        nbrs = self.graph.old_of_new[nbrs] + torch.from_numpy(np.repeat((tree * n).numpy(), c))  # into its tree
        self._edge_times.append(etime)
        return np.repeat(np.arange(frontier.numel(), dtype=np.int64), c), nbrs, edges

    def sample(self, seeds, epoch, step, others=None, trees=None):
        self._edge_times = []
        out = super().sample(seeds, epoch, step, others, trees)
        out.edge_time = torch.cat(self._edge_times) if self._edge_times else torch.empty(0, dtype=torch.int64)
        return out

    def edge_filter(self) -> Any:
        if self._filter is None:
            self._filter = _OwnerEdges(self)
        return self._filter

    def _any(self, flag: bool) -> bool:
        if self.comm.world_size == 1:
            return flag
        return bool(self.comm.all_reduce(torch.tensor([int(flag)], dtype=torch.int64), op="max")[0])


class _OwnerEdges:
    """``has_edge(src, dst)`` over original ids, answered by the destinations' owners (collective)."""

    def __init__(self, sampler: RankTemporalSampler) -> None:
        g = sampler.graph
        self.new_of_old = g.new_of_old
        many = sampler.comm.world_size > 1  # one process: its part is the whole graph, rows its new ids
        self.filter = EdgeFilter(sampler.indptr, sampler.indices, book=g.book if many else None,
                                 comm=sampler.comm if many else None, num_nodes=sampler.num_nodes)

    def has_edge(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return self.filter.has_edge(src, self.new_of_old[dst])


_LOADERS: dict[type, type] = {}


def with_edge_times(base: type) -> type:
    """``base`` (a rank loader class of :mod:`gnnscale.pyg.run`, passed by it: this module does not
    import it back) with :class:`gnnscale.pyg.run_typed_temporal.EdgeTimes` mixed in (an untyped batch's
    ``edge_time``), made once per base."""
    if base not in _LOADERS:
        _LOADERS[base] = type(base.__name__.replace("Rank", "RankTemporal"), (run_typed_temporal.EdgeTimes, base),
                              {"__doc__": f"{base.__name__} sampling in time (batches carry ``edge_time``).",
                               "__module__": __name__})
    return _LOADERS[base]


def _options(run: Any, data: Any, kwargs: dict, link: bool) -> tuple[str, str, int, str]:
    """(time_attr, strategy, window, cut) popped from ``kwargs`` (the seeds' times stay, for PyG's
    loader), each checked in one line."""
    time_attr = kwargs.pop("time_attr", None)
    if time_attr is None:
        given = next(name for name in TIMED if kwargs.get(name) is not None)
        raise SamplerError(f"{given}={shown(kwargs[given])} needs time_attr (the times it applies to); pass "
                           f"time_attr='edge_time' (a temporal folder's edge times) or leave {given} out.")
    strategy = kwargs.pop("temporal_strategy", None) or "uniform"
    window = kwargs.pop("time_window", None) or 0
    cut = kwargs.pop("time_cut", None) or "<="
    folder = isinstance(data, tuple)
    if folder and not data[1].meta.get("temporal"):
        raise SamplerError(f"time_attr={time_attr!r} needs a temporal partition folder (meta.json 'temporal': "
                           "edge_time.npy per part); this folder has no times: partition a graph with data.edge_time.")
    if folder and time_attr not in FOLDER_TIME_NAMES:
        raise SamplerError(f"time_attr={time_attr!r}: a temporal folder holds edge times only, named "
                           f"{' or '.join(map(repr, FOLDER_TIME_NAMES))}; pass time_attr='edge_time'.")
    seed_time, other = ("edge_label_time", "input_time") if link else ("input_time", "edge_label_time")
    if kwargs.get(other) is not None:
        raise SamplerError(f"a {'link' if link else 'node'} loader takes {seed_time}, not {other}; pass the seeds' "
                           f"times as {seed_time}=...")
    kwargs.pop(other, None)
    if kwargs.get(seed_time) is None and (folder or link):  # in memory, node times may time the seeds
        raise SamplerError(f"a temporal rank {'link' if link else 'node'} loader needs {seed_time} (one time per "
                           f"{'pair' if link else 'seed'}{': a folder holds edge times, no node times' * folder}); "
                           f"pass {seed_time}=...")
    sub = kwargs.pop("subgraph_type", None)
    if sub is not None and str(getattr(sub, "value", sub)) != "directional":
        raise SamplerError(f"subgraph_type={shown(sub)} with time_attr is not supported: the time-respecting draws "
                           "keep each seed's own earlier edges; leave subgraph_type out.")
    kwargs.pop("disjoint", None)  # PyG's rule: disjoint is set to True for temporal sampling (as the plain loaders)
    check_temporal_options(strategy, window, cut)
    return time_attr, strategy, int(window), cut


def sampler(run: Any, data: Any, num_neighbors: Any, seed: int, replace: bool, opts: tuple) -> Any:
    """The temporal sampler of a rank loader: the owners' over a folder, the plain one in memory."""
    from gnnscale.pyg.checks import check_num_neighbors
    from gnnscale.pyg.loaders import _graph

    time_attr, strategy, window, cut = opts
    if replace:
        raise SamplerError("gnnscale.pyg's temporal sampling draws without replacement; leave replace out with "
                           "time_attr")
    if is_typed_stores(data):  # a typed temporal folder: the owners draw each relation
        return run_typed_temporal.sampler(run, data, num_neighbors, seed, opts)
    if isinstance(data, tuple):
        return RankTemporalSampler(data[1], run.comm, check_num_neighbors(num_neighbors), int(seed), strategy,
                                   window, cut)
    from gnnscale.pyg.loaders import _sampler

    edge_index, num_nodes = _graph(data)
    return _sampler(data, edge_index, num_nodes, num_neighbors, int(seed), False, "auto", True, None,
                    "directional", False, (time_attr, strategy, window, cut))


def node_loader(run: Any, kit: tuple, num_neighbors: Any, input_nodes: Any, batch_size: int, shuffle: bool,
                drop_last: bool, seed: int, replace: bool, kwargs: dict, data: Any = None, into: Any = None) -> Any:
    """:meth:`~gnnscale.pyg.run.DistRun.node_loader` with time (module docstring); ``kit``: run.py's
    ``(RankBatches, RankNodeLoader)``; ``into``: a loader instance to make it (the drop-in's: its class
    mixes in :class:`gnnscale.pyg.run_typed_temporal.EdgeTimes`)."""
    RankBatches, base = kit
    data = run.data if data is None else data
    opts = _options(run, data, kwargs, link=False)
    smp = sampler(run, data, num_neighbors, seed, replace, opts)
    typed = is_typed_stores(data) or isinstance(data, HeteroData)
    if isinstance(input_nodes, str):
        nodes = run.split(input_nodes)
    elif typed:  # (type, ids or mask); a seed may repeat (at another time: its own tree)
        nodes = check_seeds(input_nodes, smp.num_nodes)
    else:  # a seed may repeat (at another time: its own tree)
        nodes = torch.arange(smp.num_nodes) if input_nodes is None else check_input_nodes(input_nodes, smp.num_nodes,
                                                                                           distinct=False)
    count = (nodes[1] if isinstance(nodes, tuple) else nodes).numel()
    wrap = run_typed_temporal.with_typed_edge_times if typed else with_edge_times
    args = dict(input_nodes=nodes, batch_sampler=RankBatches(count, batch_size, shuffle, drop_last, seed, run.rank,
                                                             run.world_size), **kwargs)
    loader = wrap(base)(data, smp, **args) if into is None else into
    if into is not None:
        base.__init__(into, data, smp, **args)
    loader._sampler, loader._epoch, loader._health, loader._seed = smp, 0, run.health, int(seed)
    loader._mask_ids = given_as_mask(input_nodes)
    loader._watch = 2 * run.timeout if run.world_size > 1 else 0.0
    run._share_steps(loader, smp, loader.input_data.node, loader.input_data.input_id)
    return loader


def link_loader(run: Any, kit: tuple, num_neighbors: Any, edge_label_index: Any, edge_label: Any, neg_sampling: Any,
                neg_sampling_ratio: Any, batch_size: int, shuffle: bool, drop_last: bool, seed: int, replace: bool,
                kwargs: dict, data: Any = None, into: Any = None) -> Any:
    """:meth:`~gnnscale.pyg.run.DistRun.link_loader` with time (module docstring); ``kit``: run.py's
    ``(RankBatches, RankLinkLoader)``; ``into`` as :func:`node_loader`'s."""
    RankBatches, base = kit
    data = run.data if data is None else data
    opts = _options(run, data, kwargs, link=True)
    smp = sampler(run, data, num_neighbors, seed, replace, opts)
    typed = is_typed_stores(data) or isinstance(data, HeteroData)
    if typed:  # (relation, pairs)
        if not (isinstance(edge_label_index, tuple) and len(edge_label_index) == 2):
            raise SamplerError(f"on a typed folder edge_label_index is (relation, pairs int64 [2, B]); found "
                               f"{type(edge_label_index).__name__}. Pass e.g. (('user', 'rates', 'movie'), pairs).")
        pairs, count = edge_label_index, int(edge_label_index[1].size(1))
    else:
        pairs = (None, edge_label_index) if isinstance(data, tuple) else edge_label_index
        count = int(edge_label_index.size(1))
    wrap = run_typed_temporal.with_typed_edge_times if typed else with_edge_times
    args = dict(edge_label_index=pairs, edge_label=edge_label, neg_sampling=neg_sampling,
                neg_sampling_ratio=neg_sampling_ratio, batch_sampler=RankBatches(
                    count, batch_size, shuffle, drop_last, seed, run.rank, run.world_size), **kwargs)
    loader = wrap(base)(data, smp, **args) if into is None else into
    if into is not None:
        base.__init__(into, data, smp, **args)
    loader._sampler, loader._epoch, loader._health, loader._seed = smp, 0, run.health, int(seed)
    loader._watch = 2 * run.timeout if run.world_size > 1 else 0.0
    run._share_steps(loader, smp, torch.stack([loader.input_data.row, loader.input_data.col]),
                     loader.input_data.input_id)
    if getattr(smp, "steps", None) is not None:  # the positives' times by position (a step's negatives' redraws)
        smp.steps.times = loader.input_data.time
    return loader
