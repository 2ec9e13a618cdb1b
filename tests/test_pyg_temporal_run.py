"""gnnscale.pyg.start_run's rank loaders in time (issue 57; gnnscale.pyg.run_temporal): on 2 processes (gloo
on 127.0.0.1, launch_local) over a temporal partition of the synthetic temporal graph, every step's two
batches are, tree for tree, one process's plain temporal loader batch of their seeds (keyed draws), the
draws made by the owners, and no edge is from its seed's future; what stays unsupported is one line."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from gnnscale.datasets.temporal import generate_temporal_synthetic
from gnnscale.errors import GnnscaleError
from gnnscale.partitioning import partition_graph
from gnnscale.process.launch import launch_local
from gnnscale.pyg import LinkNeighborLoader, NeighborLoader

from pyg_temporal_workers import CONFIGS, temporal_batches

FANOUTS = [4, 3]
B = 8  # per rank; one process's batch: 2 B


@pytest.fixture(scope="module")
def graph():
    return generate_temporal_synthetic(num_nodes=120, num_events=2500, span=100_000, seed=3)


@pytest.fixture(scope="module")
def folder(graph, tmp_path_factory):
    d = tmp_path_factory.mktemp("temporal2")
    partition_graph(graph, 2, d, method="random", dataset="temporal-synthetic")
    return str(d)


def _inputs(graph):
    g = torch.Generator().manual_seed(5)
    seeds = torch.randint(0, graph.num_nodes, (40,), generator=g)
    seed_time = torch.randint(0, 110_000, (40,), generator=g)
    cols = torch.randint(0, graph.edge_index.size(1), (36,), generator=g)
    return seeds, seed_time, graph.edge_index[:, cols], graph.edge_time[cols]


def _edges(b: dict, tree_time: torch.Tensor) -> Counter:
    """Every sampled edge as (tree's input, source, target, e_id, edge time, tree's time), original ids."""
    src, dst = b["n_id"][b["edge_index"][0]], b["n_id"][b["edge_index"][1]]
    tree = b["input_id"][b["batch"][b["edge_index"][1]]]
    return Counter(zip(tree.tolist(), src.tolist(), dst.tolist(), b["e_id"].tolist(), b["edge_time"].tolist(),
                       tree_time[tree].tolist()))


def _plain(b) -> dict:
    return dict(n_id=b.n_id, edge_index=b.edge_index, e_id=b.e_id, batch=b.batch, edge_time=b.edge_time,
                input_id=b.input_id, eli=b.n_id[b.edge_label_index] if "edge_label_index" in b else None,
                label=b.get("edge_label"))


def test_two_ranks_sample_in_time_as_one_process_and_never_a_future_edge(graph, folder):
    seeds, seed_time, pairs, pair_time = _inputs(graph)
    node_graph = graph.clone()  # node times: a neighbour counts at its own time, negatives redrawn before theirs
    del node_graph.edge_time
    node_graph.time = torch.randint(0, 110_000, (graph.num_nodes,), generator=torch.Generator().manual_seed(9))
    got = launch_local(temporal_batches, 2, args=(folder, FANOUTS, seeds, seed_time, pairs, pair_time, B, 7, "own", graph,
                                                  node_graph), threads_per_worker=1)
    assert [g["store"] for g in got] == ["OwnPartGraphStore"] * 2
    for g in got:  # the owners drew: the hop exchanges carried requests and answers
        assert g["comm"]["sent"]["sample_request"] > 0 and g["comm"]["received"]["sample_response"] > 0
    for c, cfg in enumerate(CONFIGS + CONFIGS[:1]):  # the last: the Data in memory (data=graph)
        strict = cfg.get("time_cut") == "<"
        ref = list(NeighborLoader(graph, FANOUTS, input_nodes=seeds, input_time=seed_time, time_attr="edge_time",
                                  batch_size=2 * B, shuffle=True, seed=7, **cfg))
        assert len(got[0]["nodes"][c]) == len(got[1]["nodes"][c]) == len(ref) == 3  # 5 batches of B: 3 steps
        edges = 0
        for k, one in enumerate(ref):  # step k: rank r's batch k is the pass's batch 2 k + r
            step = [b for rank in got for b in rank["nodes"][c] if b["k"] == k and not b["repeat"]]
            assert torch.equal(torch.cat([b["input_id"] for b in step]), one.input_id)
            mine = sum((_edges(b, seed_time) for b in step), Counter())
            assert mine == _edges(_plain(one), seed_time), (cfg, k)
            for b in step:
                t = seed_time[b["input_id"][b["batch"][b["edge_index"][1]]]]
                assert bool((b["edge_time"] < t).all() if strict else (b["edge_time"] <= t).all())
                assert torch.equal(b["edge_time"], graph.edge_time[b["e_id"]])
                if "time_window" in cfg:
                    assert bool((b["edge_time"] >= t - cfg["time_window"]).all())
                edges += b["e_id"].numel()
        assert edges > 100
    ref = list(LinkNeighborLoader(graph, FANOUTS, edge_label_index=pairs, edge_label_time=pair_time,
                                  time_attr="edge_time", neg_sampling_ratio=1.0, batch_size=2 * B, shuffle=True,
                                  seed=7, time_cut="<"))
    ref_n = list(LinkNeighborLoader(node_graph, FANOUTS, edge_label_index=pairs, edge_label_time=pair_time,
                                    time_attr="time", neg_sampling_ratio=1.0, batch_size=2 * B, shuffle=True, seed=7,
                                    time_cut="<"))
    for rank in got:  # ratio 1.5: each negative (both ends) before the time it is sampled at, its batch's
        for b in rank["node_time"].pop():  # positive j % b's (PyG's layout), when an earlier node exists
            neg = b["eli_local"][:, b["label"] == 0]
            pos_t = pair_time[b["input_id"]]
            t = pos_t[torch.arange(neg.size(1)) % pos_t.numel()].expand(2, -1)
            some = t > int(node_graph.time.min())
            assert some.sum() > 10 and bool((node_graph.time[b["n_id"][neg]][some] < t[some]).all())
    for k, one in enumerate(ref_n):  # the Data with node times in memory: the step's negatives as one process's
        step = [b for rank in got for b in rank["node_time"] if b["k"] == k and not b["repeat"]]
        lab = torch.cat([b["label"] for b in step])
        eli = torch.cat([b["eli"] for b in step], 1)
        assert torch.equal(eli[:, lab == 0], one.n_id[one.edge_label_index][:, one.edge_label == 0]), k
        for b in step:  # every sampled neighbour strictly before its tree's time
            t = pair_time[b["input_id"][b["batch"][b["edge_index"][1]]]]
            assert bool((node_graph.time[b["n_id"][b["edge_index"][0]]] < t).all())
    for k, one in enumerate(ref):
        step = [b for rank in got for b in rank["links"] if b["k"] == k and not b["repeat"]]
        lab = torch.cat([b["label"] for b in step])
        eli = torch.cat([b["eli"] for b in step], 1)
        assert torch.equal(eli[:, lab == 1], one.n_id[one.edge_label_index][:, one.edge_label == 1])
        assert torch.equal(eli[:, lab == 0], one.n_id[one.edge_label_index][:, one.edge_label == 0])
        mine = Counter()
        for b in step:
            t = pair_time[b["input_id"][b["batch"][b["edge_index"][1]]]]
            assert bool((b["edge_time"] < t).all())
            src, dst = b["n_id"][b["edge_index"][0]], b["n_id"][b["edge_index"][1]]
            mine += Counter(zip(src.tolist(), dst.tolist(), b["e_id"].tolist(), t.tolist()))
        t = pair_time[one.input_id[one.batch[one.edge_index[1]]]]
        src, dst = one.n_id[one.edge_index[0]], one.n_id[one.edge_index[1]]
        assert mine == Counter(zip(src.tolist(), dst.tolist(), one.e_id.tolist(), t.tolist())), k


def test_one_process_over_a_folder_is_the_plain_loader_and_what_is_not_honoured_is_one_line(graph, tmp_path):
    """start_run over a 1-part temporal folder (no torchrun): batches field for field the plain temporal
    loader's (node: 'last', strict; link: window); then each unsupported combination is one line."""
    from gnnscale.pyg import start_run

    d = tmp_path / "t1"
    partition_graph(graph, 1, d, method="random", dataset="temporal-synthetic")
    plain = tmp_path / "plain1"
    untimed = graph.clone()
    del untimed.edge_time
    partition_graph(untimed, 1, plain, method="random", dataset="plain")
    seeds, seed_time, pairs, pair_time = _inputs(graph)
    run = start_run(str(d), timeout=30)
    try:
        kw = dict(temporal_strategy="last", time_cut="<")
        mine = list(run.node_loader(FANOUTS, seeds, batch_size=B, shuffle=True, seed=2, time_attr="edge_time",
                                    input_time=seed_time, **kw))
        ref = list(NeighborLoader(graph, FANOUTS, input_nodes=seeds, input_time=seed_time, time_attr="edge_time",
                                  batch_size=B, shuffle=True, seed=2, **kw))
        assert len(mine) == len(ref) == 5
        for a, b in zip(mine, ref):
            for key in ("n_id", "edge_index", "e_id", "batch", "edge_time", "input_id"):
                assert torch.equal(a[key], b[key]), key
        kw = dict(time_window=30_000, neg_sampling_ratio=2.0)
        mine = list(run.link_loader(FANOUTS, pairs, batch_size=B, seed=2, time_attr="time", edge_label_time=pair_time,
                                    **kw))
        ref = list(LinkNeighborLoader(graph, FANOUTS, edge_label_index=pairs, edge_label_time=pair_time,
                                      time_attr="edge_time", batch_size=B, seed=2, **kw))
        assert len(mine) == len(ref) == 5
        for a, b in zip(mine, ref):
            for key in ("n_id", "edge_index", "e_id", "batch", "edge_time", "edge_label_index", "edge_label"):
                assert torch.equal(a[key], b[key]), key
        cases = [
            (dict(input_time=seed_time), "input_time=.* needs time_attr"),
            (dict(time_attr="edge_time"), "a temporal rank node loader needs input_time"),
            (dict(time_attr="when", input_time=seed_time), "time_attr='when': a temporal folder holds edge times only"),
            (dict(time_attr="edge_time", input_time=seed_time, temporal_strategy="newest"),
             "expected temporal_strategy among uniform, last"),
            (dict(time_attr="edge_time", input_time=seed_time, subgraph_type="induced"),
             "subgraph_type='induced' with time_attr is not supported"),
            (dict(time_attr="edge_time", edge_label_time=seed_time), "a node loader takes input_time, not "),
        ]
        for kwargs, message in cases:
            with pytest.raises(GnnscaleError, match=message) as err:
                run.node_loader(FANOUTS, seeds, batch_size=B, **kwargs)
            assert "\n" not in str(err.value)
        with pytest.raises(GnnscaleError, match="a temporal rank link loader needs edge_label_time"):
            run.link_loader(FANOUTS, pairs, batch_size=B, time_attr="edge_time")
    finally:
        run.close()
    run = start_run(str(plain), timeout=30)
    try:
        with pytest.raises(GnnscaleError, match="needs a temporal partition folder .* this folder has no times"):
            run.node_loader(FANOUTS, seeds, batch_size=B, time_attr="edge_time", input_time=seed_time)
    finally:
        run.close()
