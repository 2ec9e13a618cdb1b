"""PyG's ``BaseSampler`` for an in-memory ``HeteroData`` on gnnscale's kernels (node batches).

Each relation ``(src, rel, dst)`` is its own CSC (in-edges of the ``dst`` nodes, sources in
``src``'s ids, ordered by source id). Hop ``h`` draws, for every relation, ``fanout[rel][h]``
in-edges of the ``dst`` nodes that hop ``h - 1`` added (the seeds at hop 0), keyed by (seed,
epoch, step, relation, hop) and the node's id; each source type relabels the draws of all its
relations at once, so a node appears once per type. The output is PyG's ``HeteroSamplerOutput``:
``node[type]`` original per-type ids (the seeds first), ``row``/``col``/``edge`` per relation
(local source, local target, original edge id), ``num_sampled_nodes[type]`` per hop and
``num_sampled_edges[relation]`` per hop, as ``trim_to_layer`` reads them.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
from torch_geometric.sampler import BaseSampler, HeteroSamplerOutput, NodeSamplerInput

from gnnscale.errors import SamplerError
from gnnscale.pyg.sampler import csc_of
from gnnscale.samplers.kernels import Kernels
from gnnscale.samplers.local import check_replace
from gnnscale.samplers.rng import stream_key

_EMPTY = torch.empty(0, dtype=torch.int64)


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat(parts) if parts else _EMPTY


class HeteroGnnscaleSampler(BaseSampler):
    """Neighbour sampling of a typed graph for PyG's ``NodeLoader``.

    Args:
        edge_index: ``{(src, rel, dst): int64 [2, E]}`` (ids per type, checked by the loader).
        num_nodes: ``{type: N_type}``.
        fanouts: ``{(src, rel, dst): [per hop]}``, every relation the same number of hops;
            0 skips a relation at that hop, -1 takes all.
        seed, replace, backend: as :class:`gnnscale.pyg.sampler.GnnscaleSampler`.
    """

    def __init__(self, edge_index: Mapping[tuple, torch.Tensor], num_nodes: Mapping[str, int],
                 fanouts: Mapping[tuple, Sequence[int]], seed: int = 0, replace: bool = False,
                 backend: str = "auto") -> None:
        self.node_types = list(num_nodes)
        self.edge_types = list(edge_index)
        self.num_nodes = {t: int(n) for t, n in num_nodes.items()}
        self.fanouts = {et: [int(f) for f in fanouts[et]] for et in self.edge_types}
        self.num_hops = len(next(iter(self.fanouts.values()))) if self.fanouts else 0
        self.seed = int(seed)
        self.replace = check_replace(replace)
        self.variant = {"replace": True} if replace else {}
        self.csc = {et: csc_of(ei, self.num_nodes[et[2]], self.num_nodes[et[0]]) for et, ei in edge_index.items()}
        self.kernels = Kernels(max(self.num_nodes.values(), default=1), "cpu", backend)
        self.epoch = 0
        self.disjoint = False

    @property
    def edge_permutation(self) -> None:
        return None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def sample(self, input_type: str, seeds: torch.Tensor, epoch: int, step: int) -> HeteroSamplerOutput:
        """PyG's output for distinct seeds int64 [B] of ``input_type``."""
        nodes = {t: _EMPTY for t in self.node_types}
        nodes[input_type] = seeds.to(torch.int64).contiguous()
        frontier = dict(nodes)
        rows = {et: [] for et in self.edge_types}
        cols = {et: [] for et in self.edge_types}
        edges = {et: [] for et in self.edge_types}
        nsn = {t: [nodes[t].numel()] for t in self.node_types}
        nse = {et: [] for et in self.edge_types}
        for hop in range(self.num_hops):
            drawn = {}
            for r, et in enumerate(self.edge_types):
                fanout, at = self.fanouts[et][hop], frontier[et[2]]
                if fanout == 0 or at.numel() == 0:
                    nse[et].append(0)
                    continue
                indptr, indices, perm = self.csc[et]
                key = stream_key(self.seed, epoch, step, 0, hop, r)
                counts, nbrs, pos = self.kernels.sample(indptr, indices, at, at, fanout, key, return_edges=True,
                                                        **self.variant)
                end = nodes[et[2]].numel()
                cols[et].append(torch.from_numpy(np.repeat(np.arange(end - at.numel(), end, dtype=np.int64),
                                                           counts.numpy())))
                edges[et].append(torch.from_numpy(np.take(perm.numpy(), pos.numpy())))
                nse[et].append(nbrs.numel())
                drawn[et] = nbrs
            for t in self.node_types:  # one relabeling per source type, over all its relations' draws
                mine = [et for et in drawn if et[0] == t]
                if not mine:
                    frontier[t] = _EMPTY
                    nsn[t].append(0)
                    continue
                grown, local = self.kernels.relabel(nodes[t], torch.cat([drawn[et] for et in mine]))
                for et, part in zip(mine, torch.split(local, [drawn[et].numel() for et in mine])):
                    rows[et].append(part)
                frontier[t] = grown[nodes[t].numel():]
                nodes[t] = grown
                nsn[t].append(frontier[t].numel())
        return HeteroSamplerOutput(
            node=nodes,
            row={et: _cat(rows[et]) for et in self.edge_types},
            col={et: _cat(cols[et]) for et in self.edge_types},
            edge={et: _cat(edges[et]) for et in self.edge_types},
            batch=None, num_sampled_nodes=nsn, num_sampled_edges=nse)

    def sample_from_nodes(self, inputs: NodeSamplerInput) -> HeteroSamplerOutput:
        if inputs.input_type is None:
            raise SamplerError("a HeteroData loader needs input_nodes with a node type, e.g. "
                               "input_nodes=('paper', mask); found none.")
        step = int(inputs.input_id[0]) if inputs.input_id is not None and inputs.input_id.numel() else 0
        out = self.sample(inputs.input_type, inputs.node, self.epoch, step)
        out.metadata = (inputs.input_id, inputs.time)
        return out

    def sample_from_edges(self, inputs, neg_sampling=None):
        raise SamplerError("gnnscale.pyg's LinkNeighborLoader samples homogeneous Data only; found HeteroData "
                           "edges. Use a Data (e.g. HeteroData.to_homogeneous()).")


def check_hetero_data(data) -> tuple[dict, dict]:
    """({relation: edge_index int64 [2, E]}, {type: N}) of a ``HeteroData``, or a one-line error."""
    from gnnscale.errors import DatasetError

    num_nodes = {}
    for t in data.node_types:
        n = data[t].num_nodes
        if n is None:
            raise DatasetError(f"data[{t!r}] has no num_nodes and no x to count nodes by; set data[{t!r}].num_nodes.")
        x = getattr(data[t], "x", None)
        if isinstance(x, torch.Tensor) and x.size(0) != n:
            raise DatasetError(f"data[{t!r}].x has {x.size(0)} rows but the type has num_nodes = {n}; x needs one "
                               f"row per node: fix data[{t!r}].num_nodes or data[{t!r}].x.")
        num_nodes[t] = int(n)
    if not data.edge_types:
        raise DatasetError("data has no edge types: the sampler needs the graph's edges. Add data[(src, rel, dst)]"
                           ".edge_index.")
    edge_index = {}
    for et in data.edge_types:
        ei = getattr(data[et], "edge_index", None)
        if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2 or ei.dtype.is_floating_point:
            raise DatasetError(f"data[{et!r}] needs edge_index, an integer tensor [2, E]; found "
                               f"{getattr(ei, 'dtype', type(ei).__name__)}. Store each relation's edges there.")
        ei = ei.to(torch.int64)
        for row, t in ((0, et[0]), (1, et[2])):
            if ei.numel() and (int(ei[row].min()) < 0 or int(ei[row].max()) >= num_nodes[t]):
                raise DatasetError(f"data[{et!r}].edge_index row {row} ids must lie in [0, {num_nodes[t]}) (the "
                                   f"{t!r} nodes); found range [{int(ei[row].min())}, {int(ei[row].max())}].")
        edge_index[et] = ei
    return edge_index, num_nodes


def hetero_fanouts(num_neighbors, edge_types: list[tuple]) -> dict:
    """``{relation: fan-outs}`` from a list (every relation) or a dict naming every relation."""
    fix = ("Pass num_neighbors as a list of ints (every relation, per hop) or a dict {(src, rel, dst): [per hop]} "
           "naming every relation; 0 skips a relation at a hop, -1 takes all.")
    if isinstance(num_neighbors, (list, tuple)):
        num_neighbors = {et: num_neighbors for et in edge_types}
    if not isinstance(num_neighbors, dict):
        raise SamplerError(f"num_neighbors must be a list of ints or a dict per relation; found {num_neighbors!r}. "
                           f"{fix}")
    missing = [et for et in edge_types if et not in num_neighbors]
    if missing:
        raise SamplerError(f"num_neighbors names no fan-outs for relation(s) {missing}. {fix}")
    out, hops = {}, None
    for et in edge_types:
        f = num_neighbors[et]
        if not isinstance(f, (list, tuple)) or not f or any(
                isinstance(v, bool) or not isinstance(v, int) or v < -1 for v in f):
            raise SamplerError(f"num_neighbors[{et!r}] must be a non-empty list of ints >= 0 or -1; found {f!r}. {fix}")
        if hops is not None and len(f) != hops:
            raise SamplerError(f"every relation needs the same number of hops; found {hops} and {len(f)} "
                               f"({et!r}). {fix}")
        hops = len(f)
        out[et] = [int(v) for v in f]
    return out
