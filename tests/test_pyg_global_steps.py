"""A global step is the same on 1 or N processes (gnnscale.pyg.steps): with ``batch_size=b`` on N
processes, step k's N batches together are one process's batch k at ``batch_size=N b``: the same
seeds, the union of their sampled subgraphs (nodes and edges, hop by hop) is the one-process
batch's, the negatives of a link step are the one-process batch's, and a short deterministic run
gives the same losses and weights (within float32 summation order)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.sampler import NegativeSampling

from gnnscale.process.launch import launch_local
from gnnscale.pyg import sampler_for
from gnnscale.pyg.rank_loaders import RankBatches, RankLinkLoader, RankNodeLoader
from gnnscale.pyg.steps import StepBook

from pyg_step_workers import step_batches, train_steps

FANOUTS = [5, 3, 2]


def _loaders(data, world, b, seed, disjoint=False, pairs=None, neg=None, replace=False):
    """Every rank's loader of one process world (rank r: RankBatches(rank=r)), as DistRun builds them."""
    out = []
    inputs = torch.nonzero(data.train_mask).flatten()
    for r in range(world):
        s = sampler_for(data, FANOUTS, seed=seed, replace=replace)
        s.disjoint = disjoint
        rb = RankBatches(inputs.numel() if pairs is None else pairs.size(1), b, True, False, seed, r, world)
        out.append(_rank_loader(data, s, rb, world, inputs, pairs, neg_sampling=neg))
    return out


def _rank_loader(data, s, rb, world, input_nodes=None, pairs=None, **negatives):
    """One rank's loader as DistRun builds it: over ``input_nodes`` (nodes) or ``pairs`` (links,
    with ``negatives``' keyword), told the step's positions (``StepBook``) when ``world > 1``."""
    if pairs is None:
        loader = RankNodeLoader(data, s, input_nodes=input_nodes, batch_sampler=rb)
        by_pos = loader.input_data.node
    else:
        loader = RankLinkLoader(data, s, edge_label_index=pairs, batch_sampler=rb, **negatives)
        by_pos = torch.stack([loader.input_data.row, loader.input_data.col])
    if world > 1:
        s.steps = rb.book = StepBook(world, by_pos, loader.input_data.input_id)
    loader._sampler, loader._epoch = s, 0
    return loader


def _steps(data, world, b, seed, **kw):
    """[(one-process batch k at N b, [the step's real batches of the N ranks])] of the second pass."""
    one = _loaders(data, 1, world * b, seed, **kw)[0]
    ranks = _loaders(data, world, b, seed, **kw)
    for loader in [one] + ranks:  # pass 0, then check pass 1 (the draws follow the pass)
        list(loader)
    ref = list(one)
    per_rank = [list(loader) for loader in ranks]
    real = ranks[0].batch_sampler.num_batches
    return [(want, [per_rank[r][k] for r in range(world) if k * world + r < real]) for k, want in enumerate(ref)]


def _edge_set(b, trees: bool = False, offset: int = 0) -> set:
    src, dst = b.n_id[b.edge_index]
    cols = [dst, src, b.e_id]
    if trees:
        cols.insert(0, b.batch[b.edge_index[1]] + offset)
    return set(zip(*[c.tolist() for c in cols]))


def _hop_of(b) -> dict:
    """{original id: the hop at which batch b reaches it} (not disjoint)."""
    hops = torch.repeat_interleave(torch.arange(len(b.num_sampled_nodes)), torch.tensor(b.num_sampled_nodes))
    return dict(zip(b.n_id.tolist(), hops.tolist()))


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("replace", [False, True])
def test_node_step_union_is_the_one_process_batch(cora, world, replace):
    for want, parts in _steps(cora, world, 12, 3, replace=replace):
        assert torch.equal(torch.cat([p.n_id[:p.batch_size] for p in parts]), want.n_id[:want.batch_size])
        hop = _hop_of(want)
        got_nodes = set().union(*[set(p.n_id.tolist()) for p in parts])
        assert got_nodes == set(want.n_id.tolist())
        got = set().union(*[_edge_set(p) for p in parts])
        assert got == _edge_set(want)
        # hop by hop: the one-process batch's hop-h edges are the ranks' edges into its hop-h nodes
        start = 0
        for h, count in enumerate(want.num_sampled_edges):
            src, dst = want.n_id[want.edge_index[:, start:start + count]]
            mine = set(zip(dst.tolist(), src.tolist(), want.e_id[start:start + count].tolist()))
            assert mine == {e for e in got if hop[e[0]] == h}
            start += count
        for p in parts:  # each rank's batch is a subgraph of the step's
            assert _edge_set(p) <= _edge_set(want)


def test_disjoint_trees_are_the_one_process_trees(cora):
    for want, parts in _steps(cora, 2, 12, 5, disjoint=True):
        offsets = [sum(p.batch_size for p in parts[:i]) for i in range(len(parts))]
        got = set().union(*[_edge_set(p, True, o) for p, o in zip(parts, offsets)])
        assert got == _edge_set(want, True)
        for p in parts:  # each rank's trees are numbered in its batch, as PyG's disjoint batches are
            assert torch.equal(p.batch.unique(), torch.arange(p.batch_size))


@pytest.mark.parametrize("neg", ["binary", "triplet"])
def test_link_step_union_and_negatives_are_the_one_process_batch(cora, neg):
    pairs = cora.edge_index[:, torch.arange(0, cora.edge_index.size(1), 29)]
    ns = NegativeSampling(neg, 2)
    for want, parts in _steps(cora, 2, 16, 7, pairs=pairs, neg=ns):
        assert set().union(*[set(p.n_id.tolist()) for p in parts]) == set(want.n_id.tolist())
        assert set().union(*[_edge_set(p) for p in parts]) == _edge_set(want)
        if neg == "binary":  # positives, then negatives: each rank's share, in rank order
            for label in (1, 0):
                got = torch.cat([p.n_id[p.edge_label_index[:, p.edge_label == label]] for p in parts], 1)
                assert torch.equal(got, want.n_id[want.edge_label_index[:, want.edge_label == label]])
        else:
            for name in ("src_index", "dst_pos_index", "dst_neg_index"):
                got = torch.cat([p.n_id[p[name]] for p in parts])
                assert torch.equal(got, want.n_id[want[name]]), name


def test_disjoint_link_trees_are_the_one_process_trees(cora):
    pairs = cora.edge_index[:, torch.arange(0, cora.edge_index.size(1), 29)]
    for neg in (NegativeSampling("binary", 1), NegativeSampling("triplet", 2)):
        for want, parts in _steps(cora, 2, 16, 7, pairs=pairs, neg=neg, disjoint=True):
            assert set().union(*[_edge_set(p) for p in parts]) == _edge_set(want)
            assert set().union(*[set(p.n_id.tolist()) for p in parts]) == set(want.n_id.tolist())


def test_step_union_on_two_processes(cora, cora_partition):
    """gloo, 2 processes over a 2-part folder, against one process over a 1-part folder: the step's
    nodes, edges and negatives, and ``run.link_metrics`` (mrr, hits@10, auc) over every rank. 271 pairs
    make 17 link batches of 16: an odd count, so rank 1's last batch is a padded repeat of batch 0 that
    link_metrics must leave out."""
    pairs = cora.edge_index[:, torch.arange(0, cora.edge_index.size(1), 39)]
    assert pairs.size(1) == 271
    fan = [5, 3]
    one = launch_local(step_batches, 1, args=(cora_partition(1), fan, 32, 7, pairs), threads_per_worker=1)[0]
    two = launch_local(step_batches, 2, args=(cora_partition(2), fan, 16, 7, pairs), threads_per_worker=1)
    assert one["world"] == 1 and [r["world"] for r in two] == [2, 2]
    assert [[b["repeat"] for b in r["links"]].count(True) for r in two] == [0, 1]

    def key_set(edges):
        return set(map(tuple, edges.tolist()))

    for kind in ("nodes", "links"):
        for k, want in enumerate(one[kind]):
            parts = [two[r][kind][k] for r in range(2) if not two[r][kind][k]["repeat"]]
            assert parts
            assert set().union(*[set(p["n_id"].tolist()) for p in parts]) == set(want["n_id"].tolist())
            assert set().union(*[key_set(p["edges"]) for p in parts]) == key_set(want["edges"])
            if kind == "nodes":
                assert torch.equal(torch.cat([p["n_id"][:p["bs"]] for p in parts]), want["n_id"][:want["bs"]])
            else:
                for label in (1, 0):
                    got = torch.cat([p["eli"][:, p["label"] == label] for p in parts], 1)
                    assert torch.equal(got, want["eli"][:, want["label"] == label])
    # run.link_metrics: the engine's bounded accumulator reduced over the ranks gives one process's figures
    m = one["metrics"]
    assert set(m) == {"mrr", "hits@10", "auc", "ap"} and 0 < m["mrr"] < 1 and 0.5 < m["auc"] < 1
    for r in range(2):
        assert two[r]["metrics"] == pytest.approx(m, rel=1e-9)


@pytest.mark.parametrize("batch,dropout", [(28, 0.5), (32, 0.0)])
def test_one_epoch_of_a_plain_loop_is_the_same_on_two_processes(cora_partition, batch, dropout):
    """GraphSAGE, 1 thread, 140 training nodes in 5 steps of ``batch`` seeds (2 x batch / 2; 32: a last
    step of 12, one rank's 12 and the other's padding, weighed by loss_scale; 28: dropout 0.5 keyed by
    node, gnnscale.pyg.keyed_dropout): equal losses and weights within float32 summation order (DDP's
    all-reduce, the edges' order in the mean)."""
    one = launch_local(train_steps, 1, args=(cora_partition(1), [5, 3], batch, 0, dropout), threads_per_worker=1)[0]
    two = launch_local(train_steps, 2, args=(cora_partition(2), [5, 3], batch // 2, 0, dropout),
                       threads_per_worker=1)
    assert len(one["losses"]) == 5 and [len(r["losses"]) for r in two] == [5, 5]
    step = [(a + b) / 2 for a, b in zip(two[0]["losses"], two[1]["losses"])]
    assert step == pytest.approx(one["losses"], rel=1e-5, abs=1e-6)
    for name, w in one["weights"].items():
        torch.testing.assert_close(two[0]["weights"]["module." + name], w, rtol=1e-5, atol=1e-6)


def test_loss_scale_weighs_a_short_last_step():
    """140 seeds at 16 per rank on 2 ranks: steps of 32, the last of 12 (rank 0 all of it, rank 1 a
    padding repeat): DDP's average of the scaled means is the mean over the step's seeds."""
    scales = [[RankBatches(140, 16, True, False, 0, r, 2).loss_scale(k) for k in range(5)] for r in range(2)]
    assert scales == [[1.0] * 4 + [2.0], [1.0] * 4 + [0.0]]
    three = [RankBatches(100, 12, False, False, 0, r, 3).loss_scale(2) for r in range(3)]  # 12 + 12 + 4
    assert three == pytest.approx([12 * 3 / 28, 12 * 3 / 28, 4 * 3 / 28])
    assert [RankBatches(100, 16, False, False, 0, r, 3).loss_scale(2) for r in range(3)] == [3.0, 0.0, 0.0]
    assert [RankBatches(140, 32, True, False, 0, 0, 1).loss_scale(k) for k in range(5)] == [1.0] * 5


def _typed_steps(data, world, b, seed, input_nodes=None, pairs=None):
    """As _steps, on a HeteroData: [(one-process batch k at N b, [the step's real batches])]."""
    fan = {et: [4, 2, 2] for et in data.edge_types}

    def loaders(w, size):
        out = []
        count = int(input_nodes[1].numel()) if pairs is None else int(pairs[1].size(1))
        for r in range(w):
            s = sampler_for(data, fan, seed=seed)
            rb = RankBatches(count, size, True, False, seed, r, w)
            out.append(_rank_loader(data, s, rb, w, input_nodes, pairs, neg_sampling_ratio=2.0))
        return out

    one, ranks = loaders(1, world * b)[0], loaders(world, b)
    ref = list(one)
    per_rank = [list(loader) for loader in ranks]
    real = ranks[0].batch_sampler.num_batches
    return [(want, [per_rank[r][k] for r in range(world) if k * world + r < real]) for k, want in enumerate(ref)]


def _typed_edges(b, et) -> set:
    src, dst = b[et[0]].n_id[b[et].edge_index[0]], b[et[2]].n_id[b[et].edge_index[1]]
    return set(zip(dst.tolist(), src.tolist(), b[et].e_id.tolist()))


def test_typed_step_union_is_the_one_process_batch(acm_data):
    """ACM (paper, author, subject), 3 hops, 2 ranks: per node type and relation, the union of the
    step's batches is one process's batch; link batches (paper-author, ratio 2): pairs and negatives too."""
    data = acm_data
    train = ("paper", torch.nonzero(data["paper"].train_mask).flatten())
    et = next(e for e in data.edge_types if e[0] != e[2])
    pairs = (et, data[et].edge_index[:, torch.arange(0, data[et].edge_index.size(1), 50)])
    for kind, steps in (("nodes", _typed_steps(data, 2, 16, 5, input_nodes=train)),
                        ("links", _typed_steps(data, 2, 32, 5, pairs=pairs))):
        assert steps
        for want, parts in steps:
            for t in data.node_types:
                assert set().union(*[set(p[t].n_id.tolist()) for p in parts]) == set(want[t].n_id.tolist()), t
            for e in data.edge_types:
                assert set().union(*[_typed_edges(p, e) for p in parts]) == _typed_edges(want, e), e
            if kind == "nodes":
                got = torch.cat([p["paper"].n_id[:p["paper"].batch_size] for p in parts])
                assert torch.equal(got, want["paper"].n_id[:want["paper"].batch_size])
            else:
                for label in (1, 0):
                    def ends(b):
                        eli = b[et].edge_label_index[:, b[et].edge_label == label]
                        return torch.stack([b[et[0]].n_id[eli[0]], b[et[2]].n_id[eli[1]]])
                    assert torch.equal(torch.cat([ends(p) for p in parts], 1), ends(want))


def test_keyed_dropout_masks_follow_the_node_not_the_row():
    """KeyedDropout: a node's mask is a function of (seed, pass, step, call, node id), so two
    batches holding node v in other rows drop the same elements of v; about p of them dropped;
    refused in one line outside a rank loader's batch or on rows that are not the batch's nodes."""
    from gnnscale.errors import SamplerError
    from gnnscale.pyg.dropout import BatchKeys, KeyedDropout, set_batch

    drop = KeyedDropout(0.5)
    x = torch.ones(6, 64)
    with pytest.raises(SamplerError, match="iterate a run.node_loader"):
        drop(x)
    try:
        set_batch(BatchKeys(torch.tensor([5, 9, 2, 7, 11, 3]), seed=0, pass_=1, step=4))
        a = drop(x)
        with pytest.raises(SamplerError, match=r"found 5 rows and 6 nodes"):
            drop(x[:5])
        set_batch(BatchKeys(torch.tensor([2, 40, 5]), seed=0, pass_=1, step=4))  # the same step, other rows
        b = drop(torch.ones(3, 64))
        assert torch.equal(b[0], a[2]) and torch.equal(b[2], a[0])  # node 2 and node 5
        set_batch(BatchKeys(torch.tensor([2, 40, 5]), seed=0, pass_=1, step=5))  # the next step: new masks
        assert not torch.equal(drop(torch.ones(3, 64))[0], a[2])
        assert set(a.unique().tolist()) == {0.0, 2.0} and 0.35 < float((a == 0).float().mean()) < 0.65
    finally:
        set_batch(None)
    drop.eval()
    assert torch.equal(drop(x), x)


def test_keyed_dropout_masks_differ_between_passes_and_calls(cora):
    """A pass is one iteration of a rank loader (its epoch: ``_RankPasses`` numbers them 0, 1, ...);
    step k of pass 0 and step k of pass 1 (the same call c) draw other masks for the same node, as
    two calls of one batch do; the masks of the nodes both batches hold are compared (issue 54,
    item 7: the pass left out of the key made them equal)."""
    from gnnscale.pyg.dropout import KeyedDropout, current_batch

    drop = KeyedDropout(0.5)
    loader = _loaders(cora, 1, 64, seed=3)[0]
    seen = []
    for _ in range(2):  # two passes; the first batch (step 0) of each, its first and second call
        for batch in loader:
            keys = current_batch()
            ones = torch.ones(batch.n_id.numel(), 32)
            first, second = drop(ones) != 0, drop(ones) != 0
            seen.append((keys.pass_, keys.step, batch.n_id, first, second))
            break
    (p0, k0, ids0, a0, b0), (p1, k1, ids1, a1, _) = seen
    assert (p0, k0, p1, k1) == (0, 0, 1, 0)
    assert not torch.equal(a0, b0)  # the second call of a batch: new masks
    common, i0, i1 = (torch.from_numpy(v) for v in np.intersect1d(ids0.numpy(), ids1.numpy(), return_indices=True))
    assert common.numel() > 50, common.numel()
    same = (a0[i0] == a1[i1]).float().mean()
    # independent masks (p = 0.5) agree on about half the elements; the same mask on all of them
    assert 0.4 < float(same) < 0.6, f"step 0's masks of pass 0 and pass 1 agree on {float(same):.1%} of the elements"
