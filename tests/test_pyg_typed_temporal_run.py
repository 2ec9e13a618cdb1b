"""gnnscale.pyg.start_run's rank loaders in time over a typed temporal folder (issue 57;
gnnscale.pyg.run_typed_temporal): on 2 processes (gloo on 127.0.0.1, launch_local), rank 0 partitioning
ACM with synthetic per-relation edge times (repeated events kept), every step's two batches are, tree
for tree and relation by relation, one process's typed temporal loader batch of their seeds over the
HeteroData, the draws made by the owners, and no sampled edge is from its tree's future."""
from __future__ import annotations

from collections import Counter

import torch

from gnnscale.process.launch import launch_local
from gnnscale.pyg import LinkNeighborLoader, NeighborLoader

from pyg_typed_temporal_workers import CONFIGS, typed_temporal_batches
from test_typed_temporal_partition import timed_acm

FANOUTS = [3, 2]
B = 8  # per rank; one process's batch: 2 B
REL = ("paper", "written_by", "author")


def _edges(b: dict, tree_time: torch.Tensor, tree_type: str) -> Counter:
    """Every sampled edge as (relation, tree's input, source, target, e_id, edge time), original ids."""
    out = Counter()
    for et, ei in b["ei"].items():
        tree = b["input_id"][tree_type][b["batch"][et[2]][ei[1]]]
        src, dst = b["n_id"][et[0]][ei[0]], b["n_id"][et[2]][ei[1]]
        out += Counter(zip([et] * ei.size(1), tree.tolist(), src.tolist(), dst.tolist(), b["e_id"][et].tolist(),
                           b["edge_time"][et].tolist()))
    return out


def _plain(b) -> dict:
    return dict(n_id={t: b[t].n_id for t in b.node_types}, batch={t: b[t].batch for t in b.node_types},
                ei={et: b[et].edge_index for et in b.edge_types}, e_id={et: b[et].e_id for et in b.edge_types},
                edge_time={et: b[et].edge_time for et in b.edge_types},
                input_id={t: b[t].input_id for t in b.node_types if "input_id" in b[t]})


def test_two_ranks_sample_a_typed_folder_in_time_as_one_process(acm_data, tmp_path):
    hd = timed_acm(acm_data)
    g = torch.Generator().manual_seed(5)
    seeds = torch.randint(0, hd["paper"].num_nodes, (40,), generator=g)
    seed_time = torch.randint(0, 1100, (40,), generator=g)
    cols = torch.randint(0, hd[REL].edge_index.size(1), (36,), generator=g)
    pairs, pair_time = hd[REL].edge_index[:, cols], hd[REL].edge_time[cols]
    hd_n = acm_data.clone()  # node times: a neighbour counts at its own time
    for t in hd_n.node_types:
        hd_n[t].time = torch.randint(0, 1000, (hd_n[t].num_nodes,), generator=g)
    got = launch_local(typed_temporal_batches, 2, args=(hd, str(tmp_path / "acm-t2"), FANOUTS, seeds, seed_time, REL,
                                                        pairs, pair_time, B, 7, hd_n), threads_per_worker=1)
    for g_ in got:  # the owners drew: the hop exchanges carried requests and answers
        assert g_["comm"]["sent"]["sample_request"] > 0 and g_["comm"]["received"]["sample_response"] > 0
    for c, cfg in enumerate(CONFIGS + CONFIGS[1:2]):  # the last: the HeteroData in memory (data=)
        strict = cfg.get("time_cut") == "<"
        ref = list(NeighborLoader(hd, FANOUTS, input_nodes=("paper", seeds), input_time=seed_time,
                                  time_attr="edge_time", batch_size=2 * B, shuffle=True, seed=7, **cfg))
        assert len(got[0]["nodes"][c]) == len(got[1]["nodes"][c]) == len(ref) == 3  # 5 batches of B: 3 steps
        edges = 0
        for k, one in enumerate(ref):  # step k: rank r's batch k is the pass's batch 2 k + r
            step = [b for rank in got for b in rank["nodes"][c] if b["k"] == k and not b["repeat"]]
            assert torch.equal(torch.cat([b["input_id"]["paper"] for b in step]), one["paper"].input_id)
            mine = sum((_edges(b, seed_time, "paper") for b in step), Counter())
            assert mine == _edges(_plain(one), seed_time, "paper"), (cfg, k)
            for b in step:
                for et, ei in b["ei"].items():  # each edge before its own tree's time, and the input's
                    t = seed_time[b["input_id"]["paper"][b["batch"][et[2]][ei[1]]]]
                    te = b["edge_time"][et]
                    assert bool((te < t).all() if strict else (te <= t).all())
                    assert torch.equal(te, hd[et].edge_time[b["e_id"][et]])
                    assert torch.equal(b["n_id"][et[0]][ei[0]], hd[et].edge_index[0, b["e_id"][et]])
                    if "time_window" in cfg:
                        assert bool((te >= t - cfg["time_window"]).all())
                    edges += te.numel()
        assert edges > 100, cfg
    ref = list(LinkNeighborLoader(hd, FANOUTS, edge_label_index=(REL, pairs), edge_label_time=pair_time,
                                  time_attr="edge_time", neg_sampling_ratio=1.0, batch_size=2 * B, shuffle=True,
                                  seed=7, time_cut="<"))
    ref_n = list(LinkNeighborLoader(hd_n, FANOUTS, edge_label_index=(REL, pairs), edge_label_time=pair_time,
                                    time_attr="time", neg_sampling_ratio=1.0, batch_size=2 * B, shuffle=True,
                                    seed=7, time_cut="<"))
    assert len(ref) == len(ref_n) == 3
    # over the folder, the HeteroData in memory, the one with node times in memory (negatives redrawn in time)
    for which, k, one in [(w, k, one) for w, r in (("links", ref), ("memory", ref), ("node_time", ref_n))
                          for k, one in enumerate(r)]:
        step = [b for rank in got for b in rank[which] if b["k"] == k and not b["repeat"]]
        lab = torch.cat([b["label"][REL] for b in step])
        eli = torch.cat([torch.stack([b["n_id"]["paper"][b["eli"][REL][0]], b["n_id"]["author"][b["eli"][REL][1]]])
                         for b in step], 1)
        one_eli = torch.stack([one["paper"].n_id[one[REL].edge_label_index[0]],
                               one["author"].n_id[one[REL].edge_label_index[1]]])
        assert torch.equal(eli[:, lab == 1], one_eli[:, one[REL].edge_label == 1])
        assert torch.equal(eli[:, lab == 0], one_eli[:, one[REL].edge_label == 0])  # the step's negatives
        mine = Counter()
        for b in step:
            for et, ei in b["ei"].items():  # each edge before its tree's positive's time (strict)
                t = pair_time[b["input_id"][REL][b["batch"][et[2]][ei[1]]]]
                te = hd[et].edge_time[b["e_id"][et]] if which != "node_time" else hd_n[et[0]].time[
                    b["n_id"][et[0]][ei[0]]]
                assert bool((te < t).all())
                if which != "node_time":
                    assert torch.equal(b["edge_time"][et], te)
                src, dst = b["n_id"][et[0]][ei[0]], b["n_id"][et[2]][ei[1]]
                mine += Counter(zip([et] * ei.size(1), src.tolist(), dst.tolist(), b["e_id"][et].tolist()))
        theirs = Counter()
        for et in one.edge_types:
            ei = one[et].edge_index
            src, dst = one[et[0]].n_id[ei[0]], one[et[2]].n_id[ei[1]]
            theirs += Counter(zip([et] * ei.size(1), src.tolist(), dst.tolist(), one[et].e_id.tolist()))
        assert mine == theirs, k


def test_one_process_over_a_typed_folder_is_the_typed_loader_and_refusals_are_one_line(acm_data, tmp_path):
    """start_run over a 1-part typed temporal folder (no torchrun): batches field for field the one-process
    typed temporal loader's over the HeteroData (node: 'last', strict; link: window, negatives)."""
    import pytest

    from gnnscale.errors import GnnscaleError
    from gnnscale.partitioning import partition_graph
    from gnnscale.pyg import start_run

    hd = timed_acm(acm_data)
    partition_graph(hd, 1, tmp_path / "t1", method="random", dataset="acm-t")
    g = torch.Generator().manual_seed(1)
    seeds = torch.randint(0, hd["paper"].num_nodes, (40,), generator=g)
    seed_time = torch.randint(0, 1100, (40,), generator=g)
    cols = torch.randint(0, hd[REL].edge_index.size(1), (30,), generator=g)
    pairs, pair_time = hd[REL].edge_index[:, cols], hd[REL].edge_time[cols]
    run = start_run(str(tmp_path / "t1"), timeout=30)
    try:
        kw = dict(temporal_strategy="last", time_cut="<")
        mine = list(run.node_loader(FANOUTS, ("paper", seeds), input_time=seed_time, time_attr="edge_time",
                                    batch_size=B, shuffle=True, seed=2, **kw))
        ref = list(NeighborLoader(hd, FANOUTS, input_nodes=("paper", seeds), input_time=seed_time,
                                  time_attr="edge_time", batch_size=B, shuffle=True, seed=2, **kw))
        kw = dict(time_window=400, neg_sampling_ratio=1.0, time_cut="<")
        mine += list(run.link_loader(FANOUTS, (REL, pairs), edge_label_time=pair_time, time_attr="time", batch_size=B,
                                     seed=2, **kw))
        ref += list(LinkNeighborLoader(hd, FANOUTS, edge_label_index=(REL, pairs), edge_label_time=pair_time,
                                       time_attr="edge_time", batch_size=B, seed=2, **kw))
        assert len(mine) == len(ref) == 9
        for a, b in zip(mine, ref):
            for t in b.node_types:
                assert torch.equal(a[t].n_id, b[t].n_id) and torch.equal(a[t].batch, b[t].batch), t
            for et in b.edge_types:
                for key in ("edge_index", "e_id", "edge_time") + (("edge_label_index", "edge_label") if
                                                                  "edge_label" in b[et] else ()):
                    assert torch.equal(a[et][key], b[et][key]), (et, key)
        with pytest.raises(GnnscaleError, match="a temporal rank node loader needs input_time") as err:
            run.node_loader(FANOUTS, ("paper", seeds), batch_size=B, time_attr="edge_time")
        assert "\n" not in str(err.value)
        with pytest.raises(GnnscaleError, match=r"on a typed folder edge_label_index is \(relation, pairs"):
            run.link_loader(FANOUTS, pairs, batch_size=B, time_attr="edge_time", edge_label_time=pair_time)
    finally:
        run.close()
