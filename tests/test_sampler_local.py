"""Local sampler: uniform distribution (exact test bounds), block structure, determinism, errors."""
import math

import pytest
import torch

from gnnscale.errors import SamplerError
from gnnscale.samplers import NeighborSampler, check_fanouts
from gnnscale.samplers.kernels import relabel, sample_from_csc, sample_positions
from gnnscale.samplers.rng import node_hash, stream_key

# Per-cell two-sided binomial bound: z = 6 gives p < 2e-9 per cell; with fewer than 500
# cells in this file the family-wise false-failure rate stays below 1e-6.
Z = 6.0


def _csc_from_edges(src, dst, n):
    order = torch.argsort(dst * n + src)
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    return indptr, src[order]


def _random_graph(n=500, e=5000, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=g)
    dst = torch.randint(0, n, (e,), generator=g)
    key = torch.unique(dst * n + src)
    return _csc_from_edges(key % n, key // n, n)


@pytest.mark.parametrize("d,k", [(10, 3), (7, 6), (30, 15), (2, 1)])
def test_inclusion_frequency_is_k_over_d(d, k):
    trials = 40000
    counts, pos = sample_positions(torch.full((trials,), d), k, node_hash(stream_key(d, k), torch.arange(trials)))
    assert torch.equal(counts, torch.full((trials,), k))
    pos = pos.view(trials, k)
    # no duplicates, ascending within a node
    assert bool((pos[:, 1:] > pos[:, :-1]).all())
    freq = torch.bincount(pos.flatten(), minlength=d).double()
    p = k / d
    sd = math.sqrt(trials * p * (1 - p))
    assert float((freq - trials * p).abs().max()) <= Z * sd, freq / trials


def test_every_subset_equally_likely():
    # d=5, k=2: 10 subsets, each with probability 1/10 (Floyd's algorithm is exact).
    trials = 50000
    _, pos = sample_positions(torch.full((trials,), 5), 2, node_hash(99, torch.arange(trials)))
    pos = pos.view(trials, 2)
    code = pos[:, 0] * 5 + pos[:, 1]
    freq = torch.bincount(code, minlength=25).double()
    nonzero = freq[freq > 0]
    assert nonzero.numel() == 10
    p = 0.1
    sd = math.sqrt(trials * p * (1 - p))
    assert float((nonzero - trials * p).abs().max()) <= Z * sd


def test_same_node_across_steps_is_uniform():
    # One node of degree 12 drawn under many stream keys (steps): each neighbor k/d of the time.
    d, k, steps = 12, 4, 20000
    keys = torch.tensor([stream_key(0, 0, s, 0, 0) for s in range(steps)], dtype=torch.int64)
    counts, pos = sample_positions(torch.full((steps,), d), k, node_hash(keys, torch.full((steps,), 7)))
    freq = torch.bincount(pos, minlength=d).double()
    p = k / d
    assert float((freq - steps * p).abs().max()) <= Z * math.sqrt(steps * p * (1 - p))


def test_small_degree_and_all_neighbors():
    deg = torch.tensor([0, 1, 3, 5, 8])
    counts, pos = sample_positions(deg, 5, node_hash(1, torch.arange(5)))
    assert counts.tolist() == [0, 1, 3, 5, 5]
    assert pos[:9].tolist() == [0, 0, 1, 2, 0, 1, 2, 3, 4]
    counts, pos = sample_positions(deg, -1, torch.arange(5))
    assert counts.tolist() == deg.tolist() and pos.numel() == 17


def test_sampled_edges_exist_and_blocks_chain():
    indptr, indices = _random_graph()
    s = NeighborSampler(indptr, indices, [5, 4, 3], seed=1)
    seeds = torch.tensor([3, 17, 256, 499, 0])
    mb = s.sample(seeds, epoch=2, step=5)
    assert len(mb.blocks) == 3
    assert torch.equal(mb.blocks[-1].dst_ids, seeds)
    edges = set(zip(indices.tolist(), torch.repeat_interleave(torch.arange(500), indptr[1:] - indptr[:-1]).tolist()))
    for i, b in enumerate(mb.blocks):
        assert torch.equal(b.src_ids[: b.num_dst], b.dst_ids)
        assert b.src_ids.unique().numel() == b.num_src
        src = b.src_ids[b.edge_index[0]].tolist()
        dst = b.dst_ids[b.edge_index[1]].tolist()
        pairs = list(zip(src, dst))
        assert all(p in edges for p in pairs)
        assert len(set(pairs)) == len(pairs)  # without replacement: no repeated edge
        if i + 1 < len(mb.blocks):
            assert torch.equal(mb.blocks[i + 1].src_ids, b.dst_ids)
    fan = {0: 3, 1: 4, 2: 5}  # blocks in model order: outermost hop (fanout 3) first
    for i, b in enumerate(mb.blocks):
        per_dst = torch.bincount(b.edge_index[1], minlength=b.num_dst)
        deg = indptr[b.dst_ids + 1] - indptr[b.dst_ids]
        assert torch.equal(per_dst, deg.clamp(max=fan[i]))


def test_deterministic_and_independent_streams():
    indptr, indices = _random_graph()
    s = NeighborSampler(indptr, indices, [5, 5], seed=3)
    seeds = torch.arange(0, 500, 7)
    a = s.sample(seeds, epoch=1, step=2)
    b = s.sample(seeds, epoch=1, step=2)
    c = s.sample(seeds, epoch=1, step=3)
    d = NeighborSampler(indptr, indices, [5, 5], seed=4).sample(seeds, epoch=1, step=2)
    for x, y in zip(a.blocks, b.blocks):
        assert torch.equal(x.src_ids, y.src_ids) and torch.equal(x.edge_index, y.edge_index)
    assert not torch.equal(a.blocks[-1].src_ids, c.blocks[-1].src_ids)
    assert not torch.equal(a.blocks[-1].src_ids, d.blocks[-1].src_ids)


def test_relabel_dst_first_then_first_appearance():
    src, local = relabel(torch.tensor([9, 4]), torch.tensor([7, 4, 9, 7, 1]))
    assert src.tolist() == [9, 4, 7, 1]
    assert local.tolist() == [2, 1, 0, 2, 3]


@pytest.mark.parametrize("held", [(0, 0), (1000, 60_000), (0, 10_000_000)])
def test_compiled_relabeler_equals_torch_and_is_sized_by_the_batch(held):
    """The compiled relabeler (held ids direct, the others hashed) gives the torch reference's
    ids and slots call after call, grows its hash table when a batch needs it, leaves both
    tables empty, and holds 16 B per hashed slot instead of 8 B per node of the graph."""
    relabel_kernels = pytest.importorskip("gnnscale.samplers.relabel_kernels")
    if not relabel_kernels.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    N = 10_000_000
    rel = relabel_kernels.Relabeler(*held, capacity=8)
    g = torch.Generator().manual_seed(0)
    for size in (10, 5000, 200_000, 300):  # the table grows at the third call, and is reused after
        dst = torch.randperm(N, generator=g)[: size // 5]
        nbrs = torch.cat([torch.randint(0, N, (size,), generator=g), dst[: size // 10]])  # repeats and dst
        got, want = rel(dst, nbrs), relabel(dst, nbrs)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert (rel.direct == -1).all() and (rel.table[:, 0] == -1).all()
    hashed = 2 * 240_000 * 16  # at least twice the largest call's ids, 16 bytes a slot
    assert rel.table.nbytes <= 2 * hashed and rel.table_bytes <= (held[1] - held[0]) * 8 + 2 * hashed
    assert rel.table_bytes < N * 8 or held == (0, N)
    with pytest.raises(ValueError, match="expected non-negative node ids, found 1 negative"):
        rel(torch.tensor([3]), torch.tensor([5, -1]))


def test_empty_seeds():
    indptr, indices = _random_graph()
    mb = NeighborSampler(indptr, indices, [5, 5]).sample(torch.empty(0, dtype=torch.int64))
    assert all(b.num_src == 0 and b.num_edges == 0 for b in mb.blocks)


@pytest.mark.parametrize("bad", [[0], [10, -2], [1.5], []])
def test_bad_fanouts(bad):
    with pytest.raises(SamplerError, match="fanout"):
        check_fanouts(bad)


def test_fanouts_wrong_length():
    with pytest.raises(SamplerError, match="expected 2 fanouts"):
        check_fanouts([5, 5, 5], num_layers=2)


def test_seeds_out_of_range_and_dtype():
    indptr, indices = _random_graph()
    s = NeighborSampler(indptr, indices, [5])
    with pytest.raises(SamplerError, match=r"seed ids must lie in \[0, 500\)"):
        s.sample(torch.tensor([3, 500]))
    with pytest.raises(SamplerError, match="int64"):
        s.sample(torch.tensor([3.0]))


@pytest.mark.parametrize("fanouts", [[5, 4, 3], [-1, 2], [1, 1, 1, 1]])
def test_compiled_and_torch_kernels_agree(fanouts):
    pytest.importorskip("numba")
    indptr, indices = _random_graph(n=2000, e=30000, seed=5)
    seeds = torch.randperm(2000, generator=torch.Generator().manual_seed(0))[:300]
    keys = torch.randperm(2000, generator=torch.Generator().manual_seed(1))  # arbitrary stream identities
    a = NeighborSampler(indptr, indices, fanouts, seed=9, node_keys=keys, backend="torch").sample(seeds, 3, 4)
    b = NeighborSampler(indptr, indices, fanouts, seed=9, node_keys=keys, backend="numba").sample(seeds, 3, 4)
    for x, y in zip(a.blocks, b.blocks):
        assert torch.equal(x.src_ids, y.src_ids)
        assert torch.equal(x.dst_ids, y.dst_ids)
        assert torch.equal(x.edge_index, y.edge_index)


def test_compiled_kernel_per_node_keys_match_torch():
    pytest.importorskip("numba")
    from gnnscale.samplers import cpu_kernels

    indptr, indices = _random_graph(n=300, e=6000, seed=2)
    rows = torch.arange(300)
    keys = torch.tensor([stream_key(0, 0, 0, r % 3, 0) for r in range(300)], dtype=torch.int64)
    c1, n1 = sample_from_csc(indptr, indices, rows, rows, 7, keys)
    c2, n2 = cpu_kernels.sample_from_csc(indptr, indices, rows, rows, 7, keys)
    assert torch.equal(c1, c2) and torch.equal(n1, n2)


def test_repeated_seeds_are_rejected():
    indptr, indices = _random_graph()
    with pytest.raises(SamplerError, match="seeds must be distinct"):
        NeighborSampler(indptr, indices, [5]).sample(torch.tensor([3, 7, 3]))


def test_training_batches_never_repeat_a_seed():
    from gnnscale.samplers.seeds import cut_batches as _batches

    ids = torch.arange(100, 130)  # 30 ids, batch 32: every step uses all 30 once
    for b in _batches(ids, 32, 3, wrap=True):
        assert torch.equal(b, ids)
    ids = torch.arange(70)  # 70 ids, batch 32, 4 steps: wrap across batches, not inside one
    out = _batches(ids, 32, 4, wrap=True)
    assert [b.numel() for b in out] == [32, 32, 32, 32]
    assert all(b.unique().numel() == b.numel() for b in out)
    assert out[2].tolist() == list(range(64, 70)) + list(range(0, 26))
    assert [b.numel() for b in _batches(ids, 32, 4, wrap=False)] == [32, 32, 6, 0]


def test_epoch_steps_follow_the_mean_rank_and_cut_larger_batches_evenly():
    """Ranks with 5250 and 4750 training nodes, batch 1024: 5 steps each (the mean rank's count;
    was 6, the larger rank's), the larger rank in near-equal batches of 1050, no seed twice."""
    from gnnscale.samplers.seeds import cut_batches, epoch_steps

    assert epoch_steps([5250, 4750], 1024) == 5
    assert epoch_steps([10000], 1024) == 10
    assert epoch_steps([0, 0], 1024) == 0
    assert epoch_steps([10000, 0], 1024) == 5  # capped: no batch over twice the batch size
    assert epoch_steps([20000, 0], 1024) == 10
    big = cut_batches(torch.arange(5250), 1024, 5, wrap=True)
    assert [b.numel() for b in big] == [1050] * 5 and torch.equal(torch.cat(big), torch.arange(5250))
    small = cut_batches(torch.arange(4750), 1024, 5, wrap=True)
    assert [b.numel() for b in small] == [1024] * 5 and all(b.unique().numel() == 1024 for b in small)


def test_max_steps_keeps_the_epochs_first_batches():
    """--max-steps caps the steps; the batches stay those of the whole epoch (batch-size seeds)."""
    from gnnscale.samplers.seeds import SeedSchedule

    ids = torch.arange(1500) * 2
    capped = SeedSchedule(ids, [1500], 100, seed=0, rank=0, max_steps=3)
    full = SeedSchedule(ids, [1500], 100, seed=0, rank=0)
    assert capped.steps == 3 and full.steps == 15
    batches = capped.epoch(0)
    assert [b.numel() for b in batches] == [100, 100, 100]
    assert all(torch.equal(a, b) for a, b in zip(batches, full.epoch(0)[:3]))
    # A pipeline's steps: the same schedule at batch x M seeds, cut into M micro-batches.
    micro = SeedSchedule(ids, [1500], 100 * 4, seed=0, rank=0, micro=4)
    step = micro.epoch(0)[0]
    whole = SeedSchedule(ids, [1500], 100 * 4, seed=0, rank=0).epoch(0)[0]
    assert [m.numel() for m in step] == [100] * 4 and torch.equal(torch.cat(step), whole)
    few = SeedSchedule(ids[:70], [70], 32 * 4, seed=0, rank=0, micro=4)  # fewer seeds than a step holds
    assert few.steps == 1 and [m.numel() for m in few.epoch(0)[0]] == [18, 18, 17, 17]
