"""gnnscale.pyg: PyG's NodeLoader / LinkLoader on gnnscale's sampler, on real Cora (issue 46).

Batches must be what they claim: rows of ``n_id``, edges of the graph named by ``e_id``, the
seeds first, per-hop counts PyG's ``trim_to_layer`` can use; links: positives real edges,
negatives not, at the ratio asked; the same seed the same batches; bad inputs one line.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.nn.models import GraphSAGE

from gnnscale.datasets import load_dataset
from gnnscale.errors import GnnscaleError
from gnnscale.pyg import GnnscaleSampler, LinkNeighborLoader, NeighborLoader
from gnnscale.samplers import NeighborSampler

ROOT = Path(__file__).resolve().parents[2] / "shared" / "data" / "planetoid"
FANOUTS = [5, 3]


@pytest.fixture(scope="module")
def cora() -> Data:
    if not ROOT.exists():
        pytest.skip(f"Cora is not at {ROOT}")
    return load_dataset("planetoid:cora", root=str(ROOT))


def edge_keys(data: Data) -> torch.Tensor:
    n = data.num_nodes
    return torch.sort(data.edge_index[1] * n + data.edge_index[0]).values


def is_edge(keys: torch.Tensor, n: int, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    q = dst * n + src
    pos = torch.searchsorted(keys, q).clamp(max=keys.numel() - 1)
    return keys[pos] == q


def check_batch(data: Data, batch, seeds: torch.Tensor, fanouts: list[int]) -> None:
    """Everything a node batch claims, checked against the whole graph."""
    bs = batch.batch_size
    assert bs == seeds.numel()
    assert torch.equal(batch.n_id[:bs], seeds)
    assert torch.unique(batch.n_id).numel() == batch.n_id.numel()
    assert torch.equal(batch.x, data.x[batch.n_id])
    assert torch.equal(batch.y[:bs], data.y[seeds])
    # every edge is the original edge e_id, between its endpoints' original ids
    src, dst = batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]]
    assert torch.equal(data.edge_index[0, batch.e_id], src)
    assert torch.equal(data.edge_index[1, batch.e_id], dst)
    assert torch.unique(batch.e_id).numel() == batch.e_id.numel()
    # per hop: counts sum to the batch, edges of hop h go into the nodes hop h - 1 added, within the fan-out
    nsn, nse = list(batch.num_sampled_nodes), list(batch.num_sampled_edges)
    assert len(nsn) == len(fanouts) + 1 and len(nse) == len(fanouts)
    assert nsn[0] == bs and sum(nsn) == batch.num_nodes and sum(nse) == batch.edge_index.size(1)
    node_lo = torch.tensor([0] + nsn).cumsum(0)
    edge_lo = torch.tensor([0] + nse).cumsum(0)
    deg = torch.bincount(data.edge_index[1], minlength=data.num_nodes)
    for h, f in enumerate(fanouts):
        cols = batch.edge_index[1, edge_lo[h]:edge_lo[h + 1]]
        rows = batch.edge_index[0, edge_lo[h]:edge_lo[h + 1]]
        assert bool(((cols >= node_lo[h]) & (cols < node_lo[h + 1])).all())
        assert bool((rows < node_lo[h + 2]).all())
        frontier = batch.n_id[node_lo[h]:node_lo[h + 1]]
        got = torch.bincount(cols - node_lo[h], minlength=frontier.numel())
        assert torch.equal(got, torch.clamp(deg[frontier], max=f))  # min(fan-out, in-degree): without replacement


def test_pyg_own_loader_cannot_sample_here_but_ours_does(cora):
    import torch_geometric.typing as pyg_typing

    if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        from torch_geometric.loader import NeighborLoader as PyGNeighborLoader

        with pytest.raises(ImportError, match="requires either 'pyg-lib' or 'torch-sparse'"):
            next(iter(PyGNeighborLoader(cora, num_neighbors=[5, 5], batch_size=32)))
    batch = next(iter(NeighborLoader(cora, num_neighbors=[5, 5], batch_size=32)))
    check_batch(cora, batch, torch.arange(32), [5, 5])


def test_node_batches_are_what_they_claim(cora):
    seeds = torch.nonzero(cora.train_mask).flatten()
    loader = NeighborLoader(cora, num_neighbors=FANOUTS, input_nodes=cora.train_mask, batch_size=32, shuffle=True,
                            seed=3)
    seen = []
    for batch in loader:
        check_batch(cora, batch, batch.input_id, FANOUTS)  # a mask's input_id: the seeds' node ids (PyG's)
        seen.append(batch.n_id[:batch.batch_size])
    assert torch.equal(torch.sort(torch.cat(seen)).values, seeds)


def test_all_neighbours_and_ids(cora):
    ids = torch.tensor([5, 0, 2000, 17])
    batch = next(iter(NeighborLoader(cora, num_neighbors=[-1], input_nodes=ids, batch_size=4)))
    check_batch(cora, batch, ids, [cora.num_nodes])
    want = torch.isin(cora.edge_index[1], ids)
    assert torch.equal(torch.sort(batch.e_id).values, torch.nonzero(want).flatten())


def test_first_hop_draws_equal_the_engine_block_sampler(cora):
    s = GnnscaleSampler(cora.edge_index, cora.num_nodes, FANOUTS, seed=7)
    engine = NeighborSampler(s.indptr, s.indices, FANOUTS, seed=7)
    seeds = torch.arange(100, 164)
    out = s.sample(seeds, epoch=2, step=5)
    block = engine.sample(seeds, epoch=2, step=5).blocks[-1]  # the seeds' hop
    m = out.num_sampled_edges[0]
    ours = torch.sort(out.node[out.col[:m]] * cora.num_nodes + out.node[out.row[:m]]).values
    theirs = torch.sort(block.dst_ids[block.edge_index[1]] * cora.num_nodes + block.src_ids[block.edge_index[0]]).values
    assert torch.equal(ours, theirs)


def test_trim_to_layer_gives_pyg_graphsage_the_same_seed_outputs(cora):
    torch.manual_seed(0)
    model = GraphSAGE(cora.num_features, 16, num_layers=2, out_channels=7).eval()
    loader = NeighborLoader(cora, num_neighbors=FANOUTS, batch_size=64, seed=1)
    for i, batch in enumerate(loader):
        full = model(batch.x, batch.edge_index)[:batch.batch_size]
        trimmed = model(batch.x, batch.edge_index, num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                        num_sampled_edges_per_hop=batch.num_sampled_edges)[:batch.batch_size]
        torch.testing.assert_close(trimmed, full)
        if i == 3:
            break


def test_same_seed_same_batches_and_epochs_differ(cora):
    def run(seed):
        loader = NeighborLoader(cora, num_neighbors=FANOUTS, batch_size=256, shuffle=True, seed=seed)
        return [[(b.n_id, b.e_id) for b in loader] for _ in range(2)]

    a, b, c = run(0), run(0), run(1)
    for ea, eb in zip(a, b):
        for (na, ea_), (nb, eb_) in zip(ea, eb):
            assert torch.equal(na, nb) and torch.equal(ea_, eb_)
    assert not torch.equal(a[0][0][0], c[0][0][0])
    assert not torch.equal(a[0][0][0], a[1][0][0])  # a new shuffle and new draws each epoch


def test_binary_link_batches(cora):
    keys, n = edge_keys(cora), cora.num_nodes
    pairs = cora.edge_index[:, :400]
    loader = LinkNeighborLoader(cora, num_neighbors=FANOUTS, edge_label_index=pairs, batch_size=64, shuffle=True,
                                neg_sampling_ratio=2.0, seed=0)
    total_pos = total_neg = 0
    for batch in loader:
        B = batch.input_id.numel()
        lab, eli = batch.edge_label, batch.edge_label_index
        assert eli.size(1) == B + 2 * B and torch.equal(lab, torch.cat([torch.ones(B), torch.zeros(2 * B)]))
        src, dst = batch.n_id[eli[0]], batch.n_id[eli[1]]
        assert torch.equal(src[:B], pairs[0, batch.input_id]) and torch.equal(dst[:B], pairs[1, batch.input_id])
        assert bool(is_edge(keys, n, src[:B], dst[:B]).all())
        assert not bool(is_edge(keys, n, src[B:], dst[B:]).any())
        assert torch.equal(batch.x, cora.x[batch.n_id])
        s, d = batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]]
        assert torch.equal(cora.edge_index[0, batch.e_id], s) and torch.equal(cora.edge_index[1, batch.e_id], d)
        total_pos, total_neg = total_pos + B, total_neg + (lab == 0).sum()
    assert total_pos == 400 and total_neg == 800


def test_triplet_link_batches_and_labels(cora):
    keys, n = edge_keys(cora), cora.num_nodes
    loader = LinkNeighborLoader(cora, num_neighbors=FANOUTS, batch_size=50, neg_sampling=dict(mode="triplet", amount=3),
                                seed=0)
    batch = next(iter(loader))
    src = batch.n_id[batch.src_index]
    assert torch.equal(src, cora.edge_index[0, :50])
    assert torch.equal(batch.n_id[batch.dst_pos_index], cora.edge_index[1, :50])
    assert batch.dst_neg_index.shape == (50, 3)
    neg = batch.n_id[batch.dst_neg_index]
    assert not bool(is_edge(keys, n, src.repeat_interleave(3), neg.reshape(-1)).any())
    # given labels (0/1): PyG shifts them by one so that 0 means "negative"; ours keeps its semantics
    labels = torch.tensor([0, 1] * 25)
    b2 = next(iter(LinkNeighborLoader(cora, num_neighbors=FANOUTS, edge_label_index=cora.edge_index[:, :50],
                                      edge_label=labels, batch_size=50, neg_sampling="binary", seed=0)))
    assert torch.equal(b2.edge_label, torch.cat([labels + 1, torch.zeros(50, dtype=torch.long)]))


def test_link_batches_same_seed_same_negatives(cora):
    def first(seed):
        b = next(iter(LinkNeighborLoader(cora, num_neighbors=FANOUTS, batch_size=64, neg_sampling_ratio=1.0,
                                         shuffle=True, seed=seed)))
        return b.n_id[b.edge_label_index]

    assert torch.equal(first(4), first(4))
    assert not torch.equal(first(4), first(5))


@pytest.mark.parametrize("make, kwargs, message", [
    (lambda d: Data(x=d.x[:100], edge_index=d.edge_index, num_nodes=d.num_nodes), {},
     "data.x has 100 rows but the graph has num_nodes = 2708"),
    (lambda d: Data(x=d.x, edge_index=d.edge_index + 5, num_nodes=d.num_nodes), {},
     "data.edge_index ids must lie in [0, 2708) (num_nodes = 2708); found range [5, 2712]"),
    (lambda d: d, {"input_nodes": torch.tensor([0, 2708])},
     "input_nodes ids must lie in [0, 2708); found range [0, 2708]"),
    (lambda d: d, {"num_neighbors": 5}, "num_neighbors must be a list of ints; found 5"),
    (lambda d: d, {"num_neighbors": [5, "5"]}, "num_neighbors must hold ints >= 0 or -1; found [5, '5']"),
    (lambda d: d, {"num_neighbors": [5, -2]}, "num_neighbors must hold ints >= 0 or -1; found [5, -2]"),
    (lambda d: d, {"subgraph_type": "both"}, "subgraph_type must be one of ['directional', 'bidirectional', "
                                             "'induced'] (or PyG's SubgraphType); found 'both'"),
    (lambda d: d, {"time_attr": "t"}, "time_attr='t' names no attribute of the data"),
    (lambda d: d, {"input_time": torch.zeros(2708)}, "gnnscale.pyg loaders do not support input_time="),
    (lambda d: d, {"disjoint": 1}, "disjoint must be a bool; found 1"),
    (lambda d: d, {"weight_attr": "w"}, "weight_attr='w' names no attribute of data"),
])
def test_bad_inputs_are_one_line(cora, make, kwargs, message):
    args = {"num_neighbors": [5, 5], "batch_size": 8} | kwargs
    with pytest.raises(GnnscaleError) as err:
        NeighborLoader(make(cora), **args)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_bad_link_inputs_are_one_line(cora):
    with pytest.raises(GnnscaleError, match=r"edge_label_index ids must lie in \[0, 2708\)") as err:
        LinkNeighborLoader(cora, num_neighbors=[5], edge_label_index=torch.tensor([[0], [9999]]))
    assert "\n" not in str(err.value)


def test_the_package_imports_only_the_data_side():
    """gnnscale.pyg sits on the data side and the process layer (groups, health, comm), below the engine,
    and reads the engine's link metrics (gnnscale.tasks.scores: torch and gnnscale.config only), so that
    a user's loop scores links with the one evaluation."""
    allowed = ("gnnscale.errors", "gnnscale.pyg", "gnnscale.samplers", "gnnscale.partitioning",
               "gnnscale.datasets", "gnnscale.data", "gnnscale.process", "gnnscale.tasks.scores")
    folder = Path(__file__).resolve().parents[1] / "gnnscale" / "pyg"
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                if name.startswith("gnnscale"):
                    assert name.startswith(allowed), f"{path.name} imports {name}"


def test_pyg_graphsage_in_a_plain_loop_learns_cora(cora):
    """PyG's GraphSAGE over our loader reaches gnnscale train's Cora accuracy (0.794 final, 0.806 at
    the best validation epoch, 20 epochs, fanouts 10,10, hidden 64: see notes)."""
    torch.manual_seed(0)
    loader = NeighborLoader(cora, num_neighbors=[10, 10], input_nodes=cora.train_mask, batch_size=32, shuffle=True,
                            seed=0)
    model = GraphSAGE(cora.num_features, 64, num_layers=2, out_channels=7, dropout=0.5)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(15):
        model.train()
        for batch in loader:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index, num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                        num_sampled_edges_per_hop=batch.num_sampled_edges)[:batch.batch_size]
            F.cross_entropy(out, batch.y[:batch.batch_size]).backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(cora.x, cora.edge_index).argmax(-1)
    acc = float((pred[cora.test_mask] == cora.y[cora.test_mask]).float().mean())
    assert acc >= 0.77, acc


def test_worker_processes_draw_what_the_main_process_draws(cora):
    """The draws are keyed by (seed, epoch, first input id of the batch): DataLoader workers, which
    each hold a copy of the sampler, give the batches one process gives, epoch after epoch."""
    def run(workers):
        loader = NeighborLoader(cora, num_neighbors=FANOUTS, batch_size=512, shuffle=True, seed=2,
                                num_workers=workers)
        return [[(b.n_id, b.e_id) for b in loader] for _ in range(2)]

    for epoch_a, epoch_b in zip(run(0), run(2)):
        assert len(epoch_a) == len(epoch_b)
        for (na, ea), (nb, eb) in zip(epoch_a, epoch_b):
            assert torch.equal(na, nb) and torch.equal(ea, eb)


def test_disjoint_node_batches_grow_one_tree_per_seed(cora):
    n = cora.num_nodes
    seeds = torch.tensor([0, 1, 2, 3, 0 + 633, 1358, 2000, 5])
    batch = next(iter(NeighborLoader(cora, num_neighbors=FANOUTS, input_nodes=seeds, batch_size=8, disjoint=True,
                                     seed=0)))
    assert torch.equal(batch.n_id[:8], seeds) and torch.equal(batch.batch[:8], torch.arange(8))
    assert torch.equal(batch.x, cora.x[batch.n_id])
    tree_key = batch.batch * n + batch.n_id
    assert torch.unique(tree_key).numel() == tree_key.numel()  # distinct within a tree
    src, dst = batch.edge_index
    assert torch.equal(batch.batch[src], batch.batch[dst])  # edges stay in their tree
    assert torch.equal(cora.edge_index[0, batch.e_id], batch.n_id[src])
    assert torch.equal(cora.edge_index[1, batch.e_id], batch.n_id[dst])
    nsn, nse = batch.num_sampled_nodes, batch.num_sampled_edges
    deg = torch.bincount(cora.edge_index[1], minlength=n)
    lo = torch.tensor([0] + list(nsn)).cumsum(0)
    elo = torch.tensor([0] + list(nse)).cumsum(0)
    for h, f in enumerate(FANOUTS):
        cols = batch.edge_index[1, elo[h]:elo[h + 1]] - lo[h]
        frontier = batch.n_id[lo[h]:lo[h + 1]]
        assert torch.equal(torch.bincount(cols, minlength=frontier.numel()), deg[frontier].clamp(max=f))
    # the same seed gives the same trees
    again = next(iter(NeighborLoader(cora, num_neighbors=FANOUTS, input_nodes=seeds, batch_size=8, disjoint=True,
                                     seed=0)))
    assert torch.equal(again.n_id, batch.n_id) and torch.equal(again.batch, batch.batch)


@pytest.mark.parametrize("mode", ["binary", "triplet"])
def test_disjoint_link_batches(cora, mode):
    keys, n = edge_keys(cora), cora.num_nodes
    B = 20
    neg = dict(mode=mode, amount=2)
    batch = next(iter(LinkNeighborLoader(cora, num_neighbors=FANOUTS, batch_size=B, neg_sampling=neg, disjoint=True,
                                         seed=0)))
    assert bool((batch.batch < B).all())
    src, dst = batch.edge_index
    assert torch.equal(batch.batch[src], batch.batch[dst])
    if mode == "binary":
        eli = batch.edge_label_index
        assert eli.size(1) == 3 * B
        s, d = batch.n_id[eli[0]], batch.n_id[eli[1]]
        assert torch.equal(s[:B], cora.edge_index[0, :B]) and torch.equal(d[:B], cora.edge_index[1, :B])
        assert not bool(is_edge(keys, n, s[B:], d[B:]).any())
        assert torch.equal(batch.edge_label, torch.cat([torch.ones(B), torch.zeros(2 * B)]))
    else:
        s = batch.n_id[batch.src_index]
        assert torch.equal(s, cora.edge_index[0, :B])
        assert torch.equal(batch.n_id[batch.dst_pos_index], cora.edge_index[1, :B])
        neg_dst = batch.n_id[batch.dst_neg_index]  # [B, 2]
        assert neg_dst.shape == (B, 2)
        assert not bool(is_edge(keys, n, s.repeat_interleave(2), neg_dst.reshape(-1)).any())
        assert torch.equal(batch.batch[batch.dst_neg_index], torch.arange(B).unsqueeze(1).expand(B, 2))


def test_weighted_negatives_follow_the_weights(cora):
    """NegativeSampling's dst_weight: negative destinations only where the weight is positive."""
    from torch_geometric.sampler import NegativeSampling

    w = torch.zeros(cora.num_nodes)
    w[100:110] = 1.0
    batch = next(iter(LinkNeighborLoader(cora, num_neighbors=[2], batch_size=64, seed=0,
                                         neg_sampling=NegativeSampling("triplet", 2, dst_weight=w))))
    neg = batch.n_id[batch.dst_neg_index]
    assert bool(((neg >= 100) & (neg < 110)).all())


ACM = ROOT.parent / "acm"


@pytest.fixture(scope="module")
def acm():
    if not ACM.exists():
        pytest.skip(f"ACM is not at {ACM}")
    from gnnscale.datasets.hetero_data import to_hetero_data

    return to_hetero_data(load_dataset(f"acm:{ACM}?split=20"))


def test_hetero_batches_are_what_they_claim(acm):
    fanouts = {et: [4, 2] for et in acm.edge_types}
    fanouts[("paper", "has_subject", "subject")] = [0, 1]  # 0: the relation is skipped at that hop
    seeds_all = torch.nonzero(acm["paper"].train_mask).flatten()
    loader = NeighborLoader(acm, num_neighbors=fanouts, input_nodes=("paper", acm["paper"].train_mask), batch_size=40,
                            shuffle=True, seed=0)
    for batch in loader:
        bs = batch["paper"].batch_size
        seeds = batch["paper"].input_id  # a mask's: the seeds' node ids (PyG's)
        assert torch.isin(seeds, seeds_all).all()
        assert torch.equal(batch["paper"].n_id[:bs], seeds)
        assert torch.equal(batch["paper"].y[:bs], acm["paper"].y[seeds])
        for t in acm.node_types:
            n_id = batch[t].n_id
            assert torch.unique(n_id).numel() == n_id.numel()
            assert sum(batch[t].num_sampled_nodes) == n_id.numel()
            if "x" in acm[t]:
                assert torch.equal(batch[t].x, acm[t].x[n_id])
        deg = {et: torch.bincount(acm[et].edge_index[1], minlength=acm[et[2]].num_nodes) for et in acm.edge_types}
        for et in acm.edge_types:
            s, _, d = et
            ei, e_id = batch[et].edge_index, batch[et].e_id
            assert torch.equal(acm[et].edge_index[0, e_id], batch[s].n_id[ei[0]])
            assert torch.equal(acm[et].edge_index[1, e_id], batch[d].n_id[ei[1]])
            nse = list(batch[et].num_sampled_edges)
            assert len(nse) == 2 and sum(nse) == ei.size(1)
            lo = torch.tensor([0] + list(batch[d].num_sampled_nodes)).cumsum(0)
            elo = torch.tensor([0] + nse).cumsum(0)
            for h in range(2):  # hop h: min(fan-out, in-degree) in-edges of each node hop h - 1 added
                cols = ei[1, elo[h]:elo[h + 1]] - lo[h]
                frontier = batch[d].n_id[lo[h]:lo[h + 1]]
                assert torch.equal(torch.bincount(cols, minlength=frontier.numel()),
                                   deg[et][frontier].clamp(max=fanouts[et][h]))


def test_hetero_trim_to_layer_gives_the_same_seed_outputs(acm):
    from torch_geometric.nn import HeteroConv, SAGEConv
    from torch_geometric.utils import trim_to_layer

    torch.manual_seed(0)
    convs = torch.nn.ModuleList(HeteroConv({et: SAGEConv((-1, -1), 8) for et in acm.edge_types}) for _ in range(2))
    batch = next(iter(NeighborLoader(acm, num_neighbors=[3, 3], input_nodes=("paper", torch.arange(30)),
                                     batch_size=30, seed=0)))
    nsn = {t: batch[t].num_sampled_nodes for t in batch.node_types}
    nse = {et: batch[et].num_sampled_edges for et in batch.edge_types}

    def forward(trim: bool) -> torch.Tensor:
        x = {t: batch[t].x if "x" in batch[t] else torch.ones(batch[t].num_nodes, 4) for t in batch.node_types}
        ei = dict(batch.edge_index_dict)
        for i, conv in enumerate(convs):
            if trim:
                x, ei, _ = trim_to_layer(i, nsn, nse, x, ei)
            x = {t: v.relu() for t, v in conv(x, ei).items()} if i == 0 else conv(x, ei)
            x = {t: v for t, v in x.items()}
        return x["paper"][:30]

    full = forward(False)
    torch.testing.assert_close(forward(True), full)


def test_hetero_bad_inputs_are_one_line(acm):
    cases = [
        (dict(num_neighbors={("paper", "written_by", "author"): [2]}, input_nodes="paper"),
         "Missing number of neighbors for edge type"),
        (dict(num_neighbors=[2], input_nodes=("venue", None)), "a HeteroData loader needs input_nodes as a node type"),
        (dict(num_neighbors=[2], input_nodes=("paper", torch.tensor([5000]))), "input_nodes ids must lie in [0, 4019)"),
    ]
    for kwargs, message in cases:
        with pytest.raises(GnnscaleError) as err:
            NeighborLoader(acm, batch_size=4, **kwargs)
        assert message in str(err.value) and "\n" not in str(err.value)


def test_weight_attr_draws_by_weight(cora):
    """PyG's weight_attr: zero-weight edges are never drawn; with weights, draws stay within fan-outs
    and the edges are still the graph's."""
    d = cora.clone()
    keep = d.edge_index[0] % 2 == 0  # only edges from even sources may be drawn
    d.edge_weight = keep.float()
    loader = NeighborLoader(d, num_neighbors=[3, 2], batch_size=128, weight_attr="edge_weight", seed=0)
    for i, batch in enumerate(loader):
        assert bool(keep[batch.e_id].all())
        src, dst = batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]]
        assert torch.equal(d.edge_index[0, batch.e_id], src) and torch.equal(d.edge_index[1, batch.e_id], dst)
        eligible = torch.bincount(d.edge_index[1][keep], minlength=d.num_nodes)
        m = batch.num_sampled_edges[0]
        got = torch.bincount(batch.edge_index[1, :m], minlength=batch.batch_size)
        assert torch.equal(got, eligible[batch.n_id[:batch.batch_size]].clamp(max=3))
        if i == 4:
            break
    with pytest.raises(GnnscaleError, match="edge_weight must be non-negative") as err:
        d.edge_weight = -d.edge_weight - 1
        NeighborLoader(d, num_neighbors=[3], weight_attr="edge_weight")
    assert "\n" not in str(err.value)


def _same_batches(a_loader, b_loader, typed: bool = False) -> list:
    """The batches of two loaders (one pass each), checked equal but for input_id: [(a, b), ...]."""
    pairs = list(zip(a_loader, b_loader))
    assert pairs and len(pairs) == len(b_loader)
    for a, b in pairs:
        stores = [(a[t], b[t]) for t in a.node_types] + [(a[et], b[et]) for et in a.edge_types] if typed else [(a, b)]
        for sa, sb in stores:
            for key in ("n_id", "edge_index", "e_id", "x", "y"):
                if key in sb:
                    assert torch.equal(sa[key], sb[key]), key
    return pairs


def test_a_mask_gives_the_id_forms_batches_and_pygs_input_id(cora, acm):
    """input_nodes as a bool mask (and typed, ("paper", mask)) is what PyG's get_input_nodes makes of
    it: its nodes as ids, the same batches as the ids give; each batch's input_id the seeds' node
    ids (PyG's input_id of a mask), where the ids' are positions among them (PyG's for ids). On the
    plain loaders and on run.node_loader of a one-process start_run (which ended in a
    22-line IndexError on a mask: the mask's length taken for the seed count), in memory."""
    from torch_geometric.loader.utils import get_input_nodes

    from gnnscale.pyg import start_run

    mask = cora.val_mask  # nodes 140..639: their positions among the mask's nodes are not their ids
    _, ids, pyg_input_id = get_input_nodes(cora, mask)  # PyG's contract for a mask: input_id = the node ids
    assert torch.equal(pyg_input_id, ids)

    def kw(nodes):
        return dict(num_neighbors=FANOUTS, input_nodes=nodes, batch_size=32, shuffle=True, seed=3)

    run = start_run(cora, timeout=30)
    try:
        for a, b in _same_batches(NeighborLoader(cora, **kw(mask)), NeighborLoader(cora, **kw(ids))):
            assert torch.equal(a.input_id, pyg_input_id[b.input_id])  # PyG: the mask's input_id at those positions
            assert torch.equal(a.input_id, a.n_id[:a.batch_size])
        plain = list(NeighborLoader(cora, **kw(mask)))
        loaders = [run.node_loader(FANOUTS, nodes, batch_size=32, shuffle=True, seed=3) for nodes in (mask, ids, "val")]
        for a, b in _same_batches(loaders[0], plain):  # one process: the plain loader's batches
            assert torch.equal(a.input_id, b.input_id)
        for other in loaders[1:]:
            for a, b in _same_batches(run.node_loader(FANOUTS, mask, batch_size=32, shuffle=True, seed=3), other):
                assert torch.equal(a.input_id, ids[b.input_id])

        paper = acm["paper"].train_mask
        typed_ids = torch.nonzero(paper).view(-1)
        fan = {et: [4, 2] for et in acm.edge_types}
        for make in (lambda nodes: NeighborLoader(acm, fan, input_nodes=nodes, batch_size=40, shuffle=True, seed=0),
                     lambda nodes: run.node_loader(fan, nodes, batch_size=40, shuffle=True, seed=0, data=acm)):
            for a, b in _same_batches(make(("paper", paper)), make(("paper", typed_ids)), typed=True):
                assert torch.equal(a["paper"].input_id, typed_ids[b["paper"].input_id])
                assert torch.equal(a["paper"].input_id, a["paper"].n_id[:a["paper"].batch_size])
    finally:
        run.close()


def test_a_bad_mask_is_refused_in_one_line(cora, acm):
    """A mask of another length, a float or 2-D tensor, a typed mask of another length, a mask
    without its node type on a HeteroData: one line each, on the plain loader and on
    run.node_loader alike, no tensor pasted into it."""
    from gnnscale.pyg import start_run

    mask, paper = cora.train_mask, acm["paper"].train_mask
    cases = [(cora, mask[:-1], "input_nodes as a mask must be bool [2708]; found shape (2707,)"),
             (cora, mask.float(), "input_nodes must be a 1-D int64 tensor of node ids or a bool mask; found "
                                  "torch.float32, shape (2708,). Pass ids as int64 (ids.long()) or a mask as bool"),
             (cora, mask.view(4, -1), "input_nodes as a mask must be bool [2708]; found shape (4, 677)"),
             (cora, ("paper", mask), "input_nodes by node type (('paper', a bool tensor of shape (2708,))) needs a "
                                     "HeteroData"),
             (acm, ("paper", paper[:-1]), "input_nodes as a mask must be bool [4019]; found shape (4018,)"),
             (acm, paper, "a HeteroData loader needs input_nodes as a node type or (node type, ids or mask), the type "
                          "among ['paper', 'author', 'subject']; found a bool tensor of shape (4019,)")]
    run = start_run(cora, timeout=30)
    try:
        for data, nodes, message in cases:
            for make in (lambda: NeighborLoader(data, [2], input_nodes=nodes, batch_size=4),
                         lambda: run.node_loader([2], nodes, batch_size=4, data=data)):
                with pytest.raises(GnnscaleError) as err:
                    make()
                assert message in str(err.value) and "\n" not in str(err.value), str(err.value)
    finally:
        run.close()


def test_a_world_not_joined_through_start_run_is_refused_in_one_line(cora, monkeypatch, capsys):
    """Process 1 of a torchrun world of 2 (WORLD_SIZE, RANK) that did not call start_run: every
    entry point of a plain loop refuses in one line naming start_run (each process would
    train its own model); uncaught, the error prints that line alone (no traceback). Joined (the
    run's world) or alone, they build."""
    import sys

    import gnnscale.pyg.world as world
    from gnnscale.pyg import keyed_dropout, memory_stores, sampler_for

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setitem(world._JOINED, "world", 0)
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    entries = {"NeighborLoader": lambda: NeighborLoader(cora, [2], input_nodes=cora.train_mask, batch_size=8),
               "LinkNeighborLoader": lambda: LinkNeighborLoader(cora, [2], batch_size=8),
               "GnnscaleSampler": lambda: GnnscaleSampler(cora.edge_index, cora.num_nodes, [2]),
               "sampler_for": lambda: sampler_for(cora, [2]),
               "memory_stores": lambda: memory_stores(cora),
               "keyed_dropout": lambda: keyed_dropout(GraphSAGE(4, 8, num_layers=2, dropout=0.5))}
    for name, make in entries.items():
        with pytest.raises(world.UnjoinedWorldError) as err:
            make()
        msg = str(err.value)
        assert msg.startswith(f"gnnscale.pyg.{name}: this is process 1 of 2 (WORLD_SIZE), not joined through "
                              "gnnscale.pyg.start_run, so each process would train its own model"), msg
        assert "run = gnnscale.pyg.start_run(data" in msg and "run.ddp(model)" in msg and "\n" not in msg
    sys.excepthook(type(err.value), err.value, err.value.__traceback__)  # uncaught: the one line
    out = capsys.readouterr()
    assert out.err.count("\n") == 1 and out.err.endswith(f": error: {err.value}\n") and "Traceback" not in out.err
    monkeypatch.delenv("WORLD_SIZE")  # a group of 3 the script made itself (torch.distributed, no torchrun)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a: 3)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *a: 2)
    with pytest.raises(world.UnjoinedWorldError, match=r"^gnnscale.pyg.NeighborLoader: this is process 2 of 3 "
                       r"\(torch.distributed's group\), not joined through gnnscale.pyg.start_run"):
        entries["NeighborLoader"]()
    monkeypatch.setitem(world._JOINED, "world", 3)  # joined through start_run: the run's loaders build
    for make in entries.values():
        make()
    monkeypatch.undo()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setitem(world._JOINED, "world", 2)
    for make in entries.values():
        make()
    monkeypatch.setitem(world._JOINED, "world", 0)
    monkeypatch.setenv("WORLD_SIZE", "1")  # one process
    for make in entries.values():
        make()
