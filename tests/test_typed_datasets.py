"""Tests of typed (heterogeneous) datasets: the contract of docs/typed_graphs.md section 1,
make_typed_data / check_typed errors, add_reverse, HeteroData and hetero-dir round trips, ACM,
the ogbn-mag-shaped generator and ogbn-mag through ogb (tiny fixture in OGB's raw layout)."""
from __future__ import annotations

import builtins
import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import HeteroData

from gnnscale.datasets import DATASET_HELP, generate_synthetic_mag, load_dataset, write_hetero_dir
from gnnscale.datasets.mag import MAG_EDGES, MAG_NODES, edge_counts, type_counts
from gnnscale.datasets.typed import (
    add_reverse,
    check_typed,
    from_hetero_data,
    make_typed_data,
    relation_edges,
    to_hetero_data,
)
from gnnscale.errors import DatasetError
from ogb_fixture import write_tiny_ogb_mag

# --------------------------------------------------------------------------- helpers


def check_typed_contract(data) -> None:
    """Every attribute of docs/typed_graphs.md section 1, with its type and dtype."""
    check_typed(data, "test")
    n, T, R = data.num_nodes, len(data.node_types), len(data.edge_types)
    assert isinstance(n, int) and isinstance(data.node_types, list) and isinstance(data.edge_types, list)
    assert all(isinstance(t, str) for t in data.node_types)
    assert all(isinstance(et, tuple) and len(et) == 3 for et in data.edge_types)
    assert data.type_ptr.dtype == torch.int64 and data.type_ptr.shape == (T + 1,)
    assert data.node_type.dtype == torch.int64 and data.node_type.shape == (n,)
    assert data.edge_index.dtype == torch.int64 and data.edge_index.shape[0] == 2
    assert data.edge_type.dtype == torch.int64 and data.edge_type.shape == (data.edge_index.shape[1],)
    if data.edge_type.numel():
        assert 0 <= int(data.edge_type.min()) and int(data.edge_type.max()) < R
    assert data.x is None and isinstance(data.x_dict, dict)
    for t, x in data.x_dict.items():
        i = data.node_types.index(t)
        assert x.dtype == torch.float32 and x.shape[0] == int(data.type_ptr[i + 1] - data.type_ptr[i])
    assert data.y.dtype == torch.int64 and data.y.shape == (n,)
    t = data.node_types.index(data.target_type)
    off_target = data.node_type != t
    assert bool((data.y[off_target] == -1).all())
    for m in (data.train_mask, data.val_mask, data.test_mask):
        assert m.dtype == torch.bool and m.shape == (n,)
        assert not bool((m & (data.y < 0)).any())
    assert isinstance(data.num_classes, int) and isinstance(data.name, str) and isinstance(data.target_type, str)


def edge_sets(data) -> dict[tuple, set]:
    """{relation: set of per-type (src, dst)} (order-free comparison of two typed graphs)."""
    return {et: set(map(tuple, ei.t().tolist())) for et, ei in relation_edges(data).items()}


def tiny(**over):
    """A small typed graph: paper (5, features), author (4, features), venue (2, none)."""
    kwargs = dict(
        num_nodes={"paper": 5, "author": 4, "venue": 2},
        edges={
            ("author", "writes", "paper"): np.array([[0, 0, 1, 2, 3, 3, 0], [0, 1, 1, 2, 3, 4, 0]]),  # one duplicate
            ("paper", "cites", "paper"): np.array([[1, 2, 3, 4], [0, 1, 1, 2]]),
            ("paper", "published_in", "venue"): np.array([[0, 1, 2, 3, 4], [0, 0, 1, 1, 1]]),
        },
        target_type="paper",
        y=np.array([0, 1, 2, -1, 1]),
        x_dict={"paper": np.arange(15, dtype=np.float64).reshape(5, 3), "author": np.ones((4, 2))},
        train=np.array([0, 1]),
        val=np.array([False, False, True, False, False]),
        test=np.array([4]),
        name="tiny",
    )
    kwargs.update(over)
    return make_typed_data(**kwargs)


# --------------------------------------------------------------------------- make_typed_data / check_typed


def test_make_typed_data_contract() -> None:
    d = tiny()
    check_typed_contract(d)
    assert d.node_types == ["paper", "author", "venue"]
    assert d.edge_types == [("author", "writes", "paper"), ("paper", "cites", "paper"), ("paper", "published_in", "venue")]
    assert d.type_ptr.tolist() == [0, 5, 9, 11] and d.num_nodes == 11
    assert d.node_type.tolist() == [0] * 5 + [1] * 4 + [2] * 2
    assert torch.bincount(d.edge_type).tolist() == [6, 4, 5]  # the duplicate (0, 0) removed
    assert edge_sets(d)[("author", "writes", "paper")] == {(0, 0), (0, 1), (1, 1), (2, 2), (3, 3), (3, 4)}
    # homogeneous ids: author a is node 5 + a, venue v is node 9 + v
    assert (5, 0) in set(map(tuple, d.edge_index.t().tolist()))
    assert set(d.x_dict) == {"paper", "author"} and d.x_dict["paper"].dtype == torch.float32
    assert d.y.tolist() == [0, 1, 2, -1, 1] + [-1] * 6 and d.num_classes == 3
    assert d.train_mask.nonzero().flatten().tolist() == [0, 1]
    assert d.val_mask.nonzero().flatten().tolist() == [2]
    assert d.test_mask.nonzero().flatten().tolist() == [4]
    assert d.target_type == "paper" and d.name == "tiny"


def test_make_typed_data_removes_unlabelled_from_masks() -> None:
    d = tiny(train=np.array([0, 3]), val=None, test=None)  # paper 3 is unlabelled
    assert d.train_mask.nonzero().flatten().tolist() == [0]
    assert int(d.val_mask.sum()) == 0


@pytest.mark.parametrize(
    "over, fragment",
    [
        ({"edges": {("author", "writes", "journal"): np.array([[0], [0]])}},
         "relation ('author', 'writes', 'journal') that names an unknown node type 'journal'"),
        ({"x_dict": {"paper": np.ones((4, 3))}}, "expected 5 feature rows (one per node of type 'paper')"),
        ({"x_dict": {"journal": np.ones((4, 3))}}, "found features for an unknown node type 'journal'"),
        ({"edges": {("author", "writes", "paper"): np.array([[0, 4], [0, 1]])}},
         "within the type ranges (sources in [0, 4) of 'author', targets in [0, 5) of 'paper'), found 1 edges out of range"),
        ({"edges": {("paper", "cites", "paper"): np.array([[0], [5]])}}, "found 1 edges out of range (the first (0, 5))"),
        ({"y": None}, "expected labels for the target type 'paper'"),
        ({"y": np.full(5, -1)}, "the target type has no labelled node"),
        ({"target_type": "journal"}, "found an unknown target type 'journal'"),
        ({"edges": [(("paper", "cites", "paper"), np.array([[0], [1]])), (("paper", "cites", "paper"), np.array([[1], [2]]))]},
         "found ('paper', 'cites', 'paper') twice"),
        ({"y": np.array([0, 1, 2]), "train": None}, "expected labels [5] (one per node of the target type 'paper')"),
        ({"train": np.array([0, 7])}, "expected train ids in [0, 5)"),
        ({"val": np.array([0, 2])}, "expected disjoint train/val/test sets"),
        ({"num_classes": 2}, "expected labels in [0, 2)"),
    ],
)
def test_make_typed_data_bad_inputs(over, fragment) -> None:
    with pytest.raises(DatasetError) as info:
        tiny(**over)
    msg = str(info.value)
    assert fragment in msg
    assert "\n" not in msg and "; " in msg  # one line: expected / found; how to fix


def _corrupt(d, **attrs):
    bad = copy.copy(d)
    for k, v in attrs.items():
        bad[k] = v
    return bad


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda d: _corrupt(d, edge_types=[("author", "writes", "paper"), ("paper", "cites", "journal"), d.edge_types[2]]),
         "names an unknown node type 'journal'"),
        (lambda d: _corrupt(d, edge_types=[("author", "writes", "paper"), ("author", "writes", "paper"), d.edge_types[2]]),
         "found ('author', 'writes', 'paper') twice"),
        (lambda d: _corrupt(d, x_dict={"paper": torch.ones(4, 3)}), "expected 5 feature rows (one per node of type 'paper')"),
        (lambda d: _corrupt(d, x_dict={"paper": torch.ones(5, 3, dtype=torch.float64)}), "x_dict['paper'] float32"),
        (lambda d: _corrupt(d, edge_type=torch.full_like(d.edge_type, 3)), "expected edge_type in [0, 3) (one per relation)"),
        (lambda d: _corrupt(d, edge_type=torch.flip(d.edge_type, [0])), "edges out of range"),
        (lambda d: _corrupt(d, edge_index=d.edge_index.flip(0)), "edges out of range"),
        (lambda d: _corrupt(d, target_type="venue"), "expected y = -1 outside the target type 'venue'"),
        (lambda d: _corrupt(d, target_type="journal"), "found an unknown target type 'journal'"),
        (lambda d: _corrupt(d, y=torch.full_like(d.y, -1)), "the target type has no labelled node"),
        (lambda d: _corrupt(d, x=torch.ones(11, 2)), "expected x = None"),
        (lambda d: _corrupt(d, type_ptr=torch.tensor([0, 4, 9, 11])), "expected node_type equal to what type_ptr says"),
        (lambda d: _corrupt(d, edge_index=torch.cat([d.edge_index, d.edge_index[:, :1]], 1),
                            edge_type=torch.cat([d.edge_type, d.edge_type[:1]])), "1 duplicates"),
        (lambda d: _corrupt(d, train_mask=torch.ones(11, dtype=torch.bool)), "expected train_mask only on labelled 'paper' nodes"),
    ],
)
def test_check_typed_bad_data(make, fragment) -> None:
    d = tiny()
    check_typed(d, "tiny")
    with pytest.raises(DatasetError) as info:
        check_typed(make(d), "tiny")
    msg = str(info.value)
    assert fragment in msg and "tiny" in msg and "\n" not in msg


# --------------------------------------------------------------------------- add_reverse


def test_add_reverse() -> None:
    d = tiny()
    r = add_reverse(d)
    check_typed_contract(r)
    assert r.edge_types == d.edge_types + [("paper", "rev_writes", "author"), ("paper", "rev_cites", "paper"),
                                           ("venue", "rev_published_in", "paper")]
    sets = edge_sets(r)
    for s, rel, t in d.edge_types:
        assert sets[(t, "rev_" + rel, s)] == {(b, a) for a, b in sets[(s, rel, t)]}
    assert torch.equal(r.edge_index[:, : d.edge_index.shape[1]], d.edge_index)  # existing edges first, unchanged
    assert d.edge_types == tiny().edge_types  # the input is not modified
    again = add_reverse(r)
    assert again.edge_types == r.edge_types and torch.equal(again.edge_index, r.edge_index)


def test_add_reverse_keeps_existing_reverses_and_symmetric_relations() -> None:
    pa = np.array([[0, 1, 2, 3], [0, 0, 1, 3]])
    cites = np.array([[0, 1, 1, 2], [1, 0, 2, 1]])  # symmetric: its own reverse
    d = make_typed_data(
        num_nodes={"paper": 4, "author": 4},
        edges={("paper", "written_by", "author"): pa, ("author", "writes", "paper"): pa[::-1],
               ("paper", "cites", "paper"): cites},
        target_type="paper", y=np.array([0, 1, 0, 1]), name="t",
    )
    r = add_reverse(d)
    assert r.edge_types == d.edge_types and r.edge_index.shape == d.edge_index.shape
    # a relation name may repeat across type pairs (PyG's DBLP: ('paper', 'to', 'author'), ('paper', 'to',
    # 'conference')): rev_r of other types beside it, and a repeated name, get their own reverses
    clash = make_typed_data(num_nodes={"a": 2, "b": 2},
                            edges={("a", "r", "b"): np.array([[0], [1]]), ("a", "rev_r", "a"): np.array([[0], [1]]),
                                   ("b", "r", "a"): np.array([[0, 1], [1, 1]])},
                            target_type="a", y=np.array([0, 1]), name="clash")
    r = add_reverse(clash)
    assert r.edge_types == clash.edge_types + [("b", "rev_r", "a"), ("a", "rev_rev_r", "a"), ("a", "rev_r", "b")]
    rel = relation_edges(r)
    assert rel["b", "rev_r", "a"].tolist() == [[1], [0]] and rel["a", "rev_r", "b"].tolist() == [[1, 1], [0, 1]]


# --------------------------------------------------------------------------- HeteroData


def test_hetero_data_round_trip() -> None:
    g = torch.Generator().manual_seed(0)
    hd = HeteroData()
    hd["paper"].x = torch.randn(30, 8, generator=g)
    hd["paper"].y = torch.randint(0, 4, (30,), generator=g)
    hd["paper"].y[:3] = -1
    perm = torch.randperm(30, generator=g)
    for label, idx in (("train_mask", perm[:15]), ("val_mask", perm[15:22]), ("test_mask", perm[22:])):
        m = torch.zeros(30, dtype=torch.bool)
        m[idx] = True
        hd["paper"][label] = m
    hd["author"].x = torch.randn(20, 5, generator=g)
    hd["field"].num_nodes = 7
    hd["author", "writes", "paper"].edge_index = torch.stack([torch.randint(0, 20, (60,), generator=g),
                                                             torch.randint(0, 30, (60,), generator=g)])
    hd["paper", "cites", "paper"].edge_index = torch.randint(0, 30, (2, 50), generator=g)
    hd["paper", "has_topic", "field"].edge_index = torch.stack([torch.randint(0, 30, (40,), generator=g),
                                                               torch.randint(0, 7, (40,), generator=g)])
    d = from_hetero_data(hd, "paper", name="hd")
    check_typed_contract(d)
    assert d.node_types == hd.node_types and d.edge_types == hd.edge_types
    assert set(d.x_dict) == {"paper", "author"} and torch.equal(d.x_dict["author"], hd["author"].x)
    lab = hd["paper"].y >= 0
    assert torch.equal(d.train_mask[:30], hd["paper"].train_mask & lab)
    back = to_hetero_data(d)
    assert back.node_types == hd.node_types and back.edge_types == hd.edge_types
    assert back["field"].num_nodes == 7 and torch.equal(back["paper"].x, hd["paper"].x)
    assert torch.equal(back["paper"].y, hd["paper"].y.clamp(min=-1))
    for et in hd.edge_types:
        want = set(map(tuple, hd[et].edge_index.t().tolist()))  # duplicates collapse
        assert set(map(tuple, back[et].edge_index.t().tolist())) == want
        assert back[et].edge_index.shape[1] == len(want)
    again = from_hetero_data(back, "paper", name="hd")
    for k in ("edge_index", "edge_type", "y", "train_mask", "val_mask", "test_mask", "type_ptr", "node_type"):
        assert torch.equal(again[k], d[k]), k
    assert again.num_classes == d.num_classes == 4
    with pytest.raises(DatasetError, match="unknown target type 'venue'"):
        from_hetero_data(hd, "venue")
    with pytest.raises(DatasetError, match="expected labels for the target type 'author'"):
        from_hetero_data(hd, "author")


# --------------------------------------------------------------------------- hetero-dir


def test_hetero_dir_round_trip(tmp_path: Path) -> None:
    d = generate_synthetic_mag(num_nodes=3000, num_features=8, num_classes=4, undirected=False, seed=3)
    folder = write_hetero_dir(d, tmp_path / "g")
    assert (tmp_path / "g" / "edges" / "author__writes__paper" / "edge_index.npy").is_file()
    assert (tmp_path / "g" / "nodes" / "institution" / "num_nodes.txt").is_file()
    assert not (tmp_path / "g" / "nodes" / "institution" / "x.npy").exists()
    back = load_dataset(f"hetero-dir:{folder}")
    check_typed_contract(back)
    assert back.node_types == d.node_types and back.edge_types == d.edge_types
    assert back.target_type == "paper" and back.num_classes == 4 and back.name == f"hetero-dir:{folder}"
    for k in ("type_ptr", "node_type", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(back[k], d[k]), k
    assert torch.equal(back.x_dict["paper"], d.x_dict["paper"]) and set(back.x_dict) == {"paper"}
    assert edge_sets(back) == edge_sets(d)
    # relative to root, and with the reverse relations
    und = load_dataset("hetero-dir:g?undirected=true", root=str(tmp_path))
    assert len(und.edge_types) == 8 and und.edge_types[4] == ("paper", "rev_writes", "author")


def test_hetero_dir_minimal_folder_and_errors(tmp_path: Path) -> None:
    g = tmp_path / "m"
    (g / "nodes" / "user").mkdir(parents=True)
    (g / "nodes" / "item").mkdir(parents=True)
    (g / "edges" / "user__buys__item").mkdir(parents=True)
    np.save(g / "nodes" / "user" / "x.npy", np.ones((6, 2), dtype=np.float64))
    (g / "nodes" / "item" / "num_nodes.txt").write_text("4\n")
    np.save(g / "nodes" / "user" / "y.npy", np.array([0, 1, 0, 1, -1, 1]))
    np.save(g / "edges" / "user__buys__item" / "edge_index.npy", np.array([[0, 1, 2, 5, 5], [0, 1, 3, 3, 3]]))
    with pytest.raises(DatasetError, match="meta.json naming the target type"):
        load_dataset(f"hetero-dir:{g}")
    (g / "meta.json").write_text(json.dumps({"target_type": "user"}))
    d = load_dataset(f"hetero-dir:{g}?seed=1")
    check_typed_contract(d)
    assert d.node_types == ["item", "user"] and d.edge_types == [("user", "buys", "item")]
    assert d.edge_index.shape[1] == 4 and d.x_dict["user"].dtype == torch.float32 and "item" not in d.x_dict
    assert int((d.train_mask | d.val_mask | d.test_mask).sum()) == 5  # the unlabelled user is in no mask
    (g / "meta.json").write_text(json.dumps({"target_type": "shop"}))
    with pytest.raises(DatasetError, match="unknown target type 'shop'"):
        load_dataset(f"hetero-dir:{g}")
    (g / "meta.json").write_text(json.dumps({"target_type": "user"}))
    (g / "nodes" / "item" / "num_nodes.txt").unlink()
    with pytest.raises(DatasetError, match="expected x.npy or num_nodes.txt"):
        load_dataset(f"hetero-dir:{g}")
    (g / "nodes" / "item" / "num_nodes.txt").write_text("3\n")
    with pytest.raises(DatasetError, match="targets in \\[0, 3\\) of 'item'\\), found 3 edges out of range"):
        load_dataset(f"hetero-dir:{g}")


# --------------------------------------------------------------------------- ACM


@pytest.fixture(scope="module")
def acm_dir(shared_data: Path) -> Path:
    path = shared_data / "acm"
    if not (path / "labels.npy").is_file():
        pytest.skip(f"{path}/labels.npy not found")
    return path


def test_acm_statistics(acm_dir: Path) -> None:
    d = load_dataset(f"acm:{acm_dir}")
    check_typed_contract(d)
    assert d.node_types == ["paper", "author", "subject"]
    assert (d.type_ptr[1:] - d.type_ptr[:-1]).tolist() == [4019, 7167, 60]
    assert d.edge_types == [("paper", "written_by", "author"), ("author", "writes", "paper"),
                            ("paper", "has_subject", "subject"), ("subject", "subject_of", "paper")]
    assert torch.bincount(d.edge_type).tolist() == [13407, 13407, 4019, 4019]
    assert {t: tuple(x.shape) for t, x in d.x_dict.items()} == {"paper": (4019, 1902), "author": (7167, 1902)}
    assert torch.allclose(d.x_dict["paper"].sum(1), torch.ones(4019), atol=1e-4)  # L1-normalised rows
    assert d.target_type == "paper" and d.num_classes == 3
    assert torch.bincount(d.y[:4019]).tolist() == [1993, 965, 1061]
    assert (int(d.train_mask.sum()), int(d.val_mask.sum()), int(d.test_mask.sum())) == (60, 1000, 1000)
    r = add_reverse(d)  # both directions are stored already
    assert r.edge_types == d.edge_types
    assert edge_sets(d)[("author", "writes", "paper")] == {(b, a) for a, b in edge_sets(d)[("paper", "written_by", "author")]}
    for k, n_train in ((40, 120), (60, 180)):
        assert int(load_dataset(f"acm:{acm_dir}?split={k}").train_mask.sum()) == n_train
    with pytest.raises(DatasetError, match="expected option split in \\[20, 40, 60\\]"):
        load_dataset(f"acm:{acm_dir}?split=30")
    with pytest.raises(DatasetError, match="expected the ACM folder"):
        load_dataset(f"acm:{acm_dir / 'missing'}")


# --------------------------------------------------------------------------- synthetic-mag


def test_synthetic_mag_shape() -> None:
    d = load_dataset("synthetic-mag?num_nodes=40000&seed=1&num_features=32&num_classes=8")
    check_typed_contract(d)
    assert d.name == "synthetic-mag?num_classes=8&num_features=32&num_nodes=40000&seed=1"
    assert d.node_types == ["paper", "author", "institution", "field_of_study"]
    counts = (d.type_ptr[1:] - d.type_ptr[:-1]).tolist()
    assert sum(counts) == 40000 and counts == list(type_counts(40000).values())
    for got, full in zip(counts, MAG_NODES.values()):  # ogbn-mag's proportions
        assert abs(got / 40000 - full / sum(MAG_NODES.values())) < 1e-3
    base = list(MAG_EDGES)
    assert d.edge_types[:4] == base and d.edge_types[4:] == [(t, "rev_" + r, s) for s, r, t in base]
    per_rel = torch.bincount(d.edge_type).tolist()
    want = edge_counts(type_counts(40000))
    assert per_rel == [want[et] for et in base] * 2
    scale = 40000 / sum(MAG_NODES.values())
    for got, full in zip(per_rel, MAG_EDGES.values()):  # ogbn-mag's edges per node
        assert abs(got - full * scale) <= 1 + 1e-6 * full
    assert list(d.x_dict) == ["paper"] and d.x_dict["paper"].shape == (counts[0], 32)
    assert int((d.y >= 0).sum()) == counts[0] and d.num_classes == 8
    # learnable: citations and features follow the class
    cites = relation_edges(d)[("paper", "cites", "paper")]
    y = d.y[: counts[0]]
    assert float((y[cites[0]] == y[cites[1]]).float().mean()) > 0.6
    x = d.x_dict["paper"]
    centroids = torch.stack([x[d.train_mask[: counts[0]] & (y == c)].mean(0) for c in range(8)])
    pred = torch.cdist(x, centroids).argmin(1)
    assert float((pred == y)[d.test_mask[: counts[0]]].float().mean()) > 0.3  # chance 0.125
    # time-split proportions
    frac = [float(m.sum()) / counts[0] for m in (d.train_mask, d.val_mask, d.test_mask)]
    assert abs(frac[0] - 0.855) < 0.02 and abs(frac[1] - 0.088) < 0.02
    # power-law sources: the most prolific author writes far more than the average
    writes = relation_edges(d)[("author", "writes", "paper")]
    deg = torch.bincount(writes[0], minlength=counts[1]).float()
    assert float(deg.max()) > 8 * float(deg.mean())
    # deterministic, and undirected=false keeps the 4 relations
    again = generate_synthetic_mag(num_nodes=40000, seed=1, num_features=32, num_classes=8)
    assert torch.equal(again.edge_index, d.edge_index) and torch.equal(again.x_dict["paper"], d.x_dict["paper"])
    directed = load_dataset("synthetic-mag?num_nodes=5000&undirected=false")
    assert len(directed.edge_types) == 4
    with pytest.raises(DatasetError, match="num_nodes >= 1000"):
        load_dataset("synthetic-mag?num_nodes=10")


def test_synthetic_mag_one_million_nodes() -> None:
    # its time is measured by benchmarks/datasets.py
    d = generate_synthetic_mag(num_nodes=1_000_000, seed=0)
    assert d.num_nodes == 1_000_000 and d.x_dict["paper"].shape[1] == 128


# --------------------------------------------------------------------------- ogbn-mag


def test_ogbn_mag_fixture_loads_offline(tmp_path: Path, monkeypatch) -> None:
    def no_input(*args):  # any prompt would be a bug
        raise AssertionError(f"input() called: {args}")

    monkeypatch.setattr(builtins, "input", no_input)
    folder, src = write_tiny_ogb_mag(tmp_path, num_nodes=3000, num_features=16, num_classes=5, seed=0)
    assert Path(folder) == tmp_path / "ogbn_mag"
    assert (Path(folder) / "raw" / "relations" / "author___writes___paper" / "edge.csv.gz").is_file()
    src_sets = edge_sets(src)
    p_src = src.node_types.index("paper")
    for attempt in range(2):  # the second load reads ogb's processed/ cache
        d = load_dataset("ogbn-mag", root=str(tmp_path))
        check_typed_contract(d)
        assert d.name == "ogbn-mag" and d.target_type == "paper" and d.num_classes == 5
        assert d.node_types == ["author", "field_of_study", "institution", "paper"]  # ogb's (sorted) order
        base = sorted(src.edge_types)
        assert d.edge_types == base + [(t, "rev_" + r, s) for s, r, t in base]
        sets = edge_sets(d)
        for et in base:
            assert sets[et] == src_sets[et], et
        counts = {t: int(d.type_ptr[i + 1] - d.type_ptr[i]) for i, t in enumerate(d.node_types)}
        assert counts == {t: int(src.type_ptr[i + 1] - src.type_ptr[i]) for i, t in enumerate(src.node_types)}
        p = d.node_types.index("paper")
        lo, hi = int(d.type_ptr[p]), int(d.type_ptr[p + 1])
        slo, shi = int(src.type_ptr[p_src]), int(src.type_ptr[p_src + 1])
        assert list(d.x_dict) == ["paper"]
        assert torch.allclose(d.x_dict["paper"], src.x_dict["paper"], atol=1e-5)
        assert torch.equal(d.y[lo:hi], src.y[slo:shi])
        for k in ("train_mask", "val_mask", "test_mask"):
            assert torch.equal(d[k][lo:hi], src[k][slo:shi]), k
    assert (Path(folder) / "processed" / "data_processed").is_file()
    directed = load_dataset("ogbn-mag", root=str(tmp_path), undirected=False)
    assert directed.edge_types == sorted(src.edge_types)


def test_ogbn_mag_missing_files_named(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(builtins, "input", lambda *a: pytest.fail("ogb prompted"))
    folder, _ = write_tiny_ogb_mag(tmp_path, num_nodes=1500)
    (Path(folder) / "raw" / "triplet-type-list.csv.gz").unlink()
    with pytest.raises(DatasetError) as info:
        load_dataset("ogbn-mag", root=str(tmp_path))
    assert "found these files missing: raw/triplet-type-list.csv.gz;" in str(info.value)


# --------------------------------------------------------------------------- help


def test_dataset_help_mentions_typed_sources() -> None:
    from gnnscale.datasets import acm, hetero_dir, mag

    for text in ("acm:PATH", "hetero-dir:PATH", "synthetic-mag", "ogbn-mag", "x_dict", "docs/typed_graphs.md"):
        assert text in DATASET_HELP
    for module in (acm, hetero_dir, mag):
        for option in module.OPTIONS:
            assert f"{option} (" in DATASET_HELP
    with pytest.raises(DatasetError) as info:
        load_dataset("hetero:x")
    assert "hetero-dir:PATH" in str(info.value) and "synthetic-mag" in str(info.value)
