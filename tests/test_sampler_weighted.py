"""Sampling with replacement and weighted sampling: exact distributions, backends, errors.

Statistical checks use per-cell two-sided binomial bounds with z = 6 (p < 2e-9 per cell);
this file has fewer than 200 cells, so its family-wise false-failure rate is below 1e-6.
All draws come from fixed stream keys, so every run sees the same numbers.
"""
import itertools
import math
import threading

import pytest
import torch

from gnnscale.process.comm import Communicator
from gnnscale.errors import SamplerError
from gnnscale.partitioning.book import PartitionBook
from gnnscale.samplers import DistNeighborSampler, NeighborSampler
from gnnscale.samplers.kernels import sample_from_csc
from gnnscale.samplers.rng import stream_key

Z = 6.0


def _assert_binomial(freq: torch.Tensor, trials: int, p: torch.Tensor) -> None:
    """Every cell of ``freq`` within Z standard deviations of Binomial(trials, p)."""
    freq = freq.double()
    p = p.double()
    sd = torch.sqrt(trials * p * (1 - p))
    dev = (freq - trials * p).abs()
    assert bool((dev <= Z * sd + 1e-9).all()), (freq / trials, p)


def _star_csc(num_nodes: int, weights: list[float]):
    """num_nodes nodes, each with in-neighbors 0..d-1 (source id = position) and the same weights."""
    d = len(weights)
    indptr = torch.arange(num_nodes + 1, dtype=torch.int64) * d
    indices = torch.arange(d, dtype=torch.int64).repeat(num_nodes)
    w = torch.tensor(weights, dtype=torch.float64).repeat(num_nodes)
    return indptr, indices, w


def _draw(indptr, indices, fanout, key, replace=False, weights=None, backend="torch"):
    n = indptr.numel() - 1
    rows = torch.arange(n)
    cum = torch.cumsum(weights.double(), 0) if (weights is not None and replace) else None
    if backend == "torch":
        return sample_from_csc(indptr, indices, rows, rows, fanout, key, replace=replace, weights=weights, cum_weights=cum)
    from gnnscale.samplers import cpu_kernels

    return cpu_kernels.sample_from_csc(indptr, indices, rows, rows, fanout, key, replace=replace, weights=weights, cum_weights=cum)


def _random_graph(n=2000, e=30000, seed=5):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=g)
    dst = torch.randint(0, n, (e,), generator=g)
    key = torch.unique(dst * n + src)
    src, dst = key % n, key // n
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    w = torch.rand(src.numel(), generator=g, dtype=torch.float64) * 3
    w[torch.rand(src.numel(), generator=g) < 0.25] = 0.0  # a quarter of the edges can never be drawn
    return indptr, src, w.to(torch.float32)


# ---------------------------------------------------------------- uniform with replacement


@pytest.mark.parametrize("d,k", [(5, 3), (3, 7)])
def test_with_replacement_each_draw_uniform(d, k):
    nodes = 20000
    indptr, indices, _ = _star_csc(nodes, [1.0] * d)
    counts, nbrs = _draw(indptr, indices, k, stream_key(11, d, k), replace=True)
    assert torch.equal(counts, torch.full((nodes,), k))  # exactly k draws, also when d < k
    draws = nbrs.view(nodes, k)
    for j in range(k):  # each draw j uniform over the d neighbors
        _assert_binomial(torch.bincount(draws[:, j], minlength=d), nodes, torch.full((d,), 1.0 / d))
    # draws 0 and 1 independent: every ordered pair 1/d^2
    pair = torch.bincount(draws[:, 0] * d + draws[:, 1], minlength=d * d)
    _assert_binomial(pair, nodes, torch.full((d * d,), 1.0 / (d * d)))
    # duplicates present (certain when d < k; with d=5, k=3 in 52% of the nodes)
    dup = (draws.unsqueeze(2) == draws.unsqueeze(1)).sum((1, 2)) > k
    assert bool(dup.all()) if d < k else int(dup.sum()) > nodes // 4


def test_with_replacement_degree_zero_and_all_neighbors():
    indptr = torch.tensor([0, 0, 2, 2, 5])
    indices = torch.tensor([7, 8, 1, 2, 3])
    counts, nbrs = _draw(indptr, indices, 4, 123, replace=True)
    assert counts.tolist() == [0, 4, 0, 4]
    assert set(nbrs[:4].tolist()) <= {7, 8} and set(nbrs[4:].tolist()) <= {1, 2, 3}
    counts, nbrs = _draw(indptr, indices, -1, 123, replace=True)  # -1: every neighbor once
    assert counts.tolist() == [0, 2, 0, 3] and nbrs.tolist() == [7, 8, 1, 2, 3]


# ---------------------------------------------------------------- weighted with replacement


def test_weighted_with_replacement_proportional_to_weight():
    weights = [1.0, 2.0, 3.0, 4.0, 0.0]
    nodes, k = 20000, 4
    indptr, indices, w = _star_csc(nodes, weights)
    counts, nbrs = _draw(indptr, indices, k, stream_key(5), replace=True, weights=w)
    assert torch.equal(counts, torch.full((nodes,), k))
    freq = torch.bincount(nbrs, minlength=5)
    assert int(freq[4]) == 0  # zero weight: never drawn
    _assert_binomial(freq[:4], nodes * k, torch.tensor(weights[:4]) / 10.0)
    # and per draw index (the j-th draws are independent across nodes)
    for j in range(k):
        _assert_binomial(torch.bincount(nbrs.view(nodes, k)[:, j], minlength=5)[:4], nodes, torch.tensor(weights[:4]) / 10.0)


def test_weighted_with_replacement_zero_total_and_rounding_edge():
    # node 0: one edge of weight 2^53; node 1: weights [2, 0, 2] sit at 2^53 in the global
    # cumsum, where the float spacing is 2, so targets round onto the node's end (the
    # clamp) and onto interval boundaries; node 2: all-zero weights; node 3: no edges.
    indptr = torch.tensor([0, 1, 4, 6, 6])
    indices = torch.tensor([9, 10, 11, 12, 13, 14])
    w = torch.tensor([2.0**53, 2.0, 0.0, 2.0, 0.0, 0.0], dtype=torch.float64)
    for backend in ("torch", "numba") if _have_numba() else ("torch",):
        counts, nbrs = _draw(indptr, indices, 200, stream_key(3), replace=True, weights=w, backend=backend)
        assert counts.tolist() == [200, 200, 0, 0]
        assert set(nbrs[:200].tolist()) == {9}
        assert set(nbrs[200:].tolist()) == {10, 12}  # never the zero-weight 11, never outside the node
    if _have_numba():
        a = _draw(indptr, indices, 200, stream_key(3), replace=True, weights=w, backend="torch")
        b = _draw(indptr, indices, 200, stream_key(3), replace=True, weights=w, backend="numba")
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# ---------------------------------------------------------------- weighted without replacement


def _exact_successive(weights: list[float], k: int):
    """Exact inclusion and subset probabilities of successive weighted sampling without replacement."""
    d = len(weights)
    total = sum(weights)
    incl = [0.0] * d
    subsets: dict = {}
    for seq in itertools.permutations([i for i in range(d) if weights[i] > 0], k):
        p, left = 1.0, total
        for i in seq:
            p *= weights[i] / left
            left -= weights[i]
        for i in seq:
            incl[i] += p
        key = tuple(sorted(seq))
        subsets[key] = subsets.get(key, 0.0) + p
    return incl, subsets


@pytest.mark.parametrize("weights,k", [([1.0, 2.0, 3.0, 4.0, 0.0], 2), ([0.5, 1.0, 3.0, 6.0], 3)])
def test_weighted_without_replacement_exact_probabilities(weights, k):
    nodes = 40000
    d = len(weights)
    indptr, indices, w = _star_csc(nodes, weights)
    counts, nbrs = _draw(indptr, indices, k, stream_key(17, k), weights=w)
    assert torch.equal(counts, torch.full((nodes,), k))
    sel = nbrs.view(nodes, k)
    assert bool((sel[:, 1:] > sel[:, :-1]).all())  # no duplicates, ascending position
    incl, subsets = _exact_successive(weights, k)
    freq = torch.bincount(nbrs, minlength=d)
    for i in range(d):
        if weights[i] == 0:
            assert int(freq[i]) == 0
    pos = [i for i in range(d) if weights[i] > 0]
    _assert_binomial(freq[pos], nodes, torch.tensor([incl[i] for i in pos]))
    code = torch.zeros(nodes, dtype=torch.int64)
    for j in range(k):
        code = code * d + sel[:, j]
    got = torch.bincount(code, minlength=d**k)
    keys = sorted(subsets)
    idx = torch.tensor([sum(s[j] * d ** (k - 1 - j) for j in range(k)) for s in keys])
    assert int(got.sum() - got[idx].sum()) == 0  # no subset outside the positive-weight ones
    _assert_binomial(got[idx], nodes, torch.tensor([subsets[s] for s in keys]))


def test_weighted_without_replacement_few_positive_takes_all():
    indptr = torch.tensor([0, 4, 7, 7, 9])
    indices = torch.tensor([5, 6, 7, 8, 1, 2, 3, 4, 4])
    w = torch.tensor([0.0, 3.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 1.0])
    counts, nbrs = _draw(indptr, indices, 2, 77, weights=w)
    assert counts.tolist() == [2, 0, 0, 2] and nbrs.tolist() == [6, 8, 4, 4]
    counts, nbrs = _draw(indptr, indices, -1, 77, weights=w)  # -1: every positive-weight neighbor
    assert counts.tolist() == [2, 0, 0, 2] and nbrs.tolist() == [6, 8, 4, 4]
    counts, nbrs = _draw(indptr, indices, -1, 77, replace=True, weights=w)
    assert counts.tolist() == [2, 0, 0, 2] and nbrs.tolist() == [6, 8, 4, 4]


def test_weighted_without_replacement_infinite_key_ties():
    # The smallest subnormal weight makes every key -log(u) / w infinite (unless u > 1 - 1e-15):
    # ties go to the smaller position, identically in both backends.
    indptr = torch.tensor([0, 6])
    indices = torch.arange(6)
    w = torch.full((6,), 5e-324, dtype=torch.float64)
    counts, nbrs = _draw(indptr, indices, 2, 1, weights=w)
    assert counts.tolist() == [2] and nbrs.tolist() == [0, 1]
    if _have_numba():
        c2, n2 = _draw(indptr, indices, 2, 1, weights=w, backend="numba")
        assert torch.equal(counts, c2) and torch.equal(nbrs, n2)


# ---------------------------------------------------------------- samplers and backends


def _have_numba() -> bool:
    from gnnscale.samplers import cpu_kernels

    return cpu_kernels.HAVE_NUMBA


VARIANTS = [(True, False), (False, True), (True, True)]  # (replace, weighted)


@pytest.mark.parametrize("replace,weighted", VARIANTS)
@pytest.mark.parametrize("fanouts", [[5, 4, 3], [-1, 2]])
def test_backends_agree(replace, weighted, fanouts):
    pytest.importorskip("numba")
    indptr, indices, w = _random_graph()
    seeds = torch.randperm(2000, generator=torch.Generator().manual_seed(0))[:300]
    keys = torch.randperm(2000, generator=torch.Generator().manual_seed(1))
    kw = dict(seed=9, node_keys=keys, replace=replace, edge_weight=w if weighted else None)
    a = NeighborSampler(indptr, indices, fanouts, backend="torch", **kw).sample(seeds, 3, 4)
    b = NeighborSampler(indptr, indices, fanouts, backend="numba", **kw).sample(seeds, 3, 4)
    for x, y in zip(a.blocks, b.blocks):
        assert torch.equal(x.src_ids, y.src_ids)
        assert torch.equal(x.dst_ids, y.dst_ids)
        assert torch.equal(x.edge_index, y.edge_index)


def test_backends_agree_parallel_kernel():
    # Frontiers of >= 4096 nodes take numba's parallel kernel when torch uses 2+ threads.
    pytest.importorskip("numba")
    from gnnscale.samplers import cpu_kernels

    indptr, indices, w = _random_graph(n=6000, e=90000, seed=8)
    rows = torch.arange(6000)
    cum = torch.cumsum(w.double(), 0)
    old = cpu_kernels._THREADS[0]
    cpu_kernels._THREADS[0] = 2
    try:
        for replace, weights, c in [(True, None, None), (False, w, None), (True, w, cum)]:
            a = sample_from_csc(indptr, indices, rows, rows, 7, stream_key(2), replace=replace, weights=weights, cum_weights=c)
            b = cpu_kernels.sample_from_csc(indptr, indices, rows, rows, 7, stream_key(2), replace=replace, weights=weights, cum_weights=c)
            assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    finally:
        cpu_kernels._THREADS[0] = old


@pytest.mark.parametrize("replace,weighted", VARIANTS)
def test_sampled_edges_exist_and_weights_respected(replace, weighted):
    indptr, indices, w = _random_graph(n=500, e=5000, seed=3)
    s = NeighborSampler(indptr, indices, [6, 4], seed=1, replace=replace, edge_weight=w if weighted else None)
    mb = s.sample(torch.arange(0, 500, 3), epoch=1, step=2)
    dst_of_edge = torch.repeat_interleave(torch.arange(500), indptr[1:] - indptr[:-1])
    edge_w = {(int(a), int(b)): float(x) for a, b, x in zip(indices, dst_of_edge, w)}
    for b, fan in zip(mb.blocks, [4, 6]):
        pairs = list(zip(b.src_ids[b.edge_index[0]].tolist(), b.dst_ids[b.edge_index[1]].tolist()))
        assert all(p in edge_w for p in pairs)
        if weighted:
            assert all(edge_w[p] > 0 for p in pairs)
        if not replace:
            assert len(set(pairs)) == len(pairs)
        per_dst = torch.bincount(b.edge_index[1], minlength=b.num_dst)
        deg = indptr[b.dst_ids + 1] - indptr[b.dst_ids]
        if replace and not weighted:
            assert torch.equal(per_dst, torch.where(deg > 0, fan, 0))
    again = s.sample(torch.arange(0, 500, 3), epoch=1, step=2)
    other = s.sample(torch.arange(0, 500, 3), epoch=1, step=3)
    assert torch.equal(mb.blocks[0].src_ids, again.blocks[0].src_ids)
    assert not torch.equal(mb.blocks[-1].edge_index, other.blocks[-1].edge_index)


@pytest.mark.parametrize("replace,weighted", VARIANTS)
@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_empty_seeds_and_isolated_nodes(replace, weighted, backend):
    if backend == "numba":
        pytest.importorskip("numba")
    indptr = torch.tensor([0, 0, 2, 2])  # nodes 0 and 2 have no in-neighbors
    indices = torch.tensor([0, 2])
    w = torch.tensor([1.0, 2.0]) if weighted else None
    s = NeighborSampler(indptr, indices, [3, 2], replace=replace, edge_weight=w, backend=backend)
    mb = s.sample(torch.empty(0, dtype=torch.int64))
    assert all(b.num_src == 0 and b.num_edges == 0 for b in mb.blocks)
    mb = s.sample(torch.tensor([0, 2]))
    assert all(b.num_edges == 0 for b in mb.blocks)
    mb = s.sample(torch.tensor([1]))
    assert mb.blocks[-1].num_edges == (3 if replace else 2)


def test_default_path_unchanged_by_new_arguments():
    indptr, indices, _ = _random_graph(n=500, e=5000, seed=3)
    seeds = torch.arange(0, 500, 5)
    a = NeighborSampler(indptr, indices, [5, 3], seed=2).sample(seeds, 1, 1)
    b = NeighborSampler(indptr, indices, [5, 3], seed=2, replace=False, edge_weight=None).sample(seeds, 1, 1)
    for x, y in zip(a.blocks, b.blocks):
        assert torch.equal(x.src_ids, y.src_ids) and torch.equal(x.edge_index, y.edge_index)


# ---------------------------------------------------------------- distributed pass-through


@pytest.mark.parametrize("replace,weighted", VARIANTS)
def test_dist_sampler_world_size_one_matches_local(replace, weighted):
    indptr, indices, w = _random_graph(n=800, e=8000, seed=4)
    ew = w if weighted else None
    seeds = torch.arange(3, 800, 11)
    local = NeighborSampler(indptr, indices, [5, 3], seed=6, replace=replace, edge_weight=ew).sample(seeds, 2, 7)
    dist = DistNeighborSampler(
        indptr, indices, PartitionBook([0, 800]), Communicator(), [5, 3], seed=6, replace=replace, edge_weight=ew
    ).sample(seeds, 2, 7)
    for x, y in zip(local.blocks, dist.blocks):
        assert torch.equal(x.src_ids, y.src_ids) and torch.equal(x.edge_index, y.edge_index)


class _ThreadComm:
    """Two ranks in two threads of one process: exchange() through a shared mailbox."""

    def __init__(self, rank, box, barrier):
        self.rank, self.world_size, self.box, self.barrier = rank, 2, box, barrier

    def exchange(self, send, category):
        self.box[self.rank] = send
        self.barrier.wait()
        got = [self.box[r][self.rank] for r in range(2)]
        self.barrier.wait()
        return got


@pytest.mark.parametrize("replace,weighted", [(True, False), (False, True)])
def test_dist_sampler_two_ranks_serve_with_owner_weights(replace, weighted):
    # Owners sample the remote frontier with their own slice of the weights and the step's
    # stream (whoever asks): the result equals the single-process sampler's.
    indptr, indices, w = _random_graph(n=600, e=7000, seed=9)
    book = PartitionBook([0, 250, 600])
    box, barrier = [None, None], threading.Barrier(2)
    seeds = {0: torch.arange(0, 600, 7), 1: torch.arange(5, 600, 9)}
    out, errors = {}, []

    def run(rank):
        try:
            lo, hi = int(book.offsets[rank]), int(book.offsets[rank + 1])
            e0, e1 = int(indptr[lo]), int(indptr[hi])
            s = DistNeighborSampler(
                indptr[lo : hi + 1] - e0, indices[e0:e1], book, _ThreadComm(rank, box, barrier), [4, 3],
                seed=2, replace=replace, edge_weight=w[e0:e1] if weighted else None, backend="torch",
            )
            out[rank] = s.sample(seeds[rank], epoch=1, step=5)
        except Exception as exc:  # pragma: no cover - surfaced below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    ref = NeighborSampler(indptr, indices, [4, 3], seed=2, replace=replace, edge_weight=w if weighted else None)
    for rank in range(2):
        exp = ref.sample(seeds[rank], epoch=1, step=5)
        assert out[rank].stats["remote_frontier_ids"] > 0
        for x, y in zip(exp.blocks, out[rank].blocks):
            assert torch.equal(x.src_ids, y.src_ids) and torch.equal(x.edge_index, y.edge_index)


# ---------------------------------------------------------------- bad input


def _small():
    return torch.tensor([0, 2, 3]), torch.tensor([1, 0, 0])


@pytest.mark.parametrize(
    "weight,match",
    [
        (torch.ones(4), r"shape \[3\].*found shape \(4,\)"),
        (torch.ones(3, 1), r"shape \[3\].*found shape \(3, 1\)"),
        (torch.ones(3, dtype=torch.int64), "floating-point.*torch.int64.*float\\(\\)"),
        (torch.tensor([1.0, -0.5, 2.0]), "non-negative.*1 negative.*edge 1"),
        (torch.tensor([1.0, float("nan"), 2.0]), "finite.*NaN or infinite.*edge 1"),
        (torch.tensor([float("inf"), 1.0, 2.0]), "finite.*edge 0"),
        ([1.0, 1.0, 1.0], "torch.Tensor"),
    ],
)
def test_bad_edge_weight(weight, match):
    indptr, indices = _small()
    with pytest.raises(SamplerError, match=match):
        NeighborSampler(indptr, indices, [2], edge_weight=weight)
    with pytest.raises(SamplerError, match=match):
        DistNeighborSampler(indptr, indices, PartitionBook([0, 2]), Communicator(), [2], edge_weight=weight)


@pytest.mark.parametrize("bad", [1, 0, "yes", None])
def test_replace_must_be_bool(bad):
    indptr, indices = _small()
    with pytest.raises(SamplerError, match="replace must be a bool"):
        NeighborSampler(indptr, indices, [2], replace=bad)
    with pytest.raises(SamplerError, match="replace must be a bool"):
        DistNeighborSampler(indptr, indices, PartitionBook([0, 2]), Communicator(), [2], replace=bad)


def test_half_precision_weights_accepted():
    indptr, indices = _small()
    s = NeighborSampler(indptr, indices, [1], edge_weight=torch.tensor([1.0, 0.0, 2.0], dtype=torch.bfloat16))
    assert s.edge_weight.dtype == torch.float32
    mb = s.sample(torch.tensor([0]))
    assert mb.blocks[0].src_ids.tolist() == [0, 1]  # node 0's only positive-weight in-neighbor is 1
