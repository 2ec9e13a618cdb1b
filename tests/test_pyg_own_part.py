"""The own-part graph store (gnnscale.pyg.own_part): each rank holds its part's topology only, the other
parts' nodes sampled by their owners; its batches on 2 processes (gloo on 127.0.0.1, launch_local: free
port, bounded waits) are the whole-topology store's, batch for batch, and one process's step for step;
the store chosen by size unless asked."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.errors import GnnscaleError
from gnnscale.pyg import NeighborLoader
from gnnscale.process.launch import launch_local
from gnnscale.pyg.own_part import WHOLE_TOPOLOGY_BYTES, choose_graph_store, open_graph_store

from pyg_workers import cora_batches

FANOUTS = [5, 3]


def _host_folder(full: str, part: int, out: Path) -> str:
    """A host's folder: meta.json and part ``part`` only (as on separate hosts)."""
    out.mkdir()
    shutil.copy(Path(full) / "meta.json", out / "meta.json")
    shutil.copytree(Path(full) / f"part{part}", out / f"part{part}")
    return str(out)


def test_own_part_batches_are_the_whole_topology_batches(cora, cora_partition, tmp_path):
    """Rank r holds part r only (its own host folder): every node and link batch of 2 passes, field by
    field (n_id, edge_index, e_id, x, y, per-hop counts; pairs, labels, negatives), is the whole-topology
    store's, and each step's two batches together are one process's batch at twice the batch size (its
    seeds in rank order, its edges); the draws crossed the ranks (sample_request / sample_response
    bytes), the graph sent was the parts' ids, masks and degrees (3 int64 per node), not their edges."""
    full = cora_partition(2)
    pairs = cora.edge_index[:, torch.arange(0, cora.edge_index.size(1), 37)]
    folders = [_host_folder(full, r, tmp_path / f"host{r}") for r in range(2)]
    own = launch_local(cora_batches, 2, args=(folders, FANOUTS, 16, 7, None, pairs, "own"), threads_per_worker=1)
    whole = launch_local(cora_batches, 2, args=(full, FANOUTS, 16, 7, None, pairs, "whole"), threads_per_worker=1)
    for r in range(2):
        a, b = own[r], whole[r]
        assert (a["store"], b["store"]) == ("OwnPartGraphStore", "PartitionGraphStore")
        assert [len(p) for p in a["nodes"]] == [len(p) for p in b["nodes"]] and len(a["nodes"][0]) > 3
        for pa, pb in zip(a["nodes"], b["nodes"]):
            for x, y in zip(pa, pb):
                assert x.keys() == y.keys()
                for key in x:
                    same = torch.equal(x[key], y[key]) if isinstance(x[key], torch.Tensor) else x[key] == y[key]
                    assert same, (r, x["k"], key)
        assert len(a["links"]) == len(b["links"]) > 1
        for x, y in zip(a["links"], b["links"]):
            for key in x:
                assert (torch.equal(x[key], y[key]) if isinstance(x[key], torch.Tensor) else x[key] == y[key]), key
        n_r = np.load(Path(full) / f"part{r}" / "orig_ids.npy", mmap_mode="r").shape[0]
        assert a["comm"]["sent"]["graph"] == 8 * 3 * n_r
        assert a["comm"]["sent"]["sample_request"] > 0 and a["comm"]["received"]["sample_response"] > 0
        assert a["comm"]["sent"].get("negative_filter_request", 0) > 0
        assert b["comm"]["sent"].get("sample_request", 0) == 0
    # and so one process's: step k's two batches (rank order) are its batch k at twice the batch size
    ref = NeighborLoader(cora, num_neighbors=FANOUTS, input_nodes=cora.train_mask, batch_size=32, shuffle=True, seed=7)
    for ep, ref_pass in enumerate([list(ref) for _ in range(2)]):
        for k, one in enumerate(ref_pass):
            step = [b for r in range(2) for b in own[r]["nodes"][ep] if b["k"] == k and not b["repeat"]]
            assert torch.equal(torch.cat([b["n_id"][:b["batch_size"]] for b in step]), one.n_id[:one.batch_size])
            got = {(d, s_) for b in step for s_, d in zip(*b["n_id"][b["edge_index"]].tolist())}
            assert got == set(zip(one.n_id[one.edge_index[1]].tolist(), one.n_id[one.edge_index[0]].tolist()))


def test_the_graph_store_is_chosen_by_size_and_the_option_honoured(cora_partition):
    """auto: the whole topology while 16 E + 24 N bytes <= 1 GiB or one process, else the own part; 'own'
    and 'whole' as asked; a typed folder likewise (by its whole store's size); a bad value is one line."""
    small = {"num_nodes": 1000, "num_edges": 10_000}
    big = {"num_nodes": 10_000_000, "num_edges": WHOLE_TOPOLOGY_BYTES // 16}
    assert choose_graph_store(small, 2)[0] == "whole"
    kind, line = choose_graph_store(big, 2)
    assert kind == "own" and line.startswith("graph store 'own': each rank holds its part only") and "\n" not in line
    assert choose_graph_store(big, 1)[0] == "whole"
    assert choose_graph_store(small, 2, "own")[0] == "own" and choose_graph_store(big, 4, "whole")[0] == "whole"
    # a typed folder by size too (its whole store: 32 E + 24 N bytes), and 'own' as asked
    assert choose_graph_store({**small, "format_version": 2}, 2)[0] == "whole"
    kind, line = choose_graph_store({**big, "num_edges": WHOLE_TOPOLOGY_BYTES // 32, "format_version": 2}, 2)
    assert kind == "own" and "would take 1.22 GiB > 1 GiB per rank" in line
    assert choose_graph_store({**small, "format_version": 2}, 2, "own")[0] == "own"
    with pytest.raises(GnnscaleError, match=r"^graph_store must be one of auto, own, whole; found 'mine'"):
        choose_graph_store(small, 2, "mine")


def test_graph_store_on_a_graph_in_memory_is_refused_in_one_line(cora):
    """graph_store chooses how a folder's topology is held: given with a graph held in memory (no
    parts_dir) it is refused before the group is joined, not ignored."""
    from gnnscale.pyg import start_run

    with pytest.raises(GnnscaleError, match=r"^graph_store='own' chooses how a partition folder's topology is held"):
        start_run(cora, graph_store="own")


def test_own_part_store_in_one_process_gives_the_whole_stores_batches(cora_partition, caplog):
    """One process (a one-part folder): PyG's own NodeLoader over (features, own-part graph) with
    sampler_for yields the whole store's batches (n_id, edge_index, e_id, x); the cache's in-degree
    order reads the own-part store's in-degrees, the whole store's. open_graph_store says its choice
    in one log line."""
    from torch_geometric.loader import NodeLoader

    from gnnscale.process.comm import Communicator
    from gnnscale.pyg import OwnPartGraphStore, PartitionFeatureStore, PartitionGraphStore, sampler_for

    folder, comm = cora_partition(1), Communicator(0, 1)
    got = []
    for store in (OwnPartGraphStore, PartitionGraphStore):
        graph = store(folder, comm)
        features = PartitionFeatureStore(graph, comm)
        loader = NodeLoader((features, graph), sampler_for((features, graph), FANOUTS, seed=3),
                            input_nodes=features.mask_ids("train_mask"), batch_size=32)
        got.append(([(b.n_id, b.edge_index, b.e_id, b.x) for b in loader], graph.in_degrees()))
    (own, own_deg), (whole, whole_deg) = got
    with caplog.at_level(logging.INFO, logger="gnnscale.pyg"):
        assert type(open_graph_store(folder, comm)).__name__ == "PartitionGraphStore"
        assert type(open_graph_store(folder, comm, "own")).__name__ == "OwnPartGraphStore"
    assert [r.getMessage() for r in caplog.records if r.name == "gnnscale.pyg"] == [
        "gnnscale.pyg: graph store 'whole' (one process; graph_store='own' keeps each rank's part only)",
        "gnnscale.pyg: graph store 'own' (as asked; the whole topology takes 0.00 GiB per rank)"]
    assert len(own) == len(whole) == 5 and torch.equal(own_deg, whole_deg)
    assert all(torch.equal(a, b) for x, y in zip(own, whole) for a, b in zip(x, y))
