"""Distributed layer-wise inference over full neighborhoods.

Layer by layer: every rank computes layer l for all the nodes it owns from their complete
in-neighborhoods, then exchanges the boundary rows (one exchange per layer) so that every
rank holds layer l of its halo, and goes on to layer l+1. Each node's embedding is computed
once per layer (no neighborhood explosion), which makes it the cheap way to evaluate on the
full graph, and the way to fill the halo tables of the ``historical`` exchange mode.
"""
from __future__ import annotations

import torch

from gnnscale.exchange import HaloExchange
from gnnscale.feature_store import DistFeatureStore
from gnnscale.models import GNN
from gnnscale.samplers.kernels import Kernels


@torch.no_grad()
def layerwise_inference(
    model: GNN,
    indptr: torch.Tensor,
    own_features: torch.Tensor,
    features: DistFeatureStore,
    halo: HaloExchange,
    step: int,
    chunk_edges: int = 1 << 18,
    node_degree: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Logits float32 [n_owned, C] (on the host) of every owned node, computed on the full graph.

    Args:
        model: the model (its current mode is kept; call ``model.eval()`` first for inference).
        indptr: int64 [n + 1] this rank's CSC pointers (in-neighbors in ``halo.local_indices``).
        own_features: float32 [n, F] features of the owned nodes.
        features: the feature store (halo input rows are fetched through it: cache, owners).
        halo: this rank's halo exchange; its tables are rewritten with the new embeddings,
            stamped ``step``.
        chunk_edges: destinations are processed in slices of about this many in-edges.
        node_degree: int64 [N] in-degrees by global id (for layers that set ``needs_degree``).
        backend: sampler kernels used to relabel the neighborhoods: ``"auto"``, ``"numba"`` or
            ``"torch"`` (see :class:`Kernels`; ``--sampler-backend``). Same result with each.

    Collective: every rank calls it (one feature fetch and L - 1 embedding exchanges).
    """
    n = halo.num_owned
    # Embeddings stay on the host between layers (the halo tables are there); each layer
    # step runs on the model's device.
    h_own, x0_own = (t.cpu() if t is not None else None for t in model.encode(own_features))
    h_halo = model.encode(features.fetch(halo.halo_ids))[0].cpu()
    kernels = Kernels(n + halo.num_halo, indptr.device, backend)
    loc = halo.local_indices
    deg_local = None
    if node_degree is not None and model.uses_degree:
        own_ids = torch.arange(halo.offset, halo.offset + n, dtype=torch.int64)
        deg_local = node_degree[torch.cat([own_ids, halo.halo_ids])]
    # Slices of destinations with about chunk_edges in-edges each (a handful of slices).
    bounds = torch.searchsorted(indptr, torch.arange(0, int(indptr[-1]) + 1, chunk_edges, dtype=torch.int64))
    cuts = sorted(set([0, n] + bounds.clamp(max=n).tolist()))
    outs = []
    for i in range(model.num_layers):
        pieces = []
        for a, b in zip(cuts[:-1], cuts[1:]):  # loop over a few slices, for memory
            dst = torch.arange(a, b, dtype=torch.int64)
            nbrs = loc[int(indptr[a]):int(indptr[b])]
            counts = torch.diff(indptr[a:b + 1])
            src, nbr_local = kernels.relabel(dst, nbrs)
            dst_local = torch.repeat_interleave(torch.arange(b - a), counts, output_size=nbrs.numel())
            is_own = src < n  # gather from the owned rows or the halo rows (no concatenated copy)
            hs = torch.empty(src.numel(), h_own.shape[1], dtype=torch.float32)
            hs[is_own] = h_own[src[is_own]].to(torch.float32)
            hs[~is_own] = h_halo[src[~is_own] - n].to(torch.float32)
            hs = model.input_dropout(i, hs)
            pieces.append(model.layer_step(i, hs, hs[: b - a], torch.stack([nbr_local, dst_local]),
                                           x0_own[a:b] if x0_own is not None else None,
                                           deg_local[src] if deg_local is not None else None).cpu())
        h_own = torch.cat(pieces) if pieces else h_own[:0]
        if model.jk != "none":
            outs.append(h_own)
        if i < model.num_layers - 1:
            h_halo = None  # the previous layer's halo rows are not needed any more
            h_halo = halo.exchange_layer(i + 1, h_own, step)
    return model.readout(h_own, outs).cpu()


@torch.no_grad()
def refresh_embeddings(
    model: GNN,
    nodes: torch.Tensor,
    sample_fn,
    relabel,
    features: DistFeatureStore,
    halo: HaloExchange,
    node_degree: torch.Tensor | None = None,
) -> list[torch.Tensor]:
    """Recompute the hidden embeddings h^1..h^{L-1} of owned ``nodes`` (int64 [k] global ids).

    One hop per layer, GNNAutoScale's rule: ``sample_fn(nodes) -> (counts, nbrs)`` draws the
    in-neighbors once; layer 1 reads their raw features (one feature fetch, collective: every
    rank calls this once per step, ``nodes`` may be empty), layer l > 1 their historical
    layer-(l-1) rows (``halo.history``). Returns per hidden layer float32 [k, d] (on the host).
    """
    k = nodes.numel()
    counts, nbrs = sample_fn(nodes)
    src, nbr_local = relabel(nodes, nbrs)
    edge_index = torch.stack([nbr_local, torch.repeat_interleave(torch.arange(k), counts, output_size=nbrs.numel())])
    deg = node_degree[src] if node_degree is not None and model.uses_degree else None
    h, x0 = model.encode(features.fetch(src))
    x0_dst = x0[:k] if x0 is not None else None
    out = []
    for i in range(model.num_layers - 1):
        if i > 0:
            h = halo.history(i, src)
        h = model.layer_step(i, h, h[:k], edge_index, x0_dst, deg)
        out.append(h.cpu())  # pushed from the host's halo tables
    return out
