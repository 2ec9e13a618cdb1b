"""Seed-edge batches (samplers/link.py, docs/link_prediction.md section 3): negatives, the edge
filter, exclusion of the batch's positives, and distributed == single process."""
from __future__ import annotations

import pytest
import torch

from gnnscale.datasets import generate_synthetic
from gnnscale.errors import SamplerError
from gnnscale.partitioning import load_part, partition_graph, to_csc
from gnnscale.samplers import Block, EdgeFilter, LinkSampler, MiniBatch, NegativeSampler, NeighborSampler
from gnnscale.samplers import link_kernels

N_NODES = 1200
FANOUTS = [4, 3]


def _csc(edge_index: torch.Tensor, n: int, relabel: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    indptr, indices = to_csc(edge_index, n, dedupe=True, relabel=None if relabel is None else relabel.numpy())
    return torch.from_numpy(indptr), torch.from_numpy(indices)


def _adjacency(edge_index: torch.Tensor, n: int) -> torch.Tensor:
    adj = torch.zeros(n, n, dtype=torch.bool)
    adj[edge_index[0], edge_index[1]] = True
    return adj


def _scored_pairs(mb: MiniBatch) -> torch.Tensor:
    """int64 [2, B + Q] the scored pairs in the batch's node ids."""
    return mb.seeds[mb.edge_label_index]


@pytest.fixture(scope="module")
def graph():
    return generate_synthetic(num_nodes=N_NODES, avg_degree=6, num_classes=4, num_features=4, seed=7)


@pytest.fixture(scope="module")
def parts(graph, tmp_path_factory):
    """(folder, book, new_of_old, old_of_new): the graph cut into 2 parts by METIS."""
    out = tmp_path_factory.mktemp("link2")
    partition_graph(graph, 2, out, method="metis", dataset="synthetic")
    loaded = [load_part(out, p) for p in range(2)]
    old_of_new = torch.cat([p.orig_ids for p in loaded])
    new_of_old = torch.empty_like(old_of_new)
    new_of_old[old_of_new] = torch.arange(old_of_new.numel())
    return str(out), loaded[0].book, new_of_old, old_of_new


# 1. uniform negatives ------------------------------------------------------------------------

def test_uniform_negatives_cover_every_part_in_proportion(parts):
    _, book, _, _ = parts
    n = book.num_nodes
    sampler = NegativeSampler(n, "uniform", k=100, seed=3)
    pos = torch.zeros(2, 1000, dtype=torch.int64)
    neg, of_pos = sampler.draw(pos, epoch=0, step=0, rank=0)
    assert neg.shape == (2, 100_000) and neg.dtype == torch.int64
    assert torch.equal(of_pos, torch.arange(1000).repeat_interleave(100))
    ids = neg.reshape(-1)  # 200k draws
    assert int(ids.min()) >= 0 and int(ids.max()) < n
    share = torch.bincount(book.owner(ids), minlength=2).double() / ids.numel()
    fraction = book.part_sizes().double() / n
    assert book.part_sizes().tolist() != [n, 0]
    assert torch.all((share - fraction).abs() < 0.01), (share, fraction)
    # per_source: the destinations alone, likewise.
    dst = NegativeSampler(n, "per_source", k=200, seed=3).draw(pos, 0, 0, 0)[0][1]
    assert int(dst.min()) >= 0 and int(dst.max()) < n
    share = torch.bincount(book.owner(dst), minlength=2).double() / dst.numel()
    assert torch.all((share - fraction).abs() < 0.01), (share, fraction)


def test_negatives_are_keyed_by_seed_epoch_step_rank_only():
    s = NegativeSampler(1000, "uniform", k=4, seed=5)
    pos = torch.zeros(2, 50, dtype=torch.int64)
    a = s.draw(pos, 1, 2, 3)[0]
    assert torch.equal(a, NegativeSampler(1000, "uniform", k=4, seed=5).draw(pos + 7, 1, 2, 3)[0])
    for other in (s.draw(pos, 2, 2, 3)[0], s.draw(pos, 1, 3, 3)[0], s.draw(pos, 1, 2, 0)[0],
                  NegativeSampler(1000, "uniform", k=4, seed=6).draw(pos, 1, 2, 3)[0]):
        assert not torch.equal(a, other)


# 2. the edge filter ----------------------------------------------------------------------------

def test_edge_filter_answers_every_pair_of_a_small_graph():
    data = generate_synthetic(num_nodes=40, avg_degree=16, num_classes=2, num_features=2, seed=3)
    n = data.num_nodes
    adj = _adjacency(data.edge_index, n)
    f = EdgeFilter(*_csc(data.edge_index, n))
    assert f.keys.numel() == data.edge_index.size(1) and f.keys.dtype == torch.int64
    u, v = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    assert torch.equal(f.has_edge(u.reshape(-1), v.reshape(-1)), adj.reshape(-1))
    assert f.has_edge(torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64)).shape == (0,)


def test_filtered_negatives_are_never_edges_and_only_edges_are_dropped():
    data = generate_synthetic(num_nodes=40, avg_degree=16, num_classes=2, num_features=2, seed=3)
    n = data.num_nodes
    adj = _adjacency(data.edge_index, n)
    indptr, indices = _csc(data.edge_index, n)
    node = NeighborSampler(indptr, indices, [2], seed=1)
    negatives = NegativeSampler(n, "per_source", k=20, seed=9)
    pos = data.edge_index
    eids = torch.arange(0, pos.size(1), 2)
    raw = LinkSampler(node, pos, negatives, rank=1).sample(eids, epoch=3, step=1)
    kept = LinkSampler(node, pos, negatives, rank=1, edge_filter=EdgeFilter(indptr, indices)).sample(eids, 3, 1)
    B = eids.numel()
    raw_neg, kept_neg = _scored_pairs(raw)[:, B:], _scored_pairs(kept)[:, B:]
    true_edge = adj[raw_neg[0], raw_neg[1]]
    assert raw.stats["filtered_negatives"] == 0 and raw_neg.size(1) == B * 20
    assert int(true_edge.sum()) > 1000  # a dense graph: many draws hit an edge
    assert kept.stats["filtered_negatives"] == int(true_edge.sum())
    assert torch.equal(kept_neg, raw_neg[:, ~true_edge])  # exactly the true edges dropped, order kept
    assert torch.equal(kept.neg_of_pos, raw.neg_of_pos[~true_edge])
    assert not bool(adj[kept_neg[0], kept_neg[1]].any())
    assert torch.equal(kept.edge_label, torch.cat([torch.ones(B), torch.zeros(kept_neg.size(1))]))
    assert torch.equal(_scored_pairs(kept)[:, :B], pos[:, eids])


# 3. distributed == single process ------------------------------------------------------------

CONFIGS = [("uniform", 3, True, True), ("per_source", 2, True, False), ("in_batch", 4, False, True)]


def _positives(graph, book, new_of_old):
    """Per rank: every 3rd edge whose source it owns (new ids), and its batches of edge ids
    (rank 1 has an empty batch at step 2, so the ranks' batches differ in size)."""
    ei = new_of_old[graph.edge_index]
    owner = book.owner(ei[0])
    gen = torch.Generator().manual_seed(4)
    pos, batches = [], []
    for r in range(2):
        p = ei[:, owner == r][:, ::3]
        perm = torch.randperm(p.size(1), generator=gen)
        sizes = [64, 40, 0 if r == 1 else 25]
        pos.append(p)
        batches.append([perm[sum(sizes[:i]): sum(sizes[: i + 1])] for i in range(3)])
    return pos, batches


def test_distributed_link_sampler_equals_single_process(graph, parts):
    from gnnscale.process.launch import launch_local

    from link_workers import batch_record, link_batches

    folder, book, new_of_old, old_of_new = parts
    n = book.num_nodes
    pos, batches = _positives(graph, book, new_of_old)
    gen = torch.Generator().manual_seed(8)
    queries = [torch.randint(0, n, (2, 3000), generator=gen) for _ in range(2)]
    queries = [torch.cat([q, new_of_old[graph.edge_index[:, r::5]]], 1) for r, q in enumerate(queries)]
    results = launch_local(link_batches, 2, args=(folder, old_of_new, pos, batches, CONFIGS, FANOUTS, 5, 11, queries),
                           threads_per_worker=1)
    # The reference: the whole graph in new ids, each node's stream keyed by its original id.
    indptr, indices = _csc(graph.edge_index, n, relabel=new_of_old)
    node = NeighborSampler(indptr, indices, FANOUTS, seed=5, node_keys=old_of_new)
    edge_filter = EdgeFilter(indptr, indices)
    adj = _adjacency(new_of_old[graph.edge_index], n)
    for res in results:
        r = res["rank"]
        assert torch.equal(res["answers"], adj[queries[r][0], queries[r][1]])
        assert res["filter_stats"]["rounds"] == {"negative_filter_request": 1, "negative_filter": 1}
        for (mode, k, use_filter, exclude), got in zip(CONFIGS, res["configs"]):
            link = LinkSampler(node, pos[r], NegativeSampler(n, mode, k, seed=11), r,
                               edge_filter if use_filter else None, exclude)
            assert got["rounds"].get("negative_filter", 0) == (3 if use_filter else 0)
            for step, eids in enumerate(batches[r]):
                ref = batch_record(link.sample(eids, epoch=2, step=step), old_of_new)
                mine = got["batches"][step]
                B = eids.numel()
                assert torch.equal(mine["seeds"], ref["seeds"])
                pairs = mine["seeds"][mine["edge_label_index"]]
                assert torch.equal(pairs, ref["seeds"][ref["edge_label_index"]])
                assert torch.equal(pairs[:, :B], old_of_new[pos[r][:, eids]])  # the positives, original ids
                for key in ("edge_label_index", "edge_label", "neg_of_pos"):
                    assert torch.equal(mine[key], ref[key]), key
                assert mine["edge_label"].dtype == torch.float32
                assert mine["filtered_negatives"] == ref["filtered_negatives"]
                assert mine["excluded_edges"] == ref["excluded_edges"]
                assert len(mine["blocks"]) == len(ref["blocks"]) == len(FANOUTS)
                for a, b in zip(mine["blocks"], ref["blocks"]):
                    for key in ("src", "dst", "edge_index"):
                        assert torch.equal(a[key], b[key]), key
                if B == 0:
                    assert mine["seeds"].numel() == 0 and mine["edge_label_index"].shape == (2, 0)
                if use_filter:
                    neg = new_of_old[pairs[:, B:]]
                    assert not bool(adj[neg[0], neg[1]].any())
            if exclude:
                assert sum(b["excluded_edges"] for b in got["batches"]) > 0
        # the filter did drop true-edge negatives on this rank (seeded: 2 or more each)
        assert sum(b["filtered_negatives"] for c, got in zip(CONFIGS, res["configs"]) if c[2]
                   for b in got["batches"]) >= 2


# 4. exclusion of the batch's positives --------------------------------------------------------

def _block_keys(mb: MiniBatch, n: int) -> list[torch.Tensor]:
    return [b.src_ids[b.edge_index[0]] * n + b.dst_ids[b.edge_index[1]] for b in mb.blocks]


@pytest.mark.parametrize("kernels", ["compiled", "torch"])
def test_exclusion_removes_the_positives_and_their_reverses_only(graph, kernels, monkeypatch):
    if kernels == "torch":  # the fallback of samplers/link_kernels.py (no numba, or CUDA tensors)
        monkeypatch.setattr(link_kernels, "usable", lambda *tensors: False)
    n = graph.num_nodes
    indptr, indices = _csc(graph.edge_index, n)
    node = NeighborSampler(indptr, indices, [-1, 5], seed=2)
    pos = graph.edge_index  # message-passing edges (the graph is symmetric: reverses too)
    eids = torch.arange(0, pos.size(1), 37)
    negatives = NegativeSampler(n, "uniform", k=2, seed=1)
    kept = LinkSampler(node, pos, negatives, rank=0).sample(eids, epoch=1, step=3)
    full = LinkSampler(node, pos, negatives, rank=0, exclude=False).sample(eids, epoch=1, step=3)
    p = pos[:, eids]
    banned = torch.cat([p[0] * n + p[1], p[1] * n + p[0]])
    hits = [torch.isin(k, banned) for k in _block_keys(full, n)]
    assert full.stats["excluded_edges"] == 0
    assert sum(int(h.sum()) for h in hits) == kept.stats["excluded_edges"]
    # fan-out -1 at the seeds: both directions of every positive are block edges
    assert int(hits[-1].sum()) == torch.unique(banned).numel() > 0
    for key in _block_keys(kept, n):
        assert not bool(torch.isin(key, banned).any())
    for a, b, h in zip(kept.blocks, full.blocks, hits):
        assert torch.equal(a.src_ids, b.src_ids) and torch.equal(a.dst_ids, b.dst_ids)  # node lists kept
        assert torch.equal(a.edge_index, b.edge_index[:, ~h])
    excluded = kept.stats["excluded_edges"]
    assert kept.stats["sampled_edges"] == kept.num_sampled_edges == full.num_sampled_edges - excluded
    assert torch.equal(kept.edge_label_index, full.edge_label_index)


class _TypedStub:
    """A node sampler (no ``rank``) returning one typed block over the seeds: every seed
    receives an edge from every other seed, relation = source id % 3."""

    def __init__(self, flip: bool = False) -> None:
        self.calls = []
        self.flip = flip  # sources in reverse order: the seeds are not the blocks' first sources

    def sample(self, seeds, epoch=0, step=0):
        self.calls.append((epoch, step))
        d = seeds.numel()
        src, dst = torch.meshgrid(torch.arange(d), torch.arange(d), indexing="ij")
        off = src != dst
        ei = torch.stack([src[off], dst[off]])
        src_ids = seeds.flip(0) if self.flip else seeds
        attr = torch.stack([src_ids[ei[0]], seeds[ei[1]]], 1).to(torch.float32)  # (source id, destination id)
        block = Block(src_ids, seeds, ei, edge_type=src_ids[ei[0]] % 3, node_type=src_ids % 2, edge_attr=attr)
        return MiniBatch(seeds=seeds, blocks=[block], stats={"sampled_edges": ei.size(1)})


@pytest.mark.parametrize("kernels", ["compiled", "torch"])
@pytest.mark.parametrize("flip", [False, True], ids=["seeds first (local keys)", "seeds not first (global keys)"])
def test_exclusion_keeps_edge_types_aligned(flip, kernels, monkeypatch):
    if kernels == "torch":  # the fallback of samplers/link_kernels.py (no numba, or CUDA tensors)
        monkeypatch.setattr(link_kernels, "usable", lambda *tensors: False)
    pos = torch.tensor([[1, 4, 7], [2, 5, 1]])
    stub = _TypedStub(flip)
    mb = LinkSampler(stub, pos, NegativeSampler(10, "in_batch", k=1), rank=0).sample(torch.tensor([0, 1, 2]), 4, 6)
    assert stub.calls == [(4, 6)]
    assert mb.seeds.tolist() == [1, 2, 4, 5, 7]
    b = mb.blocks[0]
    src, dst = b.src_ids[b.edge_index[0]], b.dst_ids[b.edge_index[1]]
    # flipped, (7, 1) and (1, 7) are not block edges (the stub's i != j drops them instead)
    excluded = 4 if flip else 6
    assert mb.stats["excluded_edges"] == excluded and b.num_edges == 20 - excluded
    pairs = set(zip(src.tolist(), dst.tolist()))
    assert not pairs & {(1, 2), (2, 1), (4, 5), (5, 4), (7, 1), (1, 7)}
    assert torch.equal(b.edge_type, src % 3)
    assert torch.equal(b.edge_attr, torch.stack([src, dst], 1).to(torch.float32))
    assert torch.equal(b.node_type, b.src_ids % 2)
    # in_batch, k=1: (src_i, dst_{i+1})
    assert _scored_pairs(mb).tolist() == [[1, 4, 7, 1, 4, 7], [2, 5, 1, 5, 1, 2]]
    assert mb.neg_of_pos.tolist() == [0, 1, 2]


# 5. modes, shapes, errors ----------------------------------------------------------------------

def test_in_batch_and_per_source_shapes():
    pos = torch.tensor([[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]])
    neg, of_pos = NegativeSampler(20, "in_batch", k=2).draw(pos, 0, 0, 0)
    assert of_pos.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert neg.tolist() == [[0, 0, 1, 1, 2, 2, 3, 3, 4, 4], [11, 12, 12, 13, 13, 14, 14, 10, 10, 11]]
    neg, of_pos = NegativeSampler(20, "in_batch", k=10).draw(pos, 0, 0, 0)  # k capped at B - 1
    assert neg.shape == (2, 20) and torch.equal(of_pos, torch.arange(5).repeat_interleave(4))
    assert not bool((neg[1] == pos[1][of_pos]).any())  # never the positive's own destination
    for b in (0, 1):
        neg, of_pos = NegativeSampler(20, "in_batch", k=3).draw(pos[:, :b], 0, 0, 0)
        assert neg.shape == (2, 0) and of_pos.shape == (0,)
    neg, of_pos = NegativeSampler(20, "per_source", k=3, seed=1).draw(pos, 2, 0, 1)
    assert neg.shape == (2, 15) and torch.equal(of_pos, torch.arange(5).repeat_interleave(3))
    assert torch.equal(neg[0], pos[0].repeat_interleave(3))
    assert int(neg[1].min()) >= 0 and int(neg[1].max()) < 20
    neg, of_pos = NegativeSampler(20, "uniform", k=3).draw(pos[:, :0], 0, 0, 0)
    assert neg.shape == (2, 0) and of_pos.shape == (0,)


def test_link_batch_shapes_and_an_empty_batch(graph):
    n = graph.num_nodes
    node = NeighborSampler(*_csc(graph.edge_index, n), FANOUTS, seed=0)
    link = LinkSampler(node, graph.edge_index, NegativeSampler(n, "per_source", k=3), rank=0)
    mb = link.sample(torch.tensor([5, 50, 500]), epoch=0, step=0)
    assert mb.edge_label_index.shape == (2, 12) and mb.edge_label_index.dtype == torch.int64
    assert mb.edge_label.tolist() == [1.0] * 3 + [0.0] * 9
    assert mb.neg_of_pos.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert torch.equal(mb.seeds, torch.unique(_scored_pairs(mb)))
    assert torch.equal(mb.blocks[-1].dst_ids, mb.seeds)
    empty = link.sample(torch.empty(0, dtype=torch.int64), epoch=0, step=1)
    assert empty.seeds.numel() == 0 and empty.edge_label_index.shape == (2, 0)
    assert empty.edge_label.shape == (0,) and empty.neg_of_pos.shape == (0,)
    assert [b.num_edges for b in empty.blocks] == [0, 0]


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "hard"}, "negative sampling mode must be one of uniform, per_source, in_batch; found 'hard'"),
    ({"k": 0}, "k (negatives per positive) must be an integer >= 1; found 0"),
    ({"k": 1.5}, "k (negatives per positive) must be an integer >= 1; found 1.5"),
    ({"k": True}, "k (negatives per positive) must be an integer >= 1; found True"),
])
def test_bad_mode_or_k_is_a_one_line_sampler_error(kwargs, message):
    with pytest.raises(SamplerError) as err:
        NegativeSampler(10, **kwargs)
    assert str(err.value) == message


def test_bad_edge_ids_are_sampler_errors(graph):
    n = graph.num_nodes
    node = NeighborSampler(*_csc(graph.edge_index, n), FANOUTS, seed=0)
    link = LinkSampler(node, graph.edge_index[:, :10], NegativeSampler(n), rank=0)
    with pytest.raises(SamplerError, match=r"edge_ids must lie in \[0, 10\)"):
        link.sample(torch.tensor([3, 10]))
    with pytest.raises(SamplerError, match="1-D int64"):
        link.sample(torch.tensor([1.0]))
