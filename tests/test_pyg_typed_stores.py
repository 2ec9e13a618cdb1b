"""gnnscale.pyg's typed folder stores (TypedPartitionGraphStore / TypedPartitionFeatureStore): a HeteroData
partitioned into a typed folder (format 2) gives PyG's loaders the batches of the HeteroData itself, in one
process (both ranks' stores opened here, host reads) and on 2 processes (gloo on 127.0.0.1, launch_local:
init_distributed(data, parts_dir=...), rows asked of their owners)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gnnscale.errors import PartitionError
from gnnscale.process.launch import launch_local
from gnnscale.pyg import LinkNeighborLoader, NeighborLoader, init_distributed, sampler_for

from pyg_workers import acm_batches

ACM = Path(__file__).resolve().parents[2] / "shared" / "data" / "acm"


@pytest.fixture(scope="module")
def acm_data():
    if not ACM.exists():
        pytest.skip(f"ACM is not at {ACM}")
    from gnnscale.datasets import load_dataset
    from gnnscale.datasets.hetero_data import to_hetero_data

    return to_hetero_data(load_dataset(f"acm:{ACM}?split=20"))


def test_typed_folder_stores_give_the_hetero_data_batches(acm_data, tmp_path):
    """ACM in a 2-part typed folder, both ranks' stores opened in this process (their communicators
    without a group: every other part's rows read from the folder, host reads): PyG's own NodeLoader
    and LinkLoader over (TypedPartitionFeatureStore, TypedPartitionGraphStore) yield the HeteroData's
    batches (per type n_id, x and y; per relation edges and e_id; the featureless subjects' n_id);
    the splits are the masks' ids; a cache serves the top remote rows; init_distributed over a
    1-part folder gives the same batches; wrong part counts and an untyped store on the folder are
    one line each."""
    from torch_geometric.loader import LinkLoader, NodeLoader

    from gnnscale.partitioning import partition_graph
    from gnnscale.process.comm import Communicator
    from gnnscale.pyg import PartitionGraphStore, TypedPartitionFeatureStore, TypedPartitionGraphStore

    data = acm_data
    partition_graph(data, 2, tmp_path, method="metis")
    gs = TypedPartitionGraphStore(tmp_path)
    assert gs.metadata() == data.metadata() and gs.num_nodes == {t: data[t].num_nodes for t in data.node_types}
    fan = {et: [4, 2] for et in data.edge_types}
    et = ("paper", "written_by", "author")
    pairs = data[et].edge_index[:, ::50]
    for rank in range(2):
        comm = Communicator(rank, 2)  # no group: host reads never exchange
        fs = TypedPartitionFeatureStore(gs, comm, cache_rows=300 if rank else 0)
        name, train = fs.mask_ids("train_mask")
        assert name == "paper" and torch.equal(train, torch.nonzero(data["paper"].train_mask).flatten())
        nodes = NodeLoader((fs, gs), sampler_for((fs, gs), fan, seed=3), input_nodes=(name, train), batch_size=16,
                           shuffle=True, generator=torch.Generator().manual_seed(3))
        ref = NeighborLoader(data, num_neighbors=fan, input_nodes=("paper", data["paper"].train_mask),
                             batch_size=16, shuffle=True, seed=3)
        links = LinkLoader((fs, gs), sampler_for((fs, gs), [3, 2], seed=1), edge_label_index=(et, pairs),
                           neg_sampling_ratio=1.5, batch_size=100)
        lref = LinkNeighborLoader(data, num_neighbors=[3, 2], edge_label_index=(et, pairs), neg_sampling_ratio=1.5,
                                  batch_size=100, seed=1)
        count = 0
        for a, b in [*zip(nodes, ref), *zip(links, lref)]:
            count += 1
            for t in data.node_types:
                assert torch.equal(a[t].n_id, b[t].n_id), t
                assert ("x" in a[t]) == ("x" in b[t]) and ("x" not in b[t] or torch.equal(a[t].x, b[t].x)), t
            assert torch.equal(a["paper"].y, b["paper"].y)
            for rel in data.edge_types:
                assert torch.equal(a[rel].edge_index, b[rel].edge_index) and torch.equal(a[rel].e_id, b[rel].e_id)
            assert a.num_sampled_nodes_dict == b.num_sampled_nodes_dict
            if "edge_label" in b[et]:
                assert torch.equal(a[et].edge_label_index, b[et].edge_label_index)
                assert torch.equal(a[et].edge_label, b[et].edge_label)
        assert count == len(ref) + len(lref) == 4 + 3
        stats = fs.stats
        assert stats["local_rows"] > 0 and stats["host_rows"] > 0 and stats["remote_rows"] == 0
        assert (stats["cache_hits"] > 0) == bool(rank) and comm.stats.bytes_sent == 0
    # init_distributed(typed folder) in one process: its split, node and link loaders give the same batches
    partition_graph(data, 1, tmp_path / "one", method="metis")
    run = init_distributed(tmp_path / "one", timeout=30)
    assert run.split("train")[0] == "paper" and torch.equal(run.split("train")[1], train)
    got = [*run.node_loader(fan, "train", batch_size=16, shuffle=True, seed=3),
           *run.link_loader([3, 2], (et, pairs), neg_sampling_ratio=1.5, batch_size=100, seed=1)]
    want = [*NeighborLoader(data, num_neighbors=fan, input_nodes=("paper", data["paper"].train_mask), batch_size=16,
                            shuffle=True, seed=3),
            *LinkNeighborLoader(data, num_neighbors=[3, 2], edge_label_index=(et, pairs), neg_sampling_ratio=1.5,
                                batch_size=100, seed=1)]
    for a, b in zip(got, want):
        for t in data.node_types:
            assert torch.equal(a[t].n_id, b[t].n_id), t
        for rel in data.edge_types:
            assert torch.equal(a[rel].e_id, b[rel].e_id)
    assert len(got) == len(want) == 7 and torch.equal(got[-1][et].edge_label_index, want[-1][et].edge_label_index)
    run.close()
    with pytest.raises(PartitionError) as err:
        TypedPartitionFeatureStore(gs, Communicator(0, 1))
    assert "\n" not in str(err.value) and "holds 2 parts but 1 processes were started" in str(err.value)
    with pytest.raises(PartitionError) as err:
        PartitionGraphStore(tmp_path)
    assert "\n" not in str(err.value) and "TypedPartitionGraphStore" in str(err.value)


def test_typed_folder_batches_on_two_processes_are_one_process_batches(acm_data, tmp_path):
    """Rank 0 partitions ACM's HeteroData into a typed folder (init_distributed(data, parts_dir=...)) and
    2 processes read it through the typed stores, the other part's rows asked of its owner (bytes under
    feature and label) but for the 100 cached. Every rank's batch is what it claims (x of every type
    with features and the papers' y are the graph's rows of n_id; e_id names each relation's edges
    between its endpoints' original ids); step k's batches of the ranks together are one process's
    batch k at twice the batch size: per type its nodes, per relation its edges."""
    data, procs, batch = acm_data, 2, 16
    results = launch_local(acm_batches, procs, args=(str(ACM), batch, 5, str(tmp_path / "acm-parts")),
                           threads_per_worker=1)
    ref = list(NeighborLoader(data, num_neighbors={et: [4, 2] for et in data.edge_types},
                              input_nodes=("paper", data["paper"].train_mask), batch_size=batch * procs, shuffle=True,
                              seed=5))
    steps: dict = {}
    for res in results:
        for b in res["batches"]:
            for t, x in b["x"].items():
                assert torch.equal(x, data[t].x[b["n_id"][t]]), t
            assert torch.equal(b["y"], data["paper"].y[b["n_id"]["paper"]])
            if b["repeat"]:
                continue
            steps.setdefault(b["k"], []).append(b)
            for et in data.edge_types:
                ei = data[et].edge_index[:, b["e_id"][et]]
                assert torch.equal(ei[0], b["n_id"][et[0]][b["ei"][et][0]])
                assert torch.equal(ei[1], b["n_id"][et[2]][b["ei"][et][1]])
        rows, sent = res["rows"], res["comm"]["sent"]  # the other part's rows from its owner, but the cache's
        assert rows["remote_rows"] > 0 and rows["cache_hits"] > 0 and rows["host_rows"] == 0, rows
        assert sent["feature"] > 0 and sent["label"] > 0 and sent["cache_fill"] > 0, sent
    assert sorted(steps) == list(range(len(ref))) and len(ref) == 2
    for k, parts in steps.items():
        want = ref[k]
        for t in data.node_types:
            assert set(torch.cat([b["n_id"][t] for b in parts]).tolist()) == set(want[t].n_id.tolist())
        for et in data.edge_types:
            assert set(torch.cat([b["e_id"][et] for b in parts]).tolist()) == set(want[et].e_id.tolist())
