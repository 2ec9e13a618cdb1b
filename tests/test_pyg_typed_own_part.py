"""The typed own-part graph store (gnnscale.pyg.typed_own_part): over a typed folder (format 2) each rank holds
its part's in-edges per relation only, the other parts' nodes sampled by their owners; on 2 processes (gloo on
127.0.0.1, launch_local) its node and link batches are the whole-topology store's, field by field, and one
process's step for step; the store chosen by size."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.process.launch import launch_local
from gnnscale.pyg import NeighborLoader

from pyg_typed_workers import acm_store_batches
from pyg_workers import check_acm_steps

ACM = Path(__file__).resolve().parents[2] / "shared" / "data" / "acm"


def _same(x, y) -> bool:
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, list):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    return torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y


def test_typed_own_part_batches_are_the_whole_topology_batches(acm_data, tmp_path):
    """ACM in a 2-part typed folder; rank r's own host folder holds meta.json and part r only. Every node batch
    of 2 passes (per type n_id, x, y, per-hop counts; per relation edge_index and e_id; one relation with
    other fan-outs than the rest) and every link batch (pairs, labels, negatives) is the whole-topology store's,
    and step k's two batches together are one process's batch k at twice the batch size. Rank r holds exactly
    its part's in-edges (the part's etype.npy rows), not the graph's; the draws crossed the ranks
    (sample_request / sample_response), and the graph sent at opening was 2 int64 per node of the part and
    the e_id rounds' keys and counts (one int64 per edge of the graph in all), never the parts' edges."""
    from gnnscale.partitioning import partition_graph

    full = tmp_path / "acm-2"
    partition_graph(acm_data, 2, full, method="metis")
    hosts = []
    for r in range(2):
        hosts.append(tmp_path / f"host{r}")
        hosts[-1].mkdir()
        shutil.copy(full / "meta.json", hosts[-1] / "meta.json")
        shutil.copytree(full / f"part{r}", hosts[-1] / f"part{r}")
    fan = {et: [4, 2] for et in acm_data.edge_types}
    fan[acm_data.edge_types[0]] = [2, 3]
    et = ("paper", "written_by", "author")
    pairs = (et, acm_data[et].edge_index[:, ::40])
    own = launch_local(acm_store_batches, 2, args=(str(ACM), [str(h) for h in hosts], "own", fan, 16, 5, pairs),
                       threads_per_worker=1)
    whole = launch_local(acm_store_batches, 2, args=(str(ACM), str(full), "whole", fan, 16, 5, pairs),
                         threads_per_worker=1)
    total = sum(acm_data[rel].edge_index.size(1) for rel in acm_data.edge_types)
    for r in range(2):
        a, b = own[r], whole[r]
        assert (a["store"], b["store"]) == ("TypedOwnPartGraphStore", "TypedPartitionGraphStore")
        assert [len(p) for p in a["passes"]] == [len(p) for p in b["passes"]] == [2, 2]
        assert _same(a["passes"], b["passes"]), r
        assert len(a["links"]) == len(b["links"]) > 1 and _same(a["links"], b["links"]), r
        part_edges = np.load(full / f"part{r}" / "etype.npy", mmap_mode="r").shape[0]
        n_r = np.load(full / f"part{r}" / "orig_ids.npy", mmap_mode="r").shape[0]
        assert a["held"] == part_edges < total and b["held"] == total, (a["held"], part_edges, total)
        # ids and masks (2 per node), its keys and the counts for the other's (1 per edge of the graph), the totals
        assert a["comm"]["sent"]["graph"] == 8 * (2 * n_r + total) + 8 * len(acm_data.edge_types)
        assert a["comm"]["sent"]["sample_request"] > 0 and a["comm"]["received"]["sample_response"] > 0
        assert a["comm"]["sent"].get("negative_filter_request", 0) > 0
        assert b["comm"]["sent"].get("sample_request", 0) == 0
    ref = list(NeighborLoader(acm_data, num_neighbors=fan, input_nodes=("paper", acm_data["paper"].train_mask),
                              batch_size=32, shuffle=True, seed=5))
    steps = check_acm_steps(own, acm_data, ref)
    assert len(steps) == len(ref) == 2 and all(len(s) == 2 for s in steps.values())


def test_typed_own_part_store_in_one_process(acm_data, tmp_path):
    """One process (a one-part typed folder): PyG's own NodeLoader and LinkLoader over (features, own-part
    graph) with sampler_for give the whole typed store's batches; name_edges gives every relation the whole
    store's CSC and e_id (the HeteroData's columns); induced subgraphs and the whole edge_index are refused in
    one line each."""
    from torch_geometric.loader import LinkLoader, NodeLoader

    from gnnscale.errors import GnnscaleError
    from gnnscale.partitioning import partition_graph
    from gnnscale.process.comm import Communicator
    from gnnscale.pyg import TypedOwnPartGraphStore, TypedPartitionFeatureStore, TypedPartitionGraphStore, sampler_for
    from gnnscale.pyg.typed_own_part import TypedOwnPartSampler

    partition_graph(acm_data, 1, tmp_path / "one", method="metis")
    comm = Communicator(0, 1)
    fan = {et: [4, 2] for et in acm_data.edge_types}
    et = ("paper", "written_by", "author")
    got = []
    for store in (TypedOwnPartGraphStore, TypedPartitionGraphStore):
        gs = store(tmp_path / "one", comm)
        gs.name_edges(acm_data)
        fs = TypedPartitionFeatureStore(gs, comm)
        nodes = NodeLoader((fs, gs), sampler_for((fs, gs), fan, seed=3), input_nodes=fs.mask_ids("train_mask"),
                           batch_size=16)
        links = LinkLoader((fs, gs), sampler_for((fs, gs), [3, 2], seed=1),
                           edge_label_index=(et, acm_data[et].edge_index[:, ::50]), neg_sampling_ratio=1.5,
                           batch_size=100)
        got.append((gs, [(b.n_id_dict, b.edge_index_dict, b.e_id_dict) for b in [*nodes, *links]]))
    (own, a), (whole, b) = got
    assert len(a) == len(b) == 7 and _same([list(x) for x in a], [list(x) for x in b])
    for rel in acm_data.edge_types:
        assert all(torch.equal(x, y) for x, y in zip(own.relation_csc()[rel], whole.relation_csc()[rel])), rel
    with pytest.raises(GnnscaleError, match=r"^subgraph_type='induced' needs every edge among the drawn nodes"):
        TypedOwnPartSampler(own, fan, subgraph_type="induced")
    with pytest.raises(GnnscaleError, match=r"^a TypedOwnPartGraphStore holds only its own part's in-edges"):
        own.get_edge_index(edge_type=et, layout="coo")
