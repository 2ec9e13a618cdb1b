"""Worker functions of tests/test_pyg_global_steps.py (spawned by gnnscale.process.launch.launch_local)."""
from __future__ import annotations

import torch


def _edges(b, coo) -> torch.Tensor:
    """int64 [M, 2]: (destination, source) original ids of the batch's edges, checked against e_id."""
    src, dst = b.n_id[b.edge_index]
    assert torch.equal(coo[:, b.e_id], torch.stack([src, dst]))
    return torch.stack([dst, src], 1)


def step_batches(parts_dir: str, fanouts, batch_size: int, seed: int, pairs: torch.Tensor) -> dict:
    """One pass of this rank's node batches (train split) and of its link batches (ratio 2) at
    ``batch_size`` each: seeds, nodes and edges in original ids, negatives."""
    from gnnscale.pyg import start_run

    run = start_run(parts_dir, timeout=60)
    coo = run.graph_store.coo_of()
    loader = run.node_loader(fanouts, "train", batch_size=batch_size, shuffle=True, seed=seed)
    nodes = [dict(k=k, repeat=loader.batch_sampler.is_repeat(k), n_id=b.n_id, bs=b.batch_size, edges=_edges(b, coo))
             for k, b in enumerate(loader)]
    links = run.link_loader(fanouts, pairs, neg_sampling_ratio=2.0, batch_size=batch_size, shuffle=True, seed=seed)
    link = [dict(k=k, repeat=links.batch_sampler.is_repeat(k), n_id=b.n_id, eli=b.n_id[b.edge_label_index],
                 label=b.edge_label, edges=_edges(b, coo)) for k, b in enumerate(links)]
    out = dict(nodes=nodes, links=link, world=run.world_size, metrics=_link_metrics(run, fanouts, batch_size, seed, pairs))
    run.close()
    return out


def _link_metrics(run, fanouts, batch_size: int, seed: int, pairs: torch.Tensor) -> dict:
    """run.link_metrics of a fixed GraphSAGE (dot scores): mrr over triplet batches (3 negatives per
    positive), hits@10 and auc over binary ones (ratio 2)."""
    from torch_geometric.nn.models import GraphSAGE

    torch.manual_seed(0)
    model = GraphSAGE(1433, 16, num_layers=len(fanouts), out_channels=16)

    def triplet(b):
        h = model(b.x, b.edge_index)
        s = h[b.src_index]
        return (s * h[b.dst_pos_index]).sum(-1), (s[:, None] * h[b.dst_neg_index]).sum(-1)

    def binary(b):
        h = model(b.x, b.edge_index)
        return (h[b.edge_label_index[0]] * h[b.edge_label_index[1]]).sum(-1)

    trips = run.link_loader(fanouts, pairs, neg_sampling=dict(mode="triplet", amount=3), batch_size=batch_size,
                            seed=seed)
    pairs2 = run.link_loader(fanouts, pairs, neg_sampling_ratio=2.0, batch_size=batch_size, seed=seed)
    return run.link_metrics(model, trips, triplet, "mrr") | run.link_metrics(model, pairs2, binary, "hits@10") \
        | run.link_metrics(model, pairs2, binary, "auc")


def train_steps(parts_dir: str, fanouts, batch_size: int, seed: int, dropout: float = 0.0) -> dict:
    """One epoch of a plain PyG loop (GraphSAGE, SGD; ``dropout`` > 0: keyed by node, keyed_dropout) at
    ``batch_size`` per process, each rank's mean loss scaled by ``loss_scale`` (its share of the
    step): each step's scaled loss on this rank, and the final weights."""
    import torch.nn.functional as F
    from torch_geometric.nn.models import GraphSAGE

    from gnnscale.pyg import start_run, keyed_dropout

    torch.set_num_threads(1)
    run = start_run(parts_dir, timeout=60)
    loader = run.node_loader(fanouts, "train", batch_size=batch_size, shuffle=True, seed=seed)
    torch.manual_seed(seed)
    model = run.ddp(keyed_dropout(GraphSAGE(1433, 16, num_layers=len(fanouts), out_channels=7, dropout=dropout)))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for k, batch in enumerate(loader):
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        loss = F.cross_entropy(out, batch.y[:batch.batch_size]) * loader.batch_sampler.loss_scale(k)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    run.close()
    return dict(losses=losses, weights=weights, world=run.world_size)


def drop_in_batches(parts_dir: str, fanouts, batch_size: int, seed: int, train_ids: torch.Tensor) -> dict:
    """One pass of gnnscale.pyg.distributed.DistNeighborLoader as PyG's node_ogb_cpu.py builds it:
    the stores from_partition(folder, rank), a DistContext, this rank's contiguous share of
    ``train_ids`` (PyG's partition_graph.py split), PyG's RPC arguments given (ignored)."""
    import os

    from gnnscale.pyg.distributed import DistContext, DistNeighborLoader, LocalFeatureStore, LocalGraphStore

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])  # the loader joins the group
    ctx = DistContext(rank=rank, global_rank=rank, world_size=world, global_world_size=world, group_name="t")
    graph = LocalGraphStore.from_partition(parts_dir, rank)
    feature = LocalFeatureStore.from_partition(parts_dir, rank)
    mine = train_ids.split(train_ids.numel() // world)[rank]
    loader = DistNeighborLoader((feature, graph), num_neighbors=fanouts, master_addr="localhost", master_port=11112,
                                current_ctx=ctx, input_nodes=mine, batch_size=batch_size, shuffle=True, seed=seed,
                                num_workers=4, persistent_workers=True, concurrency=4, async_sampling=True)
    coo = graph.coo_of()  # the opened PartitionGraphStore's
    out = [dict(n_id=b.n_id, bs=b.batch_size, seeds=b.n_id[:b.batch_size], edges=_edges(b, coo), y=b.y)
           for b in loader]
    return dict(batches=out, meta=graph.meta, world=world)
