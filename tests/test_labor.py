"""Layer-neighbour sampling (LABOR-0, ``--sampler labor``; issue 55 item 4).

Each hop draws one keyed uniform ``u_t`` per candidate neighbour ``t`` (a function of the hop's
stream key and ``t``'s original id), shared by every seed of the hop; a seed of in-degree ``d``
keeps ``t`` iff ``u_t * d < k``. So each neighbour is kept with probability ``min(1, k / d)``,
independently of the seed's other neighbours: given how many are kept, which ones is a uniform
subset, and the mean over the kept neighbours (the layers' mean aggregation) is an unbiased
estimate of the exact neighbour mean whenever one is kept; the Horvitz-Thompson sum
``sum_kept h_t / min(d, k)`` is unbiased outright.
"""
from __future__ import annotations

import pytest
import torch

import gnnscale
from gnnscale.errors import GnnscaleError, SamplerError
from gnnscale.samplers import NeighborSampler
from gnnscale.samplers.labor import labor_positions


def _graph(n: int, deg: int, seed: int = 0):
    """A random graph of ``n`` nodes, each with ``deg`` distinct in-neighbours on average (CSC)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (n * deg,), generator=g)
    dst = torch.randint(0, n, (n * deg,), generator=g)
    key = torch.unique(dst * n + src)  # distinct edges, sorted by (dst, src)
    src, dst = key % n, key // n
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    return indptr, src


def test_labor_estimator_of_the_mean_aggregation_is_unbiased():
    """3000 keyed draws (steps) of one hop over 40 seeds of in-degree 9 .. 60 at fan-out 4: per seed,
    the Horvitz-Thompson estimate and the mean over the kept neighbours (draws keeping one or more)
    average to the exact neighbour mean within 5 standard errors; each neighbour is kept with
    probability k / d (the pooled rate within 5 sigma)."""
    n, k, draws = 400, 4, 3000
    indptr, indices = _graph(n, 20, seed=1)
    deg = torch.diff(indptr)
    seeds = torch.nonzero(deg > 8).flatten()[:40]
    assert seeds.numel() == 40
    h = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 3 + 1
    start, d = indptr[seeds], deg[seeds]
    exact = torch.stack([h[indices[s:s + c]].mean() for s, c in zip(start.tolist(), d.tolist())])  # 40 seeds
    ht_sum = torch.zeros(40, dtype=torch.float64)
    ht_sq = torch.zeros(40, dtype=torch.float64)
    mean_sum = torch.zeros(40, dtype=torch.float64)
    mean_sq = torch.zeros(40, dtype=torch.float64)
    nonempty = torch.zeros(40, dtype=torch.float64)
    kept_total = 0
    for step in range(draws):  # loop over keyed draws (the statistic), not over nodes or edges
        counts, edge = labor_positions(start, d, k, 1000 + step, indices)
        seg = torch.repeat_interleave(torch.arange(40), counts)
        s = torch.zeros(40, dtype=torch.float64).index_add_(0, seg, h[indices[edge]])
        ht = s / d.clamp(max=k).to(torch.float64)
        ht_sum += ht
        ht_sq += ht * ht
        has = counts > 0
        m = torch.where(has, s / counts.clamp(min=1), torch.zeros_like(s))
        mean_sum += m
        mean_sq += m * m
        nonempty += has
        kept_total += int(counts.sum())
    ht_mean = ht_sum / draws
    ht_se = ((ht_sq / draws - ht_mean ** 2) / draws).sqrt()
    z_ht = (ht_mean - exact) / ht_se
    assert float(z_ht.abs().max()) < 5, z_ht
    mm = mean_sum / nonempty
    mm_se = ((mean_sq / nonempty - mm ** 2) / nonempty).sqrt()
    z_mean = (mm - exact) / mm_se
    assert float(z_mean.abs().max()) < 5, z_mean
    # each neighbour kept with probability k / d: k kept per seed in expectation
    p = k / d.to(torch.float64)
    expected = float((p * d).sum()) * draws
    sd = float((p * (1 - p) * d).sum() * draws) ** 0.5
    assert abs(kept_total - expected) < 5 * sd, (kept_total, expected, sd)


def test_labor_samples_fewer_distinct_nodes_than_neighbour_sampling():
    """The same fan-outs (5, 5), batches of 64 seeds on a graph of mean in-degree 20: LABOR's
    batches hold fewer distinct input nodes in every one of 8 steps, and about as many edges per
    destination (5 in expectation; at most 5 for neighbour sampling)."""
    indptr, indices = _graph(3000, 20, seed=3)
    nb = NeighborSampler(indptr, indices, [5, 5], seed=7)
    lb = NeighborSampler(indptr, indices, [5, 5], seed=7, labor=True)
    fewer = []
    for step in range(8):
        seeds = torch.randperm(3000, generator=torch.Generator().manual_seed(step))[:64]
        a, b = nb.sample(seeds, 0, step), lb.sample(seeds, 0, step)
        fewer.append(b.input_ids.numel() < a.input_ids.numel())
        per_dst = b.blocks[-1].num_edges / 64
        assert 3.5 < per_dst < 6.5, per_dst
    assert all(fewer), fewer


def test_labor_draws_are_keyed_by_original_ids_not_by_relabeling():
    """Relabel the graph: a node draws the same (original) neighbours under its new id when the
    sampler is given each node's original id as its key; the draws depend on the step."""
    n = 500
    indptr, indices = _graph(n, 12, seed=4)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(5))  # new id -> original id
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(n)
    # the relabelled CSC: new node v is original perm[v]; its in-edges' sources in new ids, in original order
    deg = torch.diff(indptr)[perm]
    new_ptr = torch.zeros(n + 1, dtype=torch.int64)
    new_ptr[1:] = torch.cumsum(deg, 0)
    new_idx = torch.cat([inv[indices[indptr[o]:indptr[o + 1]]] for o in perm.tolist()])
    a = NeighborSampler(indptr, indices, [3, 3], seed=1, labor=True)
    b = NeighborSampler(new_ptr, new_idx, [3, 3], seed=1, labor=True, node_keys=perm)
    seeds = torch.arange(0, n, 7)
    ma, mb = a.sample(seeds, 2, 3), b.sample(inv[seeds], 2, 3)
    for x, y in zip(ma.blocks, mb.blocks):
        assert torch.equal(x.src_ids, perm[y.src_ids]) and torch.equal(x.edge_index, y.edge_index)
    assert not torch.equal(a.sample(seeds, 2, 4).input_ids, ma.input_ids)


def test_labor_refusals_name_the_option():
    indptr, indices = _graph(50, 4)
    with pytest.raises(SamplerError, match="labor=True"):
        NeighborSampler(indptr, indices, [2], labor=True, replace=True)
    with pytest.raises(SamplerError, match="labor must be a bool"):
        NeighborSampler(indptr, indices, [2], labor=1)


def test_pyg_neighbor_loader_labor():
    """gnnscale.pyg's NeighborLoader(labor=True): fewer distinct nodes per batch than its neighbour
    draws at the same num_neighbors; refused with disjoint=True, naming both."""
    from torch_geometric.data import Data

    from gnnscale.pyg import NeighborLoader

    indptr, indices = _graph(2000, 20, seed=6)
    dst = torch.repeat_interleave(torch.arange(2000), torch.diff(indptr))
    data = Data(x=torch.randn(2000, 4), edge_index=torch.stack([indices, dst]), num_nodes=2000)
    kw = dict(num_neighbors=[5, 5], batch_size=64, input_nodes=torch.arange(640), seed=3)
    plain = [b.num_nodes for b in NeighborLoader(data, **kw)]
    labor = [b.num_nodes for b in NeighborLoader(data, labor=True, **kw)]
    assert len(plain) == len(labor) == 10 and all(b < a for a, b in zip(plain, labor)), (plain, labor)
    with pytest.raises(GnnscaleError, match="labor=True .*disjoint=True"):
        NeighborLoader(data, labor=True, disjoint=True, **kw)


def test_sampler_labor_is_refused_by_chunk_pipelining_before_workers_start(cora_partition):
    with pytest.raises(GnnscaleError, match=r"--sampler \(sampler='labor'\)") as err:
        gnnscale.train(parts_dir=cora_partition(4), workers=2, chunks=True, pipeline_stages=2, layer="gcnii",
                       num_layers=4, sampler="labor", epochs=1, verify=False, progress=False)
    assert "chunk" in str(err.value)


def test_labor_step_of_two_workers_equals_one_worker(cora_partition, tmp_path):
    """As tests/test_worker_count.py's fan-out case, with --sampler labor: one step over Cora's 140
    training nodes on 1 worker (batch 140) and on 2 (batch 70) trains the same weights, the owners
    keying each shared neighbour's uniform by its original id; with host reads (rank 0 draws rank
    1's nodes itself, the host part's source keys) and without (owners answer requests)."""
    from test_worker_count import BASE, LR, _weights

    cfg = dict(BASE, fanouts=(3, 3), eval_fanouts=(3, 3), sampler="labor")
    one = tmp_path / "one.pt"
    res = gnnscale.train(parts_dir=cora_partition(1), workers=1, save_model=str(one), **dict(cfg, batch_size=140))
    # the epoch's feature bytes: every row its one batch read (distinct within the batch: at the floor)
    rec = res["epochs"][0]
    rows = rec["feature_rows_local"] + rec["feature_rows_remote_fetched"] + rec["feature_rows_from_cache"] \
        + rec["feature_rows_host"]
    assert rows == rec["feature_rows_local"] == rec["feature_rows_distinct"] > 140
    assert rec["feature_bytes_moved"] == rec["feature_bytes_by_source"]["local"] == rows * 1433 * 4
    assert rec["feature_bytes_floor"] == rec["feature_bytes_moved"] and rec["feature_floor_ratio"] == 1.0
    assert rec["feature_bandwidth_gb_per_s"] > 0
    plain = tmp_path / "plain.pt"
    gnnscale.train(parts_dir=cora_partition(1), workers=1, save_model=str(plain),
                   **dict(cfg, batch_size=140, sampler="neighbor"))
    a = _weights(one)
    assert max(float((a[k] - _weights(plain)[k]).abs().max()) for k in a) > LR / 100  # other draws
    for host in (True, False):
        two = tmp_path / f"two-{host}.pt"
        gnnscale.train(parts_dir=cora_partition(2), workers=2, save_model=str(two), host_graph=host,
                       **dict(cfg, batch_size=70))
        b = _weights(two)
        diff = max(float((a[k] - b[k]).abs().max()) for k in a)
        assert diff < LR / 100, f"host reads {host}: weights after one step differ by {diff} (lr {LR})"


def test_labor_on_a_typed_graph_one_step_of_two_workers_equals_one_worker(acm_partition, tmp_path):
    """ACM (typed): relation-wise LABOR (each relation's uniforms under its own key), one step over the
    60 training papers (batch 64 on 1 and on 2 workers): the same weights, and other draws than the
    neighbour sampler's."""
    from test_worker_count import BASE, LR, _weights

    cfg = dict(BASE, fanouts=(3, 3), eval_fanouts=(3, 3), batch_size=64, layer="rel:sage", sampler="labor")
    one, two, plain = tmp_path / "one.pt", tmp_path / "two.pt", tmp_path / "plain.pt"
    gnnscale.train(parts_dir=acm_partition(1), workers=1, save_model=str(one), **cfg)
    gnnscale.train(parts_dir=acm_partition(2), workers=2, save_model=str(two), **cfg)
    gnnscale.train(parts_dir=acm_partition(1), workers=1, save_model=str(plain), **dict(cfg, sampler="neighbor"))
    a, b, c = _weights(one), _weights(two), _weights(plain)
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < LR / 100
    assert max(float((a[k] - c[k]).abs().max()) for k in a) > LR / 100


def test_labor_compiled_and_torch_kernels_draw_the_same():
    """The numba kernel (two passes: count, fill) and the vectorized torch one keep the same edges,
    with one stream key or one per row (a typed graph's relation keys), fan-out -1 and larger than
    every degree included, serial and parallel."""
    from gnnscale.samplers import cpu_kernels, labor_kernels
    from gnnscale.samplers.kernels import sample_from_csc

    if not cpu_kernels.HAVE_NUMBA:
        pytest.skip("numba not installed")
    indptr, indices = _graph(6000, 10, seed=8)
    keys = torch.randperm(6000, generator=torch.Generator().manual_seed(9)) * 3 + 5
    rows = torch.randperm(6000, generator=torch.Generator().manual_seed(10))[:5000]
    threads = cpu_kernels._THREADS[0]
    try:
        for t in (1, 2):
            cpu_kernels._THREADS[0] = t
            for fanout in (-1, 3, 8, 1000):
                for key in (12345, torch.arange(5000) * 7919 - 3):
                    a = sample_from_csc(indptr, indices, rows, keys[rows], fanout, key, return_edges=True,
                                        labor=keys[indices])
                    b = labor_kernels.sample_from_csc(indptr, indices, rows, keys[rows], fanout, key,
                                                      return_edges=True, labor=keys[indices])
                    assert all(torch.equal(x, y) for x, y in zip(a, b)), (t, fanout)
    finally:
        cpu_kernels._THREADS[0] = threads
