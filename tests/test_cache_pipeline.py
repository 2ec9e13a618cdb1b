"""Feature cache, pipelined training and per-category byte accounting (issue 5)."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gnnscale.data.feature_cache import CacheContext, CacheError, CacheSize, FeatureCache, choose_cache_ids
from gnnscale.partitioning import load_part, write_partitions
from gnnscale.process.launch import launch_local

from dist_workers import fetch_with_cache
from test_cli import run_cli


def test_cache_lookup_matches_a_reference():
    g = torch.Generator().manual_seed(0)
    cached = torch.randperm(1000, generator=g)[:200]
    rows = torch.randn(200, 3, generator=g)
    cache = FeatureCache(cached, rows)
    query = torch.randint(0, 1000, (500,), generator=g)
    hit, got = cache.lookup(query)
    ref = {int(i): rows[k] for k, i in enumerate(cached)}
    assert hit.tolist() == [int(q) in ref for q in query]
    expect = torch.stack([ref[int(q)] for q in query if int(q) in ref])
    assert torch.equal(got, expect)
    assert cache.stats == {"lookups": 500, "hits": int(hit.sum())}


def _path_graph(tmp_path, n=8, feat=4, parts=2):
    src = torch.arange(n - 1)
    ei = torch.cat([torch.stack([src, src + 1]), torch.stack([src + 1, src])], 1)
    x = torch.arange(n * feat, dtype=torch.float32).view(n, feat)
    data = Data(x=x, y=torch.zeros(n, dtype=torch.int64), edge_index=ei, train_mask=torch.ones(n, dtype=torch.bool),
                val_mask=torch.zeros(n, dtype=torch.bool), test_mask=torch.zeros(n, dtype=torch.bool))
    data.num_classes = 1
    owner = np.repeat(np.arange(parts), n // parts)
    write_partitions(data, owner, tmp_path / "p", method="manual", dataset="path")
    return str(tmp_path / "p"), x


def test_cache_hits_misses_and_bytes_per_category(tmp_path):
    parts_dir, x = _path_graph(tmp_path)  # part 0: 0..3, part 1: 4..7; 4 float32 features = 16 B/row
    ids = [[0, 5, 6, 7, 4], [1, 2, 4]]
    cache = [[5, 6], [2]]
    r0, r1 = launch_local(fetch_with_cache, 2, args=(parts_dir, ids, cache, 10.0))
    for r, res in ((0, r0), (1, r1)):
        assert torch.equal(res["x"], x[ids[r]])  # right rows, cache or not
        assert res["cache_rows"] == len(cache[r])
    # rank 0: 5, 6 from the cache, 7 and 4 fetched; rank 1: 2 from the cache, 1 fetched.
    # distinct_rows: the distinct ids fetched (an epoch's byte floor), here every row fetched once
    assert r0["store"] == {"local_rows": 1, "remote_rows": 2, "cache_hits": 2, "host_rows": 0, "distinct_rows": 5}
    assert r1["store"] == {"local_rows": 1, "remote_rows": 1, "cache_hits": 1, "host_rows": 0, "distinct_rows": 3}
    f0, f1 = r0["fetch"], r1["fetch"]
    assert f0["sent"]["feature_request"] == 2 * 8 and f0["received"]["feature"] == 2 * 16
    assert f1["sent"]["feature_request"] == 1 * 8 and f1["received"]["feature"] == 1 * 16
    assert f0["sent"]["feature"] == 1 * 16 and f1["sent"]["feature"] == 2 * 16
    # The fill is counted apart from the per-step traffic.
    assert r0["fill"]["received"]["cache_fill"] == 2 * 16 and r1["fill"]["received"]["cache_fill"] == 16
    # The modelled link: 1 ms latency per exchange plus bytes at 10 Gbit/s, for both exchanges.
    expect = 2 * 1e-3 + (2 * 8 + 2 * 16) * 8 / 10e9
    assert f0["modelled_seconds"] == pytest.approx(expect, rel=1e-9)


def test_cache_and_fetch_with_three_owners(tmp_path):
    """Rows of three owners, asked for interleaved and in no order, some cached: each lands in its place."""
    parts_dir, x = _path_graph(tmp_path, n=9, parts=3)  # parts own 0..2, 3..5, 6..8
    ids = [[7, 4, 0, 8, 3, 6, 1, 5], [2, 8, 0, 3, 6], [1, 5, 0, 4, 7]]
    cache = [[8, 4], [0], []]
    res = launch_local(fetch_with_cache, 3, args=(parts_dir, ids, cache))
    for r in range(3):
        assert torch.equal(res[r]["x"], x[ids[r]]), r
    # rank 0: 0, 1 local; 4, 8 cached; 7, 3, 6, 5 fetched from two owners.
    assert res[0]["store"] == {"local_rows": 2, "remote_rows": 4, "cache_hits": 2, "host_rows": 0, "distinct_rows": 8}
    assert res[1]["store"] == {"local_rows": 1, "remote_rows": 3, "cache_hits": 1, "host_rows": 0, "distinct_rows": 5}
    assert res[2]["store"] == {"local_rows": 1, "remote_rows": 4, "cache_hits": 0, "host_rows": 0, "distinct_rows": 5}
    f = [r["fetch"] for r in res]
    assert [fi["received"]["feature"] for fi in f] == [4 * 16, 3 * 16, 4 * 16]
    # What each owner sent: the rows of its own that the other ranks asked for and had not cached.
    served = [sum(1 for q in range(3) if q != r for i in ids[q] if i // 3 == r and i not in cache[q])
              for r in range(3)]
    assert [fi["sent"]["feature"] for fi in f] == [16 * s for s in served]


def test_policies_choose_remote_rows_and_clamp(tmp_path, caplog):
    parts_dir, _ = _path_graph(tmp_path)
    part = load_part(parts_dir, 0)
    ctx = CacheContext(part, 8)
    ids = choose_cache_ids("degree", ctx, CacheSize.parse("rows=3"), 16)
    assert ids.tolist() == [4]  # the only remote in-neighbor of part 0
    with caplog.at_level(logging.WARNING):
        ids = choose_cache_ids("degree", ctx, CacheSize.parse("rows=100"), 16)
    assert "larger than the 4 remote rows" in caplog.text and "clamped to 4" in caplog.text
    assert caplog.text.count("clamped") == 1


def test_file_policy_bad_ids(tmp_path):
    parts_dir, _ = _path_graph(tmp_path)
    ctx = CacheContext(load_part(parts_dir, 0), 8)
    bad = tmp_path / "ids.npy"
    np.save(bad, np.array([5, 99], dtype=np.int64))
    ctx.file = str(bad)
    with pytest.raises(CacheError, match=r"ids in \[5, 99\], expected \[0, 8\)"):
        choose_cache_ids("file", ctx, CacheSize.parse("rows=2"), 16)
    np.save(bad, np.array([5.0, 6.0]))
    with pytest.raises(CacheError, match="must hold integer node ids"):
        choose_cache_ids("file", ctx, CacheSize.parse("rows=2"), 16)
    np.save(bad, np.array([6, 1, 5], dtype=np.int64))
    assert choose_cache_ids("file", ctx, CacheSize.parse("rows=2"), 16).tolist() == [6, 5]
    with pytest.raises(CacheError, match="unknown cache policy 'lru'"):
        choose_cache_ids("lru", ctx, CacheSize.parse("rows=2"), 16)
    with pytest.raises(CacheError, match="--cache-size must look like"):
        CacheSize.parse("lots")


def _cora_parts(shared_data, tmp_path_factory, parts):
    out = tmp_path_factory.mktemp("cp") / f"cora{parts}"
    r = run_cli("partition", "--dataset", "planetoid:cora", "--root", str(shared_data / "planetoid" / "raw"),
                "--parts", str(parts), "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def cora2(shared_data, tmp_path_factory):
    return _cora_parts(shared_data, tmp_path_factory, 2)


@pytest.fixture(scope="module")
def cora3(shared_data, tmp_path_factory):
    return _cora_parts(shared_data, tmp_path_factory, 3)


def test_pipelined_equals_sequential(cora3, tmp_path):
    """3 workers: every rank fetches rows of two remote owners, ahead in a thread or not."""
    runs = {}
    for mode in ("--no-pipeline", "--pipeline"):
        m = tmp_path / f"{mode}.json"
        r = run_cli("train", "--parts-dir", str(cora3), "--epochs", "2", "--batch-size", "16", "--lr", "0.01",
                    "--cache-policy", "presample", "--cache-size", "10%", mode, "--metrics", str(m),
                    "--no-host-features")  # the misses go to their owners (not read from the folder)
        assert r.returncode == 0, r.stderr[-3000:]
        runs[mode] = json.loads(m.read_text())
    a, b = runs["--no-pipeline"], runs["--pipeline"]
    assert [e["loss"] for e in a["epochs"]] == [e["loss"] for e in b["epochs"]]
    assert a["final_weights_sha256"] == b["final_weights_sha256"]
    assert a["test_acc"] == b["test_acc"]
    for ea, eb in zip(a["epochs"], b["epochs"]):
        assert ea["bytes_received_by_category"] == eb["bytes_received_by_category"]
        assert 0 < ea["cache_hit_rate"] < 1
        assert set(ea["stage_seconds_max_over_ranks"]) == {"sample", "fetch", "compute", "wait", "bubble", "grad_sync"}
        assert ea["feature_rows_remote_fetched"] > 0
    # Gradient bytes: one ring all-reduce of every parameter per step on each of the 3 ranks
    # (counted by the DDP hook): 2 (P-1)/P of the parameter bytes sent, and as much received.
    n_param_bytes = 4 * (1433 * 128 * 2 + 128 + 128 * 7 * 2 + 7)  # two SAGEConv layers (lin_l with bias, lin_r)
    for e in a["epochs"]:
        per_rank = 2 * n_param_bytes * 2 // 3
        # Counted per DDP bucket, each rounded down to a whole byte: a few bytes per step at most.
        slack = 3 * e["steps"] * 8
        assert abs(e["bytes_sent_by_category"]["gradient"] - 3 * e["steps"] * per_rank) <= slack
        assert abs(e["bytes_received_by_category"]["gradient"] - 3 * e["steps"] * per_rank) <= slack


@pytest.mark.parametrize("mode", ["exact", "historical"])
def test_modelled_network_seconds_are_exact(cora2, tmp_path, mode):
    """A known link, a known number of exchanges: modelled seconds = exchanges x latency + bytes x 8 / bandwidth.

    Per step and rank: exact mode 2 hops x (request, response) + (feature ids, rows) + 1 gradient
    bucket = 7 exchanges; historical mode (halo features held) 1 embedding push + 1 gradient bucket;
    both + (node-key request, node keys): the original ids of other parts' nodes, which key the
    dropout masks (a modelled network turns host reads off, so they are asked of their owners).
    """
    lat_ms, gbps = 0.5, 2.0
    m = tmp_path / "m.json"
    r = run_cli("train", "--parts-dir", str(cora2), "--epochs", "2", "--batch-size", "32", "--fanouts", "5,5",
                "--hidden", "16", "--exchange", mode, "--eval-every", "0", "--net-bandwidth-gbps", str(gbps),
                "--net-latency-ms", str(lat_ms), "--metrics", str(m))
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(m.read_text())
    per_step = (7 if mode == "exact" else 2) + 2
    for e in res["epochs"]:
        assert e["bytes_sent_by_category"].get("node_key", 0) > 0
        by_rank = e["modelled_network_by_rank"]
        assert len(by_rank) == 2
        for rk in by_rank:
            assert rk["exchanges"] == per_step * e["steps"]
            assert rk["seconds"] == pytest.approx(rk["exchanges"] * lat_ms * 1e-3 + rk["bytes"] * 8 / (gbps * 1e9),
                                                  rel=1e-9)
        assert e["modelled_network_seconds"] == pytest.approx(sum(rk["seconds"] for rk in by_rank), rel=1e-12)
        assert e["modelled_network_seconds_max_over_ranks"] == max(rk["seconds"] for rk in by_rank)
        # Each exchange is modelled at max(sent, received) of its payload: between all bytes sent and
        # all bytes sent plus received (split sizes and metric reductions are control, not modelled).
        sent = e["bytes_sent"] - e["bytes_sent_by_category"].get("control", 0)
        got = e["bytes_received"] - e["bytes_received_by_category"].get("control", 0)
        total = sum(rk["bytes"] for rk in by_rank)
        assert sent == got and sent <= total <= sent + got
    assert "0.5 ms latency" in res["network_model"]


def test_complete_store_fetches_without_communicating(tmp_path):
    """A store whose cache holds every remote row it may be asked for never calls the exchange;
    a row outside it is an error naming the ids. Sorted and unsorted cache ids give the same rows."""
    from gnnscale.errors import GnnscaleError
    from gnnscale.data.feature_store import DistFeatureStore

    pdir, x = _path_graph(tmp_path)
    part = load_part(pdir, 0)

    class NoComm:
        rank, world_size = 0, 2

        def exchange(self, *a, **k):
            raise AssertionError("a complete store must not communicate")

    store = DistFeatureStore(part, part.book, NoComm(), 4)
    halo = torch.tensor([4, 5])  # remote rows of part 0 (part 1 owns 4..7)
    store.hold_cache(FeatureCache(halo, x[halo]), complete=True)
    assert torch.equal(FeatureCache(halo.flip(0), x[halo.flip(0)]).lookup(halo)[1], store.cache.lookup(halo)[1])
    ids = torch.tensor([5, 0, 4, 3])
    assert torch.equal(store.fetch(ids), x[ids])
    with pytest.raises(GnnscaleError, match=r"ids \[6\] are neither owned nor held"):
        store.fetch(torch.tensor([1, 6]))
