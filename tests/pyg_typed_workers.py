"""Worker of tests/test_pyg_typed_own_part.py (spawned by gnnscale.process.launch.launch_local)."""
from __future__ import annotations


def acm_store_batches(root: str, parts_dir, graph_store: str, fanouts: dict, batch_size: int, seed: int,
                      pairs) -> dict:
    """Two passes of this rank's paper batches of ACM and one of link batches of ``pairs``
    (``(relation, int64 [2, B])``) over ``start_run(parts_dir, graph_store=...)`` (a folder, or one per rank:
    a host's folder), in acm_batches' layout; the store, the edges it holds and the bytes by category."""
    import os

    from gnnscale.pyg import start_run

    if isinstance(parts_dir, list):
        parts_dir = parts_dir[int(os.environ["RANK"])]
    run = start_run(parts_dir, timeout=60, graph_store=graph_store)
    loader = run.node_loader(fanouts, "train", batch_size=batch_size, shuffle=True, seed=seed)
    passes = [[dict(k=k, repeat=loader.batch_sampler.is_repeat(k), n_id={t: b[t].n_id for t in b.node_types},
                    e_id={et: b[et].e_id for et in b.edge_types}, ei={et: b[et].edge_index for et in b.edge_types},
                    y=b["paper"].y, x={t: b[t].x for t in b.node_types if "x" in b[t]},
                    nsn=b.num_sampled_nodes_dict) for k, b in enumerate(loader)] for _ in range(2)]
    links = run.link_loader([3, 2], pairs, neg_sampling_ratio=1.5, batch_size=64, shuffle=True, seed=seed)
    et = pairs[0]
    link = [dict(k=k, n_id={t: b[t].n_id for t in b.node_types}, e_id={r: b[r].e_id for r in b.edge_types},
                 eli=b[et].edge_label_index, label=b[et].edge_label) for k, b in enumerate(links)]
    gs = run.graph_store
    held = gs.held_edges() if hasattr(gs, "held_edges") else sum(int(c[1].numel()) for c in gs.relation_csc().values())
    out = dict(batches=passes[0], passes=passes, links=link, store=type(gs).__name__, held=held,
               comm=run.comm.stats.snapshot(), world=run.world_size)
    run.close()
    return out
