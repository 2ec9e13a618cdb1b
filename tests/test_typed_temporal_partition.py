"""Typed temporal partitions (issue 57, docs/temporal.md section 2): a HeteroData with per-relation edge
times (ACM with synthetic times and repeated events) cut into 2 typed parts keeps every event, and each
part's in-edges of each relation are a T-CSR (by time, then the relation's input column) whose times and
``edge_ids`` are the input's; meta.json and ``gnnscale info`` say so; bad times are one line each."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gnnscale.errors import GnnscaleError
from gnnscale.partitioning import partition_graph

from test_cli import cli_in_process


def timed_acm(acm_data, repeats: int = 40, seed: int = 0):
    """ACM with synthetic per-relation edge times in [0, 1000) and each relation's first ``repeats``
    edges repeated (events at other times). A copy: the fixture's graph is left as it is."""
    hd = acm_data.clone()
    g = torch.Generator().manual_seed(seed)
    for et in hd.edge_types:
        ei = hd[et].edge_index
        hd[et].edge_index = torch.cat([ei, ei[:, :repeats]], 1)
        hd[et].edge_time = torch.randint(0, 1000, (hd[et].edge_index.size(1),), generator=g)
    return hd


@pytest.fixture(scope="module")
def timed(acm_data):
    return timed_acm(acm_data)


def _part_edges(folder, meta):
    """Per part: {relation: (dst per-type orig int64 [E_r] in file order, src per-type orig, time, edge id)}."""
    typed = meta["typed"]
    ets = [tuple(e) for e in typed["edge_types"]]
    types = list(typed["node_types"])
    type_ptr = np.concatenate([[0], np.cumsum(typed["num_nodes_per_type"])])
    old_of_new = np.concatenate([np.load(folder / f"part{p}" / "orig_ids.npy") for p in range(meta["num_parts"])])
    out = []
    for p in range(meta["num_parts"]):
        pdir = folder / f"part{p}"
        indptr, indices = np.load(pdir / "indptr.npy"), np.load(pdir / "indices.npy")
        etype, t, eid = np.load(pdir / "etype.npy"), np.load(pdir / "edge_time.npy"), np.load(pdir / "edge_ids.npy")
        lo = meta["offsets"][p]
        dst_h = old_of_new[lo + np.repeat(np.arange(indptr.size - 1), np.diff(indptr))]
        src_h = old_of_new[indices]
        rels = {}
        for r, et in enumerate(ets):
            sel = etype == r
            rels[et] = (dst_h[sel] - type_ptr[types.index(et[2])], src_h[sel] - type_ptr[types.index(et[0])],
                        t[sel], eid[sel])
        out.append(rels)
    return out


def test_a_typed_graph_with_edge_times_is_cut_into_per_relation_t_csrs(timed, tmp_path):
    folder = tmp_path / "acm-t2"
    meta = partition_graph(timed, 2, folder, method="random", dataset="acm-t")
    total = sum(int(timed[et].edge_index.size(1)) for et in timed.edge_types)
    tm = meta["temporal"]
    assert meta["format_version"] == 2 and meta["num_edges"] == total  # every event kept, repeats too
    assert tm["events"] == total and tm["source"] == "per-relation edge_time"
    assert "each relation" in tm["order"]
    lo = min(int(timed[et].edge_time.min()) for et in timed.edge_types)
    hi = max(int(timed[et].edge_time.max()) for et in timed.edge_types)
    assert (tm["time_min"], tm["time_max"]) == (lo, hi)
    assert json.loads((folder / "meta.json").read_text())["temporal"] == tm
    seen = {et: [] for et in timed.edge_types}
    for rels in _part_edges(folder, meta):
        for et, (dst, src, t, eid) in rels.items():
            ei, et_time = timed[et].edge_index, timed[et].edge_time
            # the input's events: the file's (source, target, time) is its edge_ids' column of the relation
            assert np.array_equal(ei[0, eid].numpy(), src) and np.array_equal(ei[1, eid].numpy(), dst)
            assert np.array_equal(et_time[eid].numpy(), t)
            # T-CSR: within each target's in-edges of the relation, by (time, input column)
            same = dst[1:] == dst[:-1]
            assert not (same & ((t[1:] < t[:-1]) | ((t[1:] == t[:-1]) & (eid[1:] < eid[:-1])))).any()
            assert np.array_equal(np.unique(dst), np.unique(dst[np.r_[True, ~same]]))  # each target one run
            seen[et].append(eid)
    for et, ids in seen.items():  # every column of every relation in exactly one part
        assert np.array_equal(np.sort(np.concatenate(ids)), np.arange(timed[et].edge_index.size(1)))
    r = cli_in_process("info", str(folder))
    assert r.returncode == 0, r.stderr
    assert (f"temporal           {total} timed events, times {lo} .. {hi}, each relation's in-edges ordered by "
            "time (T-CSR per relation), from per-relation edge_time") in r.stdout
    # the engine's temporal link task does not sample a typed graph in time: refused by what it is (not "no times")
    from gnnscale.config import TrainConfig
    from gnnscale.planning.plan import plan_run
    with pytest.raises(GnnscaleError, match="is a typed temporal graph \\(times per relation\\): the engine's typed "
                                            "training does not sample in time yet; sample it with gnnscale.pyg"):
        plan_run(TrainConfig(task="temporal_link", layer="rel:sage"), meta, where="acm-t")


def test_node_times_time_each_relation_by_its_sources(acm_data, tmp_path):
    hd = acm_data.clone()
    for t in hd.node_types:
        hd[t].time = torch.arange(hd[t].num_nodes) * 3 % 997
    meta = partition_graph(hd, 2, tmp_path / "n2", method="random", dataset="acm-n")
    assert meta["temporal"]["source"].startswith("node time")
    for rels in _part_edges(tmp_path / "n2", meta):
        for et, (dst, src, t, eid) in rels.items():
            assert np.array_equal(t, hd[et[0]].time[src].numpy())


@pytest.mark.parametrize("change, message", [
    (lambda hd, et: setattr(hd[et], "edge_time", hd[et].edge_time[:-1]),
     r"expected hd\[\('paper', 'written_by', 'author'\)\].edge_time with one time per edge, i.e. shape \[13447\]"),
    (lambda hd, et: setattr(hd[et], "edge_time", hd[et].edge_time.double().index_fill(0, torch.tensor([3]),
                                                                               float("nan"))),
     r"expected finite times in hd\[\('paper', 'written_by', 'author'\)\].edge_time, found 1 NaN or infinite"),
    (lambda hd, et: setattr(hd[et], "edge_time", hd[et].edge_time + 0.5),
     r"expected integer times in hd\[\('paper', 'written_by', 'author'\)\].edge_time"),
    (lambda hd, et: delattr(hd[et], "edge_time"),
     r"expected times on every relation of .*found none on \('paper', 'written_by', 'author'\)"),
    (lambda hd, et: setattr(hd["paper"], "time", torch.zeros(hd["paper"].num_nodes, dtype=torch.long)),
     r"expected edge times or node times in .*found both"),
    (lambda hd, et: setattr(hd[et], "time", hd[et].edge_time),
     r"expected one time attribute on relation \('paper', 'written_by', 'author'\)"),
])
def test_bad_times_are_one_line_each(timed, tmp_path, change, message):
    hd = timed.clone()
    change(hd, ("paper", "written_by", "author"))
    with pytest.raises(GnnscaleError, match=message) as err:
        partition_graph(hd, 2, tmp_path / "bad", method="random", dataset="bad")
    assert "\n" not in str(err.value)
