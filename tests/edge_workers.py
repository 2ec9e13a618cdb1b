"""Worker bodies of the edge-feature tests (importable by spawned processes): exact layer-wise
inference of models that read edge features, on this rank's part."""
from __future__ import annotations

import torch


def streamed_edge_logits(parts_dir: str, specs: list, states: list, slice_bytes: int) -> dict:
    """Every owned node's logits of each model ``ModelSpec(**specs[k])`` with weights ``states[k]``,
    by streamed layer-wise inference over this rank's part with its edge features (slices of about
    ``slice_bytes``: several per layer), and the halo-table driver's too; with the nodes' original
    ids and the bytes counted by category."""
    from gnnscale.data.feature_store import DistFeatureStore
    from gnnscale.history.halo import HaloExchange
    from gnnscale.tasks.inference import halo_inference, streamed_inference
    from gnnscale.nn.spec import ModelSpec
    from gnnscale.partitioning import load_part
    from gnnscale.process.comm import Communicator
    from gnnscale.process.groups import init_distributed

    info = init_distributed(timeout=60)
    part = load_part(parts_dir, info.rank)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    features = DistFeatureStore(part, part.book, comm, part.meta["feature_dim"])
    streamed, halo_out = [], []
    for spec, state in zip(specs, states):
        net = ModelSpec(**spec).build()
        net.load_state_dict(state)
        net.eval()
        streamed.append(streamed_inference(net, part.indptr, part.indices, features, slice_bytes=slice_bytes,
                                           edge_attr=part.edge_attr))
        halo = HaloExchange(part.indptr, part.indices, part.book, comm, net.dims[1:net.num_layers], 4)
        halo_out.append(halo_inference(net, part.indptr, part.feature_rows(), features, halo, step=0,
                                       chunk_edges=2048, edge_attr=part.edge_attr))
    return {"orig_ids": part.orig_ids.clone(), "streamed": streamed, "halo": halo_out,
            "sent": dict(comm.stats.sent)}


def historical_vs_exact_edges(parts_dir: str, spec: dict, state: dict, fanouts: list) -> dict:
    """Historical exchange with edge features against exact sampling, on full neighbourhoods: the
    halo tables filled by layer-wise inference (edge rows per slice), then this rank's seeds (every
    7th owned node) through exact blocks and through historical blocks (remote leaves read from the
    tables; every block with its edges' rows), and the refresh rule (one hop over histories, the
    drawn edges' rows) against the tables' own rows."""
    from gnnscale.data.feature_store import DistFeatureStore
    from gnnscale.history.halo import HaloExchange
    from gnnscale.tasks.inference import halo_inference, refresh_embeddings
    from gnnscale.nn.spec import ModelSpec
    from gnnscale.partitioning import load_part
    from gnnscale.process.comm import Communicator
    from gnnscale.process.groups import init_distributed
    from gnnscale.samplers import DistNeighborSampler
    from gnnscale.samplers.kernels import Kernels

    info = init_distributed(timeout=60)
    part = load_part(parts_dir, info.rank)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    store = DistFeatureStore(part, part.book, comm, part.meta["feature_dim"])
    net = ModelSpec(**spec).build()
    net.load_state_dict(state)
    net.eval()
    L = net.num_layers
    halo = HaloExchange(part.indptr, part.indices, part.book, comm, net.dims[1:L], 4)
    halo_inference(net, part.indptr, part.feature_rows(), store, halo, step=-1, edge_attr=part.edge_attr)
    seeds = torch.arange(part.offset, part.offset + part.num_owned, 7)
    out, leaves = {}, 0
    with torch.no_grad():
        for mode in ("exact", "historical"):
            sampler = DistNeighborSampler(part.indptr, part.indices, part.book, comm, fanouts, seed=3,
                                          owned_keys=part.orig_ids, mode=mode, edge_attr=part.edge_attr)
            mb = sampler.sample(seeds, epoch=0, step=0)
            hist = None
            if mode == "historical":
                hist = [halo.lookup(i, b.hist_ids, 0) if b.num_hist else None for i, b in enumerate(mb.blocks)]
                leaves = sum(b.num_hist for b in mb.blocks)
            out[mode] = net(store.fetch(mb.input_ids), mb.blocks, hist=hist)
    kernels = Kernels(part.book.num_nodes, "cpu", "torch")
    nodes = halo.boundary[::5]

    def sample_fn(ids):
        rows = ids - part.offset
        return kernels.sample(part.indptr, part.indices, rows, part.orig_ids[rows], -1, 0, return_edges=True)

    fresh = refresh_embeddings(net, nodes, sample_fn, kernels.relabel, store, halo,
                               edge_rows=lambda edges: part.edge_attr[edges])
    refresh_err = max((float((f - halo.own_tables[l][nodes - part.offset]).abs().max()) if nodes.numel() else 0.0)
                      for l, f in enumerate(fresh))
    return {"exact": out["exact"], "historical": out["historical"], "leaves": leaves, "refresh_err": refresh_err,
            "refreshed": int(nodes.numel())}
