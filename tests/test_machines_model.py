"""The model of many machines (gnnscale/planning/machines.py, issue 47 item 5): its arithmetic by hand."""
from __future__ import annotations

import math

import pytest

from gnnscale.planning.machines import (GraphShape, Link, MeasuredRun, measured_from_metrics, predict_epoch,
                                        remote_share, sampled_rows)

RUN = MeasuredRun(parts=2, steps=10, batch_size=1000, train_nodes=20_000, cpu_seconds_per_step=0.5,
                  input_rows_per_step=50_000, remote_share=0.4, sample_bytes_per_step=1e6, model_bytes=1e6,
                  exchanges_per_step=7, feature_dim=100, cpu_share=1.0, fanouts=(10, 5), num_nodes=100_000,
                  avg_degree=20.0)
SAME = GraphShape("same", 100_000, 20_000, 100)


def test_link_seconds():
    assert Link(8.0, 1.0).seconds(1e9, 3) == pytest.approx(3e-3 + 1.0)


def test_prediction_by_hand():
    p = predict_epoch(RUN, SAME, 4, Link(10.0, 0.05), cpu_share=0.5)
    kappa = 0.4 / 0.5  # measured share over a random cut's at 2 parts
    q = kappa * 3 / 4
    assert RUN.kappa == pytest.approx(0.8) and p["remote_share"] == pytest.approx(q) == pytest.approx(remote_share(0.8, 4))
    assert p["steps"] == math.ceil(20_000 / 4000) == 5
    by = p["bytes_per_step"]
    assert by["feature"] == pytest.approx(50_000 * q * 100 * 4) and by["ids"] == pytest.approx(50_000 * q * 8)
    assert by["sample"] == pytest.approx(1e6 * q / 0.4) and by["gradient"] == pytest.approx(2 * 3 / 4 * 1e6)
    net = 7 * 0.05e-3 + sum(by[k] for k in ("feature", "ids", "sample", "gradient")) * 8 / 10e9
    assert p["network_seconds_per_step"] == pytest.approx(net)
    assert p["cpu_seconds_per_step"] == pytest.approx(0.5 / 0.5)  # half a core each: twice the CPU seconds
    assert p["epoch_seconds"] == pytest.approx(5 * (1.0 + net))


def test_one_part_has_no_network_and_the_random_cut_shares():
    assert predict_epoch(RUN, SAME, 1, Link(1.0))["network_seconds_per_step"] == 0.0
    rand = GraphShape("random", 100_000, 20_000, 100, kappa=1.0)
    assert predict_epoch(RUN, rand, 8, Link(10.0))["remote_share"] == pytest.approx(7 / 8)
    assert remote_share(1.5, 4) == 1.0  # capped


def test_rows_grow_with_the_graph_until_draws_stop_colliding():
    draws = 1000 * (1 + 10 + 50)
    assert sampled_rows(100_000, 1000, (10, 5), 20.0) == pytest.approx(100_000 * (1 - math.exp(-draws / 100_000)))
    assert sampled_rows(10**12, 1000, (10, 5), 20.0) == pytest.approx(draws, rel=1e-6)
    assert sampled_rows(10**12, 1000, (10, 5), 4.0) == pytest.approx(1000 * (1 + 4 + 16), rel=1e-6)  # capped at degree
    big = GraphShape("big", 10**9, 20_000, 100, avg_degree=20.0)
    p = predict_epoch(RUN, big, 2, Link(10.0))
    grow = sampled_rows(10**9, 1000, (10, 5), 20.0) / sampled_rows(100_000, 1000, (10, 5), 20.0)
    assert p["input_rows_per_step"] == pytest.approx(50_000 * grow)
    assert p["cpu_seconds_per_step"] == pytest.approx(0.5 * grow)


def test_measured_from_metrics_reads_a_metrics_file():
    rec = {"steps": 10, "epoch_seconds": 9.0,
           "stage_seconds_max_over_ranks": {"sample": 1.0, "fetch": 3.0, "compute": 4.0, "grad_sync": 1.0, "wait": 5.0},
           "modelled_network_by_rank": [{"seconds": 2.0, "exchanges": 70, "bytes": 1}, {"seconds": 1.5, "exchanges": 70,
                                                                                       "bytes": 1}],
           "bytes_received_by_category": {"feature": 8_000_000, "feature_request": 160_000, "sample_request": 1000,
                                          "sample_response": 9000, "gradient": 4_000_000},
           "feature_rows_local": 60_000, "feature_rows_remote_fetched": 20_000}
    run = measured_from_metrics({"config": {"batch_size": 512, "fanouts": [10, 5]}, "num_parts": 2, "epochs": [rec]},
                                train_nodes=10_000, feature_dim=100, cores=2, num_nodes=5000, avg_degree=8.0)
    assert run.cpu_seconds_per_step == pytest.approx((9.0 - 2.0) / 10)  # the epoch less the slowest rank's link
    assert run.exchanges_per_step == 7 and run.input_rows_per_step == 4000 and run.remote_share == 0.25
    assert run.sample_bytes_per_step == 500 and run.model_bytes == pytest.approx(4e6 / 20 / 1.0)
    assert run.fanouts == (10, 5) and run.cpu_share == 1.0 and run.epoch_seconds == 9.0
    # epoch=None: the median epoch after the first (which compiles)
    recs = [dict(rec, epoch_seconds=s) for s in (30.0, 9.0, 11.0, 10.0)]
    steady = measured_from_metrics({"config": {"batch_size": 512, "fanouts": [10, 5]}, "num_parts": 2, "epochs": recs},
                                   train_nodes=10_000, feature_dim=100, epoch=None)
    assert steady.epoch_seconds == 10.0 and steady.cpu_seconds_per_step == pytest.approx((10.0 - 2.0) / 10)
