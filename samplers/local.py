"""Single-process neighbor sampler over a CSC graph (the reference and the fast path).

Uniform or weighted, without replacement (default) or with replacement.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np
import torch

from gnnscale.errors import SamplerError
from gnnscale.samplers.block import Block, MiniBatch
from gnnscale.samplers.fanouts import check_fanouts  # noqa: F401 - re-exported
from gnnscale.samplers.kernels import Kernels
from gnnscale.samplers.rng import stream_key
from gnnscale.samplers.typed import TypedGraph, sample_relations, split_counts


def check_replace(replace) -> bool:
    """Validate the ``replace`` flag (a real bool, not 0/1 or a string)."""
    if not isinstance(replace, bool):
        raise SamplerError(
            f"replace must be a bool; found {replace!r} of type {type(replace).__name__}. "
            "Pass replace=True to sample with replacement or replace=False (the default) without."
        )
    return replace


def check_labor(labor, replace: bool, edge_weight) -> bool:
    """Validate the ``labor`` flag: a bool, unweighted and without replacement (LABOR-0 keeps each
    neighbour at most once with the probability its destination's fan-out sets)."""
    if not isinstance(labor, bool):
        raise SamplerError(f"labor must be a bool; found {labor!r} of type {type(labor).__name__}. Pass labor=True "
                           "for layer-neighbour sampling or labor=False (the default) for neighbour sampling.")
    if labor and (replace or edge_weight is not None):
        raise SamplerError("layer-neighbour sampling (labor=True) draws uniformly without replacement; found "
                           f"replace={replace}, edge_weight {'given' if edge_weight is not None else 'None'}. "
                           "Leave replace and edge_weight out, or pass labor=False.")
    return labor


def check_edge_weight(edge_weight, num_edges: int, device: torch.device | str = "cpu") -> torch.Tensor | None:
    """Validate an edge-weight array: float [num_edges], finite, non-negative.

    Returns the weights on ``device`` (half and bfloat16 weights become float32, exactly), or
    ``None`` when ``edge_weight`` is ``None`` (uniform sampling).
    """
    if edge_weight is None:
        return None
    fix = "Pass edge_weight as a float tensor with one non-negative finite weight per entry of `indices`."
    if not isinstance(edge_weight, torch.Tensor):
        raise SamplerError(
            f"edge_weight must be a torch.Tensor; found {type(edge_weight).__name__}. "
            "Convert it with torch.as_tensor(w, dtype=torch.float32)."
        )
    if edge_weight.dim() != 1 or edge_weight.numel() != num_edges:
        raise SamplerError(
            f"edge_weight must have shape [{num_edges}] (one weight per entry of `indices`, in CSC order); "
            f"found shape {tuple(edge_weight.shape)}. {fix}"
        )
    if not edge_weight.dtype.is_floating_point:
        raise SamplerError(
            f"edge_weight must be a floating-point tensor; found dtype {edge_weight.dtype}. "
            "Convert it with edge_weight.float()."
        )
    w = edge_weight.to(device)
    if w.dtype in (torch.float16, torch.bfloat16):
        w = w.to(torch.float32)
    finite = torch.isfinite(w)
    if not bool(finite.all()):
        bad = torch.nonzero(~finite).flatten()
        raise SamplerError(
            f"edge_weight must be finite; found {bad.numel()} NaN or infinite entries (first at edge "
            f"{int(bad[0])}: {float(w[bad[0]])}). {fix}"
        )
    neg = w < 0
    if bool(neg.any()):
        bad = torch.nonzero(neg).flatten()
        raise SamplerError(
            f"edge_weight must be non-negative; found {bad.numel()} negative entries (first at edge "
            f"{int(bad[0])}: {float(w[bad[0]])}). Use 0 for an edge that must never be sampled."
        )
    return w.contiguous()


def check_edge_attr(edge_attr, num_edges: int) -> torch.Tensor | None:
    """Validate edge attributes: float [num_edges, De], one row per entry of ``indices``.

    A numpy array (a read-only memory map too) is wrapped without a copy; rows are only ever
    read, gathered for the sampled edges. float32 stays as it is (the blocks' dtype); other
    float dtypes are converted to float32 (a copy). Returns ``None`` for ``None``.
    """
    if edge_attr is None:
        return None
    fix = "Pass edge_attr as a float32 tensor or array [E, De], one row per entry of `indices` (CSC order)."
    if isinstance(edge_attr, np.ndarray):
        with warnings.catch_warnings():  # a read-only memory map: only read here
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            try:
                edge_attr = torch.from_numpy(edge_attr)
            except TypeError as err:
                raise SamplerError(f"edge_attr must be a float array; found dtype {edge_attr.dtype}. {fix}") from err
    if not isinstance(edge_attr, torch.Tensor):
        raise SamplerError(f"edge_attr must be a torch.Tensor or numpy array; found {type(edge_attr).__name__}. {fix}")
    if edge_attr.dim() != 2 or edge_attr.shape[0] != num_edges:
        raise SamplerError(
            f"edge_attr must have shape [{num_edges}, De] (one row per entry of `indices`); "
            f"found shape {tuple(edge_attr.shape)}. {fix}"
        )
    if not edge_attr.dtype.is_floating_point:
        raise SamplerError(f"edge_attr must be a floating-point tensor; found dtype {edge_attr.dtype}. {fix}")
    return edge_attr if edge_attr.dtype == torch.float32 else edge_attr.to(torch.float32)


def gather_edge_attr(edge_attr: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
    """float32 [M, De]: the rows of CSC edge positions ``edges`` (int64 [M]), on ``edges``' device.

    On the CPU numpy's ``take`` gathers (about 3x faster than ``index_select`` for rows of a few
    floats, and it reads a memory map directly)."""
    if edge_attr.device.type == "cpu" and edges.device.type == "cpu":
        return torch.from_numpy(np.take(edge_attr.numpy(), edges.numpy(), axis=0))
    return torch.index_select(edge_attr, 0, edges.to(edge_attr.device)).to(edges.device)


class SamplingKeys:
    """Stream keys: one independent random stream per (seed, epoch, step, hop).

    Never keyed by the requesting rank: a node's neighbours at a hop are a function of the key
    and the node's original id only, so the ranks' batches of a step draw, together, what one
    worker draws for their union (the same neighbourhoods on 1, 2 or 4 workers). The field
    between step and hop, once the requester, is 0: one worker's draws are what they were.
    """

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)

    def __call__(self, epoch: int, step: int, hop: int) -> int:
        return stream_key(self.seed, epoch, step, 0, hop)


class NeighborSampler:
    """Neighbor sampler over a whole graph in one process.

    Args:
        indptr: int64 [N + 1] CSC pointers (in-edges of each node).
        indices: int64 [E] source node of each in-edge.
        fanouts: neighbors per hop, starting at the seeds (PyG's order); -1 = all.
        seed: base seed of the random streams.
        node_keys: optional int64 [N] identity of each node in the random streams (default:
            the node id). Partitioned graphs pass the original ids, so that a node draws the
            same neighbors whatever it was relabeled to.
        backend: ``"auto"``, ``"numba"`` or ``"torch"`` kernels (see :class:`Kernels`).
        replace: sample with replacement: every node with a neighbor (a positive total
            weight when weighted) gets exactly ``fanout`` draws, repeats allowed.
        edge_weight: optional float [E] non-negative weights aligned with ``indices``:
            neighbors are drawn with probability proportional to their weight (without
            replacement: exponential keys; with: inverse CDF). Zero-weight edges are never
            sampled.
        typed: a typed graph (:class:`~gnnscale.samplers.typed.TypedGraph`): each relation's
            fan-out is drawn from its run of each node's in-edges; blocks carry ``edge_type``
            and ``node_type``, and the hops are ``typed.fanouts``' (``fanouts`` is then the
            largest fan-out of each hop, for display).
        edge_attr: optional float32 [E, De] edge attributes aligned with ``indices`` (a
            tensor, or a numpy array such as a memory map, used without a copy): every block
            then carries ``edge_attr``, the rows of its sampled edges in ``edge_index`` order.
            The draws are the same with or without it. The compiled kernels' default draws
            keep a packed copy (each neighbor id beside its edge's row: ``E * (8 + 4 De)``
            bytes) and read the rows as they draw.
        labor: layer-neighbour sampling (LABOR-0, as GraphBolt's ``LayerNeighborSampler``):
            each hop draws one uniform ``u_t`` per candidate source ``t`` (keyed by the hop's
            stream and ``t``'s key, so shared by every seed of the hop), and a node of in-degree
            ``d`` keeps ``t`` iff ``u_t * d < fanout``: ``fanout`` neighbours in expectation,
            far fewer distinct sources per batch (:func:`~gnnscale.samplers.kernels.labor_positions`).
            Unweighted, without replacement; typed graphs relation by relation.

    ``sample(seeds, epoch, step)`` draws exactly what :class:`DistNeighborSampler` draws at
    the same (epoch, step), whatever the partitioning and whichever rank asks (the union of
    the ranks' seeds of a step draws the union of their neighbourhoods), provided each node's
    in-neighbors are listed in the same order (gnnscale's partition format lists them by
    original id). (Weighted sampling with replacement searches a
    cumulative sum over the local CSC, so across different partitionings its draws can
    differ where a draw falls within rounding of an interval boundary.)
    """

    def __init__(
        self,
        indptr: torch.Tensor,
        indices: torch.Tensor,
        fanouts: Sequence[int],
        seed: int = 0,
        node_keys: torch.Tensor | None = None,
        backend: str = "auto",
        replace: bool = False,
        edge_weight: torch.Tensor | None = None,
        typed: TypedGraph | None = None,
        edge_attr: torch.Tensor | np.ndarray | None = None,
        labor: bool = False,
    ) -> None:
        self.indptr = indptr
        self.indices = indices
        self.typed = typed
        self.fanouts = check_fanouts([max(h) for h in typed.fanouts] if typed is not None else fanouts)
        self.keys = SamplingKeys(seed)
        self.num_nodes = indptr.numel() - 1
        self.node_keys = node_keys
        self.kernels = Kernels(self.num_nodes, indptr.device, backend)
        self.replace = check_replace(replace)
        self.edge_weight = check_edge_weight(edge_weight, indices.numel(), indices.device)
        self.variant = sampling_variant(self.replace, self.edge_weight)
        self.labor = check_labor(labor, self.replace, self.edge_weight)
        if self.labor:  # every edge's source key: the original id of indices[e]
            self.variant = {"labor": indices if node_keys is None else node_keys[indices]}
        self.edge_attr = check_edge_attr(edge_attr, indices.numel())
        self.packed = packed_edges(self.kernels, indices, self.edge_attr, self.variant, typed)

    def sample(self, seeds: torch.Tensor, epoch: int = 0, step: int = 0) -> MiniBatch:
        """Sample the computation graph of ``seeds`` (int64 [B], unique global ids)."""
        check_seeds(seeds, self.num_nodes)

        typed = self.typed
        attr = self.edge_attr

        def hop_fn(dst: torch.Tensor, hop: int) -> tuple[torch.Tensor, ...]:
            key = self.keys(epoch, step, hop)
            ids = dst if self.node_keys is None else self.node_keys[dst]
            if typed is not None:
                out = sample_relations(self.kernels.sample, typed, self.indices, dst, typed.node_type(dst),
                                       ids, hop, key, self.variant, return_edges=attr is not None)
                counts, etype = split_counts(out[0])
                return (counts, out[1], etype) if attr is None else (counts, out[1], etype, out[2])
            if attr is None:
                return self.kernels.sample(self.indptr, self.indices, dst, ids, self.fanouts[hop], key, **self.variant)
            if self.packed is not None:  # the rows come with the draws
                counts, nbrs, rows = self.kernels.sample_packed(self.indptr, self.packed, dst, ids, self.fanouts[hop], key)
                return counts, nbrs, None, rows
            counts, nbrs, edges = self.kernels.sample(self.indptr, self.indices, dst, ids, self.fanouts[hop], key,
                                                      return_edges=True, **self.variant)
            return counts, nbrs, None, edges

        gather = None if attr is None or self.packed is not None else (lambda edges: gather_edge_attr(attr, edges))
        return build_minibatch(seeds, len(self.fanouts), hop_fn, self.kernels.relabel,
                               node_type=None if typed is None else typed.node_type, gather_edges=gather)


def packed_edges(kernels: Kernels, indices: torch.Tensor, edge_attr: torch.Tensor | None, variant: dict,
                 typed: TypedGraph | None = None) -> np.ndarray | None:
    """The compiled kernels' packed edges (``cpu_kernels.pack_edges``: each neighbor id beside its
    edge's attribute row) when they serve this sampler: edge attributes, the numba backend, the
    default uniform draws without replacement, an untyped graph. None otherwise (the draws' CSC
    positions are gathered from ``edge_attr`` after the hops, as before)."""
    if edge_attr is None or kernels.pack_edges is None or variant or typed is not None:
        return None
    return kernels.pack_edges(indices, edge_attr)


def sampling_variant(replace: bool, edge_weight: torch.Tensor | None) -> dict:
    """Keyword arguments of the kernels' ``sample`` for this variant (empty for the default).

    Weighted sampling with replacement gets its float64 inclusive cumsum of the weights
    here, once per sampler; both kernel backends search the same array.
    """
    if edge_weight is None:
        return {"replace": True} if replace else {}
    out = {"replace": replace, "weights": edge_weight}
    if replace:
        out["cum_weights"] = torch.cumsum(edge_weight.to(torch.float64), 0)
    return out


def check_seeds(seeds: torch.Tensor, num_nodes: int, lo: int = 0) -> None:
    if seeds.dtype != torch.int64 or seeds.dim() != 1:
        raise SamplerError(f"seeds must be a 1-D int64 tensor; found dtype {seeds.dtype}, shape {tuple(seeds.shape)}")
    if seeds.numel() and (int(seeds.min()) < lo or int(seeds.max()) >= lo + num_nodes):
        raise SamplerError(
            f"seed ids must lie in [{lo}, {lo + num_nodes}); found range "
            f"[{int(seeds.min())}, {int(seeds.max())}]. Pass node ids of this graph (after relabeling)."
        )
    if seeds.numel() > 1 and torch.unique(seeds).numel() != seeds.numel():
        dup = seeds.numel() - torch.unique(seeds).numel()
        raise SamplerError(
            f"seeds must be distinct (each is one output row of the batch); found {dup} repeated id(s). "
            "Deduplicate the batch, e.g. with torch.unique(seeds)."
        )


def build_minibatch(seeds: torch.Tensor, num_hops: int, hop_fn, relabel, leaf=None, node_type=None,
                    gather_edges=None) -> MiniBatch:
    """Run ``hop_fn(dst_ids, hop) -> (counts, nbrs)`` hop by hop and relabel into blocks.

    Typed graphs: ``hop_fn`` returns ``(counts, nbrs, edge_type)`` (the relation of each drawn
    edge) and ``node_type`` (``ids -> int64 types``) types the blocks' sources.
    Edge attributes: ``hop_fn`` returns ``(counts, nbrs, edge_type or None, edge_attr)``,
    ``edge_attr`` float32 [M, De] the drawn edges' rows aligned with ``nbrs``; a block's
    ``edge_index`` columns follow ``nbrs``' order (relabeling and the historical leaves'
    reordering renumber sources, never reorder edges), so the rows become ``Block.edge_attr`` as
    they are. With ``gather_edges`` (``int64 [M] CSC positions -> float32 [M, De] rows``), that
    fourth element holds the drawn edges' CSC positions instead, and the rows of every hop are
    gathered in one call after the last hop (one pass over the attribute table, out of the
    way of the hops' relabeling: measurably faster than a gather per hop).

    ``leaf``: optional ``ids -> bool mask``; new sources it marks at hops before the last are
    not expanded further: they are moved to the tail of the block's sources (``num_hist``)
    and left out of the next hop's destinations (historical embeddings stand in for them).
    """
    blocks: list[Block] = []
    positions: list[torch.Tensor] = []  # with gather_edges: each hop's CSC edge positions
    dst = seeds
    for hop in range(num_hops):
        drawn = hop_fn(dst, hop)
        extra = drawn[3] if len(drawn) > 3 else None
        if gather_edges is not None:
            positions.append(extra)
            extra = None
        counts, nbrs = drawn[0], drawn[1]
        src_ids, nbr_local = relabel(dst, nbrs)
        dst_local = torch.repeat_interleave(torch.arange(dst.numel(), device=dst.device), counts, output_size=nbrs.numel())
        num_hist = 0
        if leaf is not None and hop < num_hops - 1:
            d = dst.numel()
            is_leaf = leaf(src_ids[d:])
            num_hist = int(is_leaf.sum())
            if num_hist:
                new = torch.arange(d, src_ids.numel(), device=dst.device)
                perm = torch.cat([torch.arange(d, device=dst.device), new[~is_leaf], new[is_leaf]])
                pos = torch.empty_like(perm)
                pos[perm] = torch.arange(perm.numel(), device=dst.device)
                src_ids, nbr_local = src_ids[perm], pos[nbr_local]
        blocks.append(Block(src_ids, dst, torch.stack([nbr_local, dst_local]), num_hist,
                            drawn[2] if len(drawn) > 2 else None,
                            None if node_type is None else node_type(src_ids), extra))
        dst = src_ids[: src_ids.numel() - num_hist]
    if gather_edges is not None and blocks:
        rows = gather_edges(torch.cat(positions))
        for block, part in zip(blocks, torch.split(rows, [p.numel() for p in positions])):
            block.edge_attr = part
    blocks.reverse()
    return MiniBatch(seeds=seeds, blocks=blocks, stats={"sampled_edges": sum(b.num_edges for b in blocks)})
