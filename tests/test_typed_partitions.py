"""Typed partitions (format 2, docs/typed_graphs.md section 2): writer, loader, TypedPartitionBook,
per-type balance with METIS, relation runs, info / bench output, memory against the untyped path."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gnnscale.errors import PartitionError
from gnnscale.partitioning import (
    FORMAT_VERSION,
    TYPED_FORMAT_VERSION,
    PartitionBook,
    TypedPartitionBook,
    load_meta,
    load_part,
    partition_graph,
    partition_metrics,
    summarize,
    to_csc,
    verify_parts,
)
from gnnscale.partitioning.graph import sorted_unique
from gnnscale.partitioning.validate import check_folder

ROOT = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------------------------
# a typed graph built by hand, following docs/typed_graphs.md section 1
# --------------------------------------------------------------------------------------------

NODE_TYPES = ["author", "field", "paper"]  # ids: authors, then fields, then papers
EDGE_TYPES = [
    ("author", "writes", "paper"),
    ("paper", "cites", "paper"),
    ("paper", "extends", "paper"),  # shares some (src, dst) pairs with cites
    ("paper", "has_topic", "field"),
]
TARGET = "paper"
NUM_CLASSES = 4


def make_typed(
    counts: tuple[int, int, int] = (300, 40, 500),
    degree: float = 3.0,
    seed: int = 0,
    dims: dict[str, int] | None = None,
    with_y: bool = True,
) -> Data:
    """A typed Data exactly as the contract's section 1 describes: 3 node types (``field``
    without features), 4 relations (``cites`` and ``extends`` overlap), edges shuffled, a
    self loop, target ``paper`` with labels on 80% of its nodes and masks on those only.

    Args:
        counts: nodes of (author, field, paper).
        degree: edges per destination node and relation, on average.
        seed: numpy seed.
        dims: feature width per type (default author 3, paper 6; a type absent has none).
    """
    rng = np.random.default_rng(seed)
    dims = {"author": 3, "paper": 6} if dims is None else dims
    ptr = np.zeros(len(NODE_TYPES) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(counts)
    n = int(ptr[-1])
    tid = {t: i for i, t in enumerate(NODE_TYPES)}
    srcs, dsts, rels = [], [], []
    cites = None
    for r, (s, _, d) in enumerate(EDGE_TYPES):  # loop over relations
        ns, nd = counts[tid[s]], counts[tid[d]]
        m = int(degree * nd)
        src = rng.integers(0, ns, m) + ptr[tid[s]]
        dst = rng.integers(0, nd, m) + ptr[tid[d]]
        if r == 2 and cites is not None:  # extends: half of it repeats cites pairs
            k = min(m // 2, cites.shape[1])
            src[:k], dst[:k] = cites[0, :k], cites[1, :k]
        keys = sorted_unique(dst * n + src)  # no duplicate (src, dst) within a relation
        src, dst = keys % n, keys // n
        if r == 1:
            src = np.append(src, ptr[2])  # a self loop on the first paper
            dst = np.append(dst, ptr[2])
            keys = sorted_unique(dst * n + src)
            src, dst = keys % n, keys // n
            cites = np.stack([src, dst])
        srcs.append(src)
        dsts.append(dst)
        rels.append(np.full(src.shape[0], r, dtype=np.int64))
    src, dst, rel = np.concatenate(srcs), np.concatenate(dsts), np.concatenate(rels)
    perm = rng.permutation(src.shape[0])
    y = np.full(n, -1, dtype=np.int64)
    papers = np.arange(ptr[2], ptr[3])
    labelled = papers[rng.random(papers.shape[0]) < 0.8]
    y[labelled] = rng.integers(0, NUM_CLASSES, labelled.shape[0])
    split = rng.random(labelled.shape[0])
    masks = {}
    for name, lo, hi in (("train_mask", 0, 0.6), ("val_mask", 0.6, 0.8), ("test_mask", 0.8, 1.01)):
        m = np.zeros(n, dtype=bool)
        m[labelled[(split >= lo) & (split < hi)]] = True
        masks[name] = torch.from_numpy(m)
    g = torch.Generator().manual_seed(seed)
    data = Data(
        edge_index=torch.from_numpy(np.stack([src[perm], dst[perm]])),
        edge_type=torch.from_numpy(rel[perm]),
        node_type=torch.repeat_interleave(torch.arange(len(NODE_TYPES)), torch.as_tensor(counts)),
        type_ptr=torch.from_numpy(ptr),
        x=None,
        y=torch.from_numpy(y) if with_y else None,
        num_nodes=n,
        **masks,
    )
    data.node_types = list(NODE_TYPES)
    data.edge_types = list(EDGE_TYPES)
    data.x_dict = {t: torch.randn(counts[tid[t]], f, generator=g) for t, f in dims.items()}
    data.target_type = TARGET
    data.num_classes = NUM_CLASSES
    data.name = "typed-toy"
    return data


def homogeneous(data: Data) -> Data:
    """The same graph untyped (format 1): one feature matrix (every type must have F columns)."""
    out = Data(edge_index=data.edge_index, x=torch.cat([data.x_dict[t] for t in NODE_TYPES]), y=data.y,
               train_mask=data.train_mask, val_mask=data.val_mask, test_mask=data.test_mask,
               num_nodes=data.num_nodes)
    out.num_classes = data.num_classes
    out.name = "untyped-toy"
    return out


def read_parts(out: Path) -> tuple[dict, list]:
    meta = load_meta(out)
    return meta, [load_part(out, p) for p in range(meta["num_parts"])]


def edge_set(src: np.ndarray, dst: np.ndarray, rel: np.ndarray, n: int, r: int) -> np.ndarray:
    """Sorted distinct keys of (dst, relation, src) triples."""
    return np.unique((dst.astype(np.int64) * r + rel) * n + src)


# --------------------------------------------------------------------------------------------
# writer + loader: everything comes back
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy() -> Data:
    return make_typed()


@pytest.fixture(scope="module")
def toy_parts(toy, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("typed") / "metis3"
    partition_graph(toy, 3, out)
    return out


@pytest.mark.parametrize("method", ["metis", "fennel", "hash"])
def test_round_trip_recovers_every_node_and_edge(toy, toy_parts, tmp_path, method):
    out = toy_parts if method == "metis" else tmp_path / method
    if method != "metis":
        partition_graph(toy, 3, out, method=method)
    meta, parts = read_parts(out)
    n, r, t_count = toy.num_nodes, len(EDGE_TYPES), len(NODE_TYPES)
    assert meta["format_version"] == TYPED_FORMAT_VERSION == 2 and meta["feature_dim"] == 0
    assert not any(k.endswith("/x.npy") for k in meta["files"])
    assert sorted(k.split("/")[1] for k in meta["files"] if k.startswith("part0/")) == sorted(
        ["indptr.npy", "indices.npy", "etype.npy", "x_t0.npy", "x_t2.npy", "y.npy", "train_mask.npy", "val_mask.npy",
         "test_mask.npy", "orig_ids.npy"])
    typed = meta["typed"]
    assert typed["node_types"] == NODE_TYPES and [tuple(e) for e in typed["edge_types"]] == EDGE_TYPES
    assert typed["target_type"] == TARGET and typed["feature_dims"] == [3, 0, 6]
    assert typed["num_nodes_per_type"] == [300, 40, 500]
    verify_parts(out)
    check_folder(out)

    orig_of_new = torch.cat([p.orig_ids for p in parts]).numpy()
    assert np.array_equal(np.sort(orig_of_new), np.arange(n))
    ptr = toy.type_ptr.numpy()
    src_all, dst_all, rel_all = [], [], []
    for p, part in enumerate(parts):  # loop over parts
        tp = part.typed
        assert tp is not None and part.x.shape == (part.num_owned, 0)
        orig = part.orig_ids.numpy()
        # nodes numbered by type, then original id
        assert np.all(np.diff(orig) > 0)
        local_type = tp.node_type().numpy()
        assert np.array_equal(local_type, toy.node_type.numpy()[orig])
        assert tp.type_starts.tolist() == typed["type_starts"][p]
        for t, name in enumerate(NODE_TYPES):  # loop over types
            lo, hi = int(tp.type_starts[t]), int(tp.type_starts[t + 1])
            if name in toy.x_dict:
                want = toy.x_dict[name].numpy()[orig[lo:hi] - ptr[t]]
                assert np.array_equal(np.asarray(tp.x_by_type[t]), want)
                assert torch.equal(tp.features(t, torch.arange(hi - lo)), torch.from_numpy(want))
            else:
                assert t not in tp.x_by_type
        assert torch.equal(part.y, toy.y[orig])
        for m in ("train_mask", "val_mask", "test_mask"):
            assert torch.equal(getattr(part, m), getattr(toy, m)[orig])
        # edges: local dst, global new src -> original ids, with their relation
        deg = np.diff(part.indptr.numpy())
        dst_all.append(np.repeat(orig, deg))
        src_all.append(orig_of_new[part.indices.numpy()])
        rel_all.append(tp.etype.numpy().astype(np.int64))
        assert tp.etype.dtype == torch.int16
    got = edge_set(np.concatenate(src_all), np.concatenate(dst_all), np.concatenate(rel_all), n, r)
    ei = toy.edge_index.numpy()
    want = edge_set(ei[0], ei[1], toy.edge_type.numpy(), n, r)
    assert got.shape[0] == sum(p.indices.numel() for p in parts)  # nothing stored twice
    assert np.array_equal(got, want)
    assert typed["edges_per_relation"] == np.bincount(toy.edge_type.numpy(), minlength=r).tolist()
    # the cut per relation: stored edges whose endpoints lie in different parts
    owner = np.empty(n, dtype=np.int64)
    for p, part in enumerate(parts):
        owner[part.orig_ids.numpy()] = p
    cut = np.bincount(toy.edge_type.numpy()[owner[ei[0]] != owner[ei[1]]], minlength=r)
    assert typed["cut_per_relation"] == cut.tolist()
    counts = np.diff(np.asarray(typed["type_starts"]), axis=1)
    assert typed["balance_per_type"] == pytest.approx((counts.max(0) / counts.mean(0)).tolist())
    # per-type ids: parts own contiguous ranges, in (part, original id) order
    tbook = parts[0].typed.book
    for t in range(t_count):
        new_ids = torch.cat([part.owned_ids[part.typed.type_starts[t]:part.typed.type_starts[t + 1]] for part in parts])
        ntype, per_type = tbook.map_to_per_ntype(new_ids)
        assert bool((ntype == t).all()) and torch.equal(per_type, torch.arange(new_ids.numel()))
        owners = torch.repeat_interleave(torch.arange(3), torch.as_tensor(counts[:, t]))
        assert torch.equal(tbook.type_book(t).owner(per_type), owners)
        assert torch.equal(tbook.to_global(t, per_type), new_ids)
    assert tbook.num_types == t_count and tbook.num_nodes == n


def test_in_edges_sorted_by_relation_then_original_source(toy_parts):
    meta, parts = read_parts(toy_parts)
    n, r = meta["num_nodes"], len(meta["typed"]["edge_types"])
    orig_of_new = torch.cat([p.orig_ids for p in parts]).numpy()
    multi = 0
    for part in parts:
        deg = np.diff(part.indptr.numpy())
        dst = np.repeat(np.arange(part.num_owned), deg)
        rel = part.typed.etype.numpy().astype(np.int64)
        src = orig_of_new[part.indices.numpy()]
        key = (dst * r + rel) * n + src
        assert np.all(np.diff(key) > 0)  # strictly: sorted by (node, relation, original source), no duplicates
        # pairs linked by two relations (cites and extends) are listed once per relation
        multi += int((np.unique(dst * n + src).shape[0]) < key.shape[0])
    assert multi > 0


def test_relation_indptr(toy_parts):
    meta, parts = read_parts(toy_parts)
    r = len(meta["typed"]["edge_types"])
    for part in parts:
        ptr = part.relation_indptr()
        n = part.num_owned
        assert ptr.dtype == torch.int64 and ptr.shape == (n * r + 1,)
        deg = np.diff(part.indptr.numpy())
        key = np.repeat(np.arange(n), deg) * r + part.typed.etype.numpy()
        want = np.searchsorted(key, np.arange(n * r + 1))  # edges before row v*R+r
        assert np.array_equal(ptr.numpy(), want)
        assert np.array_equal(ptr.numpy()[::r], part.indptr.numpy())  # rows of a node add up to its in-edges
        for v in (0, n // 2, n - 1):  # a few nodes by hand
            for rel in range(r):
                run = part.typed.etype[ptr[v * r + rel]:ptr[v * r + rel + 1]]
                assert bool((run == rel).all())
        assert part.relation_indptr() is ptr  # computed once



# --------------------------------------------------------------------------------------------
# METIS balances every node type (and the target type's training nodes)
# --------------------------------------------------------------------------------------------


def test_metis_balances_every_node_type(tmp_path):
    from gnnscale.partitioning import build_vertex_weights

    data = make_typed((1500, 600, 2500), degree=4.0, seed=3)
    w = build_vertex_weights(data, ("nodes", "train"))
    assert w.shape == (data.num_nodes, 4)  # one column per node type + train
    assert np.array_equal(w[:, :3].argmax(1), data.node_type.numpy()) and np.array_equal(w[:, 3], data.train_mask.numpy())
    imbalance = 0.05
    meta = partition_graph(data, 4, tmp_path / "bal", imbalance=imbalance, seed=1)
    typed = meta["typed"]
    counts = np.diff(np.asarray(typed["type_starts"]), axis=1)
    assert counts.sum(0).tolist() == [1500, 600, 2500]
    for t, b in enumerate(typed["balance_per_type"]):
        assert b <= 1 + imbalance + 1e-9, (NODE_TYPES[t], b, counts[:, t])
    assert meta["balance"]["train"] <= 1 + imbalance + 1e-9, meta["balance"]
    # a cut well below a random assignment's
    rnd = partition_metrics(data, np.random.default_rng(0).integers(0, 4, data.num_nodes), 4)
    assert meta["edge_cut"] < 0.8 * rnd["edge_cut"]
    assert sum(typed["cut_per_relation"]) < sum(rnd["typed"]["cut_per_relation"])


# --------------------------------------------------------------------------------------------
# TypedPartitionBook
# --------------------------------------------------------------------------------------------


def _tables(counts: np.ndarray) -> tuple[list, list, list]:
    """offsets, type_starts, type_offsets of part/type counts [P, T]."""
    offsets = np.concatenate([[0], np.cumsum(counts.sum(1))])
    starts = np.concatenate([np.zeros((counts.shape[0], 1), np.int64), np.cumsum(counts, 1)], 1)
    toff = np.concatenate([np.zeros((counts.shape[1], 1), np.int64), np.cumsum(counts.T, 1)], 1)
    return offsets.tolist(), starts.tolist(), toff.tolist()


def test_typed_book_maps_both_ways():
    counts = np.array([[3, 0, 2], [0, 0, 0], [1, 4, 0], [2, 2, 5]])  # an empty part, empty segments
    offsets, starts, toff = _tables(counts)
    book = TypedPartitionBook(offsets, starts, toff)
    assert (book.num_parts, book.num_types, book.num_nodes) == (4, 3, 19)
    assert book.num_nodes_per_type().tolist() == [6, 6, 7]
    # brute force: every new id's type and per-type id, segment by segment
    want_t, want_pt = [], []
    seen = [0, 0, 0]
    for p in range(4):
        for t in range(3):
            want_t += [t] * counts[p, t]
            want_pt += list(range(seen[t], seen[t] + counts[p, t]))
            seen[t] += counts[p, t]
    ids = torch.arange(19)
    t, pt = book.map_to_per_ntype(ids)
    assert t.tolist() == want_t and pt.tolist() == want_pt
    assert torch.equal(book.ntype(ids), t)
    assert torch.equal(book.owner(ids), PartitionBook(offsets).owner(ids))
    shuffled = torch.randperm(19)
    assert torch.equal(book.ntype(shuffled.view(-1, 1)), t[shuffled].view(-1, 1))  # any shape
    for k in range(3):
        sel = t == k
        assert torch.equal(book.to_global(k, pt[sel]), ids[sel])
        tb = book.type_book(k)
        assert isinstance(tb, PartitionBook) and tb.offsets.tolist() == toff[k]
        assert torch.equal(tb.owner(pt[sel]), book.owner(ids[sel]))
    assert book.to_global(1, torch.tensor([], dtype=torch.int64)).numel() == 0


def test_typed_book_errors():
    offsets, starts, toff = _tables(np.array([[2, 1], [1, 3]]))
    book = TypedPartitionBook(offsets, starts, toff)
    with pytest.raises(PartitionError, match=r"global node ids in \[0, 7\), found ids in \[-1, 3\]"):
        book.ntype(torch.tensor([-1, 3]))
    with pytest.raises(PartitionError, match=r"in \[0, 7\), found ids in \[0, 7\]"):
        book.map_to_per_ntype(torch.tensor([0, 7]))
    with pytest.raises(PartitionError, match=r"per-type ids of type 0 in \[0, 3\), found ids in \[0, 3\]"):
        book.to_global(0, torch.tensor([0, 3]))
    with pytest.raises(PartitionError, match=r"node type in \[0, 2\), found 2"):
        book.type_book(2)
    with pytest.raises(PartitionError, match="integer node type"):
        book.to_global("paper", torch.tensor([0]))
    with pytest.raises(PartitionError, match="integer node ids"):
        book.ntype(torch.tensor([0.5]))
    with pytest.raises(PartitionError, match="rise from 0 to its part's size"):
        TypedPartitionBook(offsets, [[0, 2, 4], [0, 1, 4]], toff)
    with pytest.raises(PartitionError, match="running sums"):
        TypedPartitionBook(offsets, starts, [[0, 2, 3], [0, 2, 4]])
    with pytest.raises(PartitionError, match=r"type_starts \[P, T\+1\] as integers of shape \[2, \?\]"):
        TypedPartitionBook(offsets, [[0, 3]], toff)


# --------------------------------------------------------------------------------------------
# format 1 unchanged; typed parts refuse the untyped feature API; bad typed input
# --------------------------------------------------------------------------------------------


def test_format1_folders_still_load_and_formats_replace_each_other(toy, tmp_path):
    plain = homogeneous(make_typed(dims={"author": 4, "field": 4, "paper": 4}))
    out = tmp_path / "p"
    meta = partition_graph(plain, 2, out, method="hash")
    assert meta["format_version"] == FORMAT_VERSION == 1 and "typed" not in meta and meta["feature_dim"] == 4
    part = load_part(out, 1)
    assert part.typed is None and part.x.shape == (part.num_owned, 4)
    assert torch.equal(part.features(torch.tensor([0, 2])), plain.x[part.orig_ids[[0, 2]]])
    with pytest.raises(PartitionError, match="expected a typed part"):
        part.relation_indptr()
    check_folder(out)
    # the same folder rewritten typed, then untyped again: no file of the other format is left
    partition_graph(toy, 2, out, method="hash")
    assert not (out / "part0" / "x.npy").exists() and (out / "part0" / "etype.npy").exists()
    typed_part = load_part(out, 0)
    with pytest.raises(PartitionError, match="untyped part for features.*x_by_type"):
        typed_part.features(torch.tensor([0]))
    with pytest.raises(PartitionError, match="untyped part for feature_rows"):
        typed_part.feature_rows()
    with pytest.raises(PartitionError, match="without features"):
        typed_part.typed.features(1, torch.tensor([0]))
    partition_graph(plain, 2, out, method="hash")
    assert sorted(f.name for f in (out / "part0").iterdir()) == sorted(
        ["indptr.npy", "indices.npy", "x.npy", "y.npy", "train_mask.npy", "val_mask.npy", "test_mask.npy",
         "orig_ids.npy"])
    assert load_part(out, 0).typed is None


def test_typed_meta_and_files_are_checked(toy_parts, tmp_path):
    import shutil

    out = tmp_path / "c"
    shutil.copytree(toy_parts, out)
    meta = json.loads((out / "meta.json").read_text())
    assert meta.pop("feature_dim") == 0
    (out / "meta.json").write_text(json.dumps(meta))
    check_folder(out)  # feature_dim may be absent in a typed folder
    assert load_part(out, 2).typed.feature_dims == [3, 0, 6]
    (out / "part1" / "etype.npy").write_bytes((out / "part1" / "etype.npy").read_bytes()[:-2] + b"\x07\x00")
    with pytest.raises(PartitionError, match="part1/etype.npy to have sha256"):
        load_part(out, 1)
    with pytest.raises(PartitionError, match=r"etype.npy: expected (relations in \[0, 4\)|the in-edges of every node sorted)"):
        check_folder(out)
    (out / "part0" / "x_t2.npy").unlink()
    with pytest.raises(PartitionError, match="part0/x_t2.npy, found no such file"):
        load_part(out, 0)
    meta = json.loads((out / "meta.json").read_text())
    meta["typed"]["type_starts"][0][-1] += 1
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(PartitionError, match=r"typed.type_starts\[0\] rising from 0"):
        load_meta(out)
    del meta["typed"]
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(PartitionError, match="expected a 'typed' object"):
        load_meta(out)


@pytest.mark.parametrize("breakage,match", [
    (lambda d: setattr(d, "edge_type", d.edge_type[:-1]), r"edge_type as integers of shape \["),
    (lambda d: setattr(d, "edge_type", torch.where(d.edge_type == 3, 0, d.edge_type)),
     r"source of every edge of relation \('author', 'writes', 'paper'\) to be of type 'author', found edge"),
    (lambda d: setattr(d, "type_ptr", d.type_ptr.flip(0)), "type_ptr rising from 0"),
    (lambda d: setattr(d, "node_type", d.node_type.flip(0)), "node_type int64"),
    (lambda d: d.x_dict.update(field=torch.zeros(3, 2)), r"x_dict\['field'\] as float \[5, F\]"),
    (lambda d: setattr(d, "target_type", "venue"), "target_type among"),
    (lambda d: setattr(d, "edge_types", d.edge_types[:3]), r"edge_type in \[0, 3\)"),
])
def test_bad_typed_input_is_one_clear_error(tmp_path, breakage, match):
    data = make_typed((30, 5, 40), seed=1)
    breakage(data)
    with pytest.raises(PartitionError, match=match):
        partition_graph(data, 2, tmp_path / "bad", method="hash")


def test_to_csc_carries_the_relation():
    ei = np.array([[2, 0, 1, 2, 0, 2], [1, 1, 1, 1, 2, 1]])
    et = np.array([0, 1, 0, 1, 0, 0])  # (2 -> 1, rel 0) twice: one is a duplicate
    indptr, indices, etype = to_csc(ei, 3, dedupe=True, edge_type=et, num_relations=2)
    assert indptr.tolist() == [0, 0, 4, 5] and etype.dtype == np.int16
    assert list(zip(indices.tolist(), etype.tolist())) == [(1, 0), (2, 0), (0, 1), (2, 1), (0, 0)]
    relabel = np.array([2, 0, 1])  # sources still ordered by ORIGINAL id within each relation
    indptr, indices, etype = to_csc(ei, 3, dedupe=True, relabel=relabel, edge_type=et, num_relations=2)
    assert indptr.tolist() == [0, 4, 5, 5]
    assert list(zip(indices.tolist(), etype.tolist())) == [(0, 0), (1, 0), (2, 1), (1, 1), (2, 0)]
    plain = to_csc(ei, 3, dedupe=True)
    assert len(plain) == 2



# --------------------------------------------------------------------------------------------
# info, bench-partition
# --------------------------------------------------------------------------------------------


def test_summary_and_info_show_relations_and_types(toy_parts):
    s = summarize(toy_parts)
    typed = s["typed"]
    assert [r["relation"] for r in typed["relations"]] == ["writes", "cites", "extends", "has_topic"]
    meta = load_meta(toy_parts)
    assert [r["cut"] for r in typed["relations"]] == meta["typed"]["cut_per_relation"]
    assert [t["balance"] for t in typed["types"]] == meta["typed"]["balance_per_type"]
    assert [sum(t["per_part"]) for t in typed["types"]] == [300, 40, 500]
    from test_cli import run_cli

    r = run_cli("info", str(toy_parts), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    for rel, cut in zip(("writes", "cites", "extends", "has_topic"), meta["typed"]["cut_per_relation"]):
        assert any(line.split()[:1] == [rel] and str(cut) in line.split() for line in lines), (rel, r.stdout)
    for name, b in zip(NODE_TYPES, meta["typed"]["balance_per_type"]):
        assert any(line.split()[:1] == [name] and f"{b:.3f}" in line.split() for line in lines), (name, r.stdout)
    from test_cli import cli_in_process

    r = cli_in_process("info", str(toy_parts), "--json")
    info = json.loads(r.stdout)
    assert info["format_version"] == 2 and info["typed"]["cut_per_relation"] == meta["typed"]["cut_per_relation"]
    assert info["typed"]["balance_per_type"] == meta["typed"]["balance_per_type"]


def test_bench_reports_cut_per_relation_and_balance_per_type(toy):
    from gnnscale.partitioning.bench import format_table, format_typed, run_bench

    rows = run_bench(toy, [2], ["metis", "random"], fanouts=[4, 4], batch_size=64)
    for row in rows:
        t = row["typed"]
        assert len(t["cut_per_relation"]) == 4 and len(t["balance_per_type"]) == 3
        assert t["edges_per_relation"] == np.bincount(toy.edge_type.numpy(), minlength=4).tolist()
        comm = row["communication"]
        assert comm["feature_dims"] == [3, 0, 6] and comm["remote_rows"] > 0
        assert comm["remote_bytes"] <= comm["remote_rows"] * 6 * 4
    assert sum(rows[0]["typed"]["cut_per_relation"]) < sum(rows[1]["typed"]["cut_per_relation"])  # metis < random
    text = format_typed(rows)
    for rel in ("writes", "cites", "extends", "has_topic"):
        assert rel in text
    assert "balance per type: author" in text and "metis" in format_table(rows)
    assert format_typed([{**rows[0], "typed": None}]) == ""
    # partition_metrics agrees with what the writer stores
    from gnnscale.partitioning import assign_parts

    parts = assign_parts(toy, 2, method="hash")
    m = partition_metrics(toy, parts, 2)
    assert m["typed"]["nodes_per_type"] == [[150, 20, 250], [150, 20, 250]]


def test_bench_partition_cli_on_a_typed_dataset(toy, tmp_path):
    """Through the dataset loader (``hetero-dir:``), when the typed loaders are there."""
    try:
        from gnnscale.datasets import load_dataset
        from gnnscale.datasets.hetero_dir import write_hetero_dir
    except ImportError as exc:
        pytest.skip(f"typed dataset loaders not available yet: {exc}")
    folder = write_hetero_dir(toy, tmp_path / "hd")
    try:
        load_dataset("hetero-dir:" + folder)
    except Exception as exc:  # noqa: BLE001 - the loader is another engineer's work in progress
        pytest.skip(f"hetero-dir: not loadable yet: {exc}")
    from test_cli import cli_in_process

    r = cli_in_process("bench-partition", "--dataset", "hetero-dir:" + folder, "--parts", "2", "--methods", "metis,random",
                       "--fanouts", "4,4", "--batch-size", "64", "--out", str(tmp_path / "bench"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "cut per relation: writes" in r.stdout and "balance per type: author" in r.stdout
    res = json.loads((tmp_path / "bench" / "results.json").read_text())["results"]
    assert all(len(row["typed"]["cut_per_relation"]) == 4 for row in res)


# --------------------------------------------------------------------------------------------
# memory: the typed writer holds no more per edge than the untyped one (+ the int16 relation)
# --------------------------------------------------------------------------------------------

_MEASURE = textwrap.dedent("""
    import json, sys
    import numpy as np, torch
    from torch_geometric.data import Data
    from gnnscale.partitioning import partition_graph
    mode, src, out = sys.argv[1:4]
    z = np.load(src)
    kw = {k: torch.from_numpy(z[k]) for k in ("edge_index", "y", "train_mask", "val_mask", "test_mask")}
    n = int(z["type_ptr"][-1])
    if mode == "typed":
        data = Data(edge_type=torch.from_numpy(z["edge_type"]), node_type=torch.from_numpy(z["node_type"]),
                    type_ptr=torch.from_numpy(z["type_ptr"]), num_nodes=n, **kw)
        data.node_types, data.target_type = list(z["node_types"]), str(z["target_type"])
        data.edge_types = [tuple(e) for e in z["edge_types"].tolist()]
        data.x_dict = {t: torch.from_numpy(z["x_" + t]) for t in data.node_types}
    else:
        data = Data(x=torch.cat([torch.from_numpy(z["x_" + t]) for t in z["node_types"]]), num_nodes=n, **kw)
    data.num_classes, data.name = 4, mode
    del z
    meta = partition_graph(data, 4, out, method=sys.argv[4])
    print(json.dumps({k: meta[k] for k in ("num_edges", "peak_rss_bytes", "peak_rss_growth_bytes",
                                           "peak_rss_exact", "total_seconds")}))
""")


def test_memory_typed_vs_untyped(tmp_path):
    data = make_typed((300_000, 100_000, 600_000), degree=2.0, seed=0, dims={"author": 8, "field": 8, "paper": 8})
    src = tmp_path / "g.npz"
    np.savez(src, edge_index=data.edge_index.numpy(), edge_type=data.edge_type.numpy(),
             node_type=data.node_type.numpy(), type_ptr=data.type_ptr.numpy(), y=data.y.numpy(),
             train_mask=data.train_mask.numpy(), val_mask=data.val_mask.numpy(), test_mask=data.test_mask.numpy(),
             node_types=np.array(NODE_TYPES), edge_types=np.array(EDGE_TYPES), target_type=np.array(TARGET),
             **{"x_" + t: data.x_dict[t].numpy() for t in NODE_TYPES})
    del data
    res = {}
    for mode in ("untyped", "typed"):
        r = subprocess.run([sys.executable, "-c", _MEASURE, mode, str(src), str(tmp_path / mode), "random"],
                           capture_output=True, text=True, timeout=240, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-3000:]
        res[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    for mode, m in res.items():
        print(f"{mode}: 1M nodes, {m['num_edges']} stored edges: peak RSS {m['peak_rss_bytes'] / 2**20:.0f} MiB "
              f"(exact {m['peak_rss_exact']}), growth {m['peak_rss_growth_bytes'] / 2**20:.0f} MiB = "
              f"{m['peak_rss_growth_bytes'] / m['num_edges']:.1f} B/edge, {m['total_seconds']:.1f} s")
    per_edge = {k: m["peak_rss_growth_bytes"] / m["num_edges"] for k, m in res.items()}
    assert per_edge["typed"] <= 1.5 * per_edge["untyped"] + 8, per_edge  # generous: the writer adds 2 B/edge
