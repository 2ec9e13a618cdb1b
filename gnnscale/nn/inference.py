"""Layer-wise inference on the model's side: every layer of a model over full neighbourhoods, one
layer at a time, each node's embedding computed once per layer (no neighbourhood explosion).

:func:`slice_layer` (a layer on a slice of destinations with their in-edges) is the one per-slice
step; :func:`graph_inference` runs it over a whole graph held in one process, in slices (blocks
of destinations with their sources): chunk pipelining's table fill and evaluation, ``gnnscale
predict``. The distributed drivers, which read the feature, degree and halo stores
(``halo_inference``, ``streamed_inference``, ``refresh_embeddings``), are in
:mod:`gnnscale.tasks.inference`.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from gnnscale.errors import ModelError
from gnnscale.nn.models import GNN
from gnnscale.samplers.block import Block


def slice_layer(model: GNN, i: int, hs: torch.Tensor, num_dst: int, edge_index: torch.Tensor,
                x0_dst: torch.Tensor | None, deg_src: torch.Tensor | None,
                edge_type: torch.Tensor | None = None, node_type: torch.Tensor | None = None,
                edge_attr: torch.Tensor | None = None) -> torch.Tensor:
    """Layer ``i`` on one slice: sources' rows ``hs`` [S, dims[i]] (the slice's ``num_dst``
    destinations first), ``edge_index`` int64 [2, M] in slice numbering -> float32
    [num_dst, dims[i + 1]] on the host. Dropout as in training (none in eval mode).
    Typed graphs: ``edge_type`` int64 [M] (relation of each edge) and ``node_type`` int64 [S]
    (type of each source), what a typed block carries, for the relation-aware layers.
    ``edge_attr`` float32 [M, De]: the features of the slice's edges (``edge_index`` order), for
    the layers that read them (``model.edge_layers``)."""
    hs = model.input_dropout(i, hs)
    return model.layer_step(i, hs, hs[:num_dst], edge_index, x0_dst, deg_src,
                            edge_type=edge_type, node_type=node_type, edge_attr=edge_attr).cpu()


def edge_rows(model: GNN, edge_attr, a: int, b: int, where: str) -> torch.Tensor | None:
    """float32 [b - a, De]: rows ``a .. b-1`` of a part's in-edge features (aligned with its CSC;
    a memory map is read slice by slice), or None when the model reads none."""
    if not model.uses_edge_attr:
        return None
    if edge_attr is None:
        raise ModelError(f"{where}: the model reads edge features (edge_dim {model.edge_dim}); pass the part's "
                         "in-edge features, edge_attr=part.edge_attr")
    return torch.as_tensor(edge_attr[a:b]).to(torch.float32)


def dst_slices(indptr: torch.Tensor, chunk_edges: int) -> list[tuple[int, int]]:
    """Consecutive ranges ``(a, b)`` of local destinations with about ``chunk_edges`` in-edges
    each (cut at the destinations' boundaries), covering ``[0, n)``."""
    n = int(indptr.numel() - 1)
    bounds = torch.searchsorted(indptr, torch.arange(0, int(indptr[-1]) + 1, chunk_edges, dtype=torch.int64))
    cuts = sorted(set([0, n] + bounds.clamp(max=n).tolist()))
    return list(zip(cuts[:-1], cuts[1:]))


@torch.no_grad()
def graph_inference(
    model: GNN,
    slices: Sequence[Block],
    x: torch.Tensor | None,
    degree: torch.Tensor | None = None,
    end: int | None = None,
    after_layer: Callable[[int, torch.Tensor], None] | None = None,
) -> torch.Tensor:
    """Layers ``0 .. end - 1`` of ``model`` over a whole graph held in this process.

    Args:
        slices: blocks covering the graph's N nodes as destinations, in id order: block c's
            destinations are consecutive ids, its sources start with them (its in-neighbours
            follow, in global ids), ``edge_index`` in block numbering (chunk blocks; or one
            block of the whole graph). Historical leaves of a block are read like any source.
            A model that reads edge features gets each block's ``edge_attr``.
        x: float32 [N, F] features. degree: int64 [N] in-degrees (degree-normalized layers).
        end: the layers to run (default all: the logits through the readout).
        after_layer: ``(i, h)`` is called with h^i, the input of layer ``i`` (float32 [N, dims[i]]),
            before layer ``i`` runs: a chunk stage's table fill.

    Returns:
        float32 [N, C] logits (``end`` = L), else h^{end} [N, dims[end]].
    """
    end = model.num_layers if end is None else end
    h, x0 = model.encode(x)
    outs = []
    for i in range(end):
        if after_layer is not None:
            after_layer(i, h)
        pieces = []
        for blk in slices:  # a handful of blocks, for memory
            lo = int(blk.dst_ids[0]) if blk.num_dst else 0
            deg = blk.source_degrees(degree) if degree is not None and model.needs_degree[i] else None
            pieces.append(slice_layer(model, i, h[blk.src_ids], blk.num_dst, blk.edge_index,
                                      x0[lo:lo + blk.num_dst] if x0 is not None else None, deg,
                                      blk.edge_type, blk.node_type, blk.edge_attr))
        h = torch.cat(pieces)
        if model.jk != "none":
            outs.append(h)
    return model.readout(h, outs).cpu() if end == model.num_layers else h
