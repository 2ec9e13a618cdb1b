"""Worker of tests/test_pyg_typed_temporal_run.py (spawned by gnnscale.process.launch.launch_local)."""
from __future__ import annotations

CONFIGS = [dict(), dict(temporal_strategy="last", time_cut="<"), dict(time_window=300, time_cut="<")]


def _fields(b, k: int, loader) -> dict:
    return dict(k=k, repeat=loader.batch_sampler.is_repeat(k), n_id={t: b[t].n_id for t in b.node_types},
                batch={t: b[t].batch for t in b.node_types}, ei={et: b[et].edge_index for et in b.edge_types},
                e_id={et: b[et].e_id for et in b.edge_types}, edge_time={et: b[et].get("edge_time") for et in b.edge_types},
                input_id={**{t: b[t].input_id for t in b.node_types if "input_id" in b[t]},
                          **{et: b[et].input_id for et in b.edge_types if "input_id" in b[et]}},
                eli={et: b[et].edge_label_index for et in b.edge_types if "edge_label_index" in b[et]},
                label={et: b[et].edge_label for et in b.edge_types if "edge_label" in b[et]})


def typed_temporal_batches(data, parts_dir: str, fanouts, seeds, seed_time, rel, pairs, pair_time, batch_size: int,
                           seed: int, node_data=None) -> dict:
    """This rank's paper batches per config of CONFIGS and link batches of ``rel`` over
    ``start_run(data, parts_dir)`` (rank 0 partitions the HeteroData with its times), then a node pass
    (CONFIGS[1]) and the link pass over ``data`` in memory (``data=``), and a link pass over ``node_data``
    (a HeteroData with node times) in memory."""
    from gnnscale.pyg import start_run

    run = start_run(data, parts_dir=parts_dir, timeout=60, method="random")
    nodes = []
    for cfg in CONFIGS:
        loader = run.node_loader(fanouts, ("paper", seeds), batch_size=batch_size, shuffle=True, seed=seed,
                                 time_attr="edge_time", input_time=seed_time, **cfg)
        nodes.append([_fields(b, k, loader) for k, b in enumerate(loader)])
    links = run.link_loader(fanouts, (rel, pairs), neg_sampling_ratio=1.0, batch_size=batch_size, shuffle=True,
                            seed=seed, time_attr="time", edge_label_time=pair_time, time_cut="<")
    link = [_fields(b, k, links) for k, b in enumerate(links)]
    # the HeteroData in memory (data=): the one-process typed temporal sampler, its steps shared
    loader = run.node_loader(fanouts, ("paper", seeds), batch_size=batch_size, shuffle=True, seed=seed,
                             time_attr="edge_time", input_time=seed_time, data=data, **CONFIGS[1])
    nodes.append([_fields(b, k, loader) for k, b in enumerate(loader)])
    links = run.link_loader(fanouts, (rel, pairs), neg_sampling_ratio=1.0, batch_size=batch_size, shuffle=True,
                            seed=seed, time_attr="edge_time", edge_label_time=pair_time, time_cut="<", data=data)
    memory = [_fields(b, k, links) for k, b in enumerate(links)]
    links = run.link_loader(fanouts, (rel, pairs), neg_sampling_ratio=1.0, batch_size=batch_size, shuffle=True,
                            seed=seed, time_attr="time", edge_label_time=pair_time, time_cut="<", data=node_data)
    node_time = [_fields(b, k, links) for k, b in enumerate(links)]
    out = dict(nodes=nodes, links=link, memory=memory, node_time=node_time, comm=run.comm.stats.snapshot(), store=type(run.graph_store).__name__)
    run.close()
    return out
