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
from torch_geometric.data import Data, GraphStore, HeteroData
from torch_geometric.loader import LinkLoader, NodeLoader
from torch_geometric.sampler import NegativeSampling
from torch_geometric.sampler.base import NumNeighbors, SubgraphType

from gnnscale.errors import DatasetError, SamplerError, SamplerValueError
from gnnscale.pyg.hetero import HeteroGnnscaleSampler
from gnnscale.pyg.layout import SUBGRAPH_TYPES, shown
from gnnscale.pyg.memory_stores import graph_of_stores
from gnnscale.pyg.sampler import GnnscaleSampler
from gnnscale.pyg.temporal import temporal_kwargs, temporal_sampler
from gnnscale.pyg.typed_inputs import check_hetero_data, fanout_hops, hetero_fanouts, relation_of
from gnnscale.pyg.typed_temporal import typed_temporal_sampler
from gnnscale.pyg.world import refuse_unjoined_world

_NODE_FIX = "Pass a torch_geometric.data.Data with edge_index int64 [2, E] and node attributes of num_nodes rows."


def check_data(data: Any) -> tuple[torch.Tensor, int]:
    """(edge_index int64 [2, E], num_nodes) of an in-memory homogeneous ``Data``, or a one-line error."""
    if not isinstance(data, Data):
        raise DatasetError(f"gnnscale.pyg loaders take a torch_geometric Data, a HeteroData or (FeatureStore, "
                           f"GraphStore); found {type(data).__name__}. {_NODE_FIX}")
    ei = getattr(data, "edge_index", None)
    if ei is None:  # a graph without edges: its seeds come back alone
        ei = torch.empty(2, 0, dtype=torch.int64)
    if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2 or ei.dtype.is_floating_point \
            or ei.dtype == torch.bool:
        shape = tuple(ei.shape) if isinstance(ei, torch.Tensor) else type(ei).__name__
        raise DatasetError(f"data.edge_index must be an integer tensor of shape [2, E]; found "
                           f"{getattr(ei, 'dtype', None)}, shape {shape}. Use edge_index.long() of shape [2, E].")
    n = data.num_nodes
    if n is None:
        raise DatasetError(f"data has no num_nodes and no x to count nodes by. Set data.num_nodes. {_NODE_FIX}")
    x = getattr(data, "x", None)
    if isinstance(x, torch.Tensor) and x.size(0) != n:
        raise DatasetError(f"data.x has {x.size(0)} rows but the graph has num_nodes = {n}; x needs one row per "
                           "node: fix data.num_nodes or data.x.")
    ei = ei.to(torch.int64)
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
        raise DatasetError(f"data.edge_index ids must lie in [0, {n}) (num_nodes = {n}); found range "
                           f"[{int(ei.min())}, {int(ei.max())}]. Fix edge_index or set data.num_nodes.")
    return ei, int(n)


def check_num_neighbors(num_neighbors: Any) -> list[int]:
    """Fan-outs per hop: a list or tuple of ints (or PyG's ``NumNeighbors`` of one), each >= 0 (0:
    no neighbours at that hop) or -1 (all); empty: no hops (the seeds alone)."""
    fix = "Pass num_neighbors as a list of ints, one per hop from the seeds, e.g. num_neighbors=[10, 5] (-1: all)."
    if isinstance(num_neighbors, NumNeighbors):
        num_neighbors = num_neighbors.values
    if isinstance(num_neighbors, dict):
        raise SamplerValueError(f"num_neighbors as a dict (per edge type) needs a HeteroData; found a dict with a "
                                f"homogeneous graph. {fix}")
    if not isinstance(num_neighbors, (list, tuple)):
        raise SamplerValueError(f"num_neighbors must be a list of ints; found {shown(num_neighbors)}. {fix}")
    bad = [f for f in num_neighbors if isinstance(f, bool) or not isinstance(f, int) or f < -1]
    if bad:
        raise SamplerValueError(f"num_neighbors must hold ints >= 0 or -1; found {shown(list(num_neighbors))}. {fix}")
    return [int(f) for f in num_neighbors]


def check_subgraph_type(subgraph_type: Any, directed: bool = True) -> str:
    """PyG's ``subgraph_type`` (its ``SubgraphType`` or the name) as a name; ``directed=False``
    (PyG's deprecated spelling) is ``"induced"``."""
    if not directed:
        return "induced"
    name = subgraph_type.value if isinstance(subgraph_type, SubgraphType) else subgraph_type
    if name not in SUBGRAPH_TYPES:
        raise SamplerValueError(f"subgraph_type must be one of {list(SUBGRAPH_TYPES)} (or PyG's SubgraphType); "
                                f"found {shown(subgraph_type)}.")
    return name


def check_input_nodes(input_nodes: Any, num_nodes: int, distinct: bool = True) -> torch.Tensor | None:
    """``input_nodes`` as int64 ids in ``[0, num_nodes)`` (a bool mask of num_nodes entries, or ids: a
    tensor, a list, a range), or None (all nodes); ``distinct``: repeated ids refused (the rank
    loaders' steps; PyG's loaders take repeats)."""
    if input_nodes is None:
        return None
    if isinstance(input_nodes, tuple) or isinstance(input_nodes, str):
        raise SamplerValueError(f"input_nodes by node type ({shown(input_nodes)}) needs a HeteroData; pass a "
                                "bool mask [num_nodes] or int64 node ids.")
    t = input_nodes if isinstance(input_nodes, torch.Tensor) else \
        torch.as_tensor(list(input_nodes), dtype=torch.int64)
    if t.dtype == torch.bool:
        if t.dim() != 1 or t.numel() != num_nodes:
            raise SamplerValueError(f"input_nodes as a mask must be bool [{num_nodes}]; found shape {tuple(t.shape)}. "
                                    "Pass a mask of num_nodes entries or int64 node ids.")
        return torch.nonzero(t).flatten()
    if t.dtype.is_floating_point or t.dim() != 1:
        raise SamplerValueError(f"input_nodes must be a 1-D int64 tensor of node ids or a bool mask; found {t.dtype}, "
                                f"shape {tuple(t.shape)}. Pass ids as int64 (ids.long()) or a mask as bool "
                                "(mask.bool()).")
    t = t.to(torch.int64)
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= num_nodes):
        raise SamplerValueError(f"input_nodes ids must lie in [0, {num_nodes}); found range [{int(t.min())}, "
                                f"{int(t.max())}]. Pass ids of this graph's nodes.")
    if distinct and torch.unique(t).numel() != t.numel():
        raise SamplerValueError(f"input_nodes must be distinct (each is one seed row of a batch); found "
                                f"{t.numel() - torch.unique(t).numel()} repeated id(s). Use torch.unique(input_nodes).")
    return t


def given_as_mask(input_nodes: Any) -> bool:
    """Whether ``input_nodes`` is a bool mask (or ``(node type, bool mask)``): PyG then gives each
    batch's ``input_id`` as the seeds' node ids, not their positions among ``input_nodes``."""
    if isinstance(input_nodes, tuple) and len(input_nodes) == 2:
        input_nodes = input_nodes[1]
    return isinstance(input_nodes, torch.Tensor) and input_nodes.dtype == torch.bool


def check_seeds(input_nodes: Any, num_nodes: int | dict) -> Any:
    """``input_nodes`` as node ids: int64 ids (``num_nodes`` an int; repeats allowed, as PyG's loaders
    take them: each copy a seed row of its own) or ``(node type, ids)`` (``num_nodes`` per type), given
    as ids or a bool mask (typed: a type, or ``(type, ids or mask or None)``)."""
    if isinstance(num_nodes, dict):
        return check_typed_input_nodes(input_nodes, num_nodes, distinct=False)
    if input_nodes is None:
        return torch.arange(num_nodes)
    return check_input_nodes(input_nodes, num_nodes, distinct=False)


class MaskInputId:
    """PyG's ``input_id`` for seeds given as a bool mask: a batch's ``input_id`` holds its seeds' node
    ids (PyG's ``get_input_nodes``: ``mask.nonzero()``), not their positions among the mask's nodes.

    The sampler still gets the positions (its draws are keyed by the first one, on 1 or N
    processes alike: the id and mask forms give the same batches); ``filter_fn`` maps them to
    node ids as each batch is made. ``_mask_ids``: whether ``input_nodes`` was a mask."""

    _mask_ids: bool = False

    def filter_fn(self, out: Any) -> Any:
        if self._mask_ids:
            out.metadata = (self.input_data.node[out.metadata[0]], *out.metadata[1:])  # type: ignore[attr-defined]
        return super().filter_fn(out)  # type: ignore[misc]


def edge_weight_of(data: Data, weight_attr: str | None) -> torch.Tensor | None:
    """PyG's ``weight_attr``: ``data[weight_attr]``, float [E] (checked by the sampler), or None."""
    if weight_attr is None:
        return None
    if not isinstance(weight_attr, str) or weight_attr not in data:
        raise SamplerValueError(f"weight_attr={shown(weight_attr)} names no attribute of data (its attributes: "
                                f"{data.keys()}); store one float weight per edge, e.g. data.edge_weight, and pass "
                                "weight_attr='edge_weight'.")
    return torch.as_tensor(data[weight_attr])


def check_typed_input_nodes(input_nodes: Any, num_nodes: dict, distinct: bool = True) -> tuple:
    """``(node type, int64 ids)`` of a HeteroData's ``input_nodes`` (``type`` or ``(type, ids/mask)``)."""
    if isinstance(input_nodes, str):
        input_nodes = (input_nodes, None)
    if not isinstance(input_nodes, tuple) or len(input_nodes) != 2 or input_nodes[0] not in num_nodes:
        raise SamplerValueError(f"a HeteroData loader needs input_nodes as a node type or (node type, ids or mask), "
                                f"the type among {list(num_nodes)}; found {shown(input_nodes)}. "
                                "E.g. input_nodes=('paper', mask).")
    t, ids = input_nodes
    ids = torch.arange(num_nodes[t]) if ids is None else check_input_nodes(ids, num_nodes[t], distinct)
    return t, ids


def check_edge_label_index(edge_label_index: Any, num_nodes: int) -> torch.Tensor | None:
    """``edge_label_index`` as int64 [2, B] ids in ``[0, num_nodes)``, or None (every edge)."""
    if edge_label_index is None:
        return None
    if isinstance(edge_label_index, tuple):
        raise SamplerValueError("edge_label_index by edge type needs a HeteroData; found a tuple with a Data. "
                                "Pass an int64 tensor [2, B].")
    t = torch.as_tensor(edge_label_index)
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.dim() != 2 or t.size(0) != 2:
        raise SamplerValueError(f"edge_label_index must be an int64 tensor [2, B]; found {t.dtype}, shape "
                                f"{tuple(t.shape)}. Pass pairs as columns (row 0 sources, row 1 targets).")
    t = t.to(torch.int64)
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= num_nodes):
        raise SamplerValueError(f"edge_label_index ids must lie in [0, {num_nodes}); found range [{int(t.min())}, "
                                f"{int(t.max())}]. Pass pairs of this graph's nodes.")
    return t


def check_edge_label(edge_label: Any, pairs: torch.Tensor | None) -> None:
    """One line when ``edge_label`` has not one entry per pair of ``edge_label_index``."""
    if edge_label is not None and pairs is not None and torch.as_tensor(edge_label).size(0) != pairs.size(1):
        raise SamplerValueError(f"edge_label must have one entry per pair of edge_label_index ({pairs.size(1)}); "
                                f"found {torch.as_tensor(edge_label).size(0)}. Give one label per column.")


def check_typed_edge_label_index(edge_label_index: Any, edge_index: dict, num_nodes: dict) -> tuple:
    """``(relation, int64 [2, B] pairs)`` of a HeteroData's ``edge_label_index``: a relation, or
    ``(relation, pairs or None)`` (None: the relation's edges), the relation spelt as PyG takes it
    (``(src, rel, dst)``, ``(src, dst)``; one without edges too), ids in their types' ranges."""
    fix = "Pass edge_label_index=((src, rel, dst), pairs int64 [2, B]) or a relation of the graph."
    rel, pairs = edge_label_index, None
    if isinstance(edge_label_index, tuple) and len(edge_label_index) == 2 and \
            not all(isinstance(v, str) for v in edge_label_index):
        rel, pairs = edge_label_index
    if isinstance(rel, list):
        rel = tuple(rel)
    et = relation_of(rel, list(edge_index), list(num_nodes))
    if pairs is None:
        if et not in edge_index:
            raise SamplerValueError(f"edge_label_index names relation {et!r}, which has no edges to take as pairs; "
                                    f"{fix}")
        return et, edge_index[et]
    t = torch.as_tensor(pairs)
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.dim() != 2 or t.size(0) != 2:
        raise SamplerValueError(f"edge_label_index pairs must be an int64 tensor [2, B]; found {shown(t)}. {fix}")
    t = t.to(torch.int64)
    for row, typ in ((0, et[0]), (1, et[2])):
        if t.numel() and (int(t[row].min()) < 0 or int(t[row].max()) >= num_nodes[typ]):
            raise SamplerValueError(f"edge_label_index row {row} ids must lie in [0, {num_nodes[typ]}) (the {typ!r} "
                                    f"nodes); found range [{int(t[row].min())}, {int(t[row].max())}]. {fix}")
    return et, t


def refuse_unsupported(given: dict) -> None:
    """One line for a PyG option this sampler does not honour (set to a value other than PyG's default):
    the seeds' times without ``time_attr`` (``input_time``, ``edge_label_time``, ``temporal_strategy``)
    and a sampler of the user's own (``neighbor_sampler``)."""
    defaults = {"input_time": None, "edge_label_time": None, "temporal_strategy": "uniform", "time_attr": None,
                "neighbor_sampler": None}
    for name, value in given.items():
        if name in defaults and value is not defaults[name] and not (
                isinstance(value, str) and value == defaults[name]):
            raise SamplerError(f"gnnscale.pyg loaders do not support {name}={shown(value)} yet (PyG's default "
                               f"{defaults[name]!r} only); leave {name} out, or use PyG's loader with pyg-lib.")


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
