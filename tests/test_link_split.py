"""Link-prediction splits (docs/link_prediction.md, section 1): random_link_split on real Cora,
parse_edge_split, the one-line errors, and ogbl-* loaded offline from tiny fixtures."""
from __future__ import annotations

import json
import re
import shutil

import pytest
import torch
from torch_geometric.data import Data

from gnnscale.datasets.link_split import LinkSplit, parse_edge_split, random_link_split
from gnnscale.errors import DatasetError

# Cora (shared data): 2708 nodes, 10556 directed edges = 5278 undirected pairs, no self loops.
CORA_PAIRS, CORA_VAL, CORA_TEST = 5278, 264, 528  # round(0.05 * 5278), round(0.10 * 5278)
CORA_TRAIN = CORA_PAIRS - CORA_VAL - CORA_TEST  # 4486
CORA_SUPERVISION = 1346  # round(0.3 * 4486)


def keys(ei: torch.Tensor, n: int) -> torch.Tensor:
    return ei[0] * n + ei[1]


def rev_keys(ei: torch.Tensor, n: int) -> torch.Tensor:
    return ei[1] * n + ei[0]


def canonical(ei: torch.Tensor, n: int) -> torch.Tensor:
    return torch.minimum(ei[0], ei[1]) * n + torch.maximum(ei[0], ei[1])


@pytest.fixture(scope="module")
def cora_split(cora):
    return random_link_split(cora, val=0.05, test=0.10, seed=0)


# ------------------------------------------------------------------ (a) random split on real Cora
def test_cora_counts_and_fields(cora, cora_split):
    s: LinkSplit = cora_split.link_split
    assert s.info["undirected"] is True and s.info["pairs"] == CORA_PAIRS
    assert s.counts() == {"train": CORA_TRAIN, "val": CORA_VAL, "test": CORA_TEST, "val_neg": CORA_VAL,
                          "test_neg": CORA_TEST, "neg_per_source": 0}
    assert cora_split.edge_index.shape == (2, 10556 - 2 * (CORA_VAL + CORA_TEST))  # 8972
    assert s.metric == "auc" and s.val_neg_dst is None and s.test_neg_dst is None
    json.dumps(s.info)
    s.check(cora.num_nodes)
    for t in (s.train_pos, s.val_pos, s.test_pos, s.val_neg, s.test_neg):
        assert t.dtype == torch.int64 and t.shape[0] == 2 and bool((t[0] < t[1]).all())  # one direction, u < v
    # shallow copy: features, labels, masks, classes and name kept; the input is untouched
    assert cora_split.x is cora.x and cora_split.y is cora.y and cora_split.train_mask is cora.train_mask
    assert cora_split.num_classes == 7 and cora_split.name == cora.name == "planetoid:cora"
    assert cora.edge_index.shape == (2, 10556) and "link_split" not in cora


def test_cora_val_test_not_in_message_passing(cora, cora_split):
    n, s = cora.num_nodes, cora_split.link_split
    mp = keys(cora_split.edge_index, n)
    for pos in (s.val_pos, s.test_pos):
        assert not torch.isin(keys(pos, n), mp).any() and not torch.isin(rev_keys(pos, n), mp).any()
    # with r = 0 every training pair stays in message passing, both directions
    assert torch.isin(keys(s.train_pos, n), mp).all() and torch.isin(rev_keys(s.train_pos, n), mp).all()
    assert torch.unique(mp).numel() == mp.numel()


def test_cora_negatives_are_non_edges(cora, cora_split):
    n, s = cora.num_nodes, cora_split.link_split
    original = keys(cora.edge_index, n)
    negs = torch.cat([s.val_neg, s.test_neg], 1)
    assert bool((negs[0] != negs[1]).all())
    assert not torch.isin(keys(negs, n), original).any() and not torch.isin(rev_keys(negs, n), original).any()
    assert torch.unique(canonical(negs, n)).numel() == negs.shape[1]  # distinct, val and test disjoint


def test_cora_pairs_partition_the_graph(cora, cora_split):
    n, s = cora.num_nodes, cora_split.link_split
    src, dst = cora.edge_index
    all_pairs = torch.unique(canonical(cora.edge_index[:, src != dst], n))
    split_pairs = torch.cat([canonical(p, n) for p in (s.train_pos, s.val_pos, s.test_pos)])
    assert split_pairs.numel() == all_pairs.numel() == CORA_PAIRS  # disjoint ...
    assert torch.equal(torch.sort(split_pairs).values, all_pairs)  # ... and covering every pair


def test_cora_seeded(cora, cora_split):
    again = random_link_split(cora, val=0.05, test=0.10, seed=0)
    other = random_link_split(cora, val=0.05, test=0.10, seed=1)
    a, b, c = cora_split.link_split, again.link_split, other.link_split
    for f in ("train_pos", "val_pos", "test_pos", "val_neg", "test_neg"):
        assert torch.equal(getattr(a, f), getattr(b, f))
    assert torch.equal(cora_split.edge_index, again.edge_index)
    assert not torch.equal(a.val_pos, c.val_pos) and not torch.equal(a.val_neg, c.val_neg)
    assert c.counts() == a.counts()


# ------------------------------------------------------------------ (b) disjoint supervision edges
def test_cora_disjoint_train_ratio(cora, cora_split):
    n = cora.num_nodes
    d = random_link_split(cora, val=0.05, test=0.10, seed=0, disjoint_train_ratio=0.3)
    s = d.link_split
    assert s.train_pos.shape == (2, CORA_SUPERVISION)
    assert torch.equal(s.val_pos, cora_split.link_split.val_pos)  # same seed: same val/test pairs
    mp = keys(d.edge_index, n)
    assert not torch.isin(keys(s.train_pos, n), mp).any() and not torch.isin(rev_keys(s.train_pos, n), mp).any()
    assert d.edge_index.shape[1] == 2 * (CORA_TRAIN - CORA_SUPERVISION)  # 6280: the other training pairs
    rest = cora_split.link_split.train_pos[:, ~torch.isin(keys(cora_split.link_split.train_pos, n),
                                                          keys(s.train_pos, n))]
    assert torch.isin(keys(rest, n), mp).all() and torch.isin(rev_keys(rest, n), mp).all()
    assert s.info["disjoint_train_ratio"] == 0.3


def test_directed_graph_removes_reverses_keeps_self_loops():
    g = torch.Generator().manual_seed(3)
    n = 60
    e = torch.randint(0, n, (2, 400), generator=g)
    e = torch.cat([e, torch.tensor([[5, 6, 7], [5, 6, 7]])], 1)  # self loops
    k = torch.unique(e[0] * n + e[1])  # sorted unique keys of a directed graph with some mutual edges
    data = Data(x=torch.ones(n, 1), edge_index=torch.stack([k // n, k % n]), num_nodes=n)
    assert torch.isin(k % n * n + k // n, k).any() and not torch.isin(k % n * n + k // n, k).all()
    out = random_link_split(data, val=0.1, test=0.1, seed=0)
    s = out.link_split
    assert s.info["undirected"] is False
    mp = keys(out.edge_index, n)
    for pos in (s.val_pos, s.test_pos):
        assert not torch.isin(keys(pos, n), mp).any() and not torch.isin(rev_keys(pos, n), mp).any()
    loops = k[k // n == k % n]
    assert torch.isin(loops, mp).all()  # self loops stay in message passing ...
    pos_all = torch.cat([s.train_pos, s.val_pos, s.test_pos], 1)
    assert bool((pos_all[0] != pos_all[1]).all())  # ... and are never supervision
    assert torch.equal(torch.sort(keys(pos_all, n)).values, k[k // n != k % n])
    negs = torch.cat([s.val_neg, s.test_neg], 1)
    assert not torch.isin(keys(negs, n), k).any() and not torch.isin(rev_keys(negs, n), k).any()


# ------------------------------------------------------------------ (c) one-line errors
def one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg
    return msg


def test_edge_split_parsing():
    assert parse_edge_split("0.85,0.05,0.10") == (0.85, 0.05, 0.10)
    assert parse_edge_split(" 0.9, 0, 0.1 ") == (0.9, 0.0, 0.1)
    with pytest.raises(DatasetError) as e:
        parse_edge_split("0.8,0.05,0.1")
    assert re.fullmatch(r"--edge-split must be three fractions train,val,test that sum to 1; found "
                        r"0\.8,0\.05,0\.1 \(sum 0\.95\); e\.g\. 0\.85,0\.05,0\.10", one_line(e))
    with pytest.raises(DatasetError) as e:
        parse_edge_split("0.85,0.15")
    assert re.fullmatch(r"--edge-split must be three fractions train,val,test that sum to 1; found "
                        r"'0\.85,0\.15'; e\.g\. --edge-split 0\.85,0\.05,0\.10", one_line(e))
    with pytest.raises(DatasetError) as e:
        parse_edge_split("1,0,0")
    assert re.fullmatch(r"--edge-split must be three fractions train,val,test that sum to 1, with train > 0 "
                        r"and val \+ test > 0; found 1,0,0; e\.g\. 0\.85,0\.05,0\.10", one_line(e))


def test_ratio_errors(cora):
    with pytest.raises(DatasetError) as e:
        random_link_split(cora, val=1.2)
    assert re.fullmatch(r"expected val in \[0, 1\), found 1\.2; pass a fraction such as 0\.05", one_line(e))
    with pytest.raises(DatasetError) as e:
        random_link_split(cora, disjoint_train_ratio=-0.1)
    assert re.fullmatch(r"expected disjoint_train_ratio in \[0, 1\), found -0\.1; pass a fraction such as 0\.05",
                        one_line(e))
    with pytest.raises(DatasetError) as e:
        random_link_split(cora, val=0.5, test=0.5)
    assert re.fullmatch(r"expected val \+ test < 1 so that training edges remain, found val=0\.5 \+ test=0\.5 = 1; "
                        r"lower val or test", one_line(e))


def test_edge_errors():
    bad = Data(x=torch.ones(3, 1), edge_index=torch.tensor([[0, 1, 5], [1, 0, 2]]), num_nodes=3)
    with pytest.raises(DatasetError) as e:
        random_link_split(bad)
    assert re.fullmatch(r"expected edge_index node ids in \[0, 3\), found ids from 0 to 5 \(1 edges out of range\); "
                        r"renumber the nodes 0\.\.N-1 or fix num_nodes", one_line(e))
    tiny = Data(x=torch.ones(4, 1), edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=4)
    with pytest.raises(DatasetError) as e:
        random_link_split(tiny, val=0.05, test=0.10)
    assert re.fullmatch(r"expected enough edges for val=0\.05, test=0\.1, disjoint_train_ratio=0, found 2 undirected "
                        r"pairs \(val 0, test 0, train 2, supervision-only 0\); use a larger graph or other fractions",
                        one_line(e))


def test_check_rejects_bad_split():
    ok = torch.tensor([[0, 1], [1, 2]])
    split = LinkSplit(ok, ok, ok, ok, ok, None, None, "auc", {})
    split.check(3)
    split.val_pos = ok.to(torch.int32)
    with pytest.raises(DatasetError) as e:
        split.check(3)
    assert re.fullmatch(r"expected link_split\.val_pos an int64 tensor \[2, n\], found torch\.int32 \[2, 2\]; .*",
                        one_line(e))
    split.val_pos, split.metric = ok, "hits@0"
    with pytest.raises(DatasetError, match=r"^expected link_split\.metric 'auc', 'mrr' or 'hits@K'"):
        split.check(3)
    split.metric = "auc"
    with pytest.raises(DatasetError, match=r"^expected link_split\.train_pos node ids in \[0, 2\), "
                                           r"found ids from 0 to 2"):
        split.check(2)


# ------------------------------------------------------------------ (d) ogbl-* offline fixtures
@pytest.fixture(scope="module")
def ogbl_root(tmp_path_factory):
    pytest.importorskip("ogb")
    from ogb_link_fixture import write_tiny_ogbl

    root = tmp_path_factory.mktemp("ogbl")
    splits = {name: write_tiny_ogbl(root, name)[1] for name in ("ogbl-collab", "ogbl-citation2", "ogbl-ddi")}
    return root, splits


def _check_common(d, n: int, features: int) -> None:
    assert d.x.shape == (n, features) and d.x.dtype == torch.float32
    assert d.y.dtype == torch.int64 and bool((d.y == -1).all()) and d.num_classes == 0
    assert not any(bool(m.any()) for m in (d.train_mask, d.val_mask, d.test_mask))
    mp = keys(d.edge_index, n)
    assert torch.unique(mp).numel() == mp.numel()
    s = d.link_split
    s.check(n)
    assert torch.isin(keys(s.train_pos, n), mp).all() and torch.isin(rev_keys(s.train_pos, n), mp).all()
    # message passing = the train edges with their reverses, nothing else
    assert torch.equal(torch.unique(torch.cat([keys(s.train_pos, n), rev_keys(s.train_pos, n)])), mp)


def test_ogbl_collab(ogbl_root):
    from gnnscale.datasets import load_dataset

    root, splits = ogbl_root
    d = load_dataset("ogbl-collab", root=str(root))
    s, raw = d.link_split, splits["ogbl-collab"]
    _check_common(d, 300, 16)
    assert s.metric == "hits@50" and d.name == "ogbl-collab"
    assert torch.equal(s.train_pos, torch.from_numpy(raw["train"]["edge"]).T)  # as stored, repeats included
    assert s.val_pos.shape == (2, len(raw["valid"]["edge"])) and s.test_pos.shape == (2, len(raw["test"]["edge"]))
    assert torch.equal(s.val_neg, torch.from_numpy(raw["valid"]["edge_neg"]).T)
    assert s.test_neg.shape == (2, len(raw["test"]["edge_neg"])) and s.val_neg_dst is None
    assert "edge_year" in s.info["ignored"] and "edge_weight" in s.info["ignored"]


def test_ogbl_citation2(ogbl_root):
    from gnnscale.datasets import load_dataset

    root, splits = ogbl_root
    d = load_dataset("ogbl-citation2", root=str(root))
    s, raw = d.link_split, splits["ogbl-citation2"]
    _check_common(d, 300, 16)
    assert s.metric == "mrr" and s.val_neg is None and s.test_neg is None
    assert torch.equal(s.train_pos[0], torch.from_numpy(raw["train"]["source_node"]))
    assert s.val_neg_dst.shape == (s.val_pos.shape[1], 1000) and s.test_neg_dst.shape == (s.test_pos.shape[1], 1000)
    assert torch.equal(s.test_neg_dst, torch.from_numpy(raw["test"]["target_node_neg"]))
    mp = keys(d.edge_index, 300)
    for pos in (s.val_pos, s.test_pos):
        assert pos.shape[1] > 0
        assert not torch.isin(keys(pos, 300), mp).any() and not torch.isin(rev_keys(pos, 300), mp).any()


def test_ogbl_ddi_featureless(ogbl_root):
    from gnnscale.datasets import load_dataset

    root, _ = ogbl_root
    d = load_dataset("ogbl-ddi", root=str(root))
    _check_common(d, 300, 1)
    assert bool((d.x == 1).all()) and d.link_split.metric == "hits@20"


def test_ogbl_missing_file_and_unsupported(ogbl_root, tmp_path):
    from gnnscale.datasets import load_dataset

    root, _ = ogbl_root
    shutil.copytree(root / "ogbl_collab", tmp_path / "ogbl_collab")
    (tmp_path / "ogbl_collab" / "raw" / "edge_year.csv.gz").unlink()
    shutil.rmtree(tmp_path / "ogbl_collab" / "processed")
    with pytest.raises(DatasetError) as e:
        load_dataset("ogbl-collab", root=str(tmp_path))
    assert re.match(r"expected a complete ogbl-collab dataset in .*ogbl_collab/, found these files missing: "
                    r"raw/edge_year\.csv\.gz; ", one_line(e))
    with pytest.raises(DatasetError) as e:
        load_dataset("ogbl-wikikg2", root=str(tmp_path))
    assert re.match(r"expected one of \['ogbl-collab', 'ogbl-ppa', 'ogbl-ddi', 'ogbl-citation2'\], found "
                    r"ogbl-wikikg2 \(a knowledge graph with relation types\); ", one_line(e))
