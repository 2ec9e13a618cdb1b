"""Temporal graphs (docs/temporal.md): timed data in, a T-CSR partition out, and time-respecting
sampling that never lets an edge from the future in, on 1, 2 and 3 processes."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data, TemporalData

from gnnscale.datasets.temporal import from_pyg, read_events, temporal_data
from gnnscale.errors import DatasetError, SamplerError
from gnnscale.partitioning import load_part, partition_graph
from gnnscale.partitioning.graph import to_csc
from gnnscale.process.launch import launch_local
from gnnscale.samplers.temporal import (TemporalNeighborSampler, check_edge_time, check_tcsr,
                                        check_temporal_options, time_sorted_csc)
from temporal_workers import blocks_orig, temporal_sample

N, E, T = 120, 2400, 1000


def _graph(seed: int = 0) -> Data:
    g = np.random.default_rng(seed)
    src, dst = g.integers(0, N, E), g.integers(0, N, E)
    t = torch.from_numpy(g.integers(0, T, E))
    t[:50] = t[50:100]  # ties: equal times at one node happen
    return temporal_data(src, dst, t, N, "random-temporal", "test")


@pytest.fixture(scope="module")
def graph():
    return _graph()


@pytest.fixture(scope="module")
def parted(graph, tmp_path_factory):
    out = {}
    for p in (1, 2, 3):
        d = tmp_path_factory.mktemp(f"temporal{p}")
        partition_graph(graph, p, d, method="random" if p > 1 else "metis", dataset="random-temporal")
        out[p] = str(d)
    return out


def _local(graph: Data, fanouts, **kw) -> TemporalNeighborSampler:
    """The whole graph in one process: the T-CSR ordered as the partition writer orders it."""
    indptr, indices, eids = map(torch.from_numpy, to_csc(graph.edge_index, N, return_edge_ids=True))
    et = graph.edge_time[eids]
    indices, perm = time_sorted_csc(indptr, indices, et, eids)
    return TemporalNeighborSampler(indptr, indices, et[perm], fanouts, **kw)


def _seeds(k: int = 60, seed: int = 1):
    g = np.random.default_rng(seed)
    return torch.from_numpy(g.integers(0, N, k)), torch.from_numpy(g.integers(0, T + 50, k))


def _in_edges(graph: Data, v: int):
    """(sources, times) of v's in-edges."""
    m = graph.edge_index[1] == v
    return graph.edge_index[0][m], graph.edge_time[m]


# ---------------------------------------------------------------- data


def test_events_file_and_the_partition_keep_every_event_with_its_time_in_t_csr_order(tmp_path, graph, parted):
    f = tmp_path / "ev.txt"
    f.write_text("# src dst t\n10 20 5\n20 10 7\n10 20 5\n30 10 9\n")
    d = read_events(f)
    assert d.num_nodes == 3 and d.edge_index.tolist() == [[0, 1, 0, 2], [1, 0, 1, 0]]
    assert d.edge_time.tolist() == [5, 7, 5, 9]  # the repeated pair is two events
    want = sorted(zip(graph.edge_index[0].tolist(), graph.edge_index[1].tolist(), graph.edge_time.tolist()))
    for p, folder in parted.items():
        got = []
        for k in range(p):
            part = load_part(folder, k)
            assert part.meta["temporal"]["events"] == E
            check_tcsr(part.indptr, part.edge_time, part.indices.numel())  # ascending within each node
            old = torch.cat([load_part(folder, j).orig_ids for j in range(p)])
            dst = torch.repeat_interleave(part.orig_ids, torch.diff(part.indptr))
            got += list(zip(old[part.indices].tolist(), dst.tolist(), part.edge_time.tolist()))
        assert sorted(got) == want


def test_dir_and_pyg_inputs_carry_their_times(tmp_path):
    from gnnscale.datasets import load_dataset

    np.save(tmp_path / "edge_index.npy", np.array([[0, 1, 1], [1, 2, 2]]))
    np.save(tmp_path / "x.npy", np.ones((3, 2), np.float32))
    np.save(tmp_path / "y.npy", np.array([0, 1, 0]))
    np.save(tmp_path / "edge_time.npy", np.array([3, 1, 2]))
    d = load_dataset(f"dir:{tmp_path}")
    assert d.edge_index.tolist() == [[0, 1, 1], [1, 2, 2]] and d.edge_time.tolist() == [3, 1, 2]
    td = TemporalData(src=torch.tensor([0, 2]), dst=torch.tensor([1, 0]), t=torch.tensor([4, 6]),
                      msg=torch.ones(2, 3))
    d = from_pyg(td)
    assert d.edge_time.tolist() == [4, 6] and d.edge_attr.shape == (2, 3)
    d = from_pyg(Data(edge_index=torch.tensor([[0, 1], [1, 2]]), time=torch.tensor([5, 9, 1]), num_nodes=3))
    assert d.edge_time.tolist() == [5, 9]  # node times: an edge takes its source's
    (tmp_path / "j.csv").write_text("user_id,item_id,timestamp,state_label,f1,f2\n0,0,1.0,0,0.5,1\n1,1,4.0,1,2,3\n")
    d = load_dataset(f"jodie:{tmp_path / 'j.csv'}")
    assert d.edge_index.tolist() == [[0, 1], [2, 3]] and d.edge_time.tolist() == [1, 4]  # items after the users
    assert d.edge_attr.tolist() == [[0.5, 1.0], [2.0, 3.0]] and d.state_label.tolist() == [0, 1]


@pytest.mark.parametrize("times, claimed, message", [
    (np.arange(4), False, "expected edge_time with one time per edge, i.e. shape [3], found shape (4,)"),
    (np.array([1.0, np.nan, 2.0]), False, "expected finite times in edge_time, found 1 NaN or infinite"),
    (np.array([1.5, 2.0, 3.0]), False, "expected integer times in edge_time, found 1.5 at edge 0"),
    (np.array([1, 3, 2]), True, "expected edge_time sorted by time as claimed, found time 2 at edge 2 after 3"),
])
def test_bad_times_are_one_line_each(times, claimed, message):
    with pytest.raises(DatasetError) as err:
        check_edge_time(times, 3, "edge_time", claimed)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_bad_sampler_options_and_unsorted_csc_are_one_line_each():
    for args, msg in ((("newest", 0, "<"), "expected temporal_strategy among uniform, last"),
                      (("last", -3, "<"), "expected a time window as an integer >= 0"),
                      (("last", 0, "<<"), "expected the time cut '<'")):
        with pytest.raises(SamplerError, match=msg):
            check_temporal_options(*args)
    with pytest.raises(SamplerError, match="expected each node's in-edges sorted by time"):
        check_tcsr(torch.tensor([0, 2]), torch.tensor([5, 4]), 2)


# ---------------------------------------------------------------- the rules of time


@pytest.mark.parametrize("strategy, window", [("uniform", 0), ("last", 0), ("uniform", 300), ("last", 300)])
def test_no_sampled_edge_is_ever_at_or_after_its_seeds_time_one_process(graph, strategy, window):
    seeds, times = _seeds()
    for fanouts in ([4, 3], [-1, 2]):
        mb = _local(graph, fanouts, seed=3, strategy=strategy, window=window).sample(seeds, times)
        for b in blocks_orig(mb, None, torch.arange(seeds.numel())):
            assert b["edge_time"].numel() > 0
            assert bool((b["edge_time"] < b["seed_time"]).all())  # strictly before, per tree
            assert torch.equal(b["seed_time"], times[b["tree"]])  # each tree sees its own seed's time
            if window:
                assert bool((b["edge_time"] >= b["seed_time"] - window).all())


def test_the_cut_is_strict_an_edge_at_the_seeds_time_is_left_out_unless_asked(graph):
    """Seeds asked exactly at their in-edges' times: '<' must leave those edges out, '<=' keep them
    (this test fails if the default cut were '<=')."""
    v = torch.arange(N)
    t = torch.stack([_in_edges(graph, int(i))[1].max() for i in v])  # each node's latest in-edge time
    strict = _local(graph, [-1]).sample(v, t).blocks[-1]
    assert bool((strict.edge_time < strict.src_time[strict.edge_index[1]]).all())
    loose = _local(graph, [-1], cut="<=").sample(v, t).blocks[-1]
    at = loose.edge_time == loose.src_time[loose.edge_index[1]]
    assert int(at.sum()) >= N and loose.num_edges == strict.num_edges + int(at.sum())


def test_last_takes_exactly_the_k_most_recent_earlier_in_edges(graph):
    seeds, times = _seeds(200, seed=4)
    k = 5
    b = _local(graph, [k], strategy="last").sample(seeds, times).blocks[-1]
    for i in range(seeds.numel()):  # the reference, one seed at a time (a test, not a hot path)
        src, tt = _in_edges(graph, int(seeds[i]))
        m = tt < times[i]
        want = sorted(tt[m].tolist())[-k:]
        mine = b.edge_index[1] == i
        assert sorted(b.edge_time[mine].tolist()) == want


def test_uniform_draws_every_earlier_in_edge_equally_often():
    """Node 0 has 20 in-edges at times 0..19 (and later ones); 4000 seeds ask for 5 of them at times
    after 19 but before the later edges: each earlier edge drawn ~1000 times (chi-square)."""
    from scipy.stats import chisquare

    src = np.concatenate([np.arange(1, 21), np.arange(1, 11)])
    t = torch.from_numpy(np.concatenate([np.arange(20), np.full(10, 10**6)]))
    g = temporal_data(src, np.zeros(30, np.int64), t, 21, "star", "test")
    indptr, indices, eids = map(torch.from_numpy, to_csc(g.edge_index, 21, return_edge_ids=True))
    et = g.edge_time[eids]
    indices, perm = time_sorted_csc(indptr, indices, et, eids)
    s = TemporalNeighborSampler(indptr, indices, et[perm], [5], seed=11)
    b = s.sample(torch.zeros(4000, dtype=torch.int64), torch.arange(100, 4100)).blocks[-1]
    assert bool((b.edge_time < 20).all()) and b.num_edges == 4000 * 5
    counts = torch.bincount(b.edge_time, minlength=20)
    assert float(chisquare(counts.numpy()).pvalue) > 1e-3


# ---------------------------------------------------------------- over owners


def _canonical(blocks: list[list[dict]]) -> list[list[tuple]]:
    """Per hop, the sorted (tree, src, dst, edge time) of the ranks' blocks together."""
    hops = []
    for h in range(len(blocks[0])):
        rows = []
        for rank_blocks in blocks:
            b = rank_blocks[h]
            rows += list(zip(b["tree"].tolist(), b["src"].tolist(), b["dst"].tolist(), b["edge_time"].tolist()))
        hops.append(sorted(rows))
    return hops


CONFIGS = [{"strategy": "uniform"}, {"strategy": "last"}, {"strategy": "uniform", "window": 300}]


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_the_same_trees_on_1_2_and_3_workers_and_never_a_future_edge(graph, parted, parts):
    seeds, times = _seeds(48, seed=7)
    fanouts = [4, 3]
    results = launch_local(temporal_sample, parts, args=(parted[parts], seeds, times, fanouts, 5, CONFIGS))
    for c, cfg in enumerate(CONFIGS):
        ref = blocks_orig(_local(graph, fanouts, seed=5, **cfg).sample(seeds, times, 1, 2), None,
                          torch.arange(seeds.numel()))
        got = [res[c] for res in results]
        assert _canonical(got) == _canonical([ref])
        for rank_blocks in got:
            for b in rank_blocks:
                assert bool((b["edge_time"] < b["seed_time"]).all())
                assert torch.equal(b["seed_time"], times[b["tree"]])


@pytest.mark.parametrize("width,with_keys", [(2, False), (3, True)])
def test_a_hops_queries_and_answers_round_trip_through_three_owners_in_the_frontiers_order(width, with_keys):
    """DistTemporalSampler.draw_hop's packing (samplers/temporal_kernels.py) with the exchanges done
    by hand: 3 requesters' frontiers (repeats, an empty one, a rank asked nothing) go to their owners
    as (id, time[, key]) rows, each owner answers every row received (counts, then each edge's
    values), and each requester gets its answers back in its frontier's order."""
    from gnnscale.samplers.temporal_kernels import merge_replies, pack_replies, pack_requests

    P, N = 3, 90
    offsets = torch.tensor([0, 30, 60, N])
    g = np.random.default_rng(3)
    fronts = [torch.from_numpy(g.integers(0, N, n)) for n in (50, 0, 41)]
    fronts[2][fronts[2] >= 60] -= 30  # requester 2 asks nothing of owner 2
    times = [torch.from_numpy(g.integers(0, 1000, f.numel())) for f in fronts]
    keys = [torch.from_numpy(g.integers(0, 1 << 40, f.numel())) for f in fronts]

    def answer(ids, t, k):  # an owner's draws: a pure function of the query
        c = (ids + t) % 4
        q = torch.repeat_interleave(torch.arange(ids.numel()), c)
        j = torch.arange(q.numel()) - torch.repeat_interleave(torch.cumsum(c, 0) - c, c)
        vals = [ids[q] * 10 + j, t[q] - j - 1, k[q] + j][:width]
        return c, vals

    packed = [pack_requests(torch.searchsorted(offsets, f, right=True) - 1, f, t, k if with_keys else None, P)
              for f, t, k in zip(fronts, times, keys)]
    assert all(req.shape == (f.numel(), 3 if with_keys else 2) for (req, _, _), f in zip(packed, fronts))
    assert int(packed[2][1][2]) == 0
    replies = []
    for r in range(P):  # owner r: the rows every requester sent it, requester 0's first
        pieces = [torch.split(req, asked.tolist())[r] for req, asked, _ in packed]
        got = torch.cat(pieces)
        assert bool(((got[:, 0] >= offsets[r]) & (got[:, 0] < offsets[r + 1])).all())
        k = got[:, 2] if with_keys else torch.zeros(got.shape[0], dtype=torch.int64)
        c, vals = answer(got[:, 0], got[:, 1], k)
        buf, lens = pack_replies(c, torch.tensor([x.shape[0] for x in pieces]), vals)
        replies.append(torch.split(buf, lens.tolist()))
    for q, (f, t, k) in enumerate(zip(fronts, times, keys)):
        back = [replies[r][q] for r in range(P)]
        counts, *vals = merge_replies(torch.cat(back), torch.tensor([b.numel() for b in back]), packed[q][1],
                                      packed[q][2], width)
        want_c, want_v = answer(f, t, k if with_keys else torch.zeros_like(f))
        assert torch.equal(counts, want_c) and len(vals) == width
        assert all(torch.equal(a, b) for a, b in zip(vals, want_v))


def test_the_cli_says_a_bad_events_file_in_one_line_and_exits_2(tmp_path):
    from test_cli import cli_in_process

    (tmp_path / "unsorted.txt").write_text("1 2 5\n2 3 3\n")
    (tmp_path / "nan.txt").write_text("1 2 5\n2 3 nan\n")
    for name, want in (("unsorted.txt?sorted=true", "sorted by time as claimed, found time 3 at edge 1 after 5"),
                       ("nan.txt", "expected finite times in the third column")):
        r = cli_in_process("partition", "--dataset", f"events:{tmp_path / name}", "--parts", "1", "--out",
                           str(tmp_path / "p"))
        assert r.returncode == 2 and want in r.stderr and r.stderr.count("\n") == 1, r.stderr
