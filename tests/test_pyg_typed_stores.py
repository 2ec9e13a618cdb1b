"""gnnscale.pyg's typed folder stores (TypedPartitionGraphStore / TypedPartitionFeatureStore): a HeteroData
partitioned into a typed folder (format 2) gives PyG's loaders the batches of the HeteroData itself, in one
process (both ranks' stores opened here, host reads) and on 2 processes (gloo on 127.0.0.1, launch_local:
start_run(data, parts_dir=...), rows asked of their owners)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gnnscale.errors import PartitionError
from gnnscale.process.launch import launch_local
from gnnscale.pyg import LinkNeighborLoader, NeighborLoader, start_run, sampler_for

from pyg_workers import OwnerSends, acm_batches, check_acm_steps

ACM = Path(__file__).resolve().parents[2] / "shared" / "data" / "acm"


@pytest.fixture(scope="module")
def acm_parts(acm_data, tmp_path_factory):
    """ACM's HeteroData in a 2-part typed folder (METIS)."""
    from gnnscale.partitioning import partition_graph

    out = tmp_path_factory.mktemp("acm-2")
    partition_graph(acm_data, 2, out, method="metis")
    return out


def test_typed_folder_stores_give_the_hetero_data_batches(acm_data, acm_parts, tmp_path):
    """ACM in a 2-part typed folder, both ranks' stores opened in this process (their communicators
    without a group: every other part's rows read from the folder, host reads): PyG's own NodeLoader
    and LinkLoader over (TypedPartitionFeatureStore, TypedPartitionGraphStore) yield the HeteroData's
    batches (per type n_id, x and y; per relation edges and e_id; the featureless subjects' n_id);
    the splits are the masks' ids; no cache when every part is read here; start_run(data,
    parts_dir=...) in one process cuts a 1-part folder once (not again for the same graph) and gives
    the same batches; wrong part counts and an untyped store on the folder are one line each."""
    from torch_geometric.loader import LinkLoader, NodeLoader

    from gnnscale.process.comm import Communicator
    from gnnscale.pyg import PartitionGraphStore, TypedPartitionFeatureStore, TypedPartitionGraphStore

    data = acm_data
    gs = TypedPartitionGraphStore(acm_parts)
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
        assert stats["cache_hits"] == 0 and comm.stats.bytes_sent == 0  # every part on the host: nothing to cache
    # start_run(typed folder) in one process: its split, node and link loaders give the same batches
    run = start_run(data, parts_dir=tmp_path / "one", timeout=30)
    created = (tmp_path / "one" / "meta.json").read_text()
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
    start_run(data, parts_dir=tmp_path / "one", timeout=30).close()  # the folder holds this graph: kept
    assert (tmp_path / "one" / "meta.json").read_text() == created
    with pytest.raises(PartitionError) as err:
        TypedPartitionFeatureStore(gs, Communicator(0, 1))
    assert "\n" not in str(err.value) and "holds 2 parts but 1 processes were started" in str(err.value)
    with pytest.raises(PartitionError) as err:
        PartitionGraphStore(acm_parts)
    assert "\n" not in str(err.value) and "TypedPartitionGraphStore" in str(err.value)


def test_a_typed_part_sent_by_its_owner_is_the_folders_own(acm_parts, tmp_path, monkeypatch):
    """Rank 0 of 2 opens a folder holding meta.json and part 0 only (rank 1's answers given here in
    process: it holds both parts and sends part 1 packed as its store packs it, 5000 values a round):
    every relation's CSC (e_id too) and COO, the id maps and part 1's split masks are the whole
    folder's, and rank 0 sends nothing (rank 1 holds part 0); without a communicator the store says
    in one line to copy the folder or pass comm=."""
    import math
    import shutil

    import numpy as np

    from gnnscale.pyg import TypedPartitionGraphStore
    from gnnscale.pyg.stores import _meta_digest

    whole = TypedPartitionGraphStore(acm_parts)
    packed = whole._pack(1)
    assert whole._packed_len(1) == packed.numel()
    monkeypatch.setattr(TypedPartitionGraphStore, "chunk_values", 5000)

    host = tmp_path / "host0"
    host.mkdir()
    shutil.copy(acm_parts / "meta.json", host / "meta.json")
    shutil.copytree(acm_parts / "part0", host / "part0")
    comm = OwnerSends(packed, _meta_digest(whole.meta), 5000)
    mine = TypedPartitionGraphStore(host, comm)
    assert mine.hosts == [frozenset({0}), frozenset({0, 1})] and comm.rounds == math.ceil(packed.numel() / 5000) > 1
    for et in whole.edge_types:
        assert all(torch.equal(a, b) for a, b in zip(mine.relation_csc()[et], whole.relation_csc()[et])), et
        assert torch.equal(mine.coo_of(et), whole.coo_of(et)), et
    for t in whole.node_types:
        assert torch.equal(mine.old_of_new[t], whole.old_of_new[t]), t
    for name in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(mine.split_mask(1, name), whole.split_mask(1, name)) and mine.split_mask(1, name).any()
    with pytest.raises(PartitionError) as err:
        TypedPartitionGraphStore(host)
    assert "\n" not in str(err.value) and "lacks indptr.npy" in str(err.value) and "pass comm=" in str(err.value)


def test_typed_folder_batches_on_two_processes_are_one_process_batches(acm_data, acm_parts, tmp_path):
    """2 gloo processes, each over its own host's folder (meta.json and its own part of a 2-part ACM
    folder; start_run(folder)): the other part's graph comes once from its owner (bytes under
    graph) and its rows per batch (feature, label) but for the 100 cached. Every rank's batch is what
    it claims (x of every type with features and the papers' y are the graph's rows of n_id; e_id
    names each relation's edges between its endpoints' original ids); step k's batches of the ranks
    together are one process's batch k at twice the batch size: per type its nodes, per relation its
    edges."""
    import shutil

    import numpy as np

    data, procs, batch = acm_data, 2, 16
    hosts = []
    for r in range(procs):
        hosts.append(tmp_path / f"host{r}")
        hosts[r].mkdir()
        shutil.copy(acm_parts / "meta.json", hosts[r] / "meta.json")
        shutil.copytree(acm_parts / f"part{r}", hosts[r] / f"part{r}")
    results = launch_local(acm_batches, procs, args=(str(ACM), batch, 5, [str(h) for h in hosts]),
                           threads_per_worker=1)
    ref = list(NeighborLoader(data, num_neighbors={et: [4, 2] for et in data.edge_types},
                              input_nodes=("paper", data["paper"].train_mask), batch_size=batch * procs, shuffle=True,
                              seed=5))
    check_acm_steps(results, data, ref)
    assert len(ref) == 2
    for r, res in enumerate(results):
        rows, sent = res["rows"], res["comm"]["sent"]  # the other part's rows from its owner, but the cache's
        assert rows["remote_rows"] > 0 and rows["cache_hits"] > 0 and rows["host_rows"] == 0, rows
        assert sent["feature"] > 0 and sent["label"] > 0 and sent["cache_fill"] > 0, sent
        # part r packed once for the other rank: E, in-degrees, ids, split masks [n_r], sources, relations [E_r]
        n_r, e_r = (np.load(acm_parts / f"part{r}" / f, mmap_mode="r").shape[0]
                    for f in ("orig_ids.npy", "indices.npy"))
        assert sent["graph"] == 8 * (1 + 3 * n_r + 2 * e_r) == results[1 - r]["comm"]["received"]["graph"], sent


def _dblp_like():
    """A small typed graph named as PyG's DBLP: the relation name 'to' on four type pairs."""
    import numpy as np

    from gnnscale.datasets.typed import make_typed_data

    rng = np.random.default_rng(0)
    pa = np.stack([rng.integers(0, 40, 120), rng.integers(0, 30, 120)])
    pc = np.stack([np.arange(40), rng.integers(0, 5, 40)])
    return make_typed_data(
        num_nodes={"paper": 40, "author": 30, "conference": 5},
        edges=[(("paper", "to", "author"), pa), (("author", "to", "paper"), pa[::-1]),
               (("paper", "to", "conference"), pc), (("conference", "to", "paper"), pc[::-1])],
        target_type="paper", y=rng.integers(0, 3, 40), x_dict={"paper": rng.standard_normal((40, 5)),
                                                               "author": rng.standard_normal((30, 4))},
        train=np.arange(0, 40, 2), val=np.arange(1, 40, 4), name="dblp-like")


def _same_batches(got, want, data):
    assert len(got) == len(want) > 0
    for a, b in zip(got, want):
        for t in data.node_types:
            assert torch.equal(a[t].n_id, b[t].n_id), t
            assert ("x" in a[t]) == ("x" in b[t]) and ("x" not in b[t] or torch.equal(a[t].x, b[t].x)), t
        for rel in data.edge_types:
            assert torch.equal(a[rel].edge_index, b[rel].edge_index), rel
        assert a.num_sampled_nodes_dict == b.num_sampled_nodes_dict


def test_a_relation_name_repeated_across_type_pairs_partitions_and_samples(tmp_path):
    """PyG's relation naming (DBLP: ('paper', 'to', 'author') and ('paper', 'to', 'conference')) on the
    partition path: start_run(hetero_data, parts_dir=...) in one process and `gnnscale partition` of
    the same graph (a hetero-dir folder, 2 parts, both ranks' stores read here) give the in-memory
    loaders' batches, per relation triple (the name 'to' repeats four times)."""
    from torch_geometric.loader import NodeLoader

    from gnnscale.cli import main
    from gnnscale.datasets import load_dataset, write_hetero_dir
    from gnnscale.datasets.hetero_data import to_hetero_data
    from gnnscale.process.comm import Communicator
    from gnnscale.pyg import TypedPartitionFeatureStore, TypedPartitionGraphStore

    typed = _dblp_like()
    data = to_hetero_data(typed)
    assert [et[1] for et in data.edge_types] == ["to"] * 4
    from gnnscale.datasets.relation_split import relation_index
    from gnnscale.errors import DatasetError

    assert relation_index(typed, "paper,to,conference") == 2  # --link-relation: the triple where a name repeats
    with pytest.raises(DatasetError, match="relation 'to' names 4 relations of dblp-like .*give --link-relation as src,rel,dst"):
        relation_index(typed, "to")
    fan = {et: [3, 2] for et in data.edge_types}
    et = ("paper", "to", "conference")
    pairs = data[et].edge_index[:, ::3]

    def want():
        return [*NeighborLoader(data, num_neighbors=fan, input_nodes=("paper", data["paper"].train_mask),
                                batch_size=8, shuffle=True, seed=3),
                *LinkNeighborLoader(data, num_neighbors=[2, 2], edge_label_index=(et, pairs), neg_sampling_ratio=1.0,
                                    batch_size=6, seed=1)]

    run = start_run(data, parts_dir=tmp_path / "one", timeout=30)
    got = [*run.node_loader(fan, "train", batch_size=8, shuffle=True, seed=3),
           *run.link_loader([2, 2], (et, pairs), neg_sampling_ratio=1.0, batch_size=6, seed=1)]
    ref = want()
    _same_batches(got, ref, data)
    for a, b in zip(got, ref):
        for rel in data.edge_types:
            assert torch.equal(a[rel].e_id, b[rel].e_id), rel
    assert torch.equal(got[-1][et].edge_label_index, ref[-1][et].edge_label_index)
    run.close()

    folder = tmp_path / "cli2"
    code = main(["partition", "--dataset", "hetero-dir:" + write_hetero_dir(typed, tmp_path / "dir"), "--parts", "2",
                 "--out", str(folder)])
    assert code == 0
    gs = TypedPartitionGraphStore(folder)
    assert gs.metadata() == data.metadata()
    for rank in range(2):
        fs = TypedPartitionFeatureStore(gs, Communicator(rank, 2))  # no group: the other part read from the folder
        nodes = NodeLoader((fs, gs), sampler_for((fs, gs), fan, seed=3), input_nodes=("paper", fs.mask_ids(
            "train_mask")[1]), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(3))
        _same_batches(list(nodes), want()[:len(nodes)], data)
