"""benchmarks/compute_split.py (issue 30): the matrix products it times are all of a real step's."""
from __future__ import annotations

import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import compute_split  # noqa: E402
import roofline  # noqa: E402

MODEL = dict(fanouts=(5, 10), batch_size=256, hidden=64, dropout=0.5)


def test_the_clock_times_every_matrix_product_of_a_step(cora_partition):
    from torch.utils.flop_counter import FlopCounterMode

    prev = torch.get_num_threads()
    try:
        r = compute_split.replay(cora_partition(1), threads=1, max_steps=2, **MODEL)
        assert len(r["data"]) == r["steps"] == 1  # Cora's 140 training nodes: one batch of 256
        blocks, x, y = r["data"][0]
        assert x.shape == (blocks[0].num_src, 1433) and y.shape == (blocks[-1].num_dst,)
        counter = FlopCounterMode(display=False, custom_mapping={torch.ops.aten.addmm_: roofline._addmm_flops})
        with counter:
            compute_split.train_step(r["net"], r["opt"], blocks, x, y)
        with compute_split._MatmulClock() as clock:
            compute_split.train_step(r["net"], r["opt"], blocks, x, y)
        assert clock.flops == counter.get_total_flops() > 0
        assert clock.seconds > 0
        from gnnscale.nn.sparse_ops import BlockAdjacency

        original, calls = BlockAdjacency.mm, []
        with compute_split._AggregationClock() as aclock:
            inner = BlockAdjacency.mm
            BlockAdjacency.mm = lambda adj, *a, **k: calls.append(a) or inner(adj, *a, **k)
            try:
                compute_split.train_step(r["net"], r["opt"], blocks, x, y)
            finally:
                BlockAdjacency.mm = inner
        assert BlockAdjacency.mm is original  # put back on exit
        # 2 layers, each aggregating forward and backward (layer 1, 1433 -> 64, aggregates after
        # its linear map: its backward reaches that map's output, not the features)
        assert len(calls) == 4 and aclock.seconds > 0
    finally:
        torch.set_num_threads(prev)


def test_split_parts_add_up_and_name_the_setting(cora_partition, tmp_path):
    prev = torch.get_num_threads()
    try:
        s = compute_split.split(cora_partition(1), threads=1, repeats=2, **MODEL)
    finally:
        torch.set_num_threads(prev)
    assert s["steps"] == s["steps_timed"] == 1 and s["threads"] == 1
    assert len(s["compute_s_runs"]) == len(s["matmul_s_runs"]) == 2
    assert s["compute_s"] == min(s["compute_s_runs"]) and s["matmul_s"] == min(s["matmul_s_runs"])
    assert 0 < s["matmul_s"] and math.isclose(s["rest_s"], s["compute_s"] - s["matmul_s"])
    assert s["aggregation_s"] == min(s["aggregation_s_runs"]) > 0 and len(s["aggregation_s_runs"]) == 2
    assert math.isclose(s["other_s"], s["rest_s"] - s["aggregation_s"])
    assert math.isclose(s["matmul_GFLOP_per_s"], s["matmul_GFLOP"] / s["matmul_s"])
    lines = compute_split.describe(s)
    assert lines[0].startswith("compute split, replayed (1 of 1 steps, 1 threads, best of 2)")


def test_several_parts_are_refused_with_the_fix(cora_partition):
    import pytest

    with pytest.raises(SystemExit, match="has several parts; the split replays the 1-process setting"):
        compute_split.replay(cora_partition(2), threads=1, **MODEL)


def test_paired_bounds_divide_each_run_by_the_measurement_beside_it(cora_partition):
    c = roofline.count(cora_partition(1), threads_per_rank=1, max_steps=1)
    keys = {roofline.shape_key(op) for op in c["counts"][0]["ops"]}
    fast = dict(matmul_GFLOP_per_s={k: 100.0 for k in keys}, matmul_GFLOP_per_s_measured={k: 100.0 for k in keys},
                copy_GBps_per_rank=20.0, copy_GBps_machine=20.0)
    slow = dict(fast, matmul_GFLOP_per_s={k: 50.0 for k in keys}, matmul_GFLOP_per_s_measured={k: 50.0 for k in keys},
                copy_GBps_per_rank=10.0, copy_GBps_machine=10.0)
    b = roofline.bounds(c, fast)["compute"]
    assert math.isclose(roofline.bounds(c, slow)["compute"], 2 * b)  # half the rates: twice the bound
    # repeat 0's gnnscale run follows `fast`, its peer's run precedes `slow`; repeat 1 the same with `slow`, `fast`
    p = roofline.paired(c, [fast, slow, fast], ours=[1.5 * b, 3.0 * b], peer=[4.0 * b, 2.0 * b])
    assert all(math.isclose(x, y) for x, y in zip(p["compute_bound_s"], [b, 2 * b, b], strict=True))
    assert [round(x, 9) for x in p["gnnscale_ratio"]] == [1.5, 1.5]
    assert [round(x, 9) for x in p["peer_ratio"]] == [2.0, 2.0]
    assert math.isclose(p["gnnscale_median"], 1.5) and math.isclose(p["bound_spread"], 2.0)
    assert "gnnscale 1.50, 1.50 (median 1.50), DGL 2.00, 2.00" in roofline.describe_paired(p)


def test_best_against_best_divides_each_side_by_the_strict_bound():
    p = roofline.best_of({"bounds": {"compute": 0.5}}, ours=0.6, peer=1.1)
    assert p == dict(gnnscale_compute_s=0.6, peer_compute_s=1.1, bound_s=0.5, gnnscale_ratio=0.6 / 0.5,
                     peer_ratio=1.1 / 0.5)
    assert roofline.describe_best(p, peer="DistDGL") == (
        "  best epoch's compute (after the warm-up, of all repeats) / bound: gnnscale 0.600 / 0.500 s = 1.20x, "
        "DistDGL 1.100 / 0.500 s = 2.20x")


def test_epochs_per_run_are_8_on_small_graphs_3_on_large_and_at_least_2():
    import subprocess

    import epoch

    assert [epoch.epochs_per_run(n, None) for n in (100_000, 499_999, 500_000, 1_000_000)] == [8, 8, 3, 3]
    assert epoch.epochs_per_run(1_000_000, 5) == 5 and epoch.epochs_per_run(100_000, 2) == 2
    script = os.path.join(os.path.dirname(compute_split.__file__), "epoch.py")
    r = subprocess.run([sys.executable, script, "--epochs", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "--epochs: expected at least 2 (the first is a warm-up and is not timed), found 1" in r.stderr
