"""gnnscale.pyg's loaders with time on a HeteroData (issue 57): the time-respecting kernels per relation
(gnnscale.pyg.typed_temporal). Checked edge by edge against the graph: no sampled edge of any relation
at or after its tree's seed time (strict cut), `last` = exactly the k most recent earlier in-edges per
relation, disjoint trees of one node at several times each see only their own past, node-level times,
link batches (negatives included), and the bad inputs in one line each. PyG's own typed temporal tests
run in tests/test_pyg_upstream.py."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import HeteroData

from gnnscale.errors import DatasetError, GnnscaleError, SamplerError
from gnnscale.pyg import LinkNeighborLoader, NeighborLoader

CLICK, BACK, FOLLOW = ("u", "clicks", "i"), ("i", "clicked_by", "u"), ("u", "follows", "u")
NU, NI = 30, 20


def _graph(seed: int = 0, span: int = 100) -> HeteroData:
    """Users and items, three relations, each edge a time in [0, span) (repeats: ties at seed times)."""
    g = torch.Generator().manual_seed(seed)
    data = HeteroData()
    data["u"].x = torch.arange(NU, dtype=torch.float).view(-1, 1)
    data["i"].x = torch.arange(NI, dtype=torch.float).view(-1, 1)
    for et, (ns, nd), e in ((CLICK, (NU, NI), 400), (BACK, (NI, NU), 300), (FOLLOW, (NU, NU), 200)):
        data[et].edge_index = torch.stack([torch.randint(0, ns, (e,), generator=g),
                                           torch.randint(0, nd, (e,), generator=g)])
        data[et].edge_time = torch.randint(0, span, (e,), generator=g)
    return data


def _tree_time_of_edges(batch, et, tree_time):
    """Each sampled edge of ``et``: (its time, its tree's seed time), after checking both ends are in one tree."""
    row, col = batch[et].edge_index
    tree = batch[et[2]].batch[col]
    assert torch.equal(batch[et[0]].batch[row], tree)  # an edge never joins two trees
    return batch[et].edge_time, tree_time[tree]


def _earlier(data, et, node, t, cut="<"):
    """Original edge ids of ``et`` into ``node`` strictly before ``t`` (or at it), in (time, id) order."""
    ei, times = data[et].edge_index, data[et].edge_time
    keep = (ei[1] == node) & ((times < t) if cut == "<" else (times <= t))
    ids = torch.nonzero(keep).flatten()
    return ids[torch.argsort(times[ids] * (ei.size(1) + 1) + ids)]


@pytest.mark.parametrize("strategy, window", [("uniform", 0), ("last", 0), ("uniform", 25)])
def test_no_sampled_edge_of_any_relation_is_at_or_after_its_trees_time(strategy, window):
    data = _graph(0)
    seed_time = torch.randint(0, 120, (NU,), generator=torch.Generator().manual_seed(1))
    loader = NeighborLoader(data, num_neighbors=[3, 2], input_nodes="u", input_time=seed_time, time_attr="edge_time",
                            temporal_strategy=strategy, time_window=window, time_cut="<", batch_size=7, seed=3)
    seen = {et: 0 for et in (CLICK, BACK, FOLLOW)}
    for batch in loader:
        tree_time = seed_time[batch["u"].input_id]
        for et in seen:
            e_time, t = _tree_time_of_edges(batch, et, tree_time)
            assert torch.equal(e_time, data[et].edge_time[batch[et].e_id])
            assert bool((e_time < t).all()), et
            if window:
                assert bool((e_time >= t - window).all()), et
            seen[et] += e_time.numel()
    assert all(n > 0 for n in seen.values()), seen


def test_last_takes_exactly_the_k_most_recent_earlier_in_edges_of_each_relation():
    data = _graph(2, span=40)  # many ties at the seeds' times: a cut '<=' would take other edges
    k = 2
    seed_time = torch.randint(0, 45, (NU,), generator=torch.Generator().manual_seed(4))
    loader = NeighborLoader(data, num_neighbors=[k, k], input_nodes="u", input_time=seed_time, time_attr="edge_time",
                            temporal_strategy="last", time_cut="<", batch_size=10, seed=0)
    checked = 0
    for batch in loader:
        tree_time = seed_time[batch["u"].input_id]
        for et in (CLICK, BACK, FOLLOW):
            # the nodes of et's target type expanded in this batch: those added before the last hop
            expanded = sum(batch[et[2]].num_sampled_nodes[:-1])
            col, e_id = batch[et].edge_index[1], batch[et].e_id
            for local in range(expanded):  # a test's loop over a few dozen nodes
                node, tree = int(batch[et[2]].n_id[local]), int(batch[et[2]].batch[local])
                want = _earlier(data, et, node, int(tree_time[tree]))[-k:]
                got = e_id[col == local]
                assert sorted(got.tolist()) == sorted(want.tolist()), (et, node, tree)
                checked += want.numel()
    assert checked > 100


def test_one_node_seeded_at_several_times_each_tree_sees_only_its_own_past():
    data = _graph(1)
    node = int(torch.bincount(data[FOLLOW].edge_index[1], minlength=NU).argmax())
    times = torch.tensor([5, 30, 60, 90, 200])
    loader = NeighborLoader(data, num_neighbors=[-1, 4], input_nodes=("u", torch.full((5,), node)), input_time=times,
                            time_attr="edge_time", time_cut="<", batch_size=5, seed=0)
    batch = next(iter(loader))
    assert batch["u"].batch[:5].tolist() == [0, 1, 2, 3, 4]
    for et in (FOLLOW, BACK):  # the relations into a 'u' node: hop 1 takes every earlier in-edge, tree by tree
        first_hop = batch[et].num_sampled_edges[0]
        col, e_id = batch[et].edge_index[1][:first_hop], batch[et].e_id[:first_hop]
        for tree, t in enumerate(times.tolist()):
            assert sorted(e_id[col == tree].tolist()) == sorted(_earlier(data, et, node, t).tolist()), (et, t)
        e_time, tt = _tree_time_of_edges(batch, et, times)
        assert bool((e_time < tt).all())
    sizes = torch.bincount(batch["u"].batch, minlength=5)
    assert sizes.tolist() == sorted(sizes.tolist())  # a later tree sees at least the earlier trees' past


def test_node_level_times_and_link_batches_respect_each_trees_time():
    data = _graph(3)
    del data[CLICK].edge_time, data[BACK].edge_time, data[FOLLOW].edge_time
    g = torch.Generator().manual_seed(5)
    data["u"].time = torch.randint(0, 100, (NU,), generator=g)
    data["i"].time = torch.randint(0, 100, (NI,), generator=g)
    nodes = NeighborLoader(data, num_neighbors=[-1, -1], input_nodes="u", time_attr="time", time_cut="<",
                           batch_size=8, seed=0)  # seed times: the seeds' own node times
    seen = 0
    for batch in nodes:
        tree_time = data["u"].time[batch["u"].n_id[:batch["u"].batch_size]]
        for et in (CLICK, BACK, FOLLOW):
            row, col = batch[et].edge_index
            assert bool((batch[et[0]].time[row] < tree_time[batch[et[2]].batch[col]]).all()), et
            seen += row.numel()
    assert seen > 0
    label_time = torch.randint(50, 150, (data[CLICK].num_edges,), generator=g)
    for neg in (dict(neg_sampling_ratio=1.0), dict(neg_sampling=dict(mode="triplet", amount=2))):
        link = LinkNeighborLoader(data, num_neighbors=[3, 3], edge_label_index=CLICK, edge_label_time=label_time,
                                  time_attr="time", time_cut="<", batch_size=16, seed=0, **neg)
        for batch in link:
            t = batch["u"].seed_time if "seed_time" in batch["u"] else batch[CLICK].edge_label_time
            for et in (CLICK, BACK, FOLLOW):
                row, col = batch[et].edge_index
                assert bool((batch[et[0]].time[row] < t[batch[et[2]].batch[col]]).all()), (et, neg)
            if "dst_neg_index" in batch["i"]:  # negatives drawn among the items before their positive's time
                neg_nodes = batch["i"].dst_neg_index.reshape(batch["i"].dst_neg_index.size(0), -1)
                assert bool((batch["i"].time[neg_nodes] < t.view(-1, 1)).all())


def test_a_relation_without_times_is_static_and_the_loaders_keep_their_contract():
    data = _graph(4)
    del data[FOLLOW].edge_time  # follows: no time, every in-edge a candidate (PyG's rule)
    times = torch.full((NU,), 10)
    batch = next(iter(NeighborLoader(data, num_neighbors=[-1], input_nodes="u", input_time=times,
                                     time_attr="edge_time", time_cut="<", batch_size=NU, seed=0)))
    assert batch[FOLLOW].num_edges == data[FOLLOW].num_edges  # every seed's every in-edge, whatever its time
    assert batch[BACK].num_edges == int((data[BACK].edge_time < 10).sum())


@pytest.mark.parametrize("change, kind, match", [
    (lambda d: setattr(d[BACK], "edge_time", torch.arange(299)), DatasetError,
     r"expected data\[\('i', 'clicked_by', 'u'\)\]\.edge_time with one time per edge, i\.e\. shape \[300\], found "
     r"shape \(299,\)"),
    (lambda d: setattr(d[CLICK], "edge_time", torch.where(torch.arange(400) == 7, float("nan"), 1.0)), DatasetError,
     r"expected finite times in data\[\('u', 'clicks', 'i'\)\]\.edge_time, found 1 NaN or infinite \(first at edge 7"),
    (lambda d: setattr(d["i"], "edge_time", torch.arange(NI)), SamplerError,
     r"time_attr='edge_time' names node times \(\['i'\]\) and edge times"),
], ids=["edge_time of another length", "NaN edge time", "node and edge times"])
def test_bad_times_are_one_line_each(change, kind, match):
    data = _graph(0)
    change(data)
    with pytest.raises(kind, match=match) as err:
        NeighborLoader(data, num_neighbors=[2], input_nodes="u", input_time=torch.zeros(NU, dtype=torch.long),
                       time_attr="edge_time", batch_size=4)
    assert "\n" not in str(err.value)


def test_bad_node_times_and_seed_times_are_one_line_each():
    data = _graph(0)
    for et in (CLICK, BACK, FOLLOW):
        del data[et].edge_time
    data["u"].time = torch.arange(NU, dtype=torch.float)
    data["u"].time[3] = float("nan")
    cases = [(dict(input_nodes="u"), DatasetError, r"expected finite times in data\['u'\]\.time, found 1 NaN or "
                                                   r"infinite \(first at node 3: nan\)")]
    data2 = _graph(0)
    for et in (CLICK, BACK, FOLLOW):
        del data2[et].edge_time
    data2["u"].time = torch.arange(NU - 1)
    for d, kwargs, kind, match in [(data, *cases[0]),
                                   (data2, dict(input_nodes="u"), DatasetError,
                                    r"expected data\['u'\]\.time with one time per node, i\.e\. shape \[30\], found "
                                    r"shape \(29,\)"),
                                   (_graph(0), dict(input_nodes="u", time_attr="when"), SamplerError,
                                    r"time_attr='when' names no attribute of the data's node types")]:
        with pytest.raises(kind, match=match) as err:
            NeighborLoader(d, num_neighbors=[2], time_attr=kwargs.pop("time_attr", "time"), batch_size=4, **kwargs)
        assert "\n" not in str(err.value)
    bad_seed_time = NeighborLoader(_graph(0), num_neighbors=[2], input_nodes="u", time_attr="edge_time",
                                   input_time=torch.full((NU,), float("nan")), batch_size=4)
    with pytest.raises(GnnscaleError, match=r"expected finite times in input_time") as err:
        next(iter(bad_seed_time))
    assert "\n" not in str(err.value)
    no_seed_time = NeighborLoader(_graph(0), num_neighbors=[2], input_nodes="u", time_attr="edge_time", batch_size=4)
    with pytest.raises(SamplerError, match=r"temporal seeds of type 'u', which has no node times, need input_time"):
        next(iter(no_seed_time))
    with pytest.raises(ValueError, match=r"'edge_label_time' is not set"):
        LinkNeighborLoader(_graph(0), num_neighbors=[2], edge_label_index=CLICK, time_attr="edge_time", batch_size=4)
