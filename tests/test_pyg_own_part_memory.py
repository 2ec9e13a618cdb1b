"""Memory per rank follows the part (issue 56): after opening the own-part graph store and sampling node
and link batches on 2 processes (gloo on 127.0.0.1, launch_local: free port, bounded waits), no array in
a rank is sized by the whole graph's node count: the id maps are per part (each rank the new ids of its
home range of original ids, the owners' answers carrying each neighbour's new id) and the sampler's
relabel and first-hop tables are batch-sized."""
from __future__ import annotations

import gc

import numpy as np
import torch

from gnnscale.process.launch import launch_local


def _graph_sized(n: int) -> list[tuple[str, tuple, str]]:
    """(kind, shape, dtype) of every live tensor or array of this process with n or n + 1 rows (arrays,
    which the collector does not track, through the objects that hold them)."""
    found, seen = [], set()
    tracked = gc.get_objects()
    for o in tracked + [a for t in tracked for a in gc.get_referents(t) if isinstance(a, np.ndarray)]:
        if isinstance(o, torch.Tensor) and o.dim() and o.shape[0] in (n, n + 1):
            ptr = o.untyped_storage().data_ptr()
            if ptr not in seen:
                seen.add(ptr)
                found.append(("tensor", tuple(o.shape), str(o.dtype)))
        elif isinstance(o, np.ndarray) and o.base is None and o.ndim and o.shape[0] in (n, n + 1):
            if o.ctypes.data not in seen:
                seen.add(o.ctypes.data)
                found.append(("array", tuple(o.shape), str(o.dtype)))
    return found


def own_part_arrays(folder: str, pairs: torch.Tensor) -> dict:
    """One rank: the own-part store, a pass of node batches and one of link batches (negatives filtered by
    their owners), then the live arrays with N or N + 1 rows (the run still open)."""
    from gnnscale.pyg import start_run

    run = start_run(folder, timeout=60, graph_store="own")
    node_loader = run.node_loader([5, 3], "train", batch_size=16, shuffle=True, seed=1)
    link_loader = run.link_loader([5, 3], pairs, neg_sampling_ratio=1.0, batch_size=64, shuffle=True, seed=1)
    nodes = [b.n_id.numel() for b in node_loader]  # the loaders (their samplers) kept while the arrays are listed
    links = [b.n_id.numel() for b in link_loader]
    n = run.graph_store.num_nodes
    gc.collect()
    g = run.graph_store
    out = dict(found=_graph_sized(n), nodes=nodes, links=links, n=n,
               home=g.directory.new_of_home.numel() if hasattr(g, "directory") else None,
               part=g.orig.numel() if hasattr(g, "orig") else None,
               met=len(g.batch_ids) if getattr(g, "batch_ids", None) is not None else None)
    run.close()
    return out


def test_no_rank_of_the_own_part_store_holds_an_array_over_every_node(cora, cora_partition):
    """2 ranks over Cora: every array a rank holds after node and link batches is sized by its part, its
    home range of ids or the batch, never by N (2708): the whole id maps, in-degrees, split bits, the
    relabeler's direct table and the first-hop levels are gone; the one left is the engine feature
    store's bool [N] of the ids fetched since its stats were reset (``distinct_rows``)."""
    pairs = cora.edge_index[:, torch.arange(0, cora.edge_index.size(1), 41)]
    res = launch_local(own_part_arrays, 2, args=(cora_partition(2), pairs), threads_per_worker=1)
    for r in res:
        assert len(r["nodes"]) > 3 and len(r["links"]) > 1 and r["n"] == cora.num_nodes
        assert r["found"] == [("tensor", (cora.num_nodes,), "torch.bool")], r["found"]
        assert r["home"] == cora.num_nodes // 2 and 0 < r["part"] < cora.num_nodes
        assert 0 < r["met"] < cora.num_nodes
