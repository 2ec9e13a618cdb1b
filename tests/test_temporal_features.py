"""JODIE's edge features in ``--task temporal_link`` (issue 57): each sampled edge's own features,
read from the part that holds the edge, beside its age (``edge_attr`` = [age | features]).

The fixture is a tiny JODIE CSV (``user,item,timestamp,state_label,f0,f1,f2``) whose signal lies
in the features: users and items fall in 3 classes, a user only ever picks items of its own class,
and each event's features are its class (one-hot, plus noise); node features are a constant column,
so without the edge features nothing tells a node's class."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gnnscale.config import TrainConfig
from gnnscale.process.launch import launch_local

BASE = dict(task="temporal_link", layer="tgat", fanouts=(5,), batch_size=50, hidden=16, epochs=1, lr=0.01,
            dropout=0.0, verify=False, progress=False, timeout=120.0, device="cpu", eval_every=1,
            eval_negatives=20, pair_features=False, host_features=False, seed=0)


def _cfg(**kw) -> TrainConfig:
    return TrainConfig(**(BASE | kw))


def jodie_csv(path, features: bool = True, users: int = 30, items: int = 30, classes: int = 3, events: int = 600,
              seed: int = 0) -> None:
    """JODIE's layout, one event per row at distinct times; ``features=False``: the same events
    without the feature columns."""
    g = np.random.default_rng(seed)
    u = g.integers(0, users, events)
    c = u % classes
    item = c + classes * g.integers(0, items // classes, events)  # an item of the user's class
    cols = [u, item, 100 + 7 * np.arange(events), np.zeros(events)]
    head, fmt = "user,item,timestamp,state_label", ["%d"] * 4
    if features:
        f = np.eye(classes)[c] + 0.1 * g.standard_normal((events, classes))
        cols += list(f.T)
        head += "," + ",".join(f"f{j}" for j in range(classes))
        fmt += ["%.6f"] * classes
    np.savetxt(path, np.stack(cols, 1), fmt=fmt, delimiter=",", header=head, comments="")


@pytest.fixture(scope="module")
def jodie(tmp_path_factory):
    """``get(kind, parts)``: the fixture's events (``feat``: with the features, ``plain``: without,
    both directions of each event) cut into ``parts``; ``get.data``: the featured input."""
    from gnnscale.datasets.temporal import read_jodie
    from gnnscale.partitioning import partition_graph

    d = tmp_path_factory.mktemp("jodie")
    jodie_csv(d / "feat.csv")
    jodie_csv(d / "plain.csv", features=False)
    made = {}

    def get(kind: str, parts: int) -> str:
        if (kind, parts) not in made:
            out = d / f"{kind}{parts}"
            partition_graph(read_jodie(d / f"{kind}.csv", undirected=True), parts, out, dataset=f"jodie-{kind}")
            made[kind, parts] = str(out)
        return made[kind, parts]

    get.data = read_jodie(d / "feat.csv", undirected=True)
    return get


def _rows(blocks: list[list[dict]]) -> list[tuple]:
    """Every block edge of every rank as (hop, tree, src, dst, edge time, its edge_attr row), sorted."""
    out = []
    for rank_blocks in blocks:
        for h, b in enumerate(rank_blocks):
            out += [(h, *row[:4], tuple(row[4:])) for row in zip(
                b["tree"].tolist(), b["src"].tolist(), b["dst"].tolist(), b["edge_time"].tolist(),
                *b["edge_attr"].T.tolist())]
    return sorted(out)


def test_sampled_edges_carry_their_own_features_the_same_on_1_and_2_workers(jodie):
    from jodie_workers import task_blocks

    data = jodie.data
    n, t = data.num_nodes, data.edge_time
    g = torch.Generator().manual_seed(4)
    seeds = torch.randint(0, n, (24,), generator=g)
    times = torch.randint(int(t.min()) + 1, int(t.max()) + 2, (24,), generator=g)
    cfg = _cfg(fanouts=(4, 3), temporal_strategy="uniform")
    one = launch_local(task_blocks, 1, args=(jodie("feat", 1), cfg, seeds, times))
    two = launch_local(task_blocks, 2, args=(jodie("feat", 2), cfg, seeds, times))
    # each sampled edge's row is [its age | the input event's features], the event found by (src, dst, t)
    src, dst = data.edge_index
    span = int(t.max()) + 1
    keys = (src * n + dst) * span + t  # times are distinct per event: each key is one input row
    order = torch.argsort(keys)
    edges = 0
    for rank_blocks in one + two:
        for b in rank_blocks:
            row = order[torch.searchsorted(keys[order], (b["src"] * n + b["dst"]) * span + b["edge_time"])]
            assert torch.equal(keys[row], (b["src"] * n + b["dst"]) * span + b["edge_time"])  # an input event
            assert b["edge_attr"].shape == (row.numel(), 4)
            assert torch.equal(b["edge_attr"][:, 1:], data.edge_attr[row])
            assert torch.equal(b["edge_attr"][:, 0], (b["seed_time"] - b["edge_time"]).float())
            assert bool((b["edge_time"] < b["seed_time"]).all())
            edges += row.numel()
    assert edges > 100
    assert _rows(two) == _rows(one)  # the same trees, edge for edge, features and all


def test_a_model_reading_the_features_scores_above_the_same_model_without(jodie, tmp_path):
    """1 worker with and without the features (the same events), and 2 workers with them; the
    saved featured model evaluates to its run's figures, and is refused on the featureless parts."""
    from dist_workers import run_configs
    from test_cli import cli_in_process

    model = tmp_path / "jodie.pt"
    feat = launch_local(run_configs, 1, args=(jodie("feat", 1), [_cfg(save_model=str(model))]))[0][0]
    plain = launch_local(run_configs, 1, args=(jodie("plain", 1), [_cfg()]))[0][0]
    two = launch_local(run_configs, 2, args=(jodie("feat", 2), [_cfg(batch_size=25)]))[0][0]
    test = {k: r["last"]["evaluation"]["metrics"]["test"]["model"] for k, r in
            (("feat", feat), ("plain", plain), ("two", two))}
    assert test["plain"]["auc"] < 0.6 and test["plain"]["ap"] < 0.6, test  # no signal without the features
    for k in ("feat", "two"):
        assert test[k]["auc"] > test["plain"]["auc"] + 0.1 and test[k]["ap"] > test["plain"]["ap"] + 0.1, test
    ev = cli_in_process("evaluate", "--model", str(model), "--parts-dir", jodie("feat", 1), "--json")
    assert ev.returncode == 0, ev.stderr[-3000:]
    assert json.loads(ev.stdout.strip().splitlines()[-1])["metrics"] == json.loads(
        json.dumps(feat["last"]["evaluation"]["metrics"]))
    bad = cli_in_process("evaluate", "--model", str(model), "--parts-dir", jodie("plain", 1))
    assert bad.returncode == 2
    assert "1 features per node and 0 per edge (the model reads 1 and 3 beside each edge's age)" in bad.stderr
    layerwise = cli_in_process("evaluate", "--model", str(model), "--parts-dir", jodie("feat", 1), "--eval-method",
                               "layerwise")  # the workers' plan, refused before they start
    assert layerwise.returncode == 2 and layerwise.stderr.startswith(
        "gnnscale evaluate: error: --eval-method layerwise does not apply to --task temporal_link"), layerwise.stderr
