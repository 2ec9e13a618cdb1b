"""Edge features and targets of every kind in partition folders (docs/targets_and_edge_features.md
section 3): edge_attr.npy / edge_ids.npy aligned with each part's CSC, y.npy of the target's kind,
meta's target and edge_feature_dim, checksums and validate.py's checks, ``gnnscale info``'s summary."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gnnscale.errors import PartitionError
from gnnscale.partitioning import load_meta, load_part, partition_graph, summarize, to_csc, write_partitions
from gnnscale.partitioning.validate import check_folder

EDGE_FILES = ("edge_attr.npy", "edge_ids.npy")


def _orig_of_new(out, meta) -> torch.Tensor:
    """int64 [N]: the original id of every new id (the parts' orig_ids in part order)."""
    return torch.cat([load_part(out, p, verify=False).orig_ids for p in range(meta["num_parts"])])


def _in_edges_orig(part, orig_of_new: torch.Tensor) -> torch.Tensor:
    """int64 [2, E_p]: (source, target) of every in-edge of ``part``, in original ids."""
    deg = part.indptr[1:] - part.indptr[:-1]
    dst_local = torch.repeat_interleave(torch.arange(part.num_owned), deg)
    return torch.stack([orig_of_new[part.indices], part.orig_ids[dst_local]])


def _first_columns(keys: np.ndarray) -> set[int]:
    """The lowest column of every distinct key (what deduplication keeps)."""
    _, first = np.unique(keys, return_index=True)  # return_index: the first occurrence
    return set(first.tolist())


# --------------------------------------------------------------------------------------------
# HumLoc (real data): 21 edge features, multilabel targets, 2 METIS parts
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def humloc(shared_data):
    from gnnscale.datasets import load_dataset

    return load_dataset("humloc:" + str(shared_data / "humloc"))


@pytest.fixture(scope="module")
def humloc_parts(humloc, tmp_path_factory):
    out = tmp_path_factory.mktemp("humloc2")
    meta = partition_graph(humloc, 2, out, method="metis", dataset="humloc")
    return out, meta


def test_humloc_edge_features_round_trip(humloc, humloc_parts):
    data, (out, meta) = humloc, humloc_parts
    assert data.edge_attr.shape[1] == 21
    assert meta["edge_feature_dim"] == 21 and load_meta(out)["edge_feature_dim"] == 21
    orig_of_new = _orig_of_new(out, meta)
    all_ids = []
    for p in range(2):
        part = load_part(out, p)  # verifies every file's sha256, the edge files included
        for f in EDGE_FILES:
            assert f"part{p}/{f}" in meta["files"]
        e_p = part.indices.numel()
        assert part.edge_attr.dtype == torch.float32 and part.edge_attr.shape == (e_p, 21)
        assert part.edge_ids.dtype == torch.int64 and part.edge_ids.shape == (e_p,)
        assert torch.equal(part.edge_attr, data.edge_attr[part.edge_ids])
        assert torch.equal(_in_edges_orig(part, orig_of_new), data.edge_index[:, part.edge_ids])
        part.edge_attr[0, 0] += 1.0  # copy-on-write: the process's page, never the file
        all_ids.append(part.edge_ids)
    # HumLoc's loader already dropped duplicates: every input edge is stored exactly once
    assert torch.equal(torch.sort(torch.cat(all_ids)).values, torch.arange(data.edge_index.shape[1]))
    load_part(out, 0)  # the file was not written
    check_folder(out)


def test_humloc_targets_round_trip(humloc, humloc_parts):
    data, (out, meta) = humloc, humloc_parts
    assert meta["target"] == {"kind": "multilabel", "num_classes": 14, "num_outputs": 14}
    assert meta["num_classes"] == 14
    for p in range(2):
        part = load_part(out, p)
        assert part.y.dtype == torch.float32 and part.y.shape == (part.num_owned, 14)
        assert torch.equal(part.y, data.y[part.orig_ids])
    s = summarize(out)
    assert s["target_kind"] == "multilabel" and s["edge_feature_dim"] == 21 and s["num_outputs"] == 14


def test_changed_edge_attr_is_caught_by_its_checksum(humloc_parts, tmp_path):
    src, meta = humloc_parts
    out = tmp_path / "copy"
    shutil.copytree(src, out)
    path = out / "part1" / "edge_attr.npy"
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(PartitionError) as err:
        load_part(out, 1)
    assert "part1/edge_attr.npy" in str(err.value) and meta["files"]["part1/edge_attr.npy"] in str(err.value)
    load_part(out, 0)  # the other part is fine


def test_validate_checks_the_edge_files_and_float_targets(humloc_parts, tmp_path):
    src, _ = humloc_parts
    out = tmp_path / "copy"
    shutil.copytree(src, out)
    path = out / "part0" / "edge_attr.npy"
    good = np.load(path)
    bad = good.copy()
    bad[3, 2] = np.nan
    np.save(path, bad)
    with pytest.raises(PartitionError, match="part0/edge_attr.npy.*finite"):
        check_folder(out)
    np.save(path, good[:-1])
    with pytest.raises(PartitionError, match=r"part0/edge_attr.npy: expected dtype float32 and shape"):
        check_folder(out)
    np.save(path, good)
    ids_path = out / "part1" / "edge_ids.npy"
    ids = np.load(ids_path)
    np.save(ids_path, ids.astype(np.int32))
    with pytest.raises(PartitionError, match="part1/edge_ids.npy: expected dtype int64"):
        check_folder(out)
    ids[0] = 10**9
    np.save(ids_path, ids)
    with pytest.raises(PartitionError, match=r"part1/edge_ids.npy: expected original edge ids in \[0, 18496\)"):
        check_folder(out)
    ids[0] = 0
    np.save(ids_path, ids)
    check_folder(out)
    # multilabel targets: 0/1 and no NaN on nodes in a mask (a float y is not a class id)
    y_path = out / "part0" / "y.npy"
    y = np.load(y_path)
    train = np.load(out / "part0" / "train_mask.npy")
    row = int(np.flatnonzero(train)[0])
    y[row, 1] = 2.0
    np.save(y_path, y)
    with pytest.raises(PartitionError, match="part0/y.npy: expected multilabel targets of 0/1"):
        check_folder(out)
    y[row, 1] = np.nan
    np.save(y_path, y)
    with pytest.raises(PartitionError, match="part0/y.npy: expected no NaN multilabel targets"):
        check_folder(out)
    np.save(y_path, y[:, :13])
    with pytest.raises(PartitionError, match=r"part0/y.npy: expected dtype float32 and shape \(\d+, 14\)"):
        load_part(out, 0, verify=False)


# --------------------------------------------------------------------------------------------
# small graphs by hand: duplicates, typed graphs, other target kinds, no edge features
# --------------------------------------------------------------------------------------------


def _plain(n: int = 60, e: int = 300, de: int = 3, seed: int = 0, y=None, **attrs) -> Data:
    """A format-1 graph with duplicate edges (and their own feature rows) and a self loop."""
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, (2, e))
    ei = np.concatenate([ei, ei[:, :20], [[7], [7]], ei[:, 5:8]], axis=1)  # duplicates come later
    r = torch.from_numpy(rng.random(n))
    data = Data(x=torch.randn(n, 4), y=torch.from_numpy(rng.integers(0, 3, n)) if y is None else y,
                edge_index=torch.from_numpy(ei), train_mask=r < 0.5, val_mask=(r >= 0.5) & (r < 0.7),
                test_mask=r >= 0.7, num_nodes=n, **attrs)
    if de:
        data.edge_attr = torch.from_numpy(rng.random((ei.shape[1], de), dtype=np.float32))
    return data


def test_to_csc_returns_the_original_edge_ids():
    data = _plain(de=0)
    ei, n = data.edge_index.numpy(), data.num_nodes
    relabel = np.random.default_rng(1).permutation(n)
    et = np.random.default_rng(2).integers(0, 3, ei.shape[1])
    for kwargs in ({}, {"relabel": relabel}, {"edge_type": et, "num_relations": 3},
                   {"relabel": relabel, "edge_type": et, "num_relations": 3}):
        for dedupe in (False, True):
            plain = to_csc(ei, n, dedupe=dedupe, **kwargs)
            *same, ids = to_csc(ei, n, dedupe=dedupe, return_edge_ids=True, **kwargs)
            assert len(same) == len(plain) and all(np.array_equal(a, b) for a, b in zip(same, plain))
            assert ids.dtype == np.int64 and ids.shape == same[1].shape
            back = relabel if "relabel" in kwargs else np.arange(n)
            dst = np.repeat(np.arange(n), np.diff(same[0]))
            new_dst = back[ei[1, ids]] if "relabel" in kwargs else ei[1, ids]
            assert np.array_equal(new_dst, dst) and np.array_equal(back[ei[0, ids]], same[1])
            if "edge_type" in kwargs:
                assert np.array_equal(et[ids], same[2])
            if dedupe:  # each distinct edge keeps the id of its first (lowest) column
                key = (ei[1] * 3 + (et if "edge_type" in kwargs else 0)) * n + ei[0]
                assert set(ids.tolist()) == _first_columns(key)
            else:
                assert np.array_equal(np.sort(ids), np.arange(ei.shape[1]))


def test_duplicates_keep_their_first_occurrence(tmp_path):
    data = _plain()
    meta = write_partitions(data, np.arange(data.num_nodes) % 3, tmp_path / "p", method="manual", dataset="toy")
    assert meta["edge_feature_dim"] == 3 and meta["num_input_edges"] == data.edge_index.shape[1]
    orig_of_new = _orig_of_new(tmp_path / "p", meta)
    ids = []
    for p in range(3):
        part = load_part(tmp_path / "p", p)
        assert torch.equal(part.edge_attr, data.edge_attr[part.edge_ids])
        assert torch.equal(_in_edges_orig(part, orig_of_new), data.edge_index[:, part.edge_ids])
        ids.append(part.edge_ids)
    ei = data.edge_index.numpy()
    assert set(torch.cat(ids).tolist()) == _first_columns(ei[1] * data.num_nodes + ei[0])
    check_folder(tmp_path / "p")


def _typed(seed: int = 0):
    from gnnscale.datasets.typed import make_typed_data

    rng = np.random.default_rng(seed)
    data = make_typed_data(
        num_nodes={"author": 30, "paper": 50},
        edges={("author", "writes", "paper"): np.stack([rng.integers(0, 30, 80), rng.integers(0, 50, 80)]),
               ("paper", "cites", "paper"): rng.integers(0, 50, (2, 120))},
        target_type="paper", y=rng.integers(0, 3, 50), x_dict={"author": rng.random((30, 4)), "paper": rng.random((50, 5))},
        train=np.arange(0, 30), val=np.arange(30, 40), test=np.arange(40, 50),
    )
    # append duplicates of a few stored edges (same relation): their features must not win
    dup = torch.arange(0, data.edge_index.shape[1], 17)
    data.edge_index = torch.cat([data.edge_index, data.edge_index[:, dup]], dim=1)
    data.edge_type = torch.cat([data.edge_type, data.edge_type[dup]])
    data.edge_attr = torch.from_numpy(rng.random((data.edge_index.shape[1], 6), dtype=np.float32))
    return data


def test_typed_graph_with_edge_features_round_trips(tmp_path):
    data = _typed()
    out = tmp_path / "typed"
    meta = partition_graph(data, 2, out, method="metis", dataset="typed")
    assert meta["format_version"] == 2 and meta["edge_feature_dim"] == 6
    assert meta["target"] == {"kind": "class", "num_classes": 3, "num_outputs": 3}
    orig_of_new = _orig_of_new(out, meta)
    ids = []
    for p in range(2):
        part = load_part(out, p)
        assert f"part{p}/edge_attr.npy" in meta["files"] and f"part{p}/edge_ids.npy" in meta["files"]
        assert part.edge_attr.shape == (part.indices.numel(), 6)
        assert torch.equal(part.edge_attr, data.edge_attr[part.edge_ids])
        assert torch.equal(_in_edges_orig(part, orig_of_new), data.edge_index[:, part.edge_ids])
        assert torch.equal(part.typed.etype.to(torch.int64), data.edge_type[part.edge_ids])
        assert torch.equal(part.y, data.y[part.orig_ids])
        ids.append(part.edge_ids)
    ei, et, n = data.edge_index.numpy(), data.edge_type.numpy(), data.num_nodes
    assert set(torch.cat(ids).tolist()) == _first_columns((ei[1] * 2 + et) * n + ei[0])
    check_folder(out)
    assert summarize(out)["edge_feature_dim"] == 6


def test_without_edge_features_no_edge_files(tmp_path):
    out = tmp_path / "p"
    write_partitions(_plain(de=2), np.arange(60) % 2, out, method="manual", dataset="toy")
    assert (out / "part1" / "edge_attr.npy").is_file()
    meta = write_partitions(_plain(de=0), np.arange(60) % 2, out, method="manual", dataset="toy")  # rewritten
    assert meta["edge_feature_dim"] == 0
    for p in range(2):
        assert not any((out / f"part{p}" / f).exists() for f in EDGE_FILES)  # stale ones removed
        assert not any(k.endswith(EDGE_FILES) for k in meta["files"])
        part = load_part(out, p)
        assert part.edge_attr is None and part.edge_ids is None
    check_folder(out)
    assert summarize(out)["edge_feature_dim"] == 0 and summarize(out)["target_kind"] == "class"
    typed = _typed()
    del typed.edge_attr
    meta = partition_graph(typed, 2, tmp_path / "t", method="hash")
    assert meta["edge_feature_dim"] == 0 and not any(k.endswith(EDGE_FILES) for k in meta["files"])
    assert load_part(tmp_path / "t", 1).edge_attr is None


@pytest.mark.parametrize("kind, y, num_classes, num_outputs", [
    ("regression", torch.randn(60), 1, 1),
    ("regression", torch.randn(60, 3), 3, 3),
    ("multilabel", (torch.rand(60, 5) < 0.3).float(), 5, 5),
    ("binary", torch.arange(60) % 2, 2, 1),
    ("class", torch.arange(60) % 4, 4, 4),
])
def test_target_kinds_round_trip(tmp_path, kind, y, num_classes, num_outputs):
    data = _plain(de=0, y=y, target_kind=kind)
    meta = write_partitions(data, np.arange(60) % 2, tmp_path / "p", method="manual", dataset="toy")
    assert meta["target"] == {"kind": kind, "num_classes": num_classes, "num_outputs": num_outputs}
    assert meta["num_classes"] == num_classes
    for p in range(2):
        part = load_part(tmp_path / "p", p)
        want = y[part.orig_ids]
        assert part.y.dtype == (torch.int64 if kind in ("class", "binary") else torch.float32)
        assert part.y.shape == want.shape and torch.equal(part.y, want.to(part.y.dtype))
    check_folder(tmp_path / "p")
    assert summarize(tmp_path / "p")["target_kind"] == kind


def test_inferred_kind_and_nan_regression_targets(tmp_path):
    y = torch.randn(60, 2)
    data = _plain(de=0, y=y)  # no target_kind: float [N, 2] not 0/1 -> regression
    mask = data.train_mask | data.val_mask | data.test_mask
    y[~mask] = float("nan")  # unlabelled rows may be NaN
    meta = write_partitions(data, np.arange(60) % 2, tmp_path / "p", method="manual", dataset="toy")
    assert meta["target"]["kind"] == "regression"
    check_folder(tmp_path / "p")
    path = tmp_path / "p" / "part0" / "y.npy"
    arr = np.load(path)
    arr[int(np.flatnonzero(np.load(tmp_path / "p" / "part0" / "test_mask.npy"))[0]), 0] = np.nan
    np.save(path, arr)
    with pytest.raises(PartitionError, match="part0/y.npy: expected no NaN regression targets"):
        check_folder(tmp_path / "p")


def test_bad_inputs_are_one_clear_error(tmp_path):
    data = _plain()
    data.edge_attr = data.edge_attr[:-1]
    with pytest.raises(PartitionError, match=r"expected data.edge_attr as floats of shape \[\d+, De\]"):
        write_partitions(data, np.arange(60) % 2, tmp_path / "a", method="manual", dataset="toy")
    data = _plain(de=0, y=torch.rand(60, 3), target_kind="nonsense")
    with pytest.raises(PartitionError, match="expected target_kind among"):
        write_partitions(data, np.arange(60) % 2, tmp_path / "b", method="manual", dataset="toy")
    data = _plain(de=0, y=torch.rand(60), target_kind="multilabel")
    with pytest.raises(PartitionError, match=r"expected multilabel targets data.y of shape \[60, C\]"):
        write_partitions(data, np.arange(60) % 2, tmp_path / "c", method="manual", dataset="toy")
