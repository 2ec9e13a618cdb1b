"""PyG's contract on gnnscale.pyg's loaders (issue 56 items 3 and 5): what PyG's own loaders take and
give, on tiny graphs with exact values. PyG's own loader tests run on them in test_pyg_upstream.py."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler.base import SubgraphType
from torch_geometric.testing import MyFeatureStore, MyGraphStore

from gnnscale.errors import GnnscaleError
from gnnscale.pyg import LinkNeighborLoader, NeighborLoader, memory_stores, sampler_for


def _chain() -> Data:
    """1 -> 0, 2 -> 0, 1 -> 2, 3 -> 1 (edge ids 0..3)."""
    return Data(x=torch.arange(4).float().view(-1, 1), edge_index=torch.tensor([[1, 2, 1, 3], [0, 0, 2, 1]]))


def _one(loader):
    (batch,) = list(loader)
    return batch


def test_subgraph_types_directional_induced_bidirectional_and_the_enum():
    g = _chain()
    kw = dict(num_neighbors=[-1], input_nodes=torch.tensor([0]), batch_size=1, seed=0)
    d = _one(NeighborLoader(g, **kw))
    assert d.n_id.tolist() == [0, 1, 2] and d.edge_index.tolist() == [[1, 2], [0, 0]] and d.e_id.tolist() == [0, 1]
    e = _one(NeighborLoader(g, subgraph_type=SubgraphType.directional, **kw))  # PyG's enum = its name
    assert torch.equal(e.edge_index, d.edge_index) and torch.equal(e.n_id, d.n_id)
    i = _one(NeighborLoader(g, subgraph_type="induced", **kw))  # + 1 -> 2 between drawn nodes; not 3 -> 1
    assert i.n_id.tolist() == [0, 1, 2] and i.edge_index.tolist() == [[1, 2, 1], [0, 0, 2]]
    assert i.e_id.tolist() == [0, 1, 2] and i.num_sampled_nodes == [1, 2]
    assert torch.equal(_one(NeighborLoader(g, directed=False, **kw)).edge_index, i.edge_index)  # PyG's old spelling
    b = _one(NeighborLoader(g, subgraph_type=SubgraphType.bidirectional, **kw))  # each drawn edge both ways
    assert b.edge_index.tolist() == [[1, 2, 0, 0], [0, 0, 1, 2]]
    with pytest.raises(ValueError, match="'induced' with disjoint=True is not supported"):
        NeighborLoader(g, subgraph_type="induced", disjoint=True, **kw)


def test_typed_induced_and_bidirectional():
    g = HeteroData()
    g["a"].num_nodes, g["b"].num_nodes = 3, 2
    g["b", "to", "a"].edge_index = torch.tensor([[0, 1, 1], [0, 0, 2]])
    g["a", "to", "b"].edge_index = torch.tensor([[0, 2], [0, 1]])
    kw = dict(num_neighbors=[-1], input_nodes=("a", torch.tensor([0])), batch_size=1, seed=0)
    d = _one(NeighborLoader(g, **kw))
    assert d["a"].n_id.tolist() == [0] and d["b"].n_id.tolist() == [0, 1]
    assert d["b", "to", "a"].edge_index.tolist() == [[0, 1], [0, 0]] and d["a", "to", "b"].edge_index.numel() == 0
    i = _one(NeighborLoader(g, subgraph_type="induced", **kw))  # a0 -> b0 joins drawn nodes; a2 was not drawn
    assert i["a", "to", "b"].edge_index.tolist() == [[0], [0]] and i["a", "to", "b"].e_id.tolist() == [0]
    b = _one(NeighborLoader(g, subgraph_type="bidirectional", **kw))  # the one reverse relation: (a, b) <- (b, a)
    assert b["a", "to", "b"].edge_index.tolist() == [[0, 0], [0, 1]] and "e_id" not in b["a", "to", "b"]


def test_relation_pairs_num_neighbors_forms_and_pygs_value_errors():
    g = HeteroData()
    g["p"].num_nodes, g["q"].num_nodes = 4, 3
    g["q", "to", "p"].edge_index = torch.tensor([[0, 1, 2, 2], [0, 1, 2, 3]])
    g["p", "to", "q"].edge_index = torch.tensor([[0, 3], [0, 2]])  # relation name 'to' twice, as PyG's DBLP
    full = dict(num_neighbors={("q", "to", "p"): [2], ("p", "to", "q"): [1]}, batch_size=2, seed=4)
    a = list(LinkNeighborLoader(g, edge_label_index=("p", "to", "q"), **full))
    b = list(LinkNeighborLoader(g, edge_label_index=("p", "q"), num_neighbors={("q", "p"): [2], "p__to__q": [1]},
                                batch_size=2, seed=4))
    assert len(a) == len(b) == 1 and a[0].input_type == b[0].input_type == ("p", "to", "q")
    for t in ("p", "q"):
        assert torch.equal(a[0][t].n_id, b[0][t].n_id)
    with pytest.raises(ValueError, match="Number of hops must be the same across all edge types") as err:
        NeighborLoader(g, num_neighbors={("q", "to", "p"): [2], ("p", "to", "q"): [1, 1]}, input_nodes="p")
    assert isinstance(err.value, GnnscaleError) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"Missing number of neighbors for edge type \('p', 'to', 'q'\)"):
        NeighborLoader(g, num_neighbors={("q", "to", "p"): [2]}, input_nodes="p")
    with pytest.raises(ValueError, match="num_neighbors must hold ints >= 0 or -1; found"):
        NeighborLoader(Data(num_nodes=3), num_neighbors=[-3])


def _typed_graph() -> HeteroData:
    g = HeteroData()
    g["p"].x, g["a"].x = torch.arange(6).view(-1, 1), torch.arange(10, 14).view(-1, 1)
    g["p", "to", "p"].edge_index = torch.tensor([[1, 2, 3, 4, 5, 0], [0, 0, 1, 1, 2, 5]])
    g["a", "to", "p"].edge_index = torch.tensor([[0, 1, 2, 3, 3], [0, 0, 1, 2, 4]])
    g["p", "to", "a"].edge_index = torch.tensor([[0, 1, 2, 4], [0, 1, 3, 3]])
    return g


def test_a_users_stores_in_coo_csr_and_csc_give_the_datas_batches():
    """PyG's own test stores (MyFeatureStore / MyGraphStore, keyed by layout and size) with one
    relation in each layout: the draws equal the HeteroData's (the CSC is the same whatever the
    layout), through the loaders and through sampler_for; MemoryGraphStore takes the three layouts."""
    from torch_geometric.utils import to_torch_csr_tensor

    g = _typed_graph()
    fs, gs, mem = MyFeatureStore(), MyGraphStore(), memory_stores(g)[1]
    for t in ("p", "a"):
        fs.put_tensor(g[t].x, group_name=t, attr_name="x", index=None)
    ei = g["p", "to", "p"].edge_index
    gs.put_edge_index((ei[0], ei[1]), edge_type=("p", "to", "p"), layout="coo", size=(6, 6))
    ei = g["a", "to", "p"].edge_index
    csr = to_torch_csr_tensor(ei, size=(4, 6))
    gs.put_edge_index((csr.crow_indices(), csr.col_indices()), edge_type=("a", "to", "p"), layout="csr", size=(4, 6))
    mem.put_edge_index((csr.crow_indices(), csr.col_indices()), edge_type=("a", "to", "p"), layout="csr", size=(4, 6))
    ei = g["p", "to", "a"].edge_index
    csc = to_torch_csr_tensor(ei.flip([0]), size=(4, 6))
    gs.put_edge_index((csc.col_indices(), csc.crow_indices()), edge_type=("p", "to", "a"), layout="csc", size=(6, 4))
    kw = dict(num_neighbors=[2, 2], input_nodes=("p", torch.arange(6)), batch_size=3, seed=1)
    for want, got in zip(NeighborLoader(g, **kw), NeighborLoader((fs, gs), **kw)):
        for t in ("p", "a"):
            assert torch.equal(want[t].n_id, got[t].n_id) and torch.equal(want[t].x, got[t].x)
        for et in g.edge_types:
            assert torch.equal(want[et].edge_index, got[et].edge_index)
    assert torch.equal(torch.stack(mem.get_edge_index(edge_type=("a", "to", "p"), layout="coo")),
                       g["a", "to", "p"].edge_index)
    s = sampler_for((fs, gs), [2])  # the store route: the CSR/CSC relations read, no KeyError
    assert sorted(s.edge_types) == sorted(g.edge_types) and s.num_nodes == {"p": 6, "a": 4}
    hs = MyGraphStore()
    hs.put_edge_index((torch.tensor([1, 2]), torch.tensor([0, 0])), edge_type=None, layout="coo", size=(3, 3))
    hf = MyFeatureStore()
    hf.put_tensor(torch.arange(3), group_name=None, attr_name="x", index=None)
    batch = _one(NeighborLoader((hf, hs), num_neighbors=[-1], input_nodes=torch.tensor([0]), batch_size=1))
    assert batch.n_id.tolist() == [0, 1, 2] and batch.x.tolist() == [0, 1, 2]


def test_no_edges_fanout_zero_and_repeated_seeds():
    lone = _one(NeighborLoader(Data(x=torch.arange(5).view(-1, 1)), num_neighbors=[2, 2],
                               input_nodes=torch.tensor([4, 1]), batch_size=2))
    assert lone.n_id.tolist() == [4, 1] and lone.num_edges == 0 and lone.x.tolist() == [[4], [1]]
    g = _chain()
    z = _one(NeighborLoader(g, num_neighbors=[0, 2], input_nodes=torch.tensor([0]), batch_size=1))
    assert z.n_id.tolist() == [0] and z.num_sampled_nodes == [1, 0, 0]
    none = _one(NeighborLoader(g, num_neighbors=[], input_nodes=torch.tensor([0, 3]), batch_size=2))
    assert none.n_id.tolist() == [0, 3] and none.edge_index.numel() == 0
    # seed 0 twice: two rows, each with 0's in-edges (1 -> 0, 2 -> 0); 1's in-edge 3 -> 1 once
    r = _one(NeighborLoader(g, num_neighbors=[-1], input_nodes=torch.tensor([0, 1, 0]), batch_size=3, seed=0))
    assert r.n_id.tolist() == [0, 1, 0, 2, 3] and r.batch_size == 3 and r.input_id.tolist() == [0, 1, 2]
    assert r.edge_index.tolist() == [[1, 3, 4, 1, 3], [0, 0, 1, 2, 2]] and r.e_id.tolist() == [0, 1, 3, 0, 1]
    assert r.num_sampled_nodes == [3, 2] and r.num_sampled_edges == [5]
    t = HeteroData()
    t["p"].num_nodes = 3
    link = _one(LinkNeighborLoader(t, num_neighbors=[], edge_label_index=(("p", "p"), torch.tensor([[0, 2], [1, 1]])),
                                   batch_size=2))
    assert link["p"].n_id.tolist() == [0, 1, 2] and link["p", "to", "p"].edge_label_index.tolist() == [[0, 2], [1, 1]]


def test_typed_weight_attr_disjoint_and_triplet_negatives():
    g = _typed_graph()
    g["p", "to", "p"].w = torch.tensor([0.0, 1.0, 0.0, 1.0, 1.0, 1.0])  # 1 -> 0 and 3 -> 1 never drawn
    kw = dict(input_nodes=("p", torch.tensor([0, 1])), batch_size=2, seed=0)
    w = _one(NeighborLoader(g, num_neighbors=[1], weight_attr="w", **kw))
    pp = w["p"].n_id[w["p", "to", "p"].edge_index]
    assert pp.tolist() == [[2, 4], [0, 1]]
    d = _one(NeighborLoader(g, num_neighbors=[-1, -1], disjoint=True, **kw))  # trees of p0 and p1 (by hand)
    assert d["p"].n_id.tolist() == [0, 1, 1, 2, 3, 4, 3, 4, 5] and d["p"].batch.tolist() == [0, 1, 0, 0, 1, 1, 0, 0, 0]
    assert d["a"].n_id.tolist() == [0, 1, 2, 2, 3, 3] and d["a"].batch.tolist() == [0, 0, 1, 0, 0, 1]
    assert d["p", "to", "a"].edge_index.tolist() == [[0, 2], [0, 1]]  # p0 -> a0 and p1 -> a1 of tree 0
    pairs = torch.tensor([[0, 1, 2], [1, 2, 0]])
    for disjoint in (False, True):
        trip = _one(LinkNeighborLoader(g, num_neighbors=[1], edge_label_index=(("p", "p"), pairs), batch_size=3,
                                       neg_sampling=dict(mode="triplet", amount=2), disjoint=disjoint, seed=0))
        p = trip["p"]
        assert torch.equal(p.n_id[p.src_index], pairs[0]) and torch.equal(p.n_id[p.dst_pos_index], pairs[1])
        assert p.dst_neg_index.shape == (3, 2)
        negs = p.n_id[p.dst_neg_index]  # no negative is an edge of the relation from its positive's source
        edges = set(map(tuple, g["p", "to", "p"].edge_index.t().tolist()))
        assert not any((int(s), int(n)) in edges for s, row in zip(pairs[0], negs) for n in row)
        if disjoint:
            assert p.src_index.tolist() == [0, 1, 2] and p.dst_pos_index.tolist() == [3, 4, 5]
            assert p.dst_neg_index.tolist() == [[6, 9], [7, 10], [8, 11]] and p.batch[:12].tolist() == [0, 1, 2] * 4


def test_persistent_workers_draw_each_epochs_keys():
    """persistent_workers=True: the workers keep the loader they were started with, and every batch
    still draws with its pass's keys: two passes equal the main process's two passes, and differ.
    (Not shuffled: torch's DataLoader draws its workers' base seed from the shuffle's generator at
    every new iterator, not at a persistent one's reset, so from the second pass on a persistent
    loader's shuffled order differs from a fresh one's, PyG's loaders' too.)"""
    g = Data(x=torch.arange(40).float().view(-1, 1),
             edge_index=torch.randint(0, 40, (2, 200), generator=torch.Generator().manual_seed(0)))
    kw = dict(num_neighbors=[2, 2], batch_size=8, seed=3)
    main = NeighborLoader(g, **kw)
    kept = NeighborLoader(g, num_workers=2, persistent_workers=True, **kw)
    passes = [([b.n_id for b in main], [b.n_id for b in kept]) for _ in range(2)]
    for want, got in passes:
        assert len(want) == len(got) == 5 and all(torch.equal(a, b) for a, b in zip(want, got))
    assert not all(torch.equal(a, b) for a, b in zip(passes[0][0], passes[1][0]))


def test_no_message_pastes_a_tensor():
    g = _chain()
    with pytest.raises(GnnscaleError) as err:
        NeighborLoader(g, num_neighbors=[1], input_time=torch.arange(4))
    assert "input_time=an int64 tensor of shape (4,)" in str(err.value) and "tensor([" not in str(err.value)
    t = _typed_graph()
    with pytest.raises(ValueError) as err:
        LinkNeighborLoader(t, num_neighbors=[1], edge_label_index=(("p", "x"), torch.zeros(2, 3, dtype=torch.long)))
    assert "found ('p', 'x')" in str(err.value) and "tensor([" not in str(err.value)
