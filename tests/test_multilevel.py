"""KaMinPar and KaHIP as strategies (issue 47 item 1): valid assignments, balance within the requested
imbalance, a cut on Cora far below random's and near METIS's, the CSR entry points, the ParHIP file,
the one-line error when a package is absent, and bench-partition's NAME?KEY=VALUE specs."""
from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
import pytest

from gnnscale.errors import PartitionError
from gnnscale.partitioning import assign_parts, edge_cut, to_undirected_csr
from gnnscale.partitioning.bench import format_table, run_bench, split_method
from gnnscale.partitioning.multilevel import kahip_assign, kaminpar_assign, single_node_weight, write_parhip

KAMINPAR = pytest.mark.skipif(importlib.util.find_spec("kaminpar") is None,
                              reason="kaminpar not installed (pip install 'gnnscale[kaminpar]')")
KAHIP = pytest.mark.skipif(importlib.util.find_spec("kahip") is None,
                           reason="kahip not installed (pip install 'gnnscale[kahip]')")
CASES = [pytest.param("kaminpar", {}, marks=KAMINPAR), pytest.param("kaminpar", {"context": "fast"}, marks=KAMINPAR),
         pytest.param("kaminpar", {"context": "terapart"}, marks=KAMINPAR),
         pytest.param("kahip", {}, marks=KAHIP), pytest.param("kahip", {"mode": "fast"}, marks=KAHIP)]
P = 4


def _cut(data, parts) -> int:
    return edge_cut(data.edge_index, parts, data.num_nodes)[0]


@pytest.mark.parametrize("method,options", CASES)
def test_valid_assignment_balanced_within_the_imbalance(cora, method, options):
    n = cora.num_nodes
    train = cora.train_mask.numpy()
    for balance, weight in ((("nodes",), np.ones(n, dtype=np.int64)), (("train",), train.astype(np.int64))):
        parts = assign_parts(cora, P, method=method, balance=balance, imbalance=0.03, options=options)
        assert parts.shape == (n,) and parts.dtype == np.int64 and set(np.unique(parts)) == set(range(P))
        per_part = np.bincount(parts, weights=weight, minlength=P)
        # both keep every part's weight within (1 + eps) * ceil(total / P)
        assert per_part.max() <= 1.03 * math.ceil(weight.sum() / P), (balance, per_part)


@pytest.mark.parametrize("method,options", CASES)
def test_cut_on_cora_far_below_random_and_near_metis(cora, method, options):
    cuts = {m: _cut(cora, assign_parts(cora, P, method=m, balance=("nodes",), options=o))
            for m, o in (("random", {}), ("metis", {}), (method, options))}
    # measured: random 3924 of 5278; METIS 364; KaMinPar 294-312; KaHIP 337-356
    assert cuts[method] < 0.15 * cuts["random"] and cuts[method] <= 1.25 * cuts["metis"], cuts


@pytest.mark.parametrize("method,options", CASES)
def test_same_seed_same_assignment(cora, method, options):
    """The same seed gives the same parts, but for KaMinPar 3.7.3's compressed (terapart) presets:
    in one process they do not repeat after a few calls (Cora, 4 parts, seed 3, six calls: cuts
    282 282 292 282 292 292; CI saw it once under load), so there the parts are only checked valid
    and of about the same cut."""
    a = assign_parts(cora, P, method=method, seed=3, options=options)
    b = assign_parts(cora, P, method=method, seed=3, options=options)
    if options.get("context", "").startswith("terapart"):
        assert set(np.unique(a)) == set(np.unique(b)) == set(range(P))
        assert abs(_cut(cora, a) - _cut(cora, b)) <= 0.1 * _cut(cora, a)
    else:
        assert np.array_equal(a, b)


def test_single_node_weight_scales_each_constraint_to_n():
    cols = np.zeros((10, 2), dtype=np.int64)
    cols[:, 0] = 1
    cols[[1, 4], 1] = 1  # 2 training nodes: scale round(10 / 2) = 5
    assert single_node_weight(cols[:, :1], 10) is None  # nodes alone: unit weights
    assert single_node_weight(cols[:, 1:], 10).tolist() == cols[:, 1].tolist()
    assert single_node_weight(cols, 10).tolist() == [1, 6, 1, 1, 6, 1, 1, 1, 1, 1]
    assert single_node_weight(None, 10) is None
    with pytest.raises(PartitionError, match="--balance nodes"):
        single_node_weight(np.zeros((10, 1), dtype=np.int64), 10)


def test_parhip_file_layout(tmp_path):
    indptr = np.array([0, 2, 3, 4])
    indices = np.array([1, 2, 0, 0])
    size = write_parhip(tmp_path / "g", indptr, indices, node_weights=np.array([1, 0, 2]),
                        edge_weights=np.array([5, 6, 5, 6]))
    raw = (tmp_path / "g").read_bytes()
    head = np.frombuffer(raw[:24], dtype=np.uint64)
    # version bits: edge weights (0), node weights (0), 64-bit offsets (0), 32-bit ids/weights (1, 1, 1)
    assert head.tolist() == [0b111000, 3, 4] and size == len(raw) == 24 + 8 * 4 + 4 * 4 + 4 * 3 + 4 * 4
    offsets = np.frombuffer(raw[24:56], dtype=np.uint64)
    assert offsets.tolist() == [56, 64, 68, 72]  # bytes from the start of the file
    rest = np.frombuffer(raw[56:], dtype=np.int32)
    assert rest.tolist() == [1, 2, 0, 0, 2, 0, 4, 5, 6, 5, 6]  # weights totalling N doubled (see write_parhip)


@KAMINPAR
def test_kaminpar_reads_the_parhip_file_back(tmp_path):
    import kaminpar

    indptr = np.array([0, 2, 3, 4])
    indices = np.array([1, 2, 0, 0])
    write_parhip(tmp_path / "g", indptr, indices, node_weights=np.array([1, 0, 2]), edge_weights=np.array([5, 6, 5, 6]))
    g = kaminpar.load_graph(str(tmp_path / "g"), kaminpar.GraphFileFormat.PARHIP)
    # weights totalling N are written doubled: KaMinPar would read them as unit weights
    assert (g.n(), g.m()) == (3, 4) and [g.node_weight(v) for v in range(3)] == [2, 0, 4]
    assert g.neighbors(0) == [(1, 5), (2, 6)] and g.neighbors(2) == [(0, 6)]
    write_parhip(tmp_path / "g", indptr, indices, node_weights=np.array([3, 0, 2]))
    g = kaminpar.load_graph(str(tmp_path / "g"), kaminpar.GraphFileFormat.PARHIP)
    assert [g.node_weight(v) for v in range(3)] == [3, 0, 2] and not g.is_edge_weighted()


@KAMINPAR
@KAHIP
def test_csr_entry_points_without_a_data(cora):
    """The out-of-core pipeline calls these on arrays it built (no torch_geometric Data)."""
    indptr, indices = to_undirected_csr(cora.edge_index, cora.num_nodes)
    for assign, opts in ((kaminpar_assign, {"context": "fast"}), (kahip_assign, {"mode": "fast"})):
        parts = assign(indptr, indices, P, imbalance=0.03, **opts)
        assert parts.shape == (cora.num_nodes,) and np.bincount(parts).max() <= 1.03 * math.ceil(cora.num_nodes / P)
        assert _cut(cora, parts) < 0.15 * _cut(cora, assign_parts(cora, P, method="random"))
        assert np.array_equal(assign(indptr, indices, 1, **opts), np.zeros(cora.num_nodes, dtype=np.int64))


@pytest.mark.parametrize("name", ["kaminpar", "kahip"])
def test_absent_package_is_one_line_naming_the_install(cora, monkeypatch, name):
    monkeypatch.setitem(sys.modules, name, None)  # import kaminpar -> ImportError
    with pytest.raises(PartitionError) as err:
        assign_parts(cora, P, method=name)
    text = str(err.value)
    assert "\n" not in text and f"pip install 'gnnscale[{name}]'" in text and f"--method {name}" in text


@KAMINPAR
@KAHIP
def test_bad_preset_is_one_line(cora):
    with pytest.raises(PartitionError, match="expected a KaMinPar context from .* found 'quick'"):
        assign_parts(cora, P, method="kaminpar", options={"context": "quick"})
    with pytest.raises(PartitionError, match="expected a KaHIP mode from .* found 'best'"):
        assign_parts(cora, P, method="kahip", options={"mode": "best"})
    with pytest.raises(PartitionError, match="expected options of method 'kahip'"):
        assign_parts(cora, P, method="kahip", options={"context": "fast"})


def test_method_specs_carry_options():
    assert split_method("kaminpar?context=fast&threads=2") == ("kaminpar", {"context": "fast", "threads": 2})
    assert split_method("metis") == ("metis", {})
    assert split_method("kahip?mode=eco&edge_weight=false") == ("kahip", {"mode": "eco", "edge_weight": False})
    with pytest.raises(PartitionError, match="NAME\\?KEY=VALUE"):
        split_method("kaminpar?fast")


@KAMINPAR
@KAHIP
def test_bench_rows_for_presets(cora):
    """bench-partition runs each preset in its own process: cut, balance, own peak memory per row."""
    specs = ["random", "kaminpar?context=fast", "kahip?mode=fast"]
    rows = run_bench(cora, [P], specs, fanouts=[5], batch_size=512, balance=("nodes",), imbalance=0.03)
    by = {r["method"]: r for r in rows}
    assert list(by) == specs and all(r["memory_measured"] == "own process" for r in rows)
    for spec in specs[1:]:
        assert by[spec]["edge_cut"] < 0.15 * by["random"]["edge_cut"]
        assert by[spec]["balance"]["nodes"] <= 1.03 * math.ceil(cora.num_nodes / P) / (cora.num_nodes / P)
        assert by[spec]["peak_rss_growth_bytes"] >= 0
    table = format_table(rows)
    assert "kaminpar?context=fast" in table and len({len(line) for line in table.splitlines()}) == 1


def test_kahip_auto_mode_follows_size_and_degree_spread(monkeypatch):
    """mode=auto (issue 54 item 12): strong on small graphs, eco above the size limit, the *social
    presets where the degree spread (std / mean) is at least 2 (Squirrel 2.12; Cora 1.34)."""
    from gnnscale.partitioning import multilevel
    from gnnscale.partitioning.multilevel import choose_kahip_mode

    regular = np.arange(0, 4 * 101, 4)  # 100 nodes of degree 4: spread 0
    star = np.concatenate([[0, 990], 990 + np.arange(1, 991)])  # a hub and 990 leaves: spread ~22
    assert choose_kahip_mode(regular)[0] == "strong"
    assert choose_kahip_mode(star)[0] == "strongsocial"
    monkeypatch.setattr(multilevel, "KAHIP_STRONG_MAX_ADJACENCY", 100)
    mode, why = choose_kahip_mode(star)
    assert mode == "ecosocial" and "1,980 adjacency entries > 100" in why and "degree spread" in why
    assert choose_kahip_mode(regular)[0] == "eco"


@KAHIP
def test_kahip_default_cuts_cora_no_worse_than_metis(cora, caplog):
    """KaHIP's old default (eco) cut Squirrel 2.3x METIS; auto runs strong on graphs this small
    (measured, 2/4/8 parts, balance nodes+train: Cora 165/265/434 against METIS 177/308/534)."""
    import logging

    with caplog.at_level(logging.INFO, logger="gnnscale.partitioning.multilevel"):
        cuts = {m: _cut(cora, assign_parts(cora, P, method=m)) for m in ("metis", "kahip")}
    assert cuts["kahip"] <= cuts["metis"], cuts
    assert any("KaHIP mode strong (" in r.getMessage() for r in caplog.records)


@KAHIP
def test_bench_shows_every_kahip_preset(cora):
    from gnnscale.partitioning.bench import expand_presets
    from gnnscale.partitioning.multilevel import KAHIP_MODES

    assert expand_presets(["metis", "kahip?mode=all&edge_weight=false"]) == \
        ["metis"] + [f"kahip?mode={m}&edge_weight=false" for m in KAHIP_MODES]
    rows = run_bench(cora, [2], ["metis", "kahip?mode=all"], fanouts=[5], batch_size=512, isolate=False)
    assert [r["method"] for r in rows] == ["metis"] + [f"kahip?mode={m}" for m in KAHIP_MODES]
    assert all(r["edge_cut"] > 0 for r in rows)
