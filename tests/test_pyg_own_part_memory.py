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


def _kept(g) -> dict:
    """What the rank kept of the opening's rounds, against the folder's whole maps (read here, every part
    being in the folder): its home range's new ids, its sources' packed ids, its nodes' first e_id."""
    from gnnscale.pyg.id_maps import pack

    parts = range(g.book.num_parts)
    old_of_new = torch.cat([torch.from_numpy(np.load(g.parts_dir / f"part{p}" / "orig_ids.npy")) for p in parts])
    deg_new = torch.cat([torch.from_numpy(np.diff(np.load(g.parts_dir / f"part{p}" / "indptr.npy"))) for p in parts])
    new_of_old = torch.empty_like(old_of_new)
    new_of_old[old_of_new] = torch.arange(old_of_new.numel())
    deg = deg_new[new_of_old]  # by original id
    lo, hi = g.homes.span(g.rank)
    src = torch.from_numpy(np.load(g.parts_dir / f"part{g.rank}" / "indices.npy"))
    return dict(home=torch.equal(g.directory.new_of_home, new_of_old[lo:hi]),
                sources=torch.equal(g.indices, pack(src, old_of_new[src])),
                starts=torch.equal(g.edge_start, (torch.cumsum(deg, 0) - deg)[g.orig]),
                rounds=g.comm.stats.rounds.get("graph", 0))


def own_part_arrays(folder: str, pairs: torch.Tensor) -> dict:
    """One rank: the own-part store, a pass of node batches and one of link batches (negatives filtered by
    their owners), then the live arrays with N or N + 1 rows (the run still open)."""
    from gnnscale.pyg import OwnPartGraphStore, start_run

    OwnPartGraphStore.chunk_values = 300  # this worker's class: the opening's exchange in many rounds
    run = start_run(folder, timeout=60, graph_store="own")
    node_loader = run.node_loader([5, 3], "train", batch_size=16, shuffle=True, seed=1)
    link_loader = run.link_loader([5, 3], pairs, neg_sampling_ratio=1.0, batch_size=64, shuffle=True, seed=1)
    nodes = [b.n_id.numel() for b in node_loader]  # the loaders (their samplers) kept while the arrays are listed
    links = [b.n_id.numel() for b in link_loader]
    n = run.graph_store.num_nodes
    gc.collect()
    g = run.graph_store
    out = dict(found=_graph_sized(n), nodes=nodes, links=links, n=n, kept=_kept(g),
               home=g.directory.new_of_home.numel() if hasattr(g, "directory") else None,
               part=g.orig.numel() if hasattr(g, "orig") else None,
               met=len(g.batch_ids) if getattr(g, "batch_ids", None) is not None else None)
    run.close()
    return out


def test_no_rank_of_the_own_part_store_holds_an_array_over_every_node(cora, cora_partition):
    """2 ranks over Cora: every array a rank holds after node and link batches is sized by its part, its
    home range of ids or the batch, never by N (2708): the whole id maps, in-degrees, split bits, the
    relabeler's direct table and the first-hop levels are gone; the one left is the engine feature
    store's bool [N] of the ids fetched since its stats were reset (``distinct_rows``). What a rank kept of
    the opening's exchange (in rounds of 100 nodes here) is the folder's: its home range's new ids, its
    sources' packed ids, its nodes' first e_id in the original-id CSC."""
    pairs = cora.edge_index[:, torch.arange(0, cora.edge_index.size(1), 41)]
    res = launch_local(own_part_arrays, 2, args=(cora_partition(2), pairs), threads_per_worker=1)
    for r in res:
        assert len(r["nodes"]) > 3 and len(r["links"]) > 1 and r["n"] == cora.num_nodes
        assert r["found"] == [("tensor", (cora.num_nodes,), "torch.bool")], r["found"]
        assert r["kept"] == dict(home=True, sources=True, starts=True, rounds=r["kept"]["rounds"])
        assert r["kept"]["rounds"] >= 13  # ceil(1354 / 100) rounds of 100 nodes
        assert r["home"] == cora.num_nodes // 2 and 0 < r["part"] < cora.num_nodes
        assert 0 < r["met"] < cora.num_nodes


def test_the_id_tables_without_numba_give_the_same_ids(monkeypatch):
    """pack_range and BatchIds without numba (sorted arrays, numpy masks) answer as the compiled ones."""
    from gnnscale.pyg import id_maps

    g = torch.Generator().manual_seed(0)
    keys = torch.randint(0, 1 << 30, (5000,), generator=g)
    src = torch.randint(0, 3000, (20000,), generator=g).numpy()
    orig = torch.randperm(1000, generator=g).numpy() + 7
    got = []
    for numba in (id_maps.HAVE_NUMBA, False):
        monkeypatch.setattr(id_maps, "HAVE_NUMBA", numba)
        out = np.full(src.shape[0], -1, dtype=np.int64)
        id_maps.pack_range(src, out, 1000, orig)
        ids = id_maps.BatchIds(capacity=16)
        ids.add(keys[:3000], keys[:3000] * 3)
        ids.add(keys[2000:], keys[2000:] * 3)  # repeats, and growth past the first table
        known, new = ids.find(torch.cat([keys, torch.tensor([-1, 1 << 31])]))
        got.append((out, known, new[known], len(ids)))
    (a, ka, na, la), (b, kb, nb, lb) = got
    assert np.array_equal(a, b) and torch.equal(ka, kb) and torch.equal(na, nb) and la == lb == keys.unique().numel()
    assert ka[:-2].all() and not ka[-2:].any() and torch.equal(na, keys * 3)
    inside = (src >= 1000) & (src < 2000)
    assert np.array_equal(a[inside], (src[inside] << 32) | orig[src[inside] - 1000]) and (a[~inside] == -1).all()
