"""Tests of gnnscale.partitioning: METIS multi-constraint balance, relabel, on-disk format."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gnnscale.errors import PartitionError
from gnnscale.partitioning import (
    FORMAT_VERSION,
    PartitionBook,
    build_vertex_weights,
    coalesce,
    contiguous_relabel,
    edge_cut,
    load_meta,
    load_part,
    metis_partition,
    partition_graph,
    register_partitioner,
    summarize,
    to_csc,
    to_undirected_csr,
    write_partitions,
)
from gnnscale.partitioning.metis import find_libmetis

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def make_data(edge_index: np.ndarray, n: int, f: int = 4, seed: int = 0, name: str = "toy") -> Data:
    """A Data following the dataset contract, with random features, labels and masks."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    r = torch.rand(n, generator=g)
    data = Data(
        x=torch.randn(n, f, generator=g),
        y=y,
        edge_index=torch.as_tensor(edge_index, dtype=torch.int64),
        train_mask=r < 0.5,
        val_mask=(r >= 0.5) & (r < 0.7),
        test_mask=r >= 0.7,
        num_nodes=n,
    )
    data.num_classes = 3
    data.name = name
    return data


def random_graph(n: int, e: int, seed: int) -> np.ndarray:
    """Directed random edges with some duplicates and self loops; int64 [2, E]."""
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, size=(2, e), dtype=np.int64)
    ei = np.concatenate([ei, ei[:, :10], np.array([[3, 5], [3, 5]])], axis=1)  # dups + loops
    return ei


def band_graph(n: int, k: int) -> np.ndarray:
    """Node i linked to i+1 .. i+k (one direction); int64 [2, ~n*k]."""
    src = np.repeat(np.arange(n, dtype=np.int64), k)
    dst = src + np.tile(np.arange(1, k + 1, dtype=np.int64), n)
    keep = dst < n
    return np.stack([src[keep], dst[keep]])


# --------------------------------------------------------------------------------------------
# METIS multi-constraint balance
# --------------------------------------------------------------------------------------------

BAND_N, BAND_K, BAND_P = 100_000, 5, 4
TRAIN_LO, TRAIN_HI = 40_000, 60_000  # a contiguous block of 20k training nodes


@pytest.fixture(scope="module")
def band():
    ei = band_graph(BAND_N, BAND_K)
    train = np.zeros(BAND_N, dtype=bool)
    train[TRAIN_LO:TRAIN_HI] = True
    indptr, indices = to_undirected_csr(ei, BAND_N)
    weights = np.stack([np.ones(BAND_N, dtype=np.int64), train.astype(np.int64)], axis=1)
    return ei, train, indptr, indices, weights


def test_libmetis_comes_from_the_pip_dependency():
    """METIS's library is found without any system package: cmeel-metis's wheel (pip)."""
    import os

    lm = find_libmetis()
    assert lm is not None, "cmeel-metis (a gnnscale dependency) should provide libmetis.so"
    if not os.environ.get("GNNSCALE_LIBMETIS"):
        assert lm.path.endswith(os.path.join("cmeel.prefix", "lib", "libmetis.so"))
    assert lm.idx_dtype == np.int32 and lm.real_dtype == np.float32


def test_metis_option_indices_follow_the_header(tmp_path):
    """METIS 5.2 moved options[] indices (NIPARTS, ONDISK inserted): read them from metis.h."""
    from gnnscale.partitioning.metis import _option_indices

    names51 = ("PTYPE OBJTYPE CTYPE IPTYPE RTYPE DBGLVL NITER NCUTS SEED NO2HOP MINCONN CONTIG "
               "COMPRESS CCORDER PFACTOR NSEPS UFACTOR NUMBERING").split()
    body = ",\n".join(f"  METIS_OPTION_{n}" for n in names51)
    header = tmp_path / "metis.h"
    header.write_text("typedef enum {\n" + body + ",\n  /* cli */ METIS_OPTION_HELP\n} moptions_et;\n")
    assert _option_indices((str(header),)) == {
        "NITER": 6, "NCUTS": 7, "SEED": 8, "CONTIG": 11, "UFACTOR": 16, "NUMBERING": 17}
    assert _option_indices((str(tmp_path / "missing.h"),))["SEED"] == 8  # 5.1 without a header
    assert find_libmetis().options == {  # cmeel-metis: METIS 5.2.1's enum
        "NITER": 7, "NCUTS": 8, "SEED": 9, "CONTIG": 13, "UFACTOR": 18, "NUMBERING": 19}


def test_band_graph_multi_constraint_balance(band, caplog):
    _, train, indptr, indices, weights = band
    with caplog.at_level(logging.WARNING):
        parts = metis_partition(indptr, indices, BAND_P, weights, imbalance=0.05, seed=0)
    assert not [r for r in caplog.records if "pymetis" in r.getMessage()]
    assert parts.dtype == np.int64 and parts.shape == (BAND_N,)
    train_per_part = np.bincount(parts[train], minlength=BAND_P)
    nodes_per_part = np.bincount(parts, minlength=BAND_P)
    print("libmetis train nodes per part:", train_per_part.tolist())
    print("libmetis nodes per part:", nodes_per_part.tolist())
    target_train = TRAIN_HI - TRAIN_LO
    assert train_per_part.sum() == target_train
    assert np.all(np.abs(train_per_part - target_train / BAND_P) <= 0.10 * target_train / BAND_P)
    assert np.all(np.abs(nodes_per_part - BAND_N / BAND_P) <= 0.06 * BAND_N / BAND_P)
    # same seed, same input -> same partition
    again = metis_partition(indptr, indices, BAND_P, weights, imbalance=0.05, seed=0)
    np.testing.assert_array_equal(parts, again)


def test_band_graph_pymetis_does_not_balance_training_nodes(band, caplog):
    """Documents why we call libmetis: pymetis drops the second (training) constraint."""
    _, train, indptr, indices, weights = band
    with caplog.at_level(logging.WARNING, logger="gnnscale.partitioning.metis"):
        parts = metis_partition(indptr, indices, BAND_P, weights, seed=0, backend="pymetis")
    msgs = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("training-node balance will NOT be enforced" in m and "cmeel-metis" in m for m in msgs)
    train_per_part = np.bincount(parts[train], minlength=BAND_P)
    nodes_per_part = np.bincount(parts, minlength=BAND_P)
    print("pymetis train nodes per part:", train_per_part.tolist())
    # node counts are balanced, but the training block lands in one or two parts only
    assert np.all(np.abs(nodes_per_part - BAND_N / BAND_P) <= 0.06 * BAND_N / BAND_P)
    assert train_per_part.max() > 1.5 * (TRAIN_HI - TRAIN_LO) / BAND_P
    assert (train_per_part == 0).sum() >= 1


def test_partition_graph_balances_train_nodes_end_to_end(tmp_path):
    n = 20_000
    ei = band_graph(n, 3)
    data = make_data(ei, n, f=2)
    train = torch.zeros(n, dtype=torch.bool)
    train[5000:9000] = True
    data.train_mask = train
    data.val_mask = torch.zeros(n, dtype=torch.bool)
    data.test_mask = ~train
    meta = partition_graph(data, 4, tmp_path / "p", balance=("nodes", "train"), seed=1)
    trains = [s["train"] for s in meta["parts"]]
    assert sum(trains) == 4000
    assert all(abs(t - 1000) <= 100 for t in trains), trains
    assert meta["partition_seconds"] >= 0
    assert meta["balance_constraints"] == ["nodes", "train"]


def test_metis_partition_edge_cases():
    # one part: zeros without METIS
    indptr, indices = to_undirected_csr(np.array([[0, 1], [1, 2]]), 3)
    np.testing.assert_array_equal(metis_partition(indptr, indices, 1), np.zeros(3, np.int64))
    # empty graph
    out = metis_partition(np.zeros(1, np.int64), np.zeros(0, np.int64), 4)
    assert out.shape == (0,) and out.dtype == np.int64
    # isolated nodes only (no edges)
    out = metis_partition(np.zeros(13, np.int64), np.zeros(0, np.int64), 3)
    assert out.shape == (12,) and set(out.tolist()) <= {0, 1, 2}
    assert np.bincount(out, minlength=3).max() <= 5
    # isolated nodes next to a connected component
    ei = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])
    indptr, indices = to_undirected_csr(ei, 10)
    out = metis_partition(indptr, indices, 2, np.ones((10, 2), np.int64))
    assert out.shape == (10,) and set(out.tolist()) <= {0, 1}
    with pytest.raises(PartitionError, match="num_parts <= number of nodes"):
        metis_partition(indptr, indices, 11)
    with pytest.raises(PartitionError, match=r"vertex_weights of shape \[10\]"):
        metis_partition(indptr, indices, 2, np.ones((9, 2), np.int64))
    with pytest.raises(PartitionError, match="non-negative"):
        metis_partition(indptr, indices, 2, -np.ones(10, np.int64))


# --------------------------------------------------------------------------------------------
# graph helpers, relabel, book
# --------------------------------------------------------------------------------------------


def test_graph_helpers():
    ei = np.array([[2, 0, 0, 1, 1, 2], [1, 1, 1, 1, 0, 1]])
    np.testing.assert_array_equal(coalesce(ei, 3), [[0, 1, 1, 2], [1, 0, 1, 1]])
    indptr, indices = to_undirected_csr(ei, 4)
    np.testing.assert_array_equal(indptr, [0, 1, 3, 4, 4])
    np.testing.assert_array_equal(indices, [1, 0, 2, 1])
    assert indptr.dtype == np.int64 and indices.dtype == np.int64
    indptr, indices = to_csc(ei, 3)
    np.testing.assert_array_equal(indptr, [0, 1, 6, 6])
    np.testing.assert_array_equal(indices, [1, 0, 0, 1, 2, 2])
    indptr, indices = to_csc(torch.as_tensor(ei), 3, dedupe=True)
    np.testing.assert_array_equal(indices, [1, 0, 1, 2])
    with pytest.raises(PartitionError, match=r"node ids in \[0, 2\)"):
        coalesce(ei, 2)


def test_relabel_is_stable_and_contiguous():
    parts = np.array([2, 0, 2, 1, 0, 2, 0])
    new_of_old, old_of_new, offsets = contiguous_relabel(parts, num_parts=4)
    np.testing.assert_array_equal(old_of_new, [1, 4, 6, 3, 0, 2, 5])
    np.testing.assert_array_equal(offsets, [0, 3, 4, 7, 7])
    np.testing.assert_array_equal(new_of_old[old_of_new], np.arange(7))
    np.testing.assert_array_equal(parts[old_of_new], [0, 0, 0, 1, 2, 2, 2])


def test_partition_book():
    book = PartitionBook(torch.tensor([0, 3, 3, 7, 10]))
    assert book.num_parts == 4 and book.num_nodes == 10
    np.testing.assert_array_equal(
        book.owner(torch.arange(10)), [0, 0, 0, 2, 2, 2, 2, 3, 3, 3]
    )
    assert book.part_size(1) == 0 and book.part_range(2) == (3, 7)
    np.testing.assert_array_equal(book.to_local(torch.tensor([3, 6]), 2), [0, 3])
    with pytest.raises(PartitionError, match="owned by part 0"):
        book.to_local(torch.tensor([5]), 0)
    with pytest.raises(PartitionError, match=r"ids in \[0, 10\)"):
        book.owner(torch.tensor([10]))
    with pytest.raises(PartitionError, match="non-decreasing"):
        PartitionBook(torch.tensor([0, 5, 3]))
    with pytest.raises(PartitionError, match="start at 0"):
        PartitionBook(torch.tensor([1, 5]))


def test_vertex_weights():
    data = make_data(np.array([[0, 1, 2], [1, 2, 1]]), 3)
    w = build_vertex_weights(data, ("nodes", "train", "edges"))
    assert w.shape == (3, 3) and w.dtype == np.int64
    np.testing.assert_array_equal(w[:, 0], 1)
    np.testing.assert_array_equal(w[:, 1], data.train_mask.numpy().astype(np.int64))
    np.testing.assert_array_equal(w[:, 2], [0, 2, 1])
    with pytest.raises(PartitionError, match="unknown"):
        build_vertex_weights(data, ("nodes", "bogus"))


# --------------------------------------------------------------------------------------------
# partition + on-disk format round trip
# --------------------------------------------------------------------------------------------


@pytest.fixture()
def small(tmp_path):
    n = 300
    ei = random_graph(n, 1500, seed=7)
    data = make_data(ei, n, f=5, seed=3)
    out = tmp_path / "parts"
    meta = partition_graph(data, 3, out, seed=0)
    return data, out, meta


def test_round_trip(small):
    data, out, meta = small
    n = data.num_nodes
    assert meta == load_meta(out)
    assert meta["format_version"] == FORMAT_VERSION and meta["num_parts"] == 3
    assert meta["dataset"] == "toy" and meta["method"] == "metis"
    offsets = np.array(meta["offsets"])
    assert offsets[0] == 0 and offsets[-1] == n and np.all(np.diff(offsets) > 0)

    unique_edges = {tuple(e) for e in data.edge_index.t().tolist()}
    assert meta["num_edges"] == len(unique_edges)

    seen_edges = []
    all_orig = []
    for p in range(3):
        part = load_part(out, p)
        lo, hi = offsets[p], offsets[p + 1]
        assert part.num_owned == hi - lo and part.offset == lo
        assert part.indptr.dtype == torch.int64 and part.indices.dtype == torch.int64
        assert isinstance(part.x, np.memmap) and not part.x.flags.writeable
        assert part.x.dtype == np.float32 and part.x.shape == (hi - lo, 5)
        orig = part.orig_ids
        all_orig.append(orig)
        # node data are the original ones
        torch.testing.assert_close(part.features(torch.arange(part.num_owned)), data.x[orig])
        sel = torch.tensor([2, 0, 2])
        torch.testing.assert_close(part.features(sel), data.x[orig[sel]])
        assert torch.equal(part.y, data.y[orig])
        assert torch.equal(part.train_mask, data.train_mask[orig])
        assert torch.equal(part.val_mask, data.val_mask[orig])
        assert torch.equal(part.test_mask, data.test_mask[orig])
        # book: owned ids map to this part
        assert torch.equal(part.book.owner(part.owned_ids), torch.full((hi - lo,), p))
        # CSC edges back to original ids
        deg = part.indptr[1:] - part.indptr[:-1]
        dst_local = torch.repeat_interleave(torch.arange(part.num_owned), deg)
        seen_edges.append((part.indices, orig[dst_local]))
        assert meta["parts"][p]["in_edges"] == part.indices.numel()
        assert meta["parts"][p]["train"] == int(part.train_mask.sum())

    orig_of_new = torch.cat(all_orig)
    assert torch.equal(torch.sort(orig_of_new).values, torch.arange(n))
    src = torch.cat([orig_of_new[s] for s, _ in seen_edges])
    dst = torch.cat([d for _, d in seen_edges])
    got = list(zip(src.tolist(), dst.tolist()))
    assert len(got) == len(set(got))  # every edge exactly once
    assert set(got) == unique_edges

    # owner() of every source agrees with where that node was written
    new_of_orig = torch.empty(n, dtype=torch.int64)
    new_of_orig[orig_of_new] = torch.arange(n)
    book = PartitionBook(torch.tensor(meta["offsets"]))
    owners = book.owner(new_of_orig)
    for p in range(3):
        assert torch.all(owners[all_orig[p]] == p)

    s = summarize(out)
    assert s["num_parts"] == 3 and len(s["parts"]) == 3
    assert sum(pp["nodes"] for pp in s["parts"]) == n
    assert all(pp["bytes"] > 0 for pp in s["parts"])


def test_corrupted_file_is_detected(small):
    _, out, meta = small
    path = out / "part1" / "x.npy"
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(PartitionError) as err:
        load_part(out, 1)
    msg = str(err.value)
    assert "part1/x.npy" in msg and meta["files"]["part1/x.npy"] in msg
    assert "gnnscale partition" in msg
    load_part(out, 0)  # other parts are fine
    load_part(out, 1, verify=False)  # the check can be skipped


def test_missing_and_wrong_version(small, tmp_path):
    _, out, _ = small
    with pytest.raises(PartitionError, match="expected a partition folder"):
        load_meta(tmp_path / "nope")
    with pytest.raises(PartitionError, match="meta.json"):
        load_part(tmp_path, 0)
    with pytest.raises(PartitionError, match=r"part id in \[0, 3\)"):
        load_part(out, 3)
    meta = json.loads((out / "meta.json").read_text())
    meta["format_version"] = 99
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(PartitionError, match="format_version 1.*found 99"):
        load_part(out, 0)
    (out / "meta.json").write_text("{not json")
    with pytest.raises(PartitionError, match="readable JSON"):
        load_meta(out)


def test_bad_requests(tmp_path):
    data = make_data(random_graph(10, 30, seed=1), 10)
    with pytest.raises(
        PartitionError, match=r"num_parts <= number of nodes \(10\).*found num_parts=11"
    ):
        partition_graph(data, 11, tmp_path / "a")
    with pytest.raises(PartitionError, match="found num_parts=0"):
        partition_graph(data, 0, tmp_path / "a")
    with pytest.raises(PartitionError, match=r"from \['metis'.*found 'scotch'"):
        partition_graph(data, 2, tmp_path / "a", method="scotch")
    with pytest.raises(PartitionError, match="unknown"):
        partition_graph(data, 2, tmp_path / "a", balance=("nodes", "weird"))


def test_registered_partitioner_and_edge_cut(tmp_path):
    # two triangles {0,1,2} and {3,4,5} joined by the edge 2-3 (both directions given)
    ei = np.array(
        [
            [0, 1, 1, 2, 2, 0, 3, 4, 4, 5, 5, 3, 2, 3],
            [1, 0, 2, 1, 0, 2, 4, 3, 5, 4, 3, 5, 3, 2],
        ]
    )
    data = make_data(ei, 6)
    cut, total = edge_cut(ei, np.array([0, 0, 0, 1, 1, 1]), 6)
    assert (cut, total) == (1, 7)

    register_partitioner(
        "halves", lambda d, p, **_: torch.arange(d.num_nodes) * p // d.num_nodes, overwrite=True
    )
    meta = partition_graph(data, 2, tmp_path / "h", method="halves")
    assert meta["edge_cut"] == 1
    assert meta["edge_cut_fraction"] == pytest.approx(1 / 7)
    assert meta["undirected_edges"] == 7
    assert meta["offsets"] == [0, 3, 6]
    with pytest.raises(PartitionError, match="already registered"):
        register_partitioner("halves", lambda d, p, **_: None)

    meta = partition_graph(data, 2, tmp_path / "m", balance=("nodes",))
    assert meta["edge_cut"] == 1
    assert [s["nodes"] for s in meta["parts"]] == [3, 3]


def test_rewrite_removes_stale_parts(tmp_path):
    data = make_data(random_graph(50, 200, seed=2), 50)
    out = tmp_path / "p"
    partition_graph(data, 4, out)
    assert (out / "part3").is_dir()
    meta = write_partitions(data, np.zeros(50, np.int64), out, method="manual", dataset="toy")
    assert meta["num_parts"] == 1 and not (out / "part3").exists()
    part = load_part(out, 0)
    assert part.num_owned == 50
    np.testing.assert_array_equal(part.orig_ids.numpy(), np.arange(50))


def test_a_route_to_one_owner_keeps_the_callers_order_and_equals_the_general_route():
    """Route.build with every id on one owner (a one-rank world) skips the sort and the merges:
    the pieces, the merged rows and the merged segments equal the general route's."""
    from gnnscale.partitioning.routing import Route

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 1000, (300,), generator=g)
    counts = torch.randint(0, 5, (300,), generator=g)
    values = torch.arange(int(counts.sum()))
    for world, owner_rank in ((1, 0), (3, 2)):
        owner = torch.full((300,), owner_rank, dtype=torch.int64)
        fast = Route.build(owner, world)
        slow = Route(torch.argsort(owner, stable=True), torch.bincount(owner, minlength=world))
        assert fast.only == owner_rank and slow.only is None
        assert torch.equal(fast.order, slow.order) and torch.equal(fast.counts, slow.counts)
        for a, b in zip(fast.split(ids), slow.split(ids)):
            assert torch.equal(a, b)
        pieces_c, pieces_v = fast.split(counts), [values if r == owner_rank else values[:0] for r in range(world)]
        for x, y in zip(fast.merge_segments(pieces_c, pieces_v), slow.merge_segments(pieces_c, pieces_v)):
            assert torch.equal(x, y)
        assert torch.equal(fast.merge_rows(fast.split(ids)), slow.merge_rows(slow.split(ids)))
    mixed = Route.build(torch.tensor([0, 1, 0]), 2)
    assert mixed.only is None and mixed.order.tolist() == [0, 2, 1]
