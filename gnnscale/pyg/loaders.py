"""``NeighborLoader`` / ``LinkNeighborLoader`` with PyG's argument names on gnnscale's sampler.

They are PyG's own ``NodeLoader`` / ``LinkLoader`` (batches, ``filter_data``, workers, transforms:
all PyG's) built with :class:`~gnnscale.pyg.sampler.GnnscaleSampler`, so they work where PyG's
``NeighborSampler`` needs pyg-lib or torch-sparse. Their data: a ``Data``, a ``HeteroData`` or a
user's own ``(FeatureStore, GraphStore)`` (edges in COO, CSR or CSC layout). Inputs are checked
before anything is built, each bad one a one-line :class:`~gnnscale.errors.GnnscaleError` (what
was expected, what was found, how to fix it; where PyG raises ``ValueError``, a
:class:`~gnnscale.errors.SamplerValueError`, which is one too). Every ``iter`` is a new epoch of the
draws, in worker processes too (``persistent_workers=True`` included: each batch's indices carry
their epoch); ``seed`` fixes the shuffle and the draws (without it, both follow ``torch.manual_seed``).
PyG's own loader tests run on these loaders: tests/pyg_upstream/run.py (docs/pyg.md lists what
they still refuse).
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler
from torch_geometric.data import GraphStore, HeteroData
from torch_geometric.loader import LinkLoader, NodeLoader
from torch_geometric.sampler import NegativeSampling

from gnnscale.errors import SamplerValueError
from gnnscale.pyg.hetero import HeteroGnnscaleSampler
from gnnscale.pyg.layout import shown
from gnnscale.pyg.memory_stores import graph_of_stores
from gnnscale.pyg.sampler import GnnscaleSampler
from gnnscale.pyg.temporal import temporal_kwargs, temporal_sampler
from gnnscale.pyg.typed_inputs import check_hetero_data, fanout_hops, hetero_fanouts
from gnnscale.pyg.typed_temporal import typed_temporal_sampler
from gnnscale.pyg.world import refuse_unjoined_world
from gnnscale.pyg.checks import (check_data, check_num_neighbors, check_subgraph_type, check_input_nodes, given_as_mask, MaskInputId, edge_weight_of, check_typed_input_nodes, check_edge_label_index, check_edge_label, check_typed_edge_label_index, refuse_unsupported)


def _options(kwargs: dict, time_attr: str | None, neighbor_sampler: Any, seed_time: dict, temporal_strategy: str,
             subgraph_type: Any, directed: bool, labor: bool) -> tuple[str, tuple[int, str]]:
    """Both loaders' checks of the sampling options, in one place: (the subgraph type's name, the time
    window and cut taken out of ``kwargs`` for :mod:`gnnscale.pyg.temporal`'s sampler). Without
    ``time_attr`` the seeds' times (``seed_time``, ``{name: value}``) and ``temporal_strategy`` are refused
    in one line; with it, ``labor`` and a subgraph type other than directional; ``neighbor_sampler`` always."""
    window_cut = temporal_kwargs(kwargs, time_attr)
    refuse_unsupported(dict(neighbor_sampler=neighbor_sampler,
                            **({} if time_attr is not None else dict(seed_time, temporal_strategy=temporal_strategy))))
    subgraph_type = check_subgraph_type(subgraph_type, directed)
    if time_attr is not None and seed_time.get("edge_label_time", 0) is None:
        raise SamplerValueError("a temporal link loader needs edge_label_time with time_attr (the time of each seed "
                                "edge): 'edge_label_time' is not set; pass edge_label_time=... (one per pair)")
    if time_attr is not None:
        name = "labor=True" if labor else None if subgraph_type == "directional" else f"subgraph_type={subgraph_type!r}"
        if name is not None:
            raise SamplerValueError(f"{name} with time_attr is not supported: the time-respecting draws keep each "
                                    f"seed's own earlier edges (gnnscale.pyg.temporal); leave {name} out.")
    return subgraph_type, window_cut


def _seed_and_generator(seed: int | None, kwargs: dict) -> int:
    """The draws' base seed; with ``seed`` the shuffle gets its own generator too."""
    if seed is None:
        return int(torch.randint(0, 2**62, (1,)))
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SamplerValueError(f"seed must be an int or None; found {shown(seed)}. Pass e.g. seed=0.")
    kwargs.setdefault("generator", torch.Generator().manual_seed(seed))
    return seed


class _Same:
    """The loaders' DataLoader dataset: an index is itself (a batch of seed positions, with its epoch)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        return index


class _EpochBatches:
    """PyG's batches of seed positions, each handed out as one item ``(epoch, positions)``: the epoch
    is read in this process when the pass starts, so a worker process (a persistent one too, which
    keeps the sampler it was started with) draws the batch with the pass's keys."""

    def __init__(self, batches: Any, sampler: Any) -> None:
        self.batches, self.sampler = batches, sampler

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        epoch = self.sampler.epoch
        for batch in self.batches:
            yield [(epoch, batch)]


class _EpochIndex(DataLoader):
    """Between PyG's ``NodeLoader``/``LinkLoader`` and torch's ``DataLoader``: the batches (PyG's:
    ``batch_size``, ``shuffle``, ``drop_last``, ``sampler``, ``generator`` or a ``batch_sampler``)
    carry the pass's epoch (:class:`_EpochBatches`)."""

    def __init__(self, dataset: Any, **kwargs: Any) -> None:
        batches = kwargs.pop("batch_sampler", None)
        if batches is None:
            batch_size = kwargs.pop("batch_size", 1)
            shuffle, drop_last = kwargs.pop("shuffle", None), kwargs.pop("drop_last", False)
            order = kwargs.pop("sampler", None)
            if batch_size is None:
                raise SamplerValueError("gnnscale.pyg loaders need batch_size (an int); found None. Pass e.g. "
                                        "batch_size=1024.")
            if order is not None and shuffle:
                raise SamplerValueError("sampler option is mutually exclusive with shuffle (torch's DataLoader "
                                        "rule); pass one of them.")
            if order is None:
                order = RandomSampler(dataset, generator=kwargs.get("generator")) if shuffle else \
                    SequentialSampler(dataset)
            batches = BatchSampler(order, batch_size, drop_last)
        super().__init__(_Same(len(dataset)), batch_sampler=_EpochBatches(batches, self._sampler), **kwargs)
        # what DataLoader leaves None with a batch_sampler: PyG's and users' code read them
        object.__setattr__(self, "batch_size", getattr(batches, "batch_size", None))
        object.__setattr__(self, "drop_last", getattr(batches, "drop_last", False))


class _EpochMixin:
    """Every ``iter`` keys the draws by the next epoch (0, 1, ...); a batch drawn in a worker process
    is keyed by the epoch it carries (:class:`_EpochBatches`)."""

    _sampler: GnnscaleSampler
    _epoch: int = 0

    def __iter__(self):
        self._sampler.set_epoch(self._epoch)
        self._epoch += 1
        return super().__iter__()  # type: ignore[misc]

    def collate_fn(self, index: Any) -> Any:
        if isinstance(index, list) and len(index) == 1 and isinstance(index[0], tuple):
            epoch, index = index[0]
            self._sampler.set_epoch(epoch)
        return super().collate_fn(index)  # type: ignore[misc]


def _graph(data: Any) -> tuple[Any, Any]:
    """(edge_index, num_nodes) of the loaders' data: a Data (a tensor, an int), a HeteroData or a
    ``(FeatureStore, GraphStore)`` (per type and relation when typed)."""
    if isinstance(data, HeteroData):
        return check_hetero_data(data)
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[1], GraphStore):
        return graph_of_stores(*data)
    return check_data(data)


def _weights(data: Any, weight_attr: str | None, edge_index: Any) -> Any:
    """PyG's ``weight_attr`` of a Data (float [E]) or a HeteroData (``{relation: float [E]}``, the
    relations holding it), or None."""
    if weight_attr is None:
        return None
    if isinstance(data, HeteroData):
        if not isinstance(weight_attr, str) or not any(weight_attr in data[et] for et in edge_index):
            raise SamplerValueError(f"weight_attr={shown(weight_attr)} names no attribute of data's relations; store "
                                    "one float weight per edge, e.g. data[rel].edge_weight, and pass "
                                    "weight_attr='edge_weight'.")
        return {et: torch.as_tensor(data[et][weight_attr]) for et in edge_index if weight_attr in data[et]}
    if isinstance(data, tuple):
        raise SamplerValueError("weight_attr with a (FeatureStore, GraphStore) is not supported yet (the weights are "
                                "an edge attribute the GraphStore does not hold); pass a Data or HeteroData.")
    return edge_weight_of(data, weight_attr)


def check_layout(subgraph_type: Any, disjoint: Any, directed: bool = True) -> str:
    """The subgraph type's name (:func:`check_subgraph_type`), refusing ``induced`` with ``disjoint``
    (as PyG does): the plain loaders' and :func:`gnnscale.pyg.sampler_for`'s one check."""
    subgraph_type = check_subgraph_type(subgraph_type, directed)
    if subgraph_type == "induced" and disjoint:
        raise SamplerValueError("subgraph_type='induced' with disjoint=True is not supported (as in PyG); pass one "
                                "of them.")
    return subgraph_type


def _sampler(data: Any, edge_index: Any, num_nodes: Any, num_neighbors: Any, seed: int, replace: bool,
             backend: str, disjoint: bool, weight_attr: str | None, subgraph_type: str, labor: bool = False,
             time: tuple = (None,)) -> Any:
    """The loader's sampler: homogeneous or typed, as the data is (``labor``: layer-neighbour draws,
    homogeneous only); ``time`` (time_attr, strategy, window, cut): the time-respecting ones.
    :func:`gnnscale.pyg.sampler_for` builds an in-memory graph's so too."""
    subgraph_type = check_layout(subgraph_type, disjoint)
    weight = _weights(data, weight_attr, edge_index)
    if time[0] is not None and isinstance(edge_index, dict):
        return typed_temporal_sampler(data, edge_index, num_nodes, hetero_fanouts(num_neighbors, list(edge_index)),
                                      *time, seed, backend, replace, weight, fanout_hops(num_neighbors))
    if time[0] is not None:
        return temporal_sampler(data, edge_index, num_nodes, check_num_neighbors(num_neighbors), *time, seed, backend,
                                replace, weight)
    if isinstance(edge_index, dict):
        if labor:
            raise SamplerValueError("labor=True applies to a Data (one node and edge type); this data is typed: "
                                    "leave labor out, or use gnnscale train --sampler labor, which draws per relation.")
        return HeteroGnnscaleSampler(edge_index, num_nodes, hetero_fanouts(num_neighbors, list(edge_index)),
                                     seed=seed, replace=replace, backend=backend, disjoint=disjoint, edge_weight=weight,
                                     subgraph_type=subgraph_type, num_hops=fanout_hops(num_neighbors))
    return GnnscaleSampler(edge_index, num_nodes, check_num_neighbors(num_neighbors), seed=seed, replace=replace,
                           backend=backend, disjoint=disjoint, edge_weight=weight, subgraph_type=subgraph_type,
                           labor=labor)


class NeighborLoader(_EpochMixin, MaskInputId, NodeLoader, _EpochIndex):
    """PyG's ``NeighborLoader`` on gnnscale's sampler: a ``Data``, a ``HeteroData`` or a user's own
    ``(FeatureStore, GraphStore)`` (edges in COO, CSR or CSC layout).

    A ``HeteroData`` is sampled by :class:`~gnnscale.pyg.hetero.HeteroGnnscaleSampler`:
    ``num_neighbors`` a list (every relation), a dict per relation (``(src, rel, dst)`` or
    ``(src, dst)`` keys; 0 skips a relation at a hop) or PyG's ``NumNeighbors``, every relation the
    same number of hops (PyG's rule); ``input_nodes`` a node type or ``(type, ids or mask)``.

    Args (PyG's names): ``data``, ``num_neighbors`` (fan-outs per hop from the seeds; 0: none at
    that hop; empty: the seeds alone), ``input_nodes`` (bool mask or int64 ids, repeats allowed;
    default all nodes; for a mask each batch's ``input_id`` holds its seeds' node ids, as PyG's,
    else their positions), ``replace``, ``subgraph_type`` (``"directional"``, ``"bidirectional"``,
    ``"induced"`` or PyG's ``SubgraphType``; ``directed=False``: induced), ``disjoint``,
    ``weight_attr`` (an edge attribute of float weights: weighted draws), ``filter_per_worker``,
    ``transform``, ``transform_sampler_output``, and DataLoader's ``batch_size``, ``shuffle``,
    ``drop_last``, ``num_workers``, ``persistent_workers``, ...; plus ``seed`` and ``labor``
    (gnnscale's, PyG has none: layer-neighbour sampling, LABOR-0 as GraphBolt's
    ``LayerNeighborSampler``; ``num_neighbors`` are then the fan-outs in expectation; a ``Data``,
    not disjoint, unweighted, without replacement).

    Batches are PyG's: ``x``/``y``/... rows of ``n_id`` (seeds first, ``batch_size`` of them),
    ``edge_index`` local (source, target), ``e_id``, ``num_sampled_nodes``/``num_sampled_edges``.
    A seed given twice is two rows, each with the seed's first-hop in-edges.
    """

    def __init__(self, data: Any, num_neighbors: Any, input_nodes: Any = None, replace: bool = False,
                 filter_per_worker: bool | None = None, transform: Callable | None = None,
                 transform_sampler_output: Callable | None = None, seed: int | None = None,
                 backend: str = "auto", input_time: Any = None, subgraph_type: Any = "directional",
                 disjoint: bool = False, temporal_strategy: str = "uniform", time_attr: str | None = None,
                 weight_attr: str | None = None, is_sorted: bool = False, neighbor_sampler: Any = None,
                 directed: bool = True, labor: bool = False, **kwargs: Any) -> None:
        refuse_unjoined_world("NeighborLoader")
        subgraph_type, window_cut = _options(kwargs, time_attr, neighbor_sampler, dict(input_time=input_time),
                                             temporal_strategy, subgraph_type, directed, labor)
        edge_index, num_nodes = _graph(data)
        if isinstance(num_nodes, dict):
            nodes = check_typed_input_nodes(input_nodes, num_nodes, distinct=False)
        else:
            nodes = check_input_nodes(input_nodes, num_nodes, distinct=False)
        seed = _seed_and_generator(seed, kwargs)
        self._sampler = _sampler(data, edge_index, num_nodes, num_neighbors, seed, replace, backend, disjoint,
                                 weight_attr, subgraph_type, labor, (time_attr, temporal_strategy, *window_cut))
        self._mask_ids = given_as_mask(input_nodes)
        super().__init__(data, self._sampler, input_nodes=nodes, input_time=input_time, transform=transform,
                         transform_sampler_output=transform_sampler_output, filter_per_worker=filter_per_worker,
                         **kwargs)


class LinkNeighborLoader(_EpochMixin, LinkLoader, _EpochIndex):
    """PyG's ``LinkNeighborLoader`` on gnnscale's sampler: a ``Data``, a ``HeteroData`` or a user's own
    ``(FeatureStore, GraphStore)``.

    A ``HeteroData``: ``edge_label_index`` a relation or ``(relation, pairs)`` (the relation as
    ``(src, rel, dst)`` or ``(src, dst)``), ``num_neighbors`` as :class:`NeighborLoader`'s.

    Args (PyG's names): ``data``, ``num_neighbors``, ``edge_label_index`` (int64 [2, B]; default
    ``data.edge_index``), ``edge_label``, ``neg_sampling`` (``"binary"``/``"triplet"`` or a
    ``NegativeSampling``), ``neg_sampling_ratio`` (binary), ``replace``, ``subgraph_type``,
    ``disjoint``, ``weight_attr``, ``filter_per_worker``, ``transform``,
    DataLoader's ``batch_size``/``shuffle``/``drop_last``/``persistent_workers``/...; plus ``seed``.

    Batches are PyG's (``edge_label_index`` local to ``n_id``, ``edge_label`` 1 for positives and
    0 for negatives, or triplet ``src_index``/``dst_pos_index``/``dst_neg_index``); negatives are
    never edges of the graph (see :mod:`gnnscale.pyg.sampler`).
    """

    def __init__(self, data: Any, num_neighbors: Any, edge_label_index: Any = None,
                 edge_label: torch.Tensor | None = None, neg_sampling: NegativeSampling | str | None = None,
                 neg_sampling_ratio: float | None = None, replace: bool = False,
                 filter_per_worker: bool | None = None, transform: Callable | None = None,
                 transform_sampler_output: Callable | None = None, seed: int | None = None,
                 backend: str = "auto", edge_label_time: Any = None, subgraph_type: Any = "directional",
                 disjoint: bool = False, temporal_strategy: str = "uniform", time_attr: str | None = None,
                 weight_attr: str | None = None, is_sorted: bool = False, neighbor_sampler: Any = None,
                 directed: bool = True, labor: bool = False, **kwargs: Any) -> None:
        refuse_unjoined_world("LinkNeighborLoader")
        subgraph_type, window_cut = _options(kwargs, time_attr, neighbor_sampler, dict(edge_label_time=edge_label_time),
                                             temporal_strategy, subgraph_type, directed, labor)
        edge_index, num_nodes = _graph(data)
        if isinstance(num_nodes, dict):
            et, pairs = check_typed_edge_label_index(edge_label_index, edge_index, num_nodes)
            check_edge_label(edge_label, pairs)
            label_index = (et, pairs)
        else:
            pairs = check_edge_label_index(edge_label_index, num_nodes)
            check_edge_label(edge_label, pairs)
            label_index = edge_index if pairs is None else pairs
        seed = _seed_and_generator(seed, kwargs)
        self._sampler = _sampler(data, edge_index, num_nodes, num_neighbors, seed, replace, backend, disjoint,
                                 weight_attr, subgraph_type, labor, (time_attr, temporal_strategy, *window_cut))
        super().__init__(data, self._sampler, edge_label_index=label_index, edge_label=edge_label,
                         edge_label_time=edge_label_time, neg_sampling=neg_sampling, neg_sampling_ratio=neg_sampling_ratio, transform=transform,
                         transform_sampler_output=transform_sampler_output, filter_per_worker=filter_per_worker,
                         **kwargs)
