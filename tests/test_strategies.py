"""Tests of the partitioning strategies, the plug-in hook and bad requests."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gnnscale.errors import PartitionError
from gnnscale.partitioning import (
    assign_parts,
    available_methods,
    integer_edge_weights,
    load_meta,
    load_part,
    partition_graph,
    partition_metrics,
    register_partitioner,
    stream_partition,
    summarize,
    to_undirected_csr,
)
from gnnscale.partitioning.streaming import _water_fill, capacity

METHODS = ["metis", "random", "hash", "range", "ldg", "fennel"]  # kaminpar, kahip: tests/test_multilevel.py
SEEDED = ["random", "ldg", "fennel"]
N, K, P = 2000, 4, 4  # planted graph: N nodes in K communities, partitioned into P parts



def make_data(ei: np.ndarray, n: int, seed: int = 0) -> Data:
    """A Data following the dataset contract (features, labels, disjoint masks)."""
    g = torch.Generator().manual_seed(seed)
    r = torch.rand(n, generator=g)
    data = Data(
        x=torch.randn(n, 3, generator=g),
        y=torch.randint(0, 3, (n,), generator=g),
        edge_index=torch.as_tensor(ei, dtype=torch.int64),
        train_mask=r < 0.3,
        val_mask=(r >= 0.3) & (r < 0.5),
        test_mask=r >= 0.5,
        num_nodes=n,
    )
    data.num_classes = 3
    data.name = "toy"
    return data


def planted_graph(n: int = N, k: int = K, m: int = 20_000, p_in: float = 0.9, seed: int = 0):
    """Directed edges, 90% inside one of ``k`` equal communities, node ids scrambled.

    Returns (edge_index int64 [2, m], community int64 [n]).
    """
    rng = np.random.default_rng(seed)
    comm = np.repeat(np.arange(k), n // k)
    src = rng.integers(0, n, m)
    inside = rng.random(m) < p_in
    dst = np.where(inside, comm[src] * (n // k) + rng.integers(0, n // k, m), rng.integers(0, n, m))
    perm = rng.permutation(n)
    new_comm = np.empty(n, dtype=np.int64)
    new_comm[perm] = comm
    return np.stack([perm[src], perm[dst]]), new_comm


@pytest.fixture(scope="module")
def planted() -> Data:
    ei, _ = planted_graph()
    return make_data(ei, N)


# --------------------------------------------------------------------------------------------
# every strategy: complete, in range, deterministic, balanced
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_every_node_assigned_in_range_and_deterministic(planted, method):
    parts = assign_parts(planted, P, method=method, seed=3)
    assert parts.dtype == np.int64 and parts.shape == (N,)
    assert parts.min() >= 0 and parts.max() < P
    assert np.all(np.bincount(parts, minlength=P) > 0)
    np.testing.assert_array_equal(parts, assign_parts(planted, P, method=method, seed=3))
    if method in SEEDED:
        assert not np.array_equal(parts, assign_parts(planted, P, method=method, seed=4))


def test_exact_balance_of_random_hash_range(planted):
    for method in ("random", "hash", "range"):
        counts = np.bincount(assign_parts(planted, 3, method=method, seed=1), minlength=3)
        assert counts.max() - counts.min() <= 1, (method, counts)
    np.testing.assert_array_equal(assign_parts(planted, 3, method="hash"), np.arange(N) % 3)
    rng_parts = assign_parts(planted, 3, method="range")
    assert np.all(np.diff(rng_parts) >= 0)  # contiguous original-id ranges
    np.testing.assert_array_equal(np.bincount(rng_parts), [667, 667, 666])
    # random: a permutation cut into equal ranges, different for another seed
    assert np.bincount(assign_parts(planted, 4, method="random", seed=9)).tolist() == [500] * 4


@pytest.mark.parametrize("method", ["ldg", "fennel"])
@pytest.mark.parametrize("slack", [0.0, 0.05, 0.3])
def test_streaming_capacity_is_never_exceeded(planted, method, slack):
    parts = assign_parts(planted, P, method=method, seed=0, options={"slack": slack})
    counts = np.bincount(parts, minlength=P)
    cap = capacity(N, P, slack)
    assert cap == max(N // P, int((1 + slack) * N / P))
    assert counts.max() <= cap, counts
    if slack == 0.0:
        assert counts.tolist() == [N // P] * P


def test_streaming_slack_defaults_to_imbalance(planted):
    a = assign_parts(planted, P, method="fennel", imbalance=0.2, seed=0)
    b = assign_parts(planted, P, method="fennel", seed=0, options={"slack": 0.2})
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("method", ["ldg", "fennel"])
def test_streaming_cuts_fewer_edges_than_random(planted, method):
    cut = {
        m: partition_metrics(planted, assign_parts(planted, P, method=m, seed=0), P)[
            "edge_cut_fraction"
        ]
        for m in ("random", method)
    }
    print(cut)
    assert cut["random"] > 0.7  # 3/4 of the edges, as expected for 4 random parts
    assert cut[method] < 0.6 * cut["random"]
    # restreaming (several passes) recovers the planted communities almost exactly
    again = assign_parts(planted, P, method=method, seed=0, options={"passes": 4})
    assert partition_metrics(planted, again, P)["edge_cut_fraction"] < 0.12


def test_stream_partition_chunk_size_one_and_options():
    ei, comm = planted_graph(n=400, k=4, m=4000, seed=2)
    indptr, indices = to_undirected_csr(ei, 400)
    a = stream_partition(indptr, indices, 4, kind="ldg", chunk_size=1, seed=0)
    assert np.bincount(a, minlength=4).max() <= capacity(400, 4, 0.05)
    b = stream_partition(indptr, indices.astype(np.int32), 4, kind="ldg", chunk_size=1, seed=0)
    np.testing.assert_array_equal(a, b)  # int32 indices give the same result
    with pytest.raises(PartitionError, match="streaming kind"):
        stream_partition(indptr, indices, 4, kind="greedy")
    with pytest.raises(PartitionError, match="slack >= 0"):
        stream_partition(indptr, indices, 4, slack=-0.1)
    with pytest.raises(PartitionError, match="gamma > 1"):
        stream_partition(indptr, indices, 4, gamma=1.0)
    with pytest.raises(PartitionError, match="chunk_size"):
        stream_partition(indptr, indices, 4, chunk_size=0)
    with pytest.raises(PartitionError, match="passes >= 1"):
        stream_partition(indptr, indices, 4, passes=0)


def test_water_fill_evens_sizes():
    sizes = np.array([10, 3, 7, 3])
    alloc = _water_fill(sizes, np.full(4, 100), 9)
    assert alloc.sum() == 9
    assert sorted((sizes + alloc).tolist()) == [7, 7, 8, 10]
    # a full part takes nothing; the rest is spread
    alloc = _water_fill(np.array([0, 0, 0]), np.array([1, 5, 5]), 9)
    assert alloc.tolist()[0] <= 1 and alloc.sum() == 9 and alloc.max() - alloc[1:].min() <= 1


def test_metis_balances_nodes_and_train(planted):
    parts = assign_parts(planted, P, method="metis", balance=("nodes", "train"), seed=0)
    m = partition_metrics(planted, parts, P)
    assert m["balance"]["nodes"] <= 1.06
    assert m["balance"]["train"] <= 1.10
    assert m["edge_cut_fraction"] < 0.15  # finds the planted communities


def test_metis_schemes(planted):
    """auto = recursive bisection for 2+ constraints (tolerance split over levels), else k-way."""
    got = {}
    for scheme in ("kway", "recursive", "auto"):
        parts = assign_parts(planted, P, method="metis", seed=0, options={"scheme": scheme})
        m = partition_metrics(planted, parts, P)
        assert m["balance"]["nodes"] <= 1.05 + 1e-9 and m["balance"]["train"] <= 1.10, scheme
        got[scheme] = parts
    np.testing.assert_array_equal(got["auto"], got["recursive"])
    one = assign_parts(planted, P, method="metis", balance=("nodes",), seed=0)
    kway = assign_parts(
        planted, P, method="metis", balance=("nodes",), seed=0, options={"scheme": "kway"}
    )
    np.testing.assert_array_equal(one, kway)
    with pytest.raises(PartitionError, match=r"METIS scheme from \['auto', 'kway', 'recursive'\]"):
        assign_parts(planted, P, method="metis", options={"scheme": "multilevel"})
    with pytest.raises(PartitionError, match="integer ncuts >= 1"):
        assign_parts(planted, P, method="metis", options={"ncuts": 0})


def test_metis_edges_constraint_balances_in_degree():
    # a star-heavy graph: node i < 40 gets many in-edges, the rest few
    rng = np.random.default_rng(0)
    n = 1000
    dst = np.concatenate([rng.integers(0, 40, 8000), rng.integers(40, n, 2000)])
    src = rng.integers(0, n, dst.shape[0])
    keep = src != dst
    data = make_data(np.stack([src[keep], dst[keep]]), n)
    nodes_only = assign_parts(data, 4, method="metis", balance=("nodes",), seed=0)
    by_edges = assign_parts(data, 4, method="metis", balance=("edges",), seed=0)
    bal_nodes_only = partition_metrics(data, nodes_only, 4)["balance"]["in_edges"]
    bal_edges = partition_metrics(data, by_edges, 4)["balance"]["in_edges"]
    print("in-edge balance: nodes-only", bal_nodes_only, "edges", bal_edges)
    assert bal_edges <= 1.10
    assert bal_edges < bal_nodes_only


def test_metis_uses_edge_weights():
    # cycle 0..7; light edges 1-2 and 5-6: the balanced 2-way cut of least weight cuts those
    n = 8
    src = np.arange(n)
    dst = (src + 1) % n
    w = np.full(n, 100.0)
    w[[1, 5]] = 1.0
    data = make_data(np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])]), n)
    data.edge_weight = torch.from_numpy(np.concatenate([w, w]))
    parts = assign_parts(data, 2, method="metis", balance=("nodes",), imbalance=0.01, seed=0)
    assert len(set(parts[[2, 3, 4, 5]].tolist())) == 1
    assert len(set(parts[[6, 7, 0, 1]].tolist())) == 1
    assert parts[2] != parts[6]


def test_integer_edge_weights():
    np.testing.assert_array_equal(integer_edge_weights(np.array([0.0, 2.0, 7.0])), [1, 2, 7])
    np.testing.assert_array_equal(integer_edge_weights(np.array([0.001, 0.5, 1.0])), [1, 500, 1000])
    with pytest.raises(PartitionError, match="non-negative"):
        integer_edge_weights(np.array([1.0, -1.0]))
    with pytest.raises(PartitionError, match="NaN"):
        integer_edge_weights(np.array([1.0, np.nan]))


def test_weighted_streaming_follows_heavy_edges():
    # two 4-cliques of heavy edges (10) with every cross pair joined by a light edge (0.1):
    # weighted Fennel keeps the cliques apart (a light edge does not beat the load penalty),
    # unweighted Fennel sees 3 vs 4 neighbors and mixes them
    a = np.array([(i, j) for i in range(4) for j in range(4) if i != j])
    cross = np.array([(i, j) for i in range(4) for j in range(4, 8)])
    ei = np.concatenate([a, a + 4, cross, cross[:, ::-1]]).T
    data = make_data(ei, 8)
    opts = {"slack": 0.0, "chunk_size": 1}
    for seed in range(5):
        data.edge_weight = torch.from_numpy(np.concatenate([np.full(24, 10.0), np.full(32, 0.1)]))
        parts = assign_parts(data, 2, method="fennel", options=opts, seed=seed)
        assert len(set(parts[:4].tolist())) == 1 and len(set(parts[4:].tolist())) == 1
        data.edge_weight = None
        parts = assign_parts(data, 2, method="fennel", options=opts, seed=seed)
        assert len(set(parts[:4].tolist())) == 2


# --------------------------------------------------------------------------------------------
# partition_graph end to end: meta.json carries the metrics and the cost
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["fennel", "range"])
def test_partition_graph_stores_metrics_and_cost(planted, tmp_path, method):
    out = tmp_path / method
    meta = partition_graph(planted, P, out, method=method, seed=0, options={})
    assert meta == load_meta(out)
    orig = np.concatenate([load_part(out, p).orig_ids.numpy() for p in range(P)])
    parts = np.repeat(np.arange(P), np.diff(meta["offsets"]))
    by_orig = np.empty(N, dtype=np.int64)
    by_orig[orig] = parts
    m = partition_metrics(planted, by_orig, P)
    for key in ("edge_cut", "edge_cut_fraction", "undirected_edges", "halo"):
        assert meta[key] == m[key], key
    assert meta["balance"] == pytest.approx(m["balance"])
    assert meta["replication_factor"] == pytest.approx(m["replication_factor"])
    assert isinstance(meta["edge_cut"], int)
    assert meta["halo"] == [s["remote_sources"] for s in meta["parts"]]
    for key in ("partition_seconds", "write_seconds", "total_seconds"):
        assert meta[key] >= 0
    assert meta["peak_rss_bytes"] > 10_000_000 and meta["partition_peak_rss_bytes"] > 0
    s = summarize(out)
    for key in ("edge_cut", "edge_cut_fraction", "balance", "halo", "replication_factor"):
        assert s[key] == meta[key], key
    json.dumps(s)


def test_summarize_converts_old_edge_cut_dict(planted, tmp_path):
    out = tmp_path / "old"
    partition_graph(planted, 2, out, method="range")
    meta = json.loads((out / "meta.json").read_text())
    cut = meta["edge_cut"]
    for key in ("balance", "halo", "edge_cut_fraction", "undirected_edges"):
        meta.pop(key)
    meta["edge_cut"] = {"count": cut, "fraction": 0.25, "undirected_edges": 4}
    (out / "meta.json").write_text(json.dumps(meta))
    s = summarize(out)
    assert s["edge_cut"] == cut and s["edge_cut_fraction"] == 0.25
    assert s["balance"]["nodes"] == 1.0 and len(s["halo"]) == 2


# --------------------------------------------------------------------------------------------
# plug-ins and the registry
# --------------------------------------------------------------------------------------------

PLUGIN_SOURCE = textwrap.dedent(
    """
    import numpy as np
    import torch

    def halves(data, num_parts, *, shift=0):
        n = data.num_nodes
        return (torch.arange(n) * num_parts // n + shift) % num_parts

    def with_seed(data, num_parts, seed, **options):
        return torch.full((data.num_nodes,), seed % num_parts, dtype=torch.long)

    def wrong_shape(data, num_parts):
        return torch.zeros(data.num_nodes + 1, dtype=torch.long)

    def as_float(data, num_parts):
        return torch.zeros(data.num_nodes)

    def out_of_range(data, num_parts):
        return torch.full((data.num_nodes,), num_parts, dtype=torch.long)

    def nothing(data, num_parts):
        return None

    NOT_CALLABLE = 3
    """
)


@pytest.fixture()
def plugin(tmp_path, monkeypatch) -> str:
    (tmp_path / "gs_plugin_mod.py").write_text(PLUGIN_SOURCE)
    (tmp_path / "gs_broken_mod.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "gs_plugin_mod"


def test_plugin_by_module_path(planted, plugin, tmp_path):
    parts = assign_parts(planted, 2, method=f"{plugin}:halves")
    np.testing.assert_array_equal(parts, np.arange(N) * 2 // N)
    shifted = assign_parts(planted, 2, method=f"{plugin}:halves", options={"shift": 1})
    np.testing.assert_array_equal(shifted, 1 - parts)
    # **options receives balance/imbalance/seed too
    assert set(assign_parts(planted, 3, method=f"{plugin}:with_seed", seed=5).tolist()) == {2}
    meta = partition_graph(planted, 2, tmp_path / "pl", method=f"{plugin}:halves")
    assert meta["method"] == f"{plugin}:halves" and meta["offsets"] == [0, N // 2, N]
    with pytest.raises(PartitionError, match=r"halves.*among \['shift'\].*unknown \['bogus'\]"):
        assign_parts(planted, 2, method=f"{plugin}:halves", options={"bogus": 1})


def test_register_partitioner_by_name(planted):
    register_partitioner(
        "evens_odds", lambda d, p, **_: torch.arange(d.num_nodes) % 2, overwrite=True
    )
    assert "evens_odds" in available_methods()
    assert available_methods()[:6] == METHODS
    np.testing.assert_array_equal(assign_parts(planted, 2, method="evens_odds"), np.arange(N) % 2)
    with pytest.raises(PartitionError, match="without ':'"):
        register_partitioner("a:b", lambda d, p: None)


@pytest.mark.parametrize(
    "fn, pattern",
    [
        ("wrong_shape", r"wrong_shape.*shape \[2000\].*found shape \[2001\]"),
        ("as_float", r"as_float.*integer dtype.*found dtype float32"),
        ("out_of_range", r"out_of_range.*ids in \[0, 2\), found ids in \[2, 2\]"),
        ("nothing", r"nothing.*LongTensor or int array"),
    ],
)
def test_plugin_bad_outputs(planted, plugin, fn, pattern, tmp_path):
    with pytest.raises(PartitionError, match=pattern):
        partition_graph(planted, 2, tmp_path / "x", method=f"{plugin}:{fn}")


def test_plugin_bad_paths(planted, plugin):
    with pytest.raises(PartitionError, match="importable module 'no_such_module_xyz'"):
        assign_parts(planted, 2, method="no_such_module_xyz:fn")
    with pytest.raises(PartitionError, match=r"define 'missing'.*has: \[.*'halves'"):
        assign_parts(planted, 2, method=f"{plugin}:missing")
    with pytest.raises(PartitionError, match="found a int"):
        assign_parts(planted, 2, method=f"{plugin}:NOT_CALLABLE")
    with pytest.raises(PartitionError, match="RuntimeError: boom at import"):
        assign_parts(planted, 2, method="gs_broken_mod:fn")
    with pytest.raises(PartitionError, match="'module.path:function'"):
        assign_parts(planted, 2, method=":fn")


# --------------------------------------------------------------------------------------------
# bad requests
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_more_parts_than_nodes(method, tmp_path):
    data = make_data(np.array([[0, 1, 2], [1, 2, 0]]), 3)
    with pytest.raises(PartitionError, match=r"num_parts <= number of nodes \(3\).*parts=4"):
        partition_graph(data, 4, tmp_path / "a", method=method)
    with pytest.raises(PartitionError, match="found num_parts=4"):
        assign_parts(data, 4, method=method)


def test_unknown_method_lists_the_known_ones(planted, tmp_path):
    with pytest.raises(PartitionError) as err:
        partition_graph(planted, 2, tmp_path / "a", method="scotch")
    msg = str(err.value)
    assert "'scotch'" in msg and "module.path:function" in msg
    for m in METHODS:
        assert f"'{m}'" in msg
    assert not (tmp_path / "a").exists()  # nothing written


def test_option_clashes_and_unknown_options(planted):
    with pytest.raises(PartitionError, match=r"\['seed'\] as partition_graph arguments"):
        assign_parts(planted, 2, method="fennel", options={"seed": 1})
    with pytest.raises(PartitionError, match=r"'random'.*unknown \['slack'\]"):
        assign_parts(planted, 2, method="random", options={"slack": 0.1})
