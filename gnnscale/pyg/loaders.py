"""``NeighborLoader`` / ``LinkNeighborLoader`` with PyG's argument names on gnnscale's sampler.

They are PyG's own ``NodeLoader`` / ``LinkLoader`` (batches, ``filter_data``, workers, transforms:
all PyG's) built with :class:`~gnnscale.pyg.sampler.GnnscaleSampler`, so they work where PyG's
``NeighborSampler`` needs pyg-lib or torch-sparse. Inputs are checked before anything is built,
each bad one a one-line :class:`~gnnscale.errors.GnnscaleError` (what was expected, what was
found, how to fix it). Every ``iter`` is a new epoch of the draws; ``seed`` fixes the shuffle
and the draws (without it, both follow ``torch.manual_seed``).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkLoader, NodeLoader
from torch_geometric.sampler import NegativeSampling

from gnnscale.errors import DatasetError, SamplerError
from gnnscale.pyg.hetero import HeteroGnnscaleSampler, check_hetero_data, hetero_fanouts
from gnnscale.pyg.temporal import temporal_kwargs, temporal_sampler
from gnnscale.pyg.sampler import GnnscaleSampler
from gnnscale.pyg.world import refuse_unjoined_world

_NODE_FIX = "Pass a torch_geometric.data.Data with edge_index int64 [2, E] and node attributes of num_nodes rows."


def check_data(data: Any) -> tuple[torch.Tensor, int]:
    """(edge_index int64 [2, E], num_nodes) of an in-memory homogeneous ``Data``, or a one-line error."""
    if not isinstance(data, Data):
        raise DatasetError(f"gnnscale.pyg loaders take an in-memory torch_geometric Data or HeteroData; found "
                           f"{type(data).__name__} (for (FeatureStore, GraphStore) use PyG's NodeLoader/LinkLoader "
                           f"with gnnscale.pyg.sampler_for). {_NODE_FIX}")
    ei = getattr(data, "edge_index", None)
    if ei is None:
        raise DatasetError(f"data has no edge_index: the sampler needs the graph's edges. {_NODE_FIX}")
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
    """Fan-outs per hop: a list or tuple of ints, each >= 1 or -1 (all neighbours)."""
    fix = "Pass num_neighbors as a list of ints, one per hop from the seeds, e.g. num_neighbors=[10, 5] (-1: all)."
    if isinstance(num_neighbors, dict):
        raise SamplerError(f"num_neighbors as a dict (per edge type) needs HeteroData, not supported yet; found "
                           f"{num_neighbors!r}. {fix}")
    if not isinstance(num_neighbors, (list, tuple)) or not num_neighbors:
        raise SamplerError(f"num_neighbors must be a non-empty list of ints; found {num_neighbors!r}. {fix}")
    bad = [f for f in num_neighbors if isinstance(f, bool) or not isinstance(f, int) or (f < 1 and f != -1)]
    if bad:
        raise SamplerError(f"num_neighbors must hold ints >= 1 or -1; found {list(num_neighbors)!r}. {fix}")
    return [int(f) for f in num_neighbors]


def shown(value: Any) -> str:
    """``value`` for a message: a tensor by its dtype and shape (never its entries), a tuple item by item."""
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).replace('torch.', '')} tensor of shape {tuple(value.shape)}"
    if isinstance(value, tuple):
        return "(" + ", ".join(shown(v) for v in value) + ")"
    return f"{value!r:.80}"


def check_input_nodes(input_nodes: Any, num_nodes: int) -> torch.Tensor | None:
    """``input_nodes`` as distinct int64 ids in ``[0, num_nodes)`` (a bool mask of num_nodes entries
    or ids), or None (all nodes)."""
    if input_nodes is None:
        return None
    if isinstance(input_nodes, tuple) or isinstance(input_nodes, str):
        raise SamplerError(f"input_nodes by node type ({shown(input_nodes)}) needs a HeteroData; pass a "
                           "bool mask [num_nodes] or int64 node ids.")
    t = torch.as_tensor(input_nodes)
    if t.dtype == torch.bool:
        if t.dim() != 1 or t.numel() != num_nodes:
            raise SamplerError(f"input_nodes as a mask must be bool [{num_nodes}]; found shape {tuple(t.shape)}. "
                               "Pass a mask of num_nodes entries or int64 node ids.")
        return torch.nonzero(t).flatten()
    if t.dtype.is_floating_point or t.dim() != 1:
        raise SamplerError(f"input_nodes must be a 1-D int64 tensor of node ids or a bool mask; found {t.dtype}, "
                           f"shape {tuple(t.shape)}. Pass ids as int64 (ids.long()) or a mask as bool (mask.bool()).")
    t = t.to(torch.int64)
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= num_nodes):
        raise SamplerError(f"input_nodes ids must lie in [0, {num_nodes}); found range [{int(t.min())}, "
                           f"{int(t.max())}]. Pass ids of this graph's nodes.")
    if torch.unique(t).numel() != t.numel():
        raise SamplerError(f"input_nodes must be distinct (each is one seed row of a batch); found "
                           f"{t.numel() - torch.unique(t).numel()} repeated id(s). Use torch.unique(input_nodes).")
    return t


def given_as_mask(input_nodes: Any) -> bool:
    """Whether ``input_nodes`` is a bool mask (or ``(node type, bool mask)``): PyG then gives each
    batch's ``input_id`` as the seeds' node ids, not their positions among ``input_nodes``."""
    if isinstance(input_nodes, tuple) and len(input_nodes) == 2:
        input_nodes = input_nodes[1]
    return isinstance(input_nodes, torch.Tensor) and input_nodes.dtype == torch.bool


def check_seeds(input_nodes: Any, num_nodes: int | dict) -> Any:
    """``input_nodes`` as node ids: distinct int64 ids (``num_nodes`` an int) or ``(node type, ids)``
    (``num_nodes`` per type), given as ids or a bool mask (typed: a type, or ``(type, ids or mask or None)``)."""
    if isinstance(num_nodes, dict):
        return check_typed_input_nodes(input_nodes, num_nodes)
    if input_nodes is None:
        return torch.arange(num_nodes)
    return check_input_nodes(input_nodes, num_nodes)


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
        raise SamplerError(f"weight_attr={weight_attr!r} names no attribute of data (its attributes: {data.keys()}); "
                           "store one float weight per edge, e.g. data.edge_weight, and pass weight_attr='edge_weight'.")
    return torch.as_tensor(data[weight_attr])


def check_typed_input_nodes(input_nodes: Any, num_nodes: dict) -> tuple:
    """``(node type, distinct int64 ids)`` of a HeteroData's ``input_nodes`` (``type`` or ``(type, ids/mask)``)."""
    if isinstance(input_nodes, str):
        input_nodes = (input_nodes, None)
    if not isinstance(input_nodes, tuple) or len(input_nodes) != 2 or input_nodes[0] not in num_nodes:
        raise SamplerError(f"a HeteroData loader needs input_nodes as a node type or (node type, ids or mask), the "
                           f"type among {list(num_nodes)}; found {shown(input_nodes)}. "
                           "E.g. input_nodes=('paper', mask).")
    t, ids = input_nodes
    ids = torch.arange(num_nodes[t]) if ids is None else check_input_nodes(ids, num_nodes[t])
    return t, ids


def check_edge_label_index(edge_label_index: Any, num_nodes: int) -> torch.Tensor | None:
    """``edge_label_index`` as int64 [2, B] ids in ``[0, num_nodes)``, or None (every edge)."""
    if edge_label_index is None:
        return None
    if isinstance(edge_label_index, tuple):
        raise SamplerError("edge_label_index by edge type needs a HeteroData; found a tuple with a Data. "
                           "Pass an int64 tensor [2, B].")
    t = torch.as_tensor(edge_label_index)
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.dim() != 2 or t.size(0) != 2:
        raise SamplerError(f"edge_label_index must be an int64 tensor [2, B]; found {t.dtype}, shape "
                           f"{tuple(t.shape)}. Pass pairs as columns (row 0 sources, row 1 targets).")
    t = t.to(torch.int64)
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= num_nodes):
        raise SamplerError(f"edge_label_index ids must lie in [0, {num_nodes}); found range [{int(t.min())}, "
                           f"{int(t.max())}]. Pass pairs of this graph's nodes.")
    return t


def check_edge_label(edge_label: Any, pairs: torch.Tensor | None) -> None:
    """One line when ``edge_label`` has not one entry per pair of ``edge_label_index``."""
    if edge_label is not None and pairs is not None and torch.as_tensor(edge_label).size(0) != pairs.size(1):
        raise SamplerError(f"edge_label must have one entry per pair of edge_label_index ({pairs.size(1)}); "
                           f"found {torch.as_tensor(edge_label).size(0)}. Give one label per column.")


def check_typed_edge_label_index(edge_label_index: Any, edge_index: dict, num_nodes: dict) -> tuple:
    """``(relation, int64 [2, B] pairs)`` of a HeteroData's ``edge_label_index`` (a relation, or
    ``(relation, pairs or None)``; None: the relation's edges), ids in their types' ranges."""
    fix = "Pass edge_label_index=((src, rel, dst), pairs int64 [2, B]) or a relation of the graph."
    et, pairs = (edge_label_index, None) if isinstance(edge_label_index, tuple) and len(edge_label_index) == 3 \
        else (edge_label_index if isinstance(edge_label_index, tuple) and len(edge_label_index) == 2 else (None, None))
    if et not in edge_index:
        raise SamplerError(f"a HeteroData link loader needs edge_label_index naming one of the relations "
                           f"{list(edge_index)}; found {edge_label_index!r:.80}. {fix}")
    if pairs is None:
        return et, edge_index[et]
    t = torch.as_tensor(pairs)
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.dim() != 2 or t.size(0) != 2:
        raise SamplerError(f"edge_label_index pairs must be an int64 tensor [2, B]; found {t.dtype}, shape "
                           f"{tuple(t.shape)}. {fix}")
    t = t.to(torch.int64)
    for row, typ in ((0, et[0]), (1, et[2])):
        if t.numel() and (int(t[row].min()) < 0 or int(t[row].max()) >= num_nodes[typ]):
            raise SamplerError(f"edge_label_index row {row} ids must lie in [0, {num_nodes[typ]}) (the {typ!r} "
                               f"nodes); found range [{int(t[row].min())}, {int(t[row].max())}]. {fix}")
    return et, t


def refuse_unsupported(given: dict) -> None:
    """One line for a PyG option this sampler does not honour (set to a value other than PyG's default)."""
    defaults = {"input_time": None, "edge_label_time": None, "subgraph_type": "directional",
                "temporal_strategy": "uniform", "time_attr": None, "neighbor_sampler": None,
                "directed": True}
    for name, value in given.items():
        if name in defaults and value is not defaults[name] and value != defaults[name]:
            raise SamplerError(f"gnnscale.pyg loaders do not support {name}={value!r} yet (PyG's default "
                               f"{defaults[name]!r} only); leave {name} out, or use PyG's loader with pyg-lib.")


def refuse_on_hetero(**given: Any) -> None:
    """One line for an option the loaders honour on a ``Data`` but not yet on a ``HeteroData``."""
    for name, value in given.items():
        if value:
            raise SamplerError(f"gnnscale.pyg loaders do not support {name}={value!r} on HeteroData yet; "
                               f"leave {name} out.")


def _seed_and_generator(seed: int | None, kwargs: dict) -> int:
    """The draws' base seed; with ``seed`` the shuffle gets its own generator too.

    ``persistent_workers=True`` (with workers) is refused: the workers would keep the sampler of
    the first epoch, so the draws would not follow the epoch."""
    if kwargs.get("persistent_workers") and kwargs.get("num_workers", 0) > 0:
        raise SamplerError("gnnscale.pyg loaders do not support persistent_workers=True yet: the workers would "
                           "keep epoch 0's sampler and repeat its draws every epoch; leave persistent_workers out.")
    if seed is None:
        return int(torch.randint(0, 2**62, (1,)))
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SamplerError(f"seed must be an int or None; found {seed!r}. Pass e.g. seed=0.")
    kwargs.setdefault("generator", torch.Generator().manual_seed(seed))
    return seed


class _EpochMixin:
    """Every ``iter`` keys the draws by the next epoch (0, 1, ...)."""

    _sampler: GnnscaleSampler
    _epoch: int = 0

    def __iter__(self):
        self._sampler.set_epoch(self._epoch)
        self._epoch += 1
        return super().__iter__()  # type: ignore[misc]


class NeighborLoader(_EpochMixin, MaskInputId, NodeLoader):
    """PyG's ``NeighborLoader`` on gnnscale's sampler: a ``Data`` or a ``HeteroData``.

    A ``HeteroData`` is sampled by :class:`~gnnscale.pyg.hetero.HeteroGnnscaleSampler`:
    ``num_neighbors`` a list (every relation) or a dict naming every relation (0 skips it at a
    hop), ``input_nodes`` a node type or ``(type, ids or mask)``; not disjoint.

    Args (PyG's names): ``data``, ``num_neighbors`` (fan-outs per hop from the seeds),
    ``input_nodes`` (bool mask or int64 ids, distinct; default all nodes; for a mask each batch's
    ``input_id`` holds its seeds' node ids, as PyG's, else their positions), ``replace``, ``disjoint``,
    ``weight_attr`` (an edge attribute of float weights: weighted draws),
    ``filter_per_worker``, ``transform``, ``transform_sampler_output``, and DataLoader's
    ``batch_size``, ``shuffle``, ``drop_last``, ``num_workers``, ...; plus ``seed``.

    Batches are PyG's: ``x``/``y``/... rows of ``n_id`` (seeds first, ``batch_size`` of them),
    ``edge_index`` local (source, target), ``e_id``, ``num_sampled_nodes``/``num_sampled_edges``.
    """

    def __init__(self, data: Data, num_neighbors: Sequence[int], input_nodes: Any = None, replace: bool = False,
                 filter_per_worker: bool | None = None, transform: Callable | None = None,
                 transform_sampler_output: Callable | None = None, seed: int | None = None,
                 backend: str = "auto", input_time: Any = None, subgraph_type: Any = "directional",
                 disjoint: bool = False, temporal_strategy: str = "uniform", time_attr: str | None = None,
                 weight_attr: str | None = None, is_sorted: bool = False, neighbor_sampler: Any = None,
                 directed: bool = True, **kwargs: Any) -> None:
        refuse_unjoined_world("NeighborLoader")
        time_window, time_cut = temporal_kwargs(kwargs, time_attr)  # time: gnnscale.pyg.temporal
        refuse_unsupported(dict(subgraph_type=subgraph_type, neighbor_sampler=neighbor_sampler, directed=directed,
                                **({} if time_attr is not None else
                                   dict(input_time=input_time, temporal_strategy=temporal_strategy))))
        if time_attr is not None:
            seed = _seed_and_generator(seed, kwargs)
            self._sampler = temporal_sampler(data, check_num_neighbors(num_neighbors), time_attr, temporal_strategy,
                                             time_window, time_cut, seed, backend, replace,
                                             edge_weight_of(data, weight_attr))
            self._mask_ids = given_as_mask(input_nodes)
            super().__init__(data, self._sampler, input_nodes=check_input_nodes(input_nodes, int(data.num_nodes)),
                             input_time=input_time, transform=transform,
                             transform_sampler_output=transform_sampler_output, filter_per_worker=filter_per_worker,
                             **kwargs)
            return
        if isinstance(data, HeteroData):
            refuse_on_hetero(disjoint=disjoint, weight_attr=weight_attr)
            edge_index, num_nodes = check_hetero_data(data)
            fanouts = hetero_fanouts(num_neighbors, list(edge_index))
            nodes = check_typed_input_nodes(input_nodes, num_nodes)
            seed = _seed_and_generator(seed, kwargs)
            self._sampler = HeteroGnnscaleSampler(edge_index, num_nodes, fanouts, seed=seed, replace=replace,
                                                  backend=backend)
        else:
            edge_index, n = check_data(data)
            fanouts = check_num_neighbors(num_neighbors)
            nodes = check_input_nodes(input_nodes, n)
            seed = _seed_and_generator(seed, kwargs)
            self._sampler = GnnscaleSampler(edge_index, n, fanouts, seed=seed, replace=replace, backend=backend,
                                            disjoint=disjoint, edge_weight=edge_weight_of(data, weight_attr))
        self._mask_ids = given_as_mask(input_nodes)
        super().__init__(data, self._sampler, input_nodes=nodes, transform=transform,
                         transform_sampler_output=transform_sampler_output, filter_per_worker=filter_per_worker,
                         **kwargs)


class LinkNeighborLoader(_EpochMixin, LinkLoader):
    """PyG's ``LinkNeighborLoader`` on gnnscale's sampler: a ``Data`` or a ``HeteroData``.

    A ``HeteroData``: ``edge_label_index`` a relation or ``(relation, pairs)``, ``num_neighbors``
    a list or a dict per relation, binary negatives only (``neg_sampling_ratio``), not disjoint.

    Args (PyG's names): ``data``, ``num_neighbors``, ``edge_label_index`` (int64 [2, B]; default
    ``data.edge_index``), ``edge_label``, ``neg_sampling`` (``"binary"``/``"triplet"`` or a
    ``NegativeSampling``), ``neg_sampling_ratio`` (binary), ``replace``, ``disjoint``, ``weight_attr``, ``filter_per_worker``,
    ``transform``, DataLoader's ``batch_size``/``shuffle``/``drop_last``/...; plus ``seed``.

    Batches are PyG's (``edge_label_index`` local to ``n_id``, ``edge_label`` 1 for positives and
    0 for negatives, or triplet ``src_index``/``dst_pos_index``/``dst_neg_index``); negatives are
    never edges of the graph (see :mod:`gnnscale.pyg.sampler`).
    """

    def __init__(self, data: Data, num_neighbors: Sequence[int], edge_label_index: Any = None,
                 edge_label: torch.Tensor | None = None, neg_sampling: NegativeSampling | str | None = None,
                 neg_sampling_ratio: float | None = None, replace: bool = False,
                 filter_per_worker: bool | None = None, transform: Callable | None = None,
                 transform_sampler_output: Callable | None = None, seed: int | None = None,
                 backend: str = "auto", edge_label_time: Any = None, subgraph_type: Any = "directional",
                 disjoint: bool = False, temporal_strategy: str = "uniform", time_attr: str | None = None,
                 weight_attr: str | None = None, is_sorted: bool = False, neighbor_sampler: Any = None,
                 directed: bool = True, **kwargs: Any) -> None:
        refuse_unjoined_world("LinkNeighborLoader")
        time_window, time_cut = temporal_kwargs(kwargs, time_attr)  # time: gnnscale.pyg.temporal
        refuse_unsupported(dict(subgraph_type=subgraph_type, neighbor_sampler=neighbor_sampler, directed=directed,
                                **({} if time_attr is not None else
                                   dict(edge_label_time=edge_label_time, temporal_strategy=temporal_strategy))))
        if time_attr is not None:
            seed = _seed_and_generator(seed, kwargs)
            self._sampler = temporal_sampler(data, check_num_neighbors(num_neighbors), time_attr, temporal_strategy,
                                             time_window, time_cut, seed, backend, replace,
                                             edge_weight_of(data, weight_attr))
            pairs = check_edge_label_index(edge_label_index, int(data.num_nodes))
            check_edge_label(edge_label, pairs)
            super().__init__(data, self._sampler, edge_label_index=data.edge_index if pairs is None else pairs,
                             edge_label=edge_label, edge_label_time=edge_label_time, neg_sampling=neg_sampling,
                             neg_sampling_ratio=neg_sampling_ratio, transform=transform,
                             transform_sampler_output=transform_sampler_output, filter_per_worker=filter_per_worker,
                             **kwargs)
            return
        if isinstance(data, HeteroData):
            refuse_on_hetero(disjoint=disjoint, weight_attr=weight_attr)
            edge_index, num_nodes = check_hetero_data(data)
            fanouts = hetero_fanouts(num_neighbors, list(edge_index))
            et, pairs = check_typed_edge_label_index(edge_label_index, edge_index, num_nodes)
            check_edge_label(edge_label, pairs)
            seed = _seed_and_generator(seed, kwargs)
            self._sampler = HeteroGnnscaleSampler(edge_index, num_nodes, fanouts, seed=seed, replace=replace,
                                                  backend=backend)
            super().__init__(data, self._sampler, edge_label_index=(et, pairs), edge_label=edge_label,
                             neg_sampling=neg_sampling, neg_sampling_ratio=neg_sampling_ratio, transform=transform,
                             transform_sampler_output=transform_sampler_output, filter_per_worker=filter_per_worker,
                             **kwargs)
            return
        edge_index, n = check_data(data)
        fanouts = check_num_neighbors(num_neighbors)
        pairs = check_edge_label_index(edge_label_index, n)
        check_edge_label(edge_label, pairs)
        seed = _seed_and_generator(seed, kwargs)
        self._sampler = GnnscaleSampler(edge_index, n, fanouts, seed=seed, replace=replace, backend=backend,
                                        disjoint=disjoint, edge_weight=edge_weight_of(data, weight_attr))
        super().__init__(data, self._sampler, edge_label_index=edge_index if pairs is None else pairs,
                         edge_label=edge_label, neg_sampling=neg_sampling, neg_sampling_ratio=neg_sampling_ratio,
                         transform=transform, transform_sampler_output=transform_sampler_output,
                         filter_per_worker=filter_per_worker, **kwargs)
