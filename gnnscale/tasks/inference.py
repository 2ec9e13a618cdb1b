"""Distributed layer-wise inference: every layer of a model over the full neighbourhoods of a
rank's nodes, one layer at a time, with the one per-slice step
(:func:`gnnscale.nn.inference.slice_layer`) over the stores a worker holds:

- :func:`halo_inference`: a rank's part and its halo (historical mode's tables): after each
  layer the boundary rows are exchanged, so that every rank holds the next layer of its halo;
- :func:`streamed_inference`: a rank's part alone: slices of destinations ask the owners for
  the rows of their remote in-neighbours, so memory follows the part (typed parts too: inputs
  per node type, relations and node types handed to the relation-aware layers);
- :func:`refresh_embeddings` recomputes a few nodes one hop per layer over histories
  (historical mode's round-robin refresh).
"""
from __future__ import annotations

import logging
import os
import tempfile
import time
from typing import Callable

import numpy as np
import torch

from gnnscale.data.degrees import DegreeStore
from gnnscale.data.feature_store import DistFeatureStore
from gnnscale.data.typed_store import TypedFeatureStore
from gnnscale.errors import ModelError
from gnnscale.nn.inference import dst_slices, edge_rows, slice_layer
from gnnscale.nn.models import GNN
from gnnscale.partitioning.resources import available_memory_bytes
from gnnscale.process.groups import local_world_size
from gnnscale.samplers.kernels import Kernels

log = logging.getLogger(__name__)


def _degrees(node_degree, ids: torch.Tensor) -> torch.Tensor:
    """In-degrees of ``ids`` from a DegreeStore (collective) or a global int64 [N] vector."""
    return node_degree.fetch(ids) if isinstance(node_degree, DegreeStore) else node_degree[ids]


@torch.no_grad()
def halo_inference(
    model: GNN,
    indptr: torch.Tensor,
    own_features: torch.Tensor,
    features: DistFeatureStore,
    halo: HaloExchange,
    step: int,
    chunk_edges: int = 1 << 18,
    node_degree: torch.Tensor | None = None,
    backend: str = "auto",
    edge_attr: torch.Tensor | None = None,
    edge_type: torch.Tensor | None = None,
    inputs: Callable | None = None,
) -> torch.Tensor:
    """Logits float32 [n_owned, C] (on the host) of every owned node, computed on the full graph.

    Args:
        model: the model (its current mode is kept; call ``model.eval()`` first for inference).
        indptr: int64 [n + 1] this rank's CSC pointers (in-neighbors from ``halo.local_slice``).
        own_features: float32 [n, F] features of the owned nodes.
        features: the feature store (halo input rows are fetched through it: cache, owners).
        halo: this rank's halo exchange; its tables are rewritten with the new embeddings,
            stamped ``step``.
        chunk_edges: destinations are processed in slices of about this many in-edges.
        node_degree: in-degrees by global id, for layers that set ``needs_degree``: a
            :class:`~gnnscale.data.degrees.DegreeStore` (asks the owners: collective) or int64 [N].
        backend: sampler kernels used to relabel the neighborhoods: ``"auto"``, ``"numba"`` or
            ``"torch"`` (see :class:`Kernels`; ``--sampler-backend``). Same result with each.
        edge_attr: float32 [E, De] features of this rank's in-edges (aligned with its CSC:
            ``part.edge_attr``), for a model whose layers read them (each slice gets its rows).
        edge_type: typed parts: the relation of each in-edge (int [E], ``part.typed.etype``).
            ``features`` is then the part's :class:`~gnnscale.data.typed_store.TypedFeatureStore`,
            ``own_features`` None (the owned rows are fetched through it as a TypedInput), and
            every layer gets its slice's relations and the sources' node types (the book's).
        inputs: ``x -> x`` applied to the owned and the halo input rows before the encoder
            (collective: a typed run attaches its featureless types' sharded embedding rows).

    Collective: every rank calls it (one feature fetch and L - 1 embedding exchanges).
    """
    n = halo.num_owned
    typed_book = features.book if isinstance(features, TypedFeatureStore) else None
    own_ids = torch.arange(halo.offset, halo.offset + n, dtype=torch.int64)
    x_own, x_halo = own_features, None
    if typed_book is not None:  # the owned rows through the typed store (no exchange: they are here)
        x_own = features.fetch(own_ids)
    if inputs is not None:
        x_own = inputs(x_own)
    # Embeddings stay on the host between layers (the halo tables are there); each layer
    # step runs on the model's device.
    h_own, x0_own = (t.cpu() if t is not None else None for t in model.encode(x_own))
    x_halo = features.fetch(halo.halo_ids)
    if inputs is not None:
        x_halo = inputs(x_halo)
    h_halo = model.encode(x_halo)[0].cpu()
    del x_own, x_halo
    ntype_local = typed_book.ntype(torch.cat([own_ids, halo.halo_ids])) if typed_book is not None else None
    kernels = Kernels(n + halo.num_halo, indptr.device, backend)
    deg_local = None
    if node_degree is not None and model.uses_degree:
        deg_local = _degrees(node_degree, torch.cat([own_ids, halo.halo_ids]))
    spans = dst_slices(indptr, chunk_edges)  # a handful of slices
    outs = []
    for i in range(model.num_layers):
        pieces = []
        for a, b in spans:  # loop over a few slices, for memory
            dst = torch.arange(a, b, dtype=torch.int64)
            nbrs = halo.local_slice(int(indptr[a]), int(indptr[b]))
            counts = torch.diff(indptr[a:b + 1])
            src, nbr_local = kernels.relabel(dst, nbrs)
            dst_local = torch.repeat_interleave(torch.arange(b - a), counts, output_size=nbrs.numel())
            is_own = src < n  # gather from the owned rows or the halo rows (no concatenated copy)
            hs = torch.empty(src.numel(), h_own.shape[1], dtype=torch.float32)
            hs[is_own] = h_own[src[is_own]].to(torch.float32)
            hs[~is_own] = h_halo[src[~is_own] - n].to(torch.float32)
            etype = ntype = None
            if typed_book is not None:
                ntype = ntype_local[src]
                if edge_type is not None:
                    etype = torch.as_tensor(edge_type[int(indptr[a]):int(indptr[b])]).to(torch.int64)
            pieces.append(slice_layer(model, i, hs, b - a, torch.stack([nbr_local, dst_local]),
                                      x0_own[a:b] if x0_own is not None else None,
                                      deg_local[src] if deg_local is not None else None, etype, ntype,
                                      edge_attr=edge_rows(model, edge_attr, int(indptr[a]), int(indptr[b]),
                                                           "halo_inference")))
        h_own = torch.cat(pieces) if pieces else h_own[:0]
        if model.jk != "none":
            outs.append(h_own)
        if i < model.num_layers - 1:
            h_halo = None  # the previous layer's halo rows are not needed any more
            h_halo = halo.exchange_layer(i + 1, h_own, step)
    return model.readout(h_own, outs).cpu()


class _RowsPart:
    """A part whose ``x`` is a layer's own rows (for a DistFeatureStore over embeddings)."""

    def __init__(self, rows: torch.Tensor) -> None:
        self.x = rows.numpy()

    def features(self, local_idx: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.x)[local_idx]


def table_budget_bytes() -> int | None:
    """The most bytes one layer table of :func:`streamed_inference` keeps in memory: a quarter of
    this worker's share of the host's available memory (two tables live at a time, besides the
    slices, the part and the model), or None where the available memory cannot be read."""
    avail = available_memory_bytes()
    return None if avail is None else avail // (4 * max(1, local_world_size()))


def layer_table(n: int, d: int, budget: int | None, layer: int = 0) -> torch.Tensor:
    """A layer's own rows, float32 ``[n, d]``: in memory, or, when its bytes pass ``budget``,
    memory-mapped on a temporary file that is deleted at once (the mapping keeps it until the
    table is freed; the kernel writes its pages to disk under memory pressure instead of
    killing the worker). The file goes to the system's temporary folder (``$TMPDIR``)."""
    nbytes = n * d * 4
    if budget is None or nbytes <= budget or nbytes == 0:
        return torch.empty(n, d, dtype=torch.float32)
    fd, path = tempfile.mkstemp(prefix="gnnscale-layer-", suffix=".f32")
    try:
        os.ftruncate(fd, nbytes)
        rows = np.memmap(path, dtype=np.float32, mode="r+", shape=(n, d))
    finally:
        os.close(fd)
        os.unlink(path)
    log.info("layer-wise inference: layer %d's table (%d x %d float32, %.2f GB) is over a quarter of this "
             "worker's share of the available memory (%.2f GB): memory-mapped on a deleted file in %s",
             layer + 1, n, d, nbytes / 1e9, budget / 1e9, os.path.dirname(path))
    return torch.from_numpy(rows)


@torch.no_grad()
def streamed_inference(
    model: GNN,
    indptr: torch.Tensor,
    indices: torch.Tensor,
    features: DistFeatureStore,
    slice_bytes: int = 64 << 20,
    node_degree=None,
    backend: str = "auto",
    edge_type: torch.Tensor | None = None,
    inputs: Callable | None = None,
    edge_attr: torch.Tensor | None = None,
    table_budget: int | None = -1,
) -> torch.Tensor:
    """Logits float32 [n_owned, C] (on the host) of every owned node on the full graph, like
    :func:`halo_inference`, holding no halo: memory follows the part and one slice.

    Layer by layer, destinations go in slices of about ``slice_bytes / (4 x the layer's input
    width)`` in-edges (so that a slice's rows take about ``slice_bytes``); each slice
    asks the owners for the rows of its remote in-neighbors (input features through
    ``features``, then the previous layer's embeddings from their owners) and writes its
    output rows into the layer's own table [n, d]. A rank holds the part, its own rows of two
    layers and one slice's rows: never the halo's (which, on a graph cut as badly as a random
    one, is several times the part). It moves more bytes than the halo exchange (a row read by
    several slices travels once per slice); use :func:`halo_inference` where the halo fits.

    Args:
        indptr, indices: this rank's CSC (int64 [n + 1], int64 [E] global in-neighbor ids;
            ``indices`` may be memory-mapped: it is read slice by slice).
        features: the feature store of this rank's group (its part gives the owned rows).
        node_degree: a :class:`~gnnscale.data.degrees.DegreeStore` (or int64 [N]) for layers that
            set ``needs_degree``.
        edge_type: typed parts: the relation of each in-edge (int [E], aligned with ``indices``:
            ``part.typed.etype``; read slice by slice). ``features`` is then the part's
            :class:`~gnnscale.data.typed_store.TypedFeatureStore`: layer 0's rows are fetched per
            node type as a TypedInput and encoded by the model's typed encoder, and every layer
            gets its slice's ``edge_type`` and the sources' ``node_type`` (the book's), as a
            typed block carries them.
        inputs: ``x -> x`` applied to layer 0's fetched rows of every slice before the encoder
            (collective: a typed run attaches its featureless types' sharded embedding rows,
            ``TypedEmbeddings.attach(x, record=False)``).
        edge_attr: float32 [E, De] features of the in-edges, aligned with ``indices``
            (``part.edge_attr``, may be memory-mapped: read slice by slice), for a model whose
            layers read them: each slice's layer gets the rows of exactly its edges.
        table_budget: the most bytes a layer's table [n, d] keeps in memory; a larger one is
            memory-mapped on a deleted temporary file (:func:`layer_table`). -1 (default): a quarter
            of this worker's share of the host's available memory, read at each layer
            (:func:`table_budget_bytes`); None: always in memory; 0: always mapped.

    Collective over ``features.comm``: every rank makes the same number of exchanges (the
    largest slice count of any rank; ranks past their last slice send and ask nothing).
    """
    comm = features.comm
    typed_book = features.book if isinstance(features, TypedFeatureStore) else None
    book = typed_book.book if typed_book is not None else features.book  # the parts' id ranges
    if typed_book is not None and edge_type is None and any(model.needs_edge_type):
        raise ModelError("streamed_inference: a typed part's relation-aware layers need the relation of every "
                         "in-edge; pass edge_type=part.typed.etype")
    n = int(indptr.numel() - 1)
    offset = int(book.offsets[comm.rank])
    kernels = Kernels(book.num_nodes, indptr.device, backend, held=(offset, offset + n))
    store, x0_own, outs = features, None, []
    for i in range(model.num_layers):
        t0 = time.perf_counter()
        # a typed layer 0 holds the fetched rows (at most the widest type's) and their encoding
        width = max(store.feature_dim, model.dims[0] if typed_book is not None and i == 0 else 0, 1)
        chunk_edges = max(64, slice_bytes // (4 * width))
        spans = dst_slices(indptr, chunk_edges)
        rounds = int(comm.all_reduce(torch.tensor([len(spans)], dtype=torch.int64), "max")[0])
        spans += [(n, n)] * (rounds - len(spans))
        h_out = None
        for a, b in spans:  # loop over slices of destinations (collective rounds)
            e_a, e_b = int(indptr[a]), int(indptr[b])
            dst = torch.arange(offset + a, offset + b, dtype=torch.int64)
            src, nbr_local = kernels.relabel(dst, torch.as_tensor(indices[e_a:e_b]))
            hs = store.fetch(src, category="feature" if i == 0 else "embedding")
            if i == 0:
                if inputs is not None:
                    hs = inputs(hs)
                hs, x0 = model.encode(hs)
                if x0 is not None:
                    if x0_own is None:
                        x0_own = torch.empty(n, x0.shape[1], dtype=x0.dtype)
                    x0_own[a:b] = x0[: b - a].cpu()
            counts = torch.diff(indptr[a:b + 1])
            dst_local = torch.repeat_interleave(torch.arange(b - a), counts, output_size=e_b - e_a)
            deg = _degrees(node_degree, src) if node_degree is not None and model.needs_degree[i] else None
            etype = ntype = None
            if typed_book is not None:
                ntype = typed_book.ntype(src)
                if edge_type is not None:
                    etype = torch.as_tensor(edge_type[e_a:e_b]).to(torch.int64)
            rows = slice_layer(model, i, hs.to(torch.float32), b - a, torch.stack([nbr_local, dst_local]),
                               x0_own[a:b] if x0_own is not None else None, deg, etype, ntype,
                               edge_rows(model, edge_attr, e_a, e_b, "streamed_inference"))
            if h_out is None:  # every rank learns the width at its first slice (maybe empty)
                h_out = layer_table(n, rows.shape[1], table_budget_bytes() if table_budget == -1 else table_budget, i)
            h_out[a:b] = rows
        if model.jk != "none":
            outs.append(h_out)
        store = DistFeatureStore(_RowsPart(h_out), book, comm, h_out.shape[1])
        if comm.rank == 0:
            log.debug("layer-wise inference: layer %d of %d in %.1f s (%d rounds of about %d in-edges)",
                      i + 1, model.num_layers, time.perf_counter() - t0, rounds, chunk_edges)
    return model.readout(h_out, outs).cpu()


@torch.no_grad()
def refresh_embeddings(
    model: GNN,
    nodes: torch.Tensor,
    sample_fn,
    relabel,
    features: DistFeatureStore,
    halo: HaloExchange,
    node_degree: torch.Tensor | None = None,
    edge_rows: Callable[[torch.Tensor], torch.Tensor] | None = None,
    inputs: Callable | None = None,
) -> list[torch.Tensor]:
    """Recompute the hidden embeddings h^1..h^{L-1} of owned ``nodes`` (int64 [k] global ids).

    One hop per layer, GNNAutoScale's rule: ``sample_fn(nodes) -> (counts, nbrs)`` draws the
    in-neighbors once; layer 1 reads their raw features (one feature fetch, collective: every
    rank calls this once per step, ``nodes`` may be empty), layer l > 1 their historical
    layer-(l-1) rows (``halo.history``); ``node_degree`` as in :func:`halo_inference`. Returns per hidden layer float32 [k, d] (on the host).
    A model that reads edge features: ``sample_fn`` returns the drawn edges' CSC positions third,
    and ``edge_rows(positions)`` gives their float32 [M, De] rows (every layer reads the same edges).
    A typed part (``features`` a :class:`~gnnscale.data.typed_store.TypedFeatureStore`):
    ``sample_fn`` returns the drawn edges' relations third (``sample_owned_typed``), the sources'
    node types come from the book, and ``inputs`` (``x -> x``, collective) attaches the
    featureless types' rows to the fetched TypedInput before the encoder.
    """
    k = nodes.numel()
    drawn = sample_fn(nodes)
    counts, nbrs = drawn[0], drawn[1]
    attr = etype = ntype = None
    typed_book = features.book if isinstance(features, TypedFeatureStore) else None
    if typed_book is not None:
        etype = drawn[2]
    elif model.uses_edge_attr:
        if edge_rows is None or len(drawn) < 3:
            raise ModelError("refresh_embeddings: the model reads edge features; sample_fn must return the drawn "
                             "edges' positions (return_edges=True) and edge_rows must map them to their rows")
        attr = edge_rows(drawn[2])
    src, nbr_local = relabel(nodes, nbrs)
    edge_index = torch.stack([nbr_local, torch.repeat_interleave(torch.arange(k), counts, output_size=nbrs.numel())])
    deg = _degrees(node_degree, src) if node_degree is not None and model.uses_degree else None
    x = features.fetch(src)
    if typed_book is not None:
        ntype = typed_book.ntype(src)
    if inputs is not None:
        x = inputs(x)
    h, x0 = model.encode(x)
    x0_dst = x0[:k] if x0 is not None else None
    out = []
    for i in range(model.num_layers - 1):
        if i > 0:
            h = halo.history(i, src)
        h = model.layer_step(i, h, h[:k], edge_index, x0_dst, deg, edge_attr=attr, edge_type=etype,
                             node_type=ntype)
        out.append(h.cpu())  # pushed from the host's halo tables
    return out
