"""In-memory PyG graphs in (issue 46 item 1): ``gnnscale.train(data)`` and ``partition_graph(data)``
take a ``Data``, a ``HeteroData`` or RandomLinkSplit's triple; their partitions are cached by a
content digest; each bad input is one line."""
from __future__ import annotations

import json
import logging

import pytest
import torch
from torch_geometric.data import Data, HeteroData

import gnnscale
from gnnscale.datasets.inmemory import content_digest, from_pyg
from gnnscale.errors import GnnscaleError
from gnnscale.partitioning import partition_graph

RUN = dict(workers=2, epochs=2, seed=0, threads=1, fanouts=[5, 5], batch_size=64, hidden=32, verify=False)


@pytest.fixture
def cora_root(shared_data):
    return str(shared_data / "planetoid" / "raw")


def _raw(cora) -> Data:
    """Cora as a PyG user holds it: no name, no num_classes, the training split as ids."""
    return Data(x=cora.x.clone(), edge_index=cora.edge_index.clone(), y=cora.y.clone(),
                train_idx=torch.nonzero(cora.train_mask).flatten(), val_mask=cora.val_mask.clone(),
                test_mask=cora.test_mask.clone())


@pytest.mark.slow
def test_train_on_a_data_equals_train_on_its_name_and_hits_the_cache(cora, cora_root, tmp_path, caplog):
    cache = str(tmp_path / "cache")
    caplog.set_level(logging.INFO, logger="gnnscale")
    mine = gnnscale.train(cora, cache_dir=cache, **RUN)
    named = gnnscale.train("planetoid:cora", root=cora_root, cache_dir=cache, **RUN)
    assert mine["test_acc"] == named["test_acc"] and mine["val_acc"] == named["val_acc"]
    assert [e["loss"] for e in mine["epochs"]] == [e["loss"] for e in named["epochs"]]  # the same run, bit for bit
    folders = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(folders) == 2 and folders[0].startswith(f"inmemory-{content_digest(cora)[:16]}-metis-2parts-")
    caplog.clear()
    again = gnnscale.train(cora, cache_dir=cache, **RUN)
    assert any("using cached partition" in r.getMessage() and "inmemory-" in r.getMessage() for r in caplog.records)
    assert again["test_acc"] == mine["test_acc"]


def test_the_digest_follows_the_content(cora):
    raw = _raw(cora)
    assert content_digest(raw) == content_digest(_raw(cora))
    raw.x[0, 0] += 1.0
    assert content_digest(raw) != content_digest(_raw(cora))


def test_a_pyg_data_becomes_the_dataset_contract(cora, tmp_path):
    got = from_pyg(_raw(cora))
    for k in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(got[k], cora[k]), k
    assert got.num_classes == 7 and got.name == "inmemory"
    meta = partition_graph(_raw(cora), 2, tmp_path / "p")  # partition_graph takes it directly
    assert meta["num_nodes"] == 2708 and meta["num_classes"] == 7 and meta["num_parts"] == 2


def test_multi_hot_targets_and_edge_attributes(tmp_path):
    g = torch.Generator().manual_seed(0)
    n, e = 40, 160
    ei = torch.randint(0, n, (2, e), generator=g)
    ei = ei[:, ei[0] != ei[1]]
    y = (torch.rand(n, 3, generator=g) > 0.5).float()
    data = Data(x=torch.randn(n, 4, generator=g), edge_index=ei, y=y, edge_attr=torch.randn(ei.size(1), 2, generator=g),
                train_mask=torch.arange(n) < 20, val_mask=(torch.arange(n) >= 20) & (torch.arange(n) < 30),
                test_mask=torch.arange(n) >= 30)
    got = from_pyg(data)
    assert got.target_kind == "multilabel" and got.num_classes == 3 and got.edge_attr.shape[1] == 2
    meta = partition_graph(data, 2, tmp_path / "p", method="random")
    assert meta["target"]["kind"] == "multilabel" and meta.get("edge_feature_dim") == 2


def test_a_hetero_data_is_a_typed_partition(acm, tmp_path):
    from gnnscale.datasets.typed import to_hetero_data

    hd = to_hetero_data(acm)
    meta = partition_graph(hd, 2, tmp_path / "p")
    assert meta["typed"]["node_types"] == list(acm.node_types)
    assert meta["num_nodes"] == int(acm.num_nodes) and meta["num_classes"] == acm.num_classes


@pytest.mark.slow
def test_train_on_a_hetero_data(acm, tmp_path):
    from gnnscale.datasets.typed import to_hetero_data

    r = gnnscale.train(to_hetero_data(acm), cache_dir=str(tmp_path / "c"), layer="rel:sage", workers=2, epochs=1,
                       fanouts=[5, 5], batch_size=64, hidden=16, threads=1, verify=False)
    assert 0.0 <= r["test_acc"] <= 1.0 and len(r["epochs"]) == 1


@pytest.mark.slow
def test_train_on_a_random_link_split(cora, tmp_path):
    from torch_geometric.transforms import RandomLinkSplit

    triple = RandomLinkSplit(num_val=0.05, num_test=0.1, is_undirected=True)(_raw(cora))
    got = from_pyg(triple)
    assert got.link_split.counts()["val_neg"] == triple[1].edge_label_index.size(1) // 2
    r = gnnscale.train(triple, task="link", cache_dir=str(tmp_path / "c"), workers=2, epochs=1, fanouts=[5, 5],
                       batch_size=256, hidden=16, threads=1, verify=False)
    assert r["metric"] == "auc" and 0.5 < r["test_acc"] <= 1.0


def _bad_inputs():
    x = torch.randn(4, 2)
    ei = torch.tensor([[0, 1, 2], [1, 2, 3]])
    no_edges = Data(x=x, y=torch.zeros(4, dtype=torch.long))
    rows = Data(x=x, edge_index=ei, num_nodes=5)
    out_of_range = Data(x=x, edge_index=torch.tensor([[0, 1], [1, 7]]))
    typo = HeteroData()
    typo["paper"].x = x
    typo["paper", "cites", "papr"].edge_index = ei
    return [
        (no_edges, "expected data.edge_index, an integer tensor [2, E] of the graph's edges, found none; set it (PyG's "
                   "layout: data.edge_index int64 [2, E] (row 0 sources, row 1 targets) and node attributes of "
                   "num_nodes rows)"),
        (rows, "expected data.x with one row per node (num_nodes = 5), found 4 rows; fix data.x or data.num_nodes"),
        (out_of_range, "expected data.edge_index ids in [0, 4) (num_nodes = 4), found ids from 0 to 7; fix the edges "
                       "or set num_nodes"),
        (typo, "expected relation ('paper', 'cites', 'papr') to join node types of the graph (paper), found unknown "
               "node type 'papr'; add data['papr'].x or .num_nodes, or fix the relation's name"),
    ]


@pytest.mark.parametrize("case", range(4))
def test_each_bad_input_is_one_line(case, tmp_path):
    data, message = _bad_inputs()[case]
    for call in (lambda: gnnscale.train(data, cache_dir=str(tmp_path / "c"), workers=2, epochs=1),
                 lambda: partition_graph(data, 2, tmp_path / "p")):
        with pytest.raises(GnnscaleError) as err:
            call()
        assert str(err.value) == message
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())


def test_options_that_would_be_ignored_are_refused(cora, tmp_path):
    with pytest.raises(GnnscaleError, match="root='x' does not apply to an in-memory graph"):
        gnnscale.train(cora, root="x", workers=2)
    with pytest.raises(GnnscaleError, match="RandomLinkSplit's \\(train, val, test\\) is a link-prediction split"):
        gnnscale.train((cora, cora, cora), workers=2)
    with pytest.raises(GnnscaleError, match="found a dict"):
        gnnscale.train({"x": 1}, workers=2)
    assert json.dumps(RUN)  # (the run's options stay plain data)
