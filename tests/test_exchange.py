"""Cross-partition embedding exchange (historical / local modes): real multi-process runs on Cora."""
from __future__ import annotations

import json

import pytest
import torch

from gnnscale.config import check_staleness
from gnnscale.errors import ExchangeError
from gnnscale.partitioning import load_part
from gnnscale.process.launch import launch_local
from gnnscale.training.trainer import TrainConfig, train_worker

from dist_workers import historical_vs_exact


@pytest.fixture(scope="module")
def cora_parts(cora_partition):
    return {parts: cora_partition(parts) for parts in (2, 3)}


def _expected_halo(cora, parts_dir, rank, parts):
    """Remote in-neighbors of the rank's nodes, in original ids, from the raw edge list."""
    orig = [load_part(parts_dir, p, verify=False).orig_ids for p in range(parts)]
    owner = torch.empty(cora.num_nodes, dtype=torch.int64)
    for p, ids in enumerate(orig):
        owner[ids] = p
    src, dst = cora.edge_index
    keep = (owner[dst] == rank) & (owner[src] != rank)
    return torch.unique(src[keep])


@pytest.mark.parametrize("parts,fanouts,layer", [(2, [-1, -1], "sage"), (3, [-1, -1, -1], "sage"), (2, [-1, -1], "gcn")])
def test_historical_full_neighborhoods_equals_exact_after_fill(cora, cora_parts, parts, fanouts, layer):
    results = launch_local(historical_vs_exact, parts, args=(cora_parts[parts], fanouts, layer, 16, 3))
    for res in results:
        # Remote nodes really were cut off and replaced by table rows.
        assert res["leaves"] > 0
        assert torch.allclose(res["historical"], res["exact"], atol=1e-5, rtol=0)
        assert torch.allclose(res["layerwise"], res["exact"], atol=1e-5, rtol=0)
        # Without halo tables, slice by slice: the same logits for every owned node; one feature
        # fetch per round in layer 0 (slices of ~97 in-edges there), one embedding fetch per round in
        # the others (every rank makes as many rounds; in-degrees asked of the owners in each round).
        assert torch.allclose(res["streamed_all"], res["layerwise_all"], atol=1e-5, rtol=0)
        # Its tables memory-mapped on deleted files (table_budget=0): the same logits, bit for bit.
        assert torch.equal(res["mapped_all"], res["streamed_all"])
        rounds = res["streamed_rounds"]
        assert rounds == results[0]["streamed_rounds"]
        assert rounds["feature"] >= res["slices"] > 10 and rounds["embedding"] >= len(fanouts) - 1
        assert rounds.get("degree", 0) == (rounds["feature"] + rounds["embedding"] if layer == "gcn" else 0)
        # The tables hold exactly the halo rows: the remote in-neighbors of owned nodes.
        expected = _expected_halo(cora, cora_parts[parts], res["rank"], parts)
        assert torch.equal(res["halo_orig"], expected)
        assert res["table_rows"] == [expected.numel()] * (len(fanouts) - 1)
        # The refresh rule recomputes boundary rows equal to the fill's (full neighborhoods, same weights).
        assert res["refreshed"] > 0 and res["refresh_err"] < 1e-5
        # Staleness bound 3: a row stamped -1 is 3 steps old at step 2 (allowed), refused at step 3.
        assert res["ok_age"] == 3
        assert res["refused"] and "older than the staleness bound (3 steps" in res["refused"]


@pytest.mark.parametrize("staleness,dtype", [(2, "float32"), (5, "float32"), (9, "float32"), (9, "bfloat16")])
def test_training_never_reads_an_embedding_older_than_the_bound(cora_parts, staleness, dtype, tmp_path):
    metrics = tmp_path / "m.json"
    # Evaluated after the last epoch only: a layer-wise evaluation refills the tables (stamped one
    # step back), which the next step would read at age 1.
    cfg = TrainConfig(epochs=3, fanouts=[5, 5], batch_size=16, hidden=16, lr=0.01, exchange="historical",
                      staleness=staleness, embedding_dtype=dtype, metrics=str(metrics), progress=False, seed=1,
                      eval_every=3)
    launch_local(train_worker, 2, args=(cora_parts[2], cfg))
    res = json.loads(metrics.read_text())
    assert res["exchange"]["mode"] == "historical" and res["exchange"]["halo_rows"] > 0
    for e in res["epochs"]:
        assert e["steps"] >= 4
        assert e["embedding_rows_used"] > 0
        # The recorded ages: a histogram {age: rows read} over every rank.
        ages = {int(a): n for a, n in e["embedding_age_counts"].items()}
        assert sum(ages.values()) == e["embedding_rows_used"]
        assert min(ages) == e["embedding_age_min"] and max(ages) == e["embedding_age_max"]
        assert e["embedding_age_max"] <= staleness
        # A pushed row is stamped with the step that computed it. Within an epoch it lands while the
        # next step runs and is read two steps after it was computed; the last push of an epoch
        # lands at the epoch's end, so the next epoch's first step reads it at age 1 (as step 0
        # reads the fill, stamped one step before it). Never younger: a stamp one step late (the
        # arrival step instead of the computing step) shows as ages 0. (With P > 1 the epoch's last
        # push may carry none of the rows the next step reads: its youngest read is then 2.)
        assert e["embedding_age_min"] == 1 if e["epoch"] == 0 else e["embedding_age_min"] in (1, 2)
        if staleness == 2:  # P = R = 1: every row is recomputed and pushed every step
            assert set(ages) == {1, 2}
            assert ages[2] > ages[1]  # only the epoch's first step reads age 1
        assert e["embedding_bytes"] > 0 and e["sampling_rounds_per_batch"] == 0
        # Every pushed row is (key, row) in the exchange dtype: 16 values of 4 or 2 bytes, plus the key.
        row_bytes = (16 + 2) * 4 if dtype == "float32" else (16 + 4) * 2
        assert e["embedding_bytes"] % row_bytes == 0
        assert e["embedding_rounds_per_batch"] == 1.0  # one push per step
    if staleness >= 5:  # ages really vary up to the bound, not just the 2-step minimum
        assert max(e["embedding_age_max"] for e in res["epochs"]) > 2
    assert res["test_acc"] > 0.6


def test_local_mode_moves_no_sampling_or_feature_bytes(cora_parts, tmp_path):
    metrics = tmp_path / "m.json"
    cfg = TrainConfig(epochs=2, fanouts=[5, 5], batch_size=64, hidden=16, exchange="local", eval_every=0,
                      metrics=str(metrics), progress=False)
    launch_local(train_worker, 2, args=(cora_parts[2], cfg))
    e = json.loads(metrics.read_text())["epochs"][-1]
    got = e["bytes_received_by_category"]
    assert set(got) <= {"gradient", "control"}, got
    assert e["feature_rows_remote_fetched"] == 0 and e["sampling_rounds_per_batch"] == 0


def test_bad_staleness_is_refused():
    with pytest.raises(ExchangeError, match="integer >= 2"):
        check_staleness(1)
    with pytest.raises(ExchangeError, match="integer >= 2"):
        check_staleness(2.5)


def test_historical_pipelined_equals_sequential(cora_parts, tmp_path):
    """The prefetch thread, the push thread and the refresh never race: same losses and weights."""
    res = {}
    for pipe in (False, True):
        metrics = tmp_path / f"m{pipe}.json"
        cfg = TrainConfig(epochs=2, fanouts=[5, 5], batch_size=16, hidden=16, lr=0.01, exchange="historical",
                          staleness=4, pipeline=pipe, eval_every=0, dropout=0.0, metrics=str(metrics), progress=False,
                          sampler_backend="numba")
        launch_local(train_worker, 2, args=(cora_parts[2], cfg))
        res[pipe] = json.loads(metrics.read_text())
    assert [e["loss"] for e in res[True]["epochs"]] == [e["loss"] for e in res[False]["epochs"]]
    assert res[True]["final_weights_sha256"] == res[False]["final_weights_sha256"]


def test_historical_holds_halo_features_and_fetches_none(cora, cora_parts, tmp_path):
    """--halo-features hold: the halo's rows are fetched once; training then fetches no feature,
    and computes exactly what per-step fetching computes (same losses, same final weights)."""
    res = {}
    for mode in ("hold", "fetch"):
        metrics = tmp_path / f"m{mode}.json"
        cfg = TrainConfig(epochs=2, fanouts=[5, 5], batch_size=16, hidden=16, lr=0.01, exchange="historical",
                          staleness=4, halo_features=mode, eval_every=0, dropout=0.0, metrics=str(metrics),
                          progress=False, host_features=False)  # fetched from the owners, not the folder
        launch_local(train_worker, 2, args=(cora_parts[2], cfg))
        res[mode] = json.loads(metrics.read_text())
    hold, fetch = res["hold"], res["fetch"]
    assert [e["loss"] for e in hold["epochs"]] == [e["loss"] for e in fetch["epochs"]]
    assert hold["final_weights_sha256"] == fetch["final_weights_sha256"]
    for e in hold["epochs"]:
        assert e["feature_rows_remote_fetched"] == 0
        assert e["feature_rounds_per_batch"] == 0  # nothing to ask for: no exchange round either
        assert "feature" not in e["bytes_received_by_category"], e["bytes_received_by_category"]
    assert all(e["feature_rows_remote_fetched"] > 0 for e in fetch["epochs"])
    # What is held is exactly rank 0's halo: its remote in-neighbors' rows, 1433 float32 each.
    halo0 = _expected_halo(cora, cora_parts[2], 0, 2).numel()
    assert hold["cache"]["policy"] == "halo" and hold["cache"]["rows"] == halo0
    assert hold["cache"]["bytes"] == halo0 * 1433 * 4
    assert fetch["cache"]["policy"] == "none"
