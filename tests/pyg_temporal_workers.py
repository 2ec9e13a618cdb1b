"""Worker bodies of gnnscale.pyg's temporal rank loader tests (importable by spawned processes)."""
from __future__ import annotations

import torch

CONFIGS = [dict(temporal_strategy="uniform"), dict(temporal_strategy="last", time_cut="<"),
           dict(temporal_strategy="uniform", time_window=20_000, time_cut="<")]


def _fields(b, k: int, loader) -> dict:
    out = dict(k=k, repeat=loader.batch_sampler.is_repeat(k), n_id=b.n_id, edge_index=b.edge_index, e_id=b.e_id,
               batch=b.batch, edge_time=b.get("edge_time"), input_id=b.input_id)
    if "edge_label_index" in b:
        out.update(eli=b.n_id[b.edge_label_index], label=b.edge_label, eli_local=b.edge_label_index)
    return out


def temporal_batches(parts_dir: str, fanouts, seeds: torch.Tensor, seed_time: torch.Tensor, pairs: torch.Tensor,
                     pair_time: torch.Tensor, batch_size: int, seed: int, graph_store: str, graph=None,
                     node_graph=None) -> dict:
    """This rank's node batches (per config of CONFIGS) and link batches over the temporal folder; with
    ``graph`` (the Data in memory, ``data=``) one more node pass of CONFIGS[0] over it; with ``node_graph``
    (a Data with node times) a link pass over it."""
    from gnnscale.pyg import start_run

    run = start_run(parts_dir, timeout=60, graph_store=graph_store)
    nodes = []
    for cfg in CONFIGS:
        loader = run.node_loader(fanouts, seeds, batch_size=batch_size, shuffle=True, seed=seed, time_attr="edge_time",
                                 input_time=seed_time, **cfg)
        nodes.append([_fields(b, k, loader) for k, b in enumerate(loader)])
    links = run.link_loader(fanouts, pairs, neg_sampling_ratio=1.0, batch_size=batch_size, shuffle=True, seed=seed,
                            time_attr="edge_time", edge_label_time=pair_time, time_cut="<")
    link = [_fields(b, k, links) for k, b in enumerate(links)]
    if graph is not None:
        loader = run.node_loader(fanouts, seeds, batch_size=batch_size, shuffle=True, seed=seed, time_attr="edge_time",
                                 input_time=seed_time, data=graph, **CONFIGS[0])
        nodes.append([_fields(b, k, loader) for k, b in enumerate(loader)])
    node_time = []
    if node_graph is not None:  # a Data with node times in memory: a step's negatives redrawn in time
        loader = run.link_loader(fanouts, pairs, neg_sampling_ratio=1.0, batch_size=batch_size, shuffle=True,
                                 seed=seed, time_attr="time", edge_label_time=pair_time, time_cut="<", data=node_graph)
        node_time = [_fields(b, k, loader) for k, b in enumerate(loader)]
        loader = run.link_loader(fanouts, pairs, neg_sampling_ratio=1.5, batch_size=batch_size, shuffle=True,
                                 seed=seed, time_attr="time", edge_label_time=pair_time, time_cut="<", data=node_graph)
        node_time.append([_fields(b, k, loader) for k, b in enumerate(loader)])
    out = dict(nodes=nodes, links=link, node_time=node_time, comm=run.comm.stats.snapshot(), store=type(run.graph_store).__name__)
    run.close()
    return out
