"""``--task temporal_link`` through the one engine (issue 57): the synthetic temporal graph, real
processes, 1 and 2 workers.

The chronological split is found over the ranks (the same events at any worker count, the ones a
sort of every time gives); the model and EdgeBank are scored on the same events and negatives and
both land in the run's metrics; the 2-worker run samples through the owners; the task's options
are refused by name before any worker starts."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gnnscale
from gnnscale.config import TrainConfig
from gnnscale.errors import GnnscaleError
from gnnscale.process.launch import launch_local

BASE = dict(task="temporal_link", layer="tgat", fanouts=(5, 5), batch_size=200, hidden=16, epochs=2, lr=0.01,
            dropout=0.0, verify=False, progress=False, timeout=120.0, device="cpu", eval_every=2,
            eval_negatives=20, host_features=False)


def _cfg(**kw) -> TrainConfig:
    return TrainConfig(**(BASE | kw))


@pytest.fixture(scope="module")
def temporal_parts(tmp_path_factory):
    """``get(parts)``: the synthetic temporal graph (60 nodes, 1,500 events) cut into ``parts``."""
    from gnnscale.datasets.temporal import generate_temporal_synthetic
    from gnnscale.partitioning import partition_graph

    data = generate_temporal_synthetic(num_nodes=60, num_events=1500, seed=0)
    made = {}

    def get(parts: int) -> str:
        if parts not in made:
            out = tmp_path_factory.mktemp(f"temporal{parts}")
            partition_graph(data, parts, out, dataset="temporal-synthetic")
            made[parts] = str(out)
        return made[parts]

    get.data = data
    return get


def _expected_counts(t: np.ndarray, fractions=(0.70, 0.15, 0.15)) -> dict:
    """Events per split by the rule: T_val the round(0.7 E)-th smallest time, T_test the
    round(0.85 E)-th; train t < T_val, validation up to T_test, test the rest."""
    st = np.sort(t)
    e = st.size
    a, b = st[int(round(fractions[0] * e))], st[int(round((fractions[0] + fractions[1]) * e))]
    return {"train": int((t < a).sum()), "val": int(((t >= a) & (t < b)).sum()), "test": int((t >= b).sum())}


def test_temporal_link_trains_on_1_and_2_workers_beside_edgebank(temporal_parts, tmp_path):
    """... and `gnnscale evaluate` of the 2-worker run's saved model replays the chronological split
    and the evaluation's draws: every figure of the model and EdgeBank equals the run's last
    evaluation (the saved weights')."""
    import json

    from dist_workers import run_configs
    from test_cli import cli_in_process

    want = _expected_counts(temporal_parts.data.edge_time.numpy())
    model = tmp_path / "temporal.pt"
    one = launch_local(run_configs, 1, args=(temporal_parts(1), [_cfg()]))[0][0]
    saved = _cfg(save_model=str(model), temporal_strategy="uniform")  # uniform: the evaluation's draws keyed
    two = launch_local(run_configs, 2, args=(temporal_parts(2), [saved, _cfg(pair_features=False, epochs=1,
                                                                             eval_every=1, eval_events=50)]))[0]
    assert "error" not in one and not [g["error"] for g in two if "error" in g], (one, two)
    for run in (one, two[0]):
        last = run["last"]
        assert last["metric"] == "mrr"
        ev = last["evaluation"]
        assert ev["method"] == "sampled in time" and ev["fanouts"] == [5, 5]
        for split in ("val", "test"):
            figs = ev["metrics"][split]
            assert set(figs) == {"model", "edgebank"}
            for who in ("model", "edgebank"):
                f = figs[who]
                assert f["positives"] == want[split] and f["negatives_per_positive_mrr"] == 20, (split, who, f)
                assert 0.0 <= f["ap"] <= 1.0 and 0.0 <= f["auc"] <= 1.0 and 0.0 < f["mrr"] <= 1.0
        assert last["test_acc"] == ev["metrics"]["test"]["model"]["mrr"]
        # the synthetic graph's recurring pairs: EdgeBank is far above chance, and so is the model
        assert ev["metrics"]["test"]["edgebank"]["auc"] > 0.7
        assert ev["metrics"]["test"]["model"]["auc"] > 0.7, ev["metrics"]["test"]
    # two workers: the endpoints' past drawn by their owners, the pairs' histories asked of them
    assert two[0]["last"]["bytes_sent_by_category"]["sample_request"] > 0
    assert two[0]["digest"] != two[1]["digest"]
    few = two[1]["last"]["evaluation"]["metrics"]["test"]["model"]["positives"]  # each kept by its key's uniform
    assert 35 <= few <= 65, few
    ev = cli_in_process("evaluate", "--model", str(model), "--parts-dir", temporal_parts(2), "--json", "--timeout",
                        "120")
    assert ev.returncode == 0, ev.stderr[-3000:]
    got = json.loads(ev.stdout.strip().splitlines()[-1])
    ran = two[0]["last"]["evaluation"]["metrics"]
    assert got["metric"] == "mrr" and got["test_mrr"] == ran["test"]["model"]["mrr"]
    assert got["metrics"] == json.loads(json.dumps(ran)), (got["metrics"], ran)


def test_split_times_over_ranks_is_the_sorted_rule():
    from gnnscale.tasks.temporal_task import split_times

    class One:  # a one-rank communicator: the reductions are the values
        rank, world_size = 0, 1

        def all_reduce(self, t, op="sum"):
            return t

    g = np.random.default_rng(3)
    for ties in (5, 1000, 10**9):
        t = g.integers(0, ties, 777)
        a, b = split_times(torch.from_numpy(t), One(), (0.70, 0.15, 0.15))
        st = np.sort(t)
        assert (a, b) == (st[round(0.70 * 777)], st[round(0.85 * 777)])


@pytest.mark.parametrize("kw, match", [
    (dict(exchange="historical"), "--exchange historical does not apply to --task temporal_link"),
    (dict(pipeline_stages=2), "--eval-negatives .* does not apply to the layer pipeline"),
    (dict(decoder="distmult"), "--decoder distmult does not apply to --task temporal_link"),
    (dict(link_metric="hits@10"), "--link-metric hits@10 does not apply to --task temporal_link"),
    (dict(sampler="labor"), "--sampler labor does not apply to --task temporal_link"),
    (dict(cache_policy="degree"), "--cache-policy degree does not apply to --task temporal_link"),
])
def test_temporal_options_refused_before_workers_start(temporal_parts, kw, match):
    with pytest.raises(GnnscaleError, match=match):
        gnnscale.train(parts_dir=temporal_parts(2), workers=2, **(BASE | kw))


def test_temporal_task_needs_edge_times(cora_partition):
    with pytest.raises(GnnscaleError, match="--task temporal_link needs timed events"):
        gnnscale.train(parts_dir=cora_partition(2), workers=2, **BASE)
    with pytest.raises(GnnscaleError, match=r"--time-window \(time_window=5\) applies only with --task temporal_link"):
        gnnscale.train(parts_dir=cora_partition(2), workers=2, fanouts=(5, 5), time_window=5)
