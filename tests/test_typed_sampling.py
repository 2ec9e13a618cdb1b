"""Relation-wise sampling of typed graphs: fan-outs per relation, blocks typed, and the
distributed sampler (real gloo processes) equal to the single-process one."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnscale.errors import SamplerError
from gnnscale.process.launch import launch_local
from gnnscale.samplers import NeighborSampler
from gnnscale.samplers.kernels import Kernels
from gnnscale.samplers.typed import TypedGraph, relation_indptr, sample_each_relation, sample_relations, typed_fanouts

from dist_workers import typed_sample

RELS = ["writes", "written_by", "cites", "has_topic"]
# (src type, dst type) per relation; types: 0 paper, 1 author, 2 topic
ENDS = [(1, 0), (0, 1), (0, 0), (2, 0)]
COUNTS = [300, 200, 20]


def typed_graph(seed: int = 0):
    """A small random typed graph in the homogeneous view: (type_ptr, edge_index, edge_type)."""
    g = torch.Generator().manual_seed(seed)
    ptr = torch.tensor([0, *np.cumsum(COUNTS)])
    src, dst, et = [], [], []
    for r, (s, d) in enumerate(ENDS):
        m = 1500
        a = torch.randint(int(ptr[s]), int(ptr[s + 1]), (m,), generator=g)
        b = torch.randint(int(ptr[d]), int(ptr[d + 1]), (m,), generator=g)
        src.append(a), dst.append(b), et.append(torch.full((m,), r))
    ei = torch.stack([torch.cat(src), torch.cat(dst)])
    et = torch.cat(et)
    key = (ei[1] * len(RELS) + et) * int(ptr[-1]) + ei[0]  # dedupe (src, dst, relation)
    key = torch.unique(key)
    ei = torch.stack([key % int(ptr[-1]), key // int(ptr[-1]) // len(RELS)])
    et = key // int(ptr[-1]) % len(RELS)
    return ptr, ei, et


def csc_by_relation(ei, et, n, relabel=None):
    """(indptr, indices, etype): in-edges of each node sorted by (relation, original source);
    with ``relabel`` (new id of each original id), rows and sources in new ids."""
    R = len(RELS)
    key = (ei[1] * R + et) * n + ei[0]
    if relabel is not None:
        key = (relabel[ei[1]] * R + et) * n + ei[0]
    order = torch.argsort(key)
    dst = (key[order] // n) // R
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    src = ei[0][order]
    return indptr, (src if relabel is None else relabel[src]), et[order]


FANOUTS = {"writes": [3, 2], "written_by": [2, 2], "cites": [4, 1], "has_topic": [1, 1]}


def single_process(seeds, fanouts=FANOUTS):
    ptr, ei, et = typed_graph()
    n = int(ptr[-1])
    indptr, indices, etype = csc_by_relation(ei, et, n)
    node_type = torch.repeat_interleave(torch.arange(3), torch.tensor(COUNTS))
    typed = TypedGraph(relation_indptr(indptr, etype, len(RELS)), torch.tensor([d for _, d in ENDS]),
                       typed_fanouts([1, 1], RELS, 2, fanouts), lambda ids: node_type[ids])
    s = NeighborSampler(indptr, indices, [1, 1], seed=9, backend="torch", typed=typed)
    return s.sample(seeds, epoch=2, step=3), (ei, et, node_type)


def test_fanouts_per_relation_are_honoured_and_edges_typed():
    seeds = torch.arange(0, 300, 7)  # papers
    mb, (ei, et, node_type) = single_process(seeds)
    true = set(zip(ei[0].tolist(), ei[1].tolist(), et.tolist()))
    for hop, block in enumerate(reversed(mb.blocks)):
        src = block.src_ids[block.edge_index[0]]
        dst = block.dst_ids[block.edge_index[1]]
        assert set(zip(src.tolist(), dst.tolist(), block.edge_type.tolist())) <= true
        assert torch.equal(block.node_type, node_type[block.src_ids])
        for r, name in enumerate(RELS):  # at most the fan-out per destination and relation
            sel = block.edge_type == r
            if sel.any():
                per_dst = torch.bincount(block.edge_index[1][sel])
                assert int(per_dst.max()) <= FANOUTS[name][hop]
                # and exactly min(fan-out, degree) for every destination of the relation's type
                d = block.dst_ids[torch.nonzero(node_type[block.dst_ids] == ENDS[r][1]).flatten()]
                deg = torch.bincount(ei[1][et == r], minlength=node_type.numel())[d]
                got = torch.bincount(block.edge_index[1][sel], minlength=block.num_dst)
                want = deg.clamp(max=FANOUTS[name][hop])
                pos = torch.nonzero(node_type[block.dst_ids] == ENDS[r][1]).flatten()
                assert torch.equal(got[pos], want)


def test_one_fanout_list_for_every_relation_and_bad_fanouts():
    assert typed_fanouts([5, 3], RELS) == [[5] * 4, [3] * 4]
    assert typed_fanouts([5, 3], RELS, 2, {"cites": [2, 1]}) == [[5, 5, 2, 5], [3, 3, 1, 3]]  # the rest: --fanouts
    with pytest.raises(SamplerError, match=r"names relation\(s\) \['cited_by'\] that the graph does not have"):
        typed_fanouts([1, 1], RELS, 2, {**FANOUTS, "cited_by": [1, 1]})
    with pytest.raises(SamplerError, match=r"relation 'cites' has 3 fan-outs \[1, 1, 1\], but --fanouts gives 2 hops"):
        typed_fanouts([1, 1], RELS, 2, {**FANOUTS, "cites": [1, 1, 1]})
    with pytest.raises(SamplerError, match="positive integers or -1"):
        typed_fanouts([1, 1], RELS, 2, {"cites": [0, 1]})


def test_unsorted_relations_are_refused():
    with pytest.raises(SamplerError, match="sorted by relation"):
        relation_indptr(torch.tensor([0, 3]), torch.tensor([1, 0, 1]), 2)


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_one_call_for_a_shared_fanout_draws_what_a_call_per_relation_draws(backend):
    """Every relation with the hop's fan-out: one kernel call over all (node, relation) runs; it
    must draw exactly the per-relation calls' neighbours, in the same order."""
    ptr, ei, et = typed_graph()
    n = int(ptr[-1])
    indptr, indices, etype = csc_by_relation(ei, et, n)
    node_type = torch.repeat_interleave(torch.arange(3), torch.tensor(COUNTS))
    typed = TypedGraph(relation_indptr(indptr, etype, len(RELS)), torch.tensor([d for _, d in ENDS]),
                       typed_fanouts([3, 2], RELS), lambda ids: node_type[ids])
    sample = Kernels(n, backend=backend).sample
    rows = torch.arange(0, n, 3)
    for hop, key in ((0, 12345), (1, torch.tensor([7, 9]).repeat_interleave(rows.numel() // 2 + 1)[:rows.numel()])):
        args = (sample, typed, indices, rows, node_type[rows], rows * 7 + 1, hop, key, {})
        one, each = sample_relations(*args), sample_each_relation(*args)
        assert torch.equal(one[0], each[0]) and torch.equal(one[1], each[1])
        assert int(one[0].sum()) > 0


@pytest.mark.parametrize("parts", [2, 3])
def test_distributed_typed_sampling_equals_single_process(parts):
    ptr, ei, et = typed_graph()
    n = int(ptr[-1])
    # Parts own contiguous new ids: a seeded permutation, cut into near-equal ranges.
    old_of_new = torch.randperm(n, generator=torch.Generator().manual_seed(4))
    new_of_old = torch.empty_like(old_of_new)
    new_of_old[old_of_new] = torch.arange(n)
    seeds_orig = torch.arange(0, 300, 11)
    res = launch_local(typed_sample, parts, args=(ei, et, COUNTS, RELS, [d for _, d in ENDS], FANOUTS,
                                                  new_of_old, seeds_orig))
    ref, _ = single_process(seeds_orig)  # every rank draws the same: the draws never depend on the rank
    for got in res:
        assert len(got["blocks"]) == len(ref.blocks)
        for b, want in zip(got["blocks"], ref.blocks):
            assert torch.equal(b["src"], want.src_ids)
            assert torch.equal(b["edge_index"], want.edge_index)
            assert torch.equal(b["edge_type"], want.edge_type)
            assert torch.equal(b["node_type"], want.node_type)
        assert got["rounds"] == {"sample_request": 2, "sample_response": 2}  # one exchange per hop
