"""gnnscale.pyg's stores and rank loaders: PyG's own NodeLoader/LinkLoader over (FeatureStore,
GraphStore), and a user's loop on 2 and 3 processes (gloo on 127.0.0.1, launch_local: free port,
bounded waits) yielding, step for step, the batches one process yields at N times the batch size."""
from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.loader import LinkLoader, NodeLoader

from gnnscale.errors import PartitionError, SamplerError
from gnnscale.process.launch import launch_local
from gnnscale.pyg import (LinkNeighborLoader, NeighborLoader, PartitionGraphStore, start_run, memory_stores,
                          sampler_for)
from gnnscale.pyg.rank_loaders import RankBatches

from pyg_workers import OwnerSends, acm_batches, check_acm_steps, cora_batches, mask_batches

ROOT = Path(__file__).resolve().parents[2] / "shared" / "data"
ACM = ROOT / "acm"
FANOUTS = [5, 3]


def edge_keys(edge_index: torch.Tensor, n: int) -> torch.Tensor:
    return torch.unique(edge_index[1] * n + edge_index[0])


def is_edge(keys: torch.Tensor, n: int, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    q = dst * n + src
    pos = torch.searchsorted(keys, q).clamp(max=keys.numel() - 1)
    return keys[pos] == q


def test_rank_batches_cut_one_process_batches_among_ranks():
    one = RankBatches(103, 10, True, False, seed=4, rank=0, world_size=1)
    ref = [b for b in one]
    for world in (2, 3):
        ranks = [RankBatches(103, 10, True, False, seed=4, rank=r, world_size=world) for r in range(world)]
        got = {}
        for r, rb in enumerate(ranks):
            assert len(rb) == math.ceil(11 / world)
            for k, b in enumerate(rb):
                if not rb.is_repeat(k):
                    got[k * world + r] = b
        assert [got[i] for i in range(11)] == ref
    # batch_size B // N per rank: step k's seeds over the ranks are one process's batch k of B
    big = [b for b in RankBatches(103, 12, True, False, seed=4, rank=0, world_size=1)]
    for world in (2, 3):
        steps = list(zip(*[list(RankBatches(103, 12 // world, True, False, seed=4, rank=r, world_size=world))
                           for r in range(world)]))
        for k, want in enumerate(big[:-1]):  # the last, short batch of B: its parts may wrap
            assert sum(steps[k], []) == want


def test_pyg_own_loaders_run_on_memory_stores(cora):
    """PyG's NodeLoader / LinkLoader with data=(feature_store, graph_store): the batches of the Data itself."""
    stores = memory_stores(cora)
    mine = NodeLoader(stores, sampler_for(stores, FANOUTS, seed=2), input_nodes=torch.arange(0, 140), batch_size=35)
    ref = NeighborLoader(cora, num_neighbors=FANOUTS, input_nodes=torch.arange(0, 140), batch_size=35, seed=2)
    for a, b in zip(mine, ref):
        for name in ("n_id", "edge_index", "e_id", "x", "y"):
            assert torch.equal(a[name], b[name]), name
        assert a.num_sampled_nodes == b.num_sampled_nodes and a.batch_size == b.batch_size
    pairs = cora.edge_index[:, :200]
    links = LinkLoader(stores, sampler_for(stores, FANOUTS, seed=2), edge_label_index=(None, pairs),
                       neg_sampling_ratio=1.0, batch_size=100)
    ref = LinkNeighborLoader(cora, num_neighbors=FANOUTS, edge_label_index=pairs, neg_sampling_ratio=1.0,
                             batch_size=100, seed=2)
    for a, b in zip(links, ref):
        assert torch.equal(a.n_id[a.edge_label_index], b.n_id[b.edge_label_index])
        assert torch.equal(a.edge_label, b.edge_label) and torch.equal(a.x, b.x)


def test_partition_stores_give_the_data_batches_in_one_process(cora, cora_partition):
    run = start_run(cora_partition(1), timeout=30)
    fs, gs = run.data
    loader = run.node_loader(FANOUTS, "train", batch_size=32, shuffle=True, seed=3)
    ref = NeighborLoader(cora, num_neighbors=FANOUTS, input_nodes=cora.train_mask, batch_size=32, shuffle=True, seed=3)
    for _ in range(2):
        for a, b in zip(list(loader), list(ref)):
            for name in ("n_id", "edge_index", "x", "y"):
                assert torch.equal(a[name], b[name]), name
            assert torch.equal(gs.coo_of()[:, a.e_id], a.n_id[a.edge_index])
    assert fs.stats["remote_rows"] == 0 and fs.stats["local_rows"] > 0
    run.close()


def test_rank_loaders_refuse_time_in_one_line(cora_partition):
    """Cora's folder holds no times: time is refused in one line (a temporal folder samples in time:
    tests/test_pyg_temporal_run.py)."""
    run = start_run(cora_partition(1), timeout=30)
    try:
        for kwargs, message in ((dict(time_attr="time"), r"time_attr='time' needs a temporal partition folder"),
                                (dict(input_time=torch.zeros(140, dtype=torch.long)), r"input_time=.* needs time_attr")):
            with pytest.raises(SamplerError, match=message) as err:
                run.node_loader(FANOUTS, "train", batch_size=32, **kwargs)
            assert "\n" not in str(err.value)
        with pytest.raises(SamplerError, match=r"edge_label_time=.* needs time_attr"):
            run.link_loader(FANOUTS, torch.tensor([[0], [1]]), edge_label_time=torch.tensor([3]), batch_size=1)
    finally:
        run.close()


def test_run_node_loader_takes_subgraph_types_disjoint_and_repeated_seeds(cora, cora_partition):
    """run.node_loader over a 1-part Cora folder with NeighborLoader's subgraph_type ('bidirectional',
    'induced', PyG's enum), disjoint=True and repeated seeds: the plain loader's batches (the same
    sampler, built by one sampler_for); induced with disjoint is PyG's ValueError, in one line."""
    from torch_geometric.sampler.base import SubgraphType

    from gnnscale.errors import SamplerValueError

    run = start_run(cora_partition(1), timeout=30)
    coo = run.graph_store.coo_of()
    seeds = torch.tensor([5, 9, 5, 120, 9, 5, 77, 2000, 120, 31])  # repeats, as PyG's loaders take them
    cases = [dict(subgraph_type="bidirectional"), dict(subgraph_type=SubgraphType.induced), dict(disjoint=True),
             dict(), dict(disjoint=True, subgraph_type="bidirectional")]
    for kw in cases:
        for nodes in (seeds, cora.val_mask):
            got = list(run.node_loader(FANOUTS, nodes, batch_size=4, shuffle=True, seed=7, **kw))
            want = list(NeighborLoader(cora, num_neighbors=FANOUTS, input_nodes=nodes, batch_size=4, shuffle=True,
                                       seed=7, **kw))
            assert len(got) == len(want) > 0, kw
            for a, b in zip(got, want):
                for name in ("n_id", "edge_index", "x", "y", "batch", "input_id", "num_sampled_nodes",
                             "num_sampled_edges", "batch_size"):
                    assert (name in a) == (name in b), (kw, name)
                    if name in b:
                        assert a[name] == b[name] if not isinstance(b[name], torch.Tensor) else \
                            torch.equal(a[name], b[name]), (kw, name)
                assert ("e_id" in a) == ("e_id" in b), kw  # e_id: the folder's edge ids (its own numbering)
                if kw.get("subgraph_type") != "bidirectional":
                    assert torch.equal(coo[:, a.e_id], a.n_id[a.edge_index]), kw
            if nodes is seeds:  # every copy of a seed is a seed row of its own
                rows = torch.cat([a.n_id[:a.batch_size] for a in got])
                assert torch.equal(torch.sort(rows).values, torch.sort(seeds).values), kw
    assert "batch" in got[0] and got[0].batch.max() == 3  # disjoint: a tree per seed
    with pytest.raises(SamplerValueError, match="subgraph_type='induced' with disjoint=True") as err:
        run.node_loader(FANOUTS, seeds, subgraph_type="induced", disjoint=True)
    assert "\n" not in str(err.value)
    run.close()


def test_a_folder_of_another_part_count_is_one_line(cora_partition):
    with pytest.raises(PartitionError) as err:
        start_run(cora_partition(2), timeout=30)
    msg = str(err.value)
    assert "\n" not in msg and "holds 2 parts but 1 processes were started" in msg and "--nproc-per-node 2" in msg


def _one_process(cora, pairs, seed, parts):
    """One process's batches at parts times the ranks' batch size (16 seeds, 64 pairs)."""
    ref = NeighborLoader(cora, num_neighbors=FANOUTS, input_nodes=cora.train_mask, batch_size=16 * parts,
                         shuffle=True, seed=seed)
    nodes = [list(ref) for _ in range(2)]
    links = list(LinkNeighborLoader(cora, num_neighbors=FANOUTS, edge_label_index=pairs, neg_sampling_ratio=2.0,
                                    batch_size=64 * parts, shuffle=True, seed=seed))
    return nodes, links


def _host_folder(full: str, parts: list[int], out: Path) -> str:
    """A host's folder: meta.json and ``parts`` of the partition folder ``full`` (copied)."""
    out.mkdir()
    shutil.copy(Path(full) / "meta.json", out / "meta.json")
    for p in parts:
        shutil.copytree(Path(full) / f"part{p}", out / f"part{p}")
    return str(out)


@pytest.mark.parametrize("parts,layout", [(2, "own"), (3, "whole"), (2, "mixed")])
def test_distributed_batches_are_one_process_batches(cora, cora_partition, tmp_path, parts, layout):
    """Every rank's batch is what it claims: x rows, labels of the seeds, every edge one of Cora's
    (named by e_id), per-hop counts within the fan-outs; link batches' positives real, negatives
    not, at ratio 2. Step k's batches of the ranks (rank r: batch k * parts + r) together are one
    process's batch k at parts times the batch size: its seeds in rank order, its nodes and edges
    (gnnscale.pyg.steps; tests/test_pyg_global_steps.py checks it hop by hop), its pairs and
    negatives. ``own``: rank r opens its own folder (meta.json and part r, as on separate
    hosts): the other part's graph and masks come from its owner once (bytes under graph: its
    packed CSC) and its rows and labels per batch (feature / label); the graph is the whole
    folder's. ``whole``: every part read from the folder (host reads), nothing exchanged.
    ``mixed``: rank 0 the whole folder, rank 1 its own part only: the ranks share a host and rank 1's
    folder lacks part 0, so by the engine's host plan (``data.host_parts.plan_host_reads``, one
    gathered answer) no rank reads rows from its folder: both ask their owners; the graph of part 0
    is still sent to rank 1 once."""
    n = cora.num_nodes
    keys = edge_keys(cora.edge_index, n)
    pairs = cora.edge_index[:, torch.arange(0, cora.edge_index.size(1), 37)]
    seed = 7
    full = cora_partition(parts)
    folders = full if layout == "whole" else \
        [full if layout == "mixed" and r == 0 else _host_folder(full, [r], tmp_path / f"host{r}") for r in range(parts)]
    results = launch_local(cora_batches, parts, args=(folders, FANOUTS, 16, seed, None, pairs), threads_per_worker=1)
    ref_nodes, ref_links = _one_process(cora, pairs, seed, parts)
    deg = torch.bincount(cora.edge_index[1], minlength=n)
    steps: dict = {}
    for r, res in enumerate(results):
        assert res["world"] == parts
        for ep in range(2):
            for b in res["nodes"][ep]:
                if b["repeat"]:
                    continue
                steps.setdefault((ep, b["k"]), []).append(b)
                assert torch.equal(b["x_sum"], cora.x[b["n_id"]].to(torch.float64).sum(1))
                bs = b["batch_size"]
                assert torch.equal(b["y"][:bs], cora.y[b["n_id"][:bs]])
                src, dst = b["n_id"][b["edge_index"]]
                assert bool(is_edge(keys, n, src, dst).all())
                assert torch.equal(res["coo"][:, b["e_id"]], torch.stack([src, dst]))
                # per hop: a node draws min(fanout, in-degree) in-edges, the fan-out of the hop at
                # which the whole step reaches it (this hop or an earlier one)
                start = 0
                for h in range(len(FANOUTS)):
                    frontier = b["n_id"][start:start + b["nsn"][h]]
                    lo, hi = min(FANOUTS[:h + 1]), max(FANOUTS[:h + 1])
                    assert int(torch.clamp(deg[frontier], max=lo).sum()) <= b["nse"][h]
                    assert b["nse"][h] <= int(torch.clamp(deg[frontier], max=hi).sum())
                    start += b["nsn"][h]
                assert sum(b["nsn"]) == b["n_id"].numel() and sum(b["nse"]) == b["edge_index"].size(1)
        for b in res["links"]:
            if b["repeat"]:
                continue
            steps.setdefault(("link", b["k"]), []).append(b)
            pos, neg = b["label"] == 1, b["label"] == 0
            assert int(neg.sum()) == 2 * int(pos.sum())
            assert bool(is_edge(keys, n, b["eli"][0, pos], b["eli"][1, pos]).all())
            assert not bool(is_edge(keys, n, b["eli"][0, neg], b["eli"][1, neg]).any())
    assert set(steps) == {(ep, k) for ep in range(2) for k in range(len(ref_nodes[ep]))} | \
        {("link", k) for k in range(len(ref_links))}
    for (ep, k), parts_of_step in steps.items():  # rank order: appended rank by rank
        if ep == "link":
            ref = ref_links[k]
            for label in (1, 0):
                got = torch.cat([b["eli"][:, b["label"] == label] for b in parts_of_step], 1)
                assert torch.equal(got, ref.n_id[ref.edge_label_index[:, ref.edge_label == label]])
            continue
        ref = ref_nodes[ep][k]
        assert torch.equal(torch.cat([b["n_id"][:b["batch_size"]] for b in parts_of_step]), ref.n_id[:ref.batch_size])
        assert set(torch.cat([b["n_id"] for b in parts_of_step]).tolist()) == set(ref.n_id.tolist())
        got = set()
        for b in parts_of_step:
            src, dst = b["n_id"][b["edge_index"]]
            got |= set(zip(dst.tolist(), src.tolist()))
        src, dst = ref.n_id[ref.edge_index]
        assert got == set(zip(dst.tolist(), src.tolist()))
    if layout != "whole":
        whole = PartitionGraphStore(full).coo_of()
        assert all(torch.equal(res["coo"], whole) for res in results)
    if layout == "mixed":
        # one host, and rank 1's folder lacks part 0: the engine's host plan reads no rows from the folders
        # (the same answer on every rank); rank 1 gets part 0's graph once, rows per batch from rank 0
        zero, one = results
        assert zero["rows"]["host_rows"] == 0 and zero["rows"]["remote_rows"] > 0
        assert one["rows"]["host_rows"] == 0 and one["rows"]["remote_rows"] > 0
        n_0, e_0 = (np.load(Path(full) / "part0" / f, mmap_mode="r").shape[0] for f in ("orig_ids.npy", "indices.npy"))
        assert zero["comm"]["sent"]["graph"] == one["comm"]["received"]["graph"] == 8 * (2 + 3 * n_0 + e_0)
        assert zero["comm"]["received"]["graph"] == one["comm"]["sent"]["graph"] == 0
        assert zero["comm"]["received"]["feature"] > 0 and one["comm"]["received"]["feature"] > 0
    elif layout == "own":
        for r, res in enumerate(results):
            assert res["rows"]["remote_rows"] > 0 and res["rows"]["host_rows"] == 0
            assert res["comm"]["sent"]["feature"] > 0 and res["comm"]["sent"]["label"] > 0
            # part r packed once: E, a flag, in-degrees, original ids, split masks [n_r] and sources [E_r]
            n_r, e_r = (np.load(Path(full) / f"part{r}" / f, mmap_mode="r").shape[0] for f in ("orig_ids.npy",
                                                                                               "indices.npy"))
            assert res["comm"]["sent"]["graph"] == 8 * (2 + 3 * n_r + e_r)
            assert res["comm"]["received"]["graph"] == results[1 - r]["comm"]["sent"]["graph"]
    else:
        for res in results:
            assert res["rows"]["remote_rows"] == 0 and res["rows"]["host_rows"] > 0
            assert res["comm"]["sent"].get("feature", 0) == 0 and res["comm"]["sent"].get("graph", 0) == 0


PLAIN_LOOP = """
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from gnnscale.pyg import NeighborLoader

g = torch.Generator().manual_seed(0)
n = 60
data = Data(x=torch.randn(n, 4, generator=g), y=torch.randint(0, 2, (n,), generator=g),
            edge_index=torch.randint(0, n, (2, 300), generator=g), train_mask=torch.rand(n, generator=g) < 0.5)
loader = NeighborLoader(data, [3, 3], input_nodes=data.train_mask, batch_size=8, shuffle=True)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for batch in loader:
    opt.zero_grad()
    loss = F.cross_entropy(model(batch.x)[:batch.batch_size], batch.y[:batch.batch_size])
    loss.backward()
    opt.step()
print(f"trained: loss {float(loss):.4f}")
"""


@pytest.mark.slow
def test_a_plain_loop_under_torchrun_is_refused_not_trained_apart(tmp_path):
    """A plain PyG loop (gnnscale.pyg.NeighborLoader, no start_run) started by torchrun as 2
    processes (127.0.0.1, a free port, a deadline) trained 2 unrelated models to the end, each
    printing its own loss, exit status 0. Now each process refuses with one line naming
    start_run (no traceback, nothing trained) and exits non-zero."""
    import subprocess
    import sys

    from gnnscale.process.launch import find_free_port

    (tmp_path / "loop.py").write_text(PLAIN_LOOP)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(find_free_port()), "--log-dir", str(tmp_path / "logs"),
           "--redirects", "3", str(tmp_path / "loop.py")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode != 0, r.stdout + r.stderr[-2000:]
    logs = sorted((tmp_path / "logs").glob("*/attempt_0/*/stderr.log"))
    assert [p.parent.name for p in logs] == ["0", "1"], logs
    for rank, log in enumerate(logs):
        err = log.read_text()
        assert err == (f"loop.py: error: gnnscale.pyg.NeighborLoader: this is process {rank} of 2 (WORLD_SIZE), not "
                       "joined through gnnscale.pyg.start_run, so each process would train its own model on "
                       "every seed; call run = gnnscale.pyg.start_run(data, parts_dir=..., timeout=...) first, "
                       "then train with run.node_loader(...) / run.link_loader(...) and run.ddp(model) (docs/pyg.md), "
                       "or start one process.\n"), err
        assert (log.parent / "stdout.log").read_text() == ""  # nothing trained


def test_a_mask_on_two_ranks_is_the_node_ids(cora, cora_partition, shared_data):
    """run.node_loader(..., input_nodes=data.val_mask), PyG's most common form (an IndexError of 22
    lines before), on 2 ranks of start_run: over the run's stores, over a Data in memory
    and, typed, as ("paper", mask) over a HeteroData, each rank's batches are those of the node
    ids (and of the "val" split); each batch's input_id holds its seeds' node ids, as PyG's
    for a mask, where the ids' hold positions among them. A mask of another length, a float or a
    2-D tensor, and a plain mask on a HeteroData are refused in one line, no tensor pasted."""
    results = launch_local(mask_batches, 2, args=(cora_partition(2), str(shared_data / "planetoid" / "raw"), FANOUTS,
                                                  64, 5), threads_per_worker=1)
    ids = torch.nonzero(cora.val_mask).view(-1)  # 140..639: positions among them are not their ids
    for res in results:
        assert res["world"] == 2
        for name, (from_mask, *others) in res["batches"].items():
            assert len(from_mask) == math.ceil(math.ceil(ids.numel() / 64) / 2), name
            for other in others:
                assert len(other) == len(from_mask), name
                for a, b in zip(from_mask, other):
                    for key in ("n_id", "edge_index"):
                        assert torch.equal(a[key], b[key]), (name, key)
                    assert a["batch_size"] == b["batch_size"]
                    assert torch.equal(a["input_id"], a["n_id"][:a["batch_size"]]), name
                    assert torch.equal(ids[b["input_id"]], b["n_id"][:b["batch_size"]]), name
        wanted = ["input_nodes as a mask must be bool [2708]; found shape (2707,)",
                  "input_nodes must be a 1-D int64 tensor of node ids or a bool mask; found torch.float32",
                  "input_nodes as a mask must be bool [2708]; found shape (2, 1354)",
                  "input_nodes as a mask must be bool [2708]; found shape (5,)",
                  "a HeteroData loader needs input_nodes as a node type or (node type, ids or mask)"]
        for msg, want in zip(res["bad"], wanted):
            assert msg is not None and want in msg and "\n" not in msg and "tensor([" not in msg, msg
    # the two ranks' seeds together are the mask's nodes, each once
    seeds = torch.cat([b["n_id"][:b["batch_size"]] for res in results for b in res["batches"]["stores"][0]])
    assert torch.equal(torch.unique(seeds), ids)


@pytest.mark.parametrize("procs", [3])
def test_acm_batches_on_several_processes_are_one_process_batches(procs):
    """Every rank's typed batch is what it claims (e_id names each relation's edges between its
    endpoints' original ids); step k's batches of the ranks together are one process's batch k at
    procs times the batch size: per type its nodes, per relation its edges; x and y are the graph's
    rows of n_id. ACM's 60 training papers at 16 per rank: a step of 3 real batches, then one of a
    batch and 2 padding repeats (2 processes: tests/test_pyg_typed_stores.py, over a typed folder)."""
    if not ACM.exists():
        pytest.skip(f"ACM is not at {ACM}")
    from gnnscale.datasets import load_dataset
    from gnnscale.datasets.hetero_data import to_hetero_data

    data = to_hetero_data(load_dataset(f"acm:{ACM}?split=20"))
    results = launch_local(acm_batches, procs, args=(str(ACM), 16, 5), threads_per_worker=1)
    ref = list(NeighborLoader(data, num_neighbors={et: [4, 2] for et in data.edge_types},
                              input_nodes=("paper", data["paper"].train_mask), batch_size=16 * procs, shuffle=True,
                              seed=5))
    steps = check_acm_steps(results, data, ref)
    assert len(ref) == 2 and len(steps[0]) == procs


def test_hetero_link_batches_are_what_they_claim(acm_data):
    """LinkNeighborLoader on ACM's paper-author relation: positives real, negatives not (ratio 1.5),
    edges of every relation real and named by e_id, x rows of n_id, the same seed the same batches."""
    data = acm_data
    et = ("paper", "written_by", "author")
    pairs = data[et].edge_index[:, :300]
    keys = edge_keys(data[et].edge_index, max(data["paper"].num_nodes, data["author"].num_nodes))

    def batches(seed):
        return list(LinkNeighborLoader(data, num_neighbors=[3, 2], edge_label_index=(et, pairs),
                                       neg_sampling_ratio=1.5, batch_size=100, shuffle=True, seed=seed))

    got = batches(1)
    n = max(data["paper"].num_nodes, data["author"].num_nodes)
    for b in got:
        eli, label = b[et].edge_label_index, b[et].edge_label
        src, dst = b["paper"].n_id[eli[0]], b["author"].n_id[eli[1]]
        pos, neg = label == 1, label == 0
        assert int(neg.sum()) == math.ceil(1.5 * int(pos.sum()))
        assert bool(is_edge(keys, n, src[pos], dst[pos]).all()) and not bool(is_edge(keys, n, src[neg], dst[neg]).any())
        for t in ("paper", "author"):
            assert torch.equal(b[t].x, data[t].x[b[t].n_id])
        for rel in data.edge_types:
            ei = data[rel].edge_index[:, b[rel].e_id]
            assert torch.equal(ei[0], b[rel[0]].n_id[b[rel].edge_index[0]])
            assert torch.equal(ei[1], b[rel[2]].n_id[b[rel].edge_index[1]])
    again = batches(1)
    for a, b in zip(got, again):
        assert torch.equal(a[et].edge_label_index, b[et].edge_label_index) and torch.equal(a["paper"].n_id,
                                                                                          b["paper"].n_id)
    with pytest.raises(Exception) as err:
        LinkNeighborLoader(data, num_neighbors=[2], edge_label_index=(("paper", "cites", "paper"), pairs),
                           batch_size=4)
    assert "\n" not in str(err.value) and "naming one of the relations" in str(err.value)


def test_a_silent_rank_in_the_users_loop_is_named(cora_partition, monkeypatch):
    """Rank 1 stops (SIGSTOP) as its second pass starts; rank 0's next collective fetch fails within the
    timeout and names rank 1, silent, and its last phase."""
    from gnnscale.errors import PeerError
    from pyg_workers import loop_passes

    monkeypatch.setenv("GNNSCALE_FAULT", "rank=1,epoch=1,phase=RankNodeLoader pass,action=stop")
    with pytest.raises(PeerError) as err:
        # grace: rank 1 stays stopped and never reports; once rank 0 has, 3 s then the launcher ends it
        launch_local(loop_passes, 2, args=(cora_partition(2), 8.0), threads_per_worker=1, grace=3)
    msg = str(err.value)
    assert "rank 1" in msg and "silent" in msg and "epoch 1 RankNodeLoader pass" in msg, msg


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_partition_feature_store_reads_other_parts_from_the_folder(cora, tmp_path, dtype):
    """Rank 0 of 2 with host reads: every row of the graph, its own and part 1's, from the folder (as
    stored: a float16 folder gives the float16 rows as float32), and no exchange."""
    from gnnscale.partitioning import partition_graph
    from gnnscale.process.comm import Communicator
    from gnnscale.pyg import PartitionFeatureStore, PartitionGraphStore

    partition_graph(cora, 2, tmp_path, method="metis", feature_dtype=dtype)
    comm = Communicator(0, 2)  # no group: host reads never exchange
    fs = PartitionFeatureStore(PartitionGraphStore(tmp_path), comm)
    ids = torch.randperm(cora.num_nodes, generator=torch.Generator().manual_seed(0))[:500]
    want = cora.x[ids].to(getattr(torch, dtype)).float()
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="x", index=ids), want)
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="y", index=ids), cora.y[ids])
    assert fs.stats["host_rows"] > 0 and fs.stats["local_rows"] > 0 and comm.stats.bytes_sent == 0


def test_per_host_folder_errors_are_one_line(cora_partition, tmp_path):
    """A folder lacking a part: without a communicator the store says so; with one (the ranks' answers
    given here in process), a rank whose folder lacks its own part, or holds another meta.json, is named."""
    import json

    from gnnscale.pyg.stores import _meta_digest

    full = cora_partition(2)
    mine = _host_folder(full, [0], tmp_path / "host0")
    meta = json.loads((Path(full) / "meta.json").read_text())

    class Answers:  # rank 0 of 2; all_gather_object gives the ranks' (parts held, meta digest, packed length)
        rank, world_size = 0, 2

        def __init__(self, theirs):
            self.theirs = theirs

        def all_gather_object(self, obj, category="control"):
            return [obj, self.theirs]

    cases = [(None, "lacks indptr.npy", "Copy the whole partition folder to every host, or pass comm="),
             (Answers(([0], _meta_digest(meta), 0)), "rank 1's partition folder lacks its own part (part1",
              "copy meta.json and the parts of a host's ranks"),
             (Answers(([1], _meta_digest({**meta, "num_nodes": 1}), 9)), "rank 1's partition folder holds another "
              "meta.json than rank 0's", "copy one partition's meta.json and parts to every host")]
    for comm, what, fix in cases:
        with pytest.raises(PartitionError) as err:
            PartitionGraphStore(mine, comm)
        msg = str(err.value)
        assert "\n" not in msg and what in msg and fix in msg, msg


def test_a_part_sent_by_its_owner_is_the_folders_own(tmp_path, monkeypatch):
    """Rank 0 of 2 opens a folder holding part 0 only (the ranks' answers given here in process: rank 1
    holds both parts and sends part 1 packed as its store packs it, 100 values a round): the graph
    (CSC in original ids, e_id of a graph with edge features, coo) and part 1's split masks are the
    whole folder's, and rank 0 sends nothing (rank 1 holds part 0)."""
    from torch_geometric.data import Data

    from gnnscale.partitioning import partition_graph
    from gnnscale.pyg.stores import _meta_digest

    g = torch.Generator().manual_seed(0)
    n, e = 120, 600
    ei = torch.unique(torch.randint(0, n, (2, e), generator=g), dim=1)
    ei = ei[:, ei[0] != ei[1]]
    mask = torch.rand(n, generator=g)
    data = Data(x=torch.randn(n, 4, generator=g), y=torch.randint(0, 3, (n,), generator=g), edge_index=ei,
                edge_attr=torch.randn(ei.size(1), 2, generator=g), train_mask=mask < 0.5,
                val_mask=(mask >= 0.5) & (mask < 0.7), test_mask=mask >= 0.7, num_classes=3)
    full = tmp_path / "full"
    partition_graph(data, 2, full, method="metis")
    whole = PartitionGraphStore(full)
    assert (full / "part1" / "edge_ids.npy").is_file()

    packed = whole._pack(1)
    assert whole._packed_len(1) == packed.numel()
    monkeypatch.setattr(PartitionGraphStore, "chunk_values", 100)

    comm = OwnerSends(packed, _meta_digest(whole.meta), 100)
    mine = PartitionGraphStore(_host_folder(str(full), [0], tmp_path / "host0"), comm)
    assert mine.hosts == [frozenset({0}), frozenset({0, 1})] and comm.rounds == math.ceil(packed.numel() / 100) > 1
    for name in ("indptr", "indices", "perm", "old_of_new"):
        assert torch.equal(getattr(mine, name), getattr(whole, name)), name
    assert not torch.equal(whole.perm, torch.arange(whole.perm.numel()))  # e_id from the folder's edge ids
    assert torch.equal(mine.coo_of(), whole.coo_of())
    assert torch.equal(data.edge_index[:, whole.perm], torch.stack([whole.indices, torch.repeat_interleave(
        torch.arange(n), whole.indptr[1:] - whole.indptr[:-1])]))
    for name in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(mine.split_mask(1, name), whole.split_mask(1, name))
        assert mine.split_mask(1, name).any()


def test_a_stall_between_batches_prints_every_threads_stack(cora_partition, capfd):
    """A rank loader re-arms faulthandler's timer at each batch (2 x the run's timeout with several
    processes; set small here): a loop body that stalls gets every thread's stack on stderr while
    it stalls, and the pass's end disarms it."""
    import time

    run = start_run(cora_partition(1), timeout=30)
    loader = run.node_loader(FANOUTS, "train", batch_size=70)
    assert loader._watch == 0.0  # one process: nothing to wait for
    loader._watch = 0.3
    for k, _ in enumerate(loader):
        if k == 0:
            time.sleep(0.8)  # a stall in the loop body
    err = capfd.readouterr().err
    assert "Timeout (0:00:00" in err and "most recent call first" in err and "test_a_stall_between" in err
    time.sleep(0.5)  # disarmed at the pass's end: nothing more
    assert "Timeout" not in capfd.readouterr().err
    run.close()


def test_a_one_process_run_over_a_folder_never_starts_numbas_thread_pool(cora_partition):
    """Issue 56: through start_run on one process a Cora epoch took 5-30x the plain loader's. The
    partition stores' row gather was numba's parallel kernel at any thread count: its first call
    started numba's OpenMP pool, whose idle threads spin on the cores torch's ops need, for the rest
    of the process (benchmarks/pyg_run_overhead.py). With torch on 1 thread the gather is the serial
    kernel and the pool is never started (a fresh process: this one's pool may be up already)."""
    code = (f"import torch; torch.set_num_threads(1)\n"
            f"from gnnscale.pyg import start_run\n"
            f"run = start_run({str(cora_partition(1))!r}, timeout=30)\n"
            f"batch = next(iter(run.node_loader([5, 5], 'train', batch_size=64)))\n"
            f"assert batch.x.shape[0] > 64 and float(batch.x.abs().sum()) > 0\n"
            f"import numba.np.ufunc.parallel as p; print('pool started', p._is_initialized)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "pool started False" in r.stdout, r.stdout


def _numba_probe(torch_threads: int, env: dict) -> str:
    """A fresh process at ``torch_threads`` torch threads: a plain loader's epoch over a small graph,
    then a start_run batch over a folder (made here, 1 part); prints the pool's state."""
    code = (f"import torch; torch.set_num_threads({torch_threads})\n"
            "from torch_geometric.data import Data\n"
            "from gnnscale.pyg import NeighborLoader, start_run\n"
            "g = torch.Generator().manual_seed(0)\n"
            "n = 6000\n"
            "data = Data(x=torch.randn(n, 4, generator=g), edge_index=torch.randint(0, n, (2, 60000), generator=g),\n"
            "            y=torch.randint(0, 3, (n,), generator=g))\n"
            "for b in NeighborLoader(data, num_neighbors=[10, 10], batch_size=5000, shuffle=True):\n"
            "    pass\n"
            "import tempfile\n"
            "run = start_run(data, parts_dir=tempfile.mkdtemp(), timeout=30)\n"
            "b = next(iter(run.node_loader([10, 10], torch.arange(5000), batch_size=5000)))\n"
            "assert b.x.shape[0] > 5000\n"
            "run.close()\n"
            "import numba, numba.np.ufunc.parallel as p\n"
            "from gnnscale.samplers import cpu_kernels\n"
            "print('pool', p._is_initialized, 'parallel', cpu_kernels.parallel_enabled(), 'torch',\n"
            "      torch.get_num_threads())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


def test_a_users_process_never_starts_numbas_pool_at_two_threads():
    """Issue 56: a user's PyG loop at 2 torch threads (the plain loader, and start_run over a
    folder) ran the parallel numba kernels (the sampler's warm-up, its frontiers of 4,096 rows and
    more, the row gather), whose first call started numba's pool: a second OpenMP runtime (the
    system's libgomp beside torch's) whose threads spin on the cores torch's ops need. Now only a
    worker the engine launched (thread_env's GNNSCALE_WORKER_THREADS) runs them; a user's process
    keeps the serial kernels and never starts the pool (5,000-seed batches: frontiers above 4,096)."""
    import os

    from gnnscale.process.launch import thread_env

    user = {k: v for k, v in os.environ.items() if k != "GNNSCALE_WORKER_THREADS"}
    assert _numba_probe(2, user) == "pool False parallel False torch 2"
    if (os.cpu_count() or 1) >= 2:  # an engine worker's environment: its parallel kernels run, as before
        worker = {**user, **thread_env(2, 1)}
        assert _numba_probe(2, worker) == "pool True parallel True torch 2"


def test_the_old_name_is_start_run_and_warns_once():
    """gnnscale.pyg.init_distributed (issue 56, item 7: one meaning per name) is start_run, with one
    FutureWarning per process; gnnscale.init_distributed stays the engine's process-group join."""
    import warnings

    import gnnscale
    import gnnscale.pyg as gp
    from gnnscale.process.groups import init_distributed as join

    gp._WARNED["init_distributed"] = False
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert gp.init_distributed is start_run and gp.init_distributed is start_run
    assert [str(w.message).split(";")[0] for w in seen] == [
        "gnnscale.pyg.init_distributed is now gnnscale.pyg.start_run (the same call)"]
    assert gnnscale.init_distributed is join
