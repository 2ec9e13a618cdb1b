"""Edge attributes through sampling (docs/targets_and_edge_features.md, section 4): the kernels
return the drawn edges' CSC positions on request (same draws), and every block carries the
rows of exactly its edges in ``edge_index`` order, locally, typed, and across ranks (gloo),
where the rows travel in their own byte category ``edge_attr``."""
from __future__ import annotations

import itertools
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.datasets import generate_synthetic
from gnnscale.errors import SamplerError
from gnnscale.partitioning import load_part, partition_graph, to_csc
from gnnscale.partitioning.book import PartitionBook
from gnnscale.process.launch import launch_local
from gnnscale.samplers import DistNeighborSampler, NeighborSampler
from gnnscale.samplers import cpu_kernels
from gnnscale.samplers import kernels as torch_kernels
from gnnscale.samplers.typed import TypedGraph, relation_indptr, sample_each_relation, sample_relations, typed_fanouts

VARIANTS = [(False, False), (True, False), (False, True), (True, True)]  # (replace, weighted)
DE = 6


# ------------------------------------------------------------------ a graph with edge features


def edge_table(src: torch.Tensor, dst: torch.Tensor, n: int, dim: int = DE, seed: int = 0):
    """Random float32 features of the edges (src, dst): (sorted keys src * n + dst, their rows)."""
    feat = torch.randn(src.numel(), dim, generator=torch.Generator().manual_seed(seed))
    keys = src * n + dst
    order = torch.argsort(keys)
    return keys[order], feat[order]


def lookup(table, src: torch.Tensor, dst: torch.Tensor, n: int) -> torch.Tensor:
    """The feature rows of edges (src, dst) (every pair must be an edge), vectorized by key."""
    keys, feat = table
    k = src * n + dst
    pos = torch.searchsorted(keys, k).clamp(max=max(keys.numel() - 1, 0))
    assert torch.equal(keys[pos], k), "a sampled (src, dst) is not an edge of the graph"
    return feat[pos]


def edge_weight_of(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """A weight per edge from its original endpoints (a seventh of them 0: never drawn)."""
    return ((src * 31 + dst * 17) % 7).to(torch.float32)


def csc_dst(indptr: torch.Tensor) -> torch.Tensor:
    """The row (destination) of every CSC edge."""
    n = indptr.numel() - 1
    return torch.repeat_interleave(torch.arange(n), torch.diff(indptr), output_size=int(indptr[-1]))


def synthetic(n: int = 1500, seed: int = 3):
    data = generate_synthetic(num_nodes=n, avg_degree=8.0, num_features=4, num_classes=3, seed=seed)
    table = edge_table(data.edge_index[0], data.edge_index[1], n)
    indptr, indices = to_csc(data.edge_index, n, dedupe=True)
    indptr, indices = torch.from_numpy(indptr), torch.from_numpy(indices)
    attr = lookup(table, indices, csc_dst(indptr), n)  # aligned with the CSC
    return data, table, indptr, indices, attr


def check_blocks(mb, table, n, de=DE):
    """Each block's edge_attr holds the features of its (src, dst) edges, in edge_index order."""
    for b in mb.blocks:
        assert b.edge_attr is not None and b.edge_attr.dtype == torch.float32
        assert tuple(b.edge_attr.shape) == (b.num_edges, de)
        src, dst = b.src_ids[b.edge_index[0]], b.dst_ids[b.edge_index[1]]
        assert torch.equal(b.edge_attr, lookup(table, src, dst, n))


def same_draws(a, b):
    assert len(a.blocks) == len(b.blocks)
    for x, y in zip(a.blocks, b.blocks):
        assert torch.equal(x.src_ids, y.src_ids) and torch.equal(x.dst_ids, y.dst_ids)
        assert torch.equal(x.edge_index, y.edge_index) and x.num_hist == y.num_hist


# ------------------------------------------------------------------ kernels


@pytest.mark.parametrize("threads", [1, 2])
def test_kernels_return_edge_positions_with_the_same_draws(threads):
    """Every variant, both backends (serial and parallel compiled kernels): asked, a third tensor
    of CSC positions with ``indices[edges] == nbrs`` inside each node's row; the draws do not change."""
    if not cpu_kernels.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    saved = cpu_kernels._THREADS[0]
    cpu_kernels._THREADS[0] = threads  # > 1 thread and >= 4096 rows: the parallel kernels
    try:
        _check_kernels()
    finally:
        cpu_kernels._THREADS[0] = saved


def _check_kernels():
    _, _, indptr, indices, _ = synthetic(n=6000, seed=1)
    w = edge_weight_of(indices, csc_dst(indptr))
    cum = torch.cumsum(w.double(), 0)
    rows = torch.randperm(6000, generator=torch.Generator().manual_seed(2))[:5000]
    per_row_keys = torch.tensor([11, 12]).repeat_interleave(2500)
    for fanout, (replace, weighted), key in itertools.product([-1, 1, 4, 12], VARIANTS, [7, per_row_keys]):
        kw = {"replace": replace}
        if weighted:
            kw.update(weights=w, cum_weights=cum)
        results = []
        for sample in (torch_kernels.sample_from_csc, cpu_kernels.sample_from_csc):
            plain = sample(indptr, indices, rows, rows * 5 + 1, fanout, key, **kw)
            asked = sample(indptr, indices, rows, rows * 5 + 1, fanout, key, return_edges=True, **kw)
            assert len(plain) == 2 and len(asked) == 3
            counts, nbrs, edges = asked
            assert torch.equal(plain[0], counts) and torch.equal(plain[1], nbrs)
            assert edges.dtype == torch.int64 and edges.numel() == nbrs.numel()
            assert torch.equal(indices[edges], nbrs)
            r = torch.repeat_interleave(rows, counts)
            assert bool(((edges >= indptr[r]) & (edges < indptr[r + 1])).all())
            if weighted:
                assert bool((w[edges] > 0).all())
            results.append(asked)
        for x, y in zip(*results):  # torch == numba, positions included
            assert torch.equal(x, y), (fanout, replace, weighted)


@pytest.mark.parametrize("threads", [1, 2])
def test_packed_kernels_draw_the_same_edges_with_their_rows(threads):
    """``sample_packed`` over ``pack_edges`` (serial and parallel kernels, 3 and 8 features per
    edge): the draws of ``sample_from_csc`` and exactly the rows at their CSC positions."""
    if not cpu_kernels.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    _, _, indptr, indices, _ = synthetic(n=6000, seed=1)
    rows = torch.randperm(6000, generator=torch.Generator().manual_seed(2))[:5000]
    per_row_keys = torch.tensor([11, 12]).repeat_interleave(2500)
    saved = cpu_kernels._THREADS[0]
    cpu_kernels._THREADS[0] = threads
    try:
        for de in (3, 8):
            attr = torch.randn(indices.numel(), de, generator=torch.Generator().manual_seed(de))
            packed = cpu_kernels.pack_edges(indices, attr)
            assert packed.dtype == np.int32 and packed.shape == (indices.numel(), 2 + de)
            for fanout, key in itertools.product([-1, 1, 4, 12], [7, per_row_keys]):
                counts, nbrs, edges = cpu_kernels.sample_from_csc(indptr, indices, rows, rows * 5 + 1, fanout, key,
                                                                  return_edges=True)
                got = cpu_kernels.sample_packed(indptr, packed, rows, rows * 5 + 1, fanout, key, return_edges=True)
                assert torch.equal(got[0], counts) and torch.equal(got[1], nbrs) and torch.equal(got[2], edges)
                assert got[3].dtype == torch.float32 and torch.equal(got[3], attr[edges]), (de, fanout)
                plain = cpu_kernels.sample_packed(indptr, packed, rows, rows * 5 + 1, fanout, key)
                assert len(plain) == 3 and torch.equal(plain[1], nbrs) and torch.equal(plain[2], attr[edges])
    finally:
        cpu_kernels._THREADS[0] = saved


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_typed_kernels_return_edge_positions(backend):
    from test_typed_sampling import COUNTS, ENDS, RELS, csc_by_relation, typed_graph

    from gnnscale.samplers.kernels import Kernels

    ptr, ei, et = typed_graph()
    n = int(ptr[-1])
    indptr, indices, etype = csc_by_relation(ei, et, n)
    node_type = torch.repeat_interleave(torch.arange(3), torch.tensor(COUNTS))
    sample = Kernels(n, backend=backend).sample
    rows = torch.arange(0, n, 3)
    for fans in ([3, 2], None):  # one fan-out per hop (one kernel call), then per relation
        fanouts = typed_fanouts([3, 2], RELS) if fans else typed_fanouts([3, 2], RELS, 2, {"cites": [1, 4]})
        typed = TypedGraph(relation_indptr(indptr, etype, len(RELS)), torch.tensor([d for _, d in ENDS]),
                           fanouts, lambda ids: node_type[ids])
        for hop, fn in itertools.product((0, 1), (sample_relations, sample_each_relation)):
            args = (sample, typed, indices, rows, node_type[rows], rows * 7 + 1, hop, 4321, {})
            plain, asked = fn(*args), fn(*args, return_edges=True)
            assert len(plain) == 2 and len(asked) == 3
            assert torch.equal(plain[0], asked[0]) and torch.equal(plain[1], asked[1])
            assert torch.equal(indices[asked[2]], asked[1])
            # each edge of its relation's run: the relation of the CSC edge is the drawn one
            rel = torch.arange(len(RELS)).repeat(rows.numel())
            assert torch.equal(etype[asked[2]], torch.repeat_interleave(rel, asked[0].flatten()))


# ------------------------------------------------------------------ local sampler


@pytest.mark.parametrize("backend", ["torch", "numba"])
@pytest.mark.parametrize("replace,weighted", VARIANTS)
def test_local_blocks_carry_the_rows_of_their_edges(replace, weighted, backend):
    data, table, indptr, indices, attr = synthetic()
    n = data.num_nodes
    ew = edge_weight_of(indices, csc_dst(indptr)) if weighted else None
    kw = dict(seed=4, backend=backend, replace=replace, edge_weight=ew)
    seeds = torch.arange(0, n, 13)
    with_attr = NeighborSampler(indptr, indices, [5, 4, 3], edge_attr=attr, **kw).sample(seeds, 1, 2)
    without = NeighborSampler(indptr, indices, [5, 4, 3], **kw).sample(seeds, 1, 2)
    same_draws(with_attr, without)
    assert all(b.edge_attr is None for b in without.blocks)
    check_blocks(with_attr, table, n)
    if replace:  # with replacement an edge drawn twice has its row twice
        b = with_attr.blocks[-1]
        code = b.edge_index[0] * b.num_dst + b.edge_index[1]
        assert torch.unique(code).numel() < code.numel()
    moved = with_attr.blocks[0].to("cpu")
    assert torch.equal(moved.edge_attr, with_attr.blocks[0].edge_attr)


def test_edge_attr_from_a_read_only_memory_map_and_bad_shapes(tmp_path):
    data, table, indptr, indices, attr = synthetic()
    np.save(tmp_path / "edge_attr.npy", attr.numpy())
    mapped = np.load(tmp_path / "edge_attr.npy", mmap_mode="r")
    mb = NeighborSampler(indptr, indices, [4, 4], edge_attr=mapped).sample(torch.arange(0, 1500, 7))
    check_blocks(mb, table, data.num_nodes)
    half = NeighborSampler(indptr, indices, [4], edge_attr=attr.double()).sample(torch.arange(5))
    assert half.blocks[0].edge_attr.dtype == torch.float32
    with pytest.raises(SamplerError, match=r"edge_attr must have shape \[\d+, De\]"):
        NeighborSampler(indptr, indices, [4], edge_attr=attr[:-1])
    with pytest.raises(SamplerError, match=r"edge_attr must have shape"):
        NeighborSampler(indptr, indices, [4], edge_attr=attr[:, 0])
    with pytest.raises(SamplerError, match="floating-point"):
        NeighborSampler(indptr, indices, [4], edge_attr=attr.long())


def _typed_setup(fanouts):
    from test_typed_sampling import COUNTS, ENDS, RELS, csc_by_relation, typed_graph

    ptr, ei, et = typed_graph()
    n = int(ptr[-1])
    R = len(RELS)
    # features of the typed edges, keyed by (src, dst * R + relation): one row per typed edge
    table = edge_table(ei[0], ei[1] * R + et, n * R, seed=5)
    node_type = torch.repeat_interleave(torch.arange(3), torch.tensor(COUNTS))
    spec = dict(ei=ei, et=et, n=n, R=R, rels=RELS, dst_type=torch.tensor([d for _, d in ENDS]),
                fanouts=typed_fanouts([1, 1], RELS, 2, fanouts), csc=csc_by_relation)
    return spec, table, node_type


def _typed_attr_of(table, indices_orig, dst_orig, etype, spec):
    return lookup(table, indices_orig, dst_orig * spec["R"] + etype, spec["n"] * spec["R"])


def _check_typed(mb, table, spec):
    for b in mb.blocks:
        src, dst = b.src_ids[b.edge_index[0]], b.dst_ids[b.edge_index[1]]
        assert b.edge_attr.shape == (b.num_edges, DE)
        assert torch.equal(b.edge_attr, _typed_attr_of(table, src, dst, b.edge_type, spec))


SHARED = {"writes": [3, 2], "written_by": [3, 2], "cites": [3, 2], "has_topic": [3, 2]}
PER_REL = {"writes": [3, 2], "written_by": [2, 2], "cites": [4, 1], "has_topic": [1, 1]}


@pytest.mark.parametrize("fanouts", [SHARED, PER_REL], ids=["one_call", "per_relation"])
def test_typed_local_blocks_carry_the_rows_of_their_typed_edges(fanouts):
    spec, table, node_type = _typed_setup(fanouts)
    indptr, indices, etype = spec["csc"](spec["ei"], spec["et"], spec["n"])
    attr = _typed_attr_of(table, indices, csc_dst(indptr), etype, spec)
    typed = TypedGraph(relation_indptr(indptr, etype, spec["R"]), spec["dst_type"], spec["fanouts"],
                       lambda ids: node_type[ids])
    seeds = torch.arange(0, 300, 7)
    got = NeighborSampler(indptr, indices, [1, 1], seed=9, typed=typed, edge_attr=attr).sample(seeds, 2, 3)
    ref = NeighborSampler(indptr, indices, [1, 1], seed=9, typed=typed).sample(seeds, 2, 3)
    same_draws(got, ref)
    _check_typed(got, table, spec)


class _ThreadComm:
    """Two ranks in two threads of one process: ``exchange`` only (no ``exchange_flat``)."""

    def __init__(self, rank, box, barrier):
        self.rank, self.world_size, self.box, self.barrier = rank, 2, box, barrier
        self.categories = []

    def exchange(self, send, category):
        self.categories.append(category)
        self.box[self.rank] = send
        self.barrier.wait()
        got = [self.box[r][self.rank] for r in range(2)]
        self.barrier.wait()
        return got


@pytest.mark.parametrize("fanouts", [SHARED, PER_REL], ids=["one_call", "per_relation"])
def test_typed_distributed_rows_equal_the_single_process_ones(fanouts):
    """Two ranks (threads) own a permuted graph's halves; owners send the rows of the typed
    edges they drew: blocks equal the single-process sampler's, rows included."""
    spec, table, node_type = _typed_setup(fanouts)
    n, R = spec["n"], spec["R"]
    old_of_new = torch.randperm(n, generator=torch.Generator().manual_seed(4))
    new_of_old = torch.empty_like(old_of_new)
    new_of_old[old_of_new] = torch.arange(n)
    book = PartitionBook(torch.tensor([0, n // 2, n]))
    indptr, indices, etype = spec["csc"](spec["ei"], spec["et"], n, relabel=new_of_old)
    attr = _typed_attr_of(table, old_of_new[indices], old_of_new[csc_dst(indptr)], etype, spec)
    seeds_orig = {0: torch.arange(0, 300, 11), 1: torch.arange(3, 300, 13)}
    box, barrier = [None, None], threading.Barrier(2)
    out, errors, comms = {}, [], {}

    def run(rank):
        try:
            lo, hi = int(book.offsets[rank]), int(book.offsets[rank + 1])
            e0, e1 = int(indptr[lo]), int(indptr[hi])
            ip, ix, et = indptr[lo:hi + 1] - e0, indices[e0:e1], etype[e0:e1]
            typed = TypedGraph(relation_indptr(ip, et, R), spec["dst_type"], spec["fanouts"],
                               lambda ids: node_type[old_of_new[ids]])
            comms[rank] = _ThreadComm(rank, box, barrier)
            s = DistNeighborSampler(ip, ix, book, comms[rank], [1, 1], seed=9, owned_keys=old_of_new[lo:hi],
                                    typed=typed, backend="torch", edge_attr=attr[e0:e1])
            out[rank] = s.sample(new_of_old[seeds_orig[rank]], epoch=2, step=3)
        except Exception as exc:  # pragma: no cover - surfaced below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    oi, oc, oe = spec["csc"](spec["ei"], spec["et"], n)
    typed_o = TypedGraph(relation_indptr(oi, oe, R), spec["dst_type"], spec["fanouts"], lambda ids: node_type[ids])
    attr_o = _typed_attr_of(table, oc, csc_dst(oi), oe, spec)
    for rank in range(2):
        ref = NeighborSampler(oi, oc, [1, 1], seed=9, typed=typed_o, edge_attr=attr_o).sample(seeds_orig[rank], 2, 3)
        for got, want in zip(out[rank].blocks, ref.blocks):
            assert torch.equal(old_of_new[got.src_ids], want.src_ids)
            assert torch.equal(got.edge_index, want.edge_index)
            assert torch.equal(got.edge_type, want.edge_type)
            assert torch.equal(got.edge_attr, want.edge_attr)
        assert comms[rank].categories == ["sample_request", "sample_response", "edge_attr"] * 2


# ------------------------------------------------------------------ two ranks over gloo


def dist_worker(parts_dir: str, attr_dir: str, table, n: int, seeds_orig: dict, fanouts, variants):
    """Rank body: per-part edge features built from the part's CSC (looked up by original
    (src, dst)), memory-mapped read-only; sample every variant with and without them, in every
    mode. Blocks come back in ORIGINAL ids with their rows and each sample's counters."""
    from gnnscale.process.comm import Communicator
    from gnnscale.process.groups import init_distributed

    info = init_distributed(timeout=60)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    part = load_part(parts_dir, info.rank)
    old_of_new = torch.cat([load_part(parts_dir, p, verify=False).orig_ids for p in range(info.world_size)])
    new_of_old = torch.empty_like(old_of_new)
    new_of_old[old_of_new] = torch.arange(n)
    src_o, dst_o = old_of_new[part.indices], part.orig_ids[csc_dst(part.indptr)]
    path = Path(attr_dir) / f"edge_attr_{info.rank}.npy"
    np.save(path, lookup(table, src_o, dst_o, n).numpy())
    attr = np.load(path, mmap_mode="r")
    seeds = new_of_old[seeds_orig[info.rank]]
    own_seeds = seeds[part.book.owner(seeds) == info.rank]  # historical and local mode expand owned nodes only

    def orig(mb):
        return [{"src": old_of_new[b.src_ids], "dst": old_of_new[b.dst_ids], "edge_index": b.edge_index,
                 "num_hist": b.num_hist, "edge_attr": b.edge_attr} for b in mb.blocks]

    out = {"rank": info.rank, "owned": part.orig_ids}
    for replace, weighted in variants:
        ew = edge_weight_of(src_o, dst_o) if weighted else None
        for mode in ("exact", "historical", "local"):
            for with_attr in (True, False):
                comm.stats.reset()
                s = DistNeighborSampler(part.indptr, part.indices, part.book, comm, fanouts, seed=5,
                                        owned_keys=part.orig_ids, replace=replace, edge_weight=ew, mode=mode,
                                        edge_attr=attr if with_attr else None)
                mb = s.sample(seeds if mode == "exact" else own_seeds, epoch=1, step=4)
                out[replace, weighted, mode, with_attr] = {"blocks": orig(mb), "stats": comm.stats.snapshot()}
    return out


DIST_VARIANTS = [(False, False), (True, False), (False, True)]


def test_distributed_rows_equal_the_single_process_ones_and_are_counted(tmp_path_factory):
    n, fanouts = 3000, [5, 3]
    data, table, indptr, indices, attr = synthetic(n=n, seed=7)
    parts_dir = tmp_path_factory.mktemp("synthetic2")
    partition_graph(data, 2, parts_dir, method="metis", dataset="synthetic")
    attr_dir = tmp_path_factory.mktemp("edge_attr")
    seeds_orig = {0: torch.arange(0, n, 17), 1: torch.arange(5, n, 19)}
    results = launch_local("test_sampler_edge_attr:dist_worker", 2,
                           args=(str(parts_dir), str(attr_dir), table, n, seeds_orig, fanouts, DIST_VARIANTS))
    received = {}
    for res in results:
        r = res["rank"]
        owned = torch.zeros(n, dtype=torch.bool)
        owned[res["owned"]] = True
        for replace, weighted in DIST_VARIANTS:
            ew = edge_weight_of(indices, csc_dst(indptr)) if weighted else None
            ref = NeighborSampler(indptr, indices, fanouts, seed=5, replace=replace, edge_weight=ew,
                                  edge_attr=attr).sample(seeds_orig[r], epoch=1, step=4)
            got = res[replace, weighted, "exact", True]
            remote_edges = 0
            for b, want in zip(got["blocks"], ref.blocks):
                assert torch.equal(b["src"], want.src_ids) and torch.equal(b["dst"], want.dst_ids)
                assert torch.equal(b["edge_index"], want.edge_index)
                assert torch.equal(b["edge_attr"], want.edge_attr)
                remote_edges += int((~owned[b["dst"][b["edge_index"][1]]]).sum())
            for b in ref.blocks:  # and they are the features of the blocks' edges
                assert torch.equal(b.edge_attr, lookup(table, b.src_ids[b.edge_index[0]],
                                                       b.dst_ids[b.edge_index[1]], n))
            st = got["stats"]
            assert remote_edges > 0
            assert st["received"]["edge_attr"] == remote_edges * DE * 4  # exactly the remote edges' rows
            assert st["rounds"] == {"sample_request": 2, "sample_response": 2, "edge_attr": 2}
            received[r, replace, weighted] = st
            plain = res[replace, weighted, "exact", False]
            assert plain["stats"]["rounds"] == {"sample_request": 2, "sample_response": 2}
            assert "edge_attr" not in plain["stats"]["sent"] and "edge_attr" not in plain["stats"]["received"]
            for mode in ("exact", "historical", "local"):  # same draws with or without; rows aligned
                a, b = res[replace, weighted, mode, True], res[replace, weighted, mode, False]
                for x, y in zip(a["blocks"], b["blocks"]):
                    assert torch.equal(x["src"], y["src"]) and torch.equal(x["edge_index"], y["edge_index"])
                    assert y["edge_attr"] is None
                    assert torch.equal(x["edge_attr"], lookup(table, x["src"][x["edge_index"][0]],
                                                              x["dst"][x["edge_index"][1]], n))
                if mode != "exact":
                    assert "edge_attr" not in a["stats"]["rounds"]
            assert any(b["num_hist"] for b in res[replace, weighted, "historical", True]["blocks"])
    for replace, weighted in DIST_VARIANTS:  # what one rank receives the other sent
        assert received[0, replace, weighted]["received"]["edge_attr"] == received[1, replace, weighted]["sent"]["edge_attr"]
        assert received[1, replace, weighted]["received"]["edge_attr"] == received[0, replace, weighted]["sent"]["edge_attr"]
