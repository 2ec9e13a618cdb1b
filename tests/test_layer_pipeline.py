"""Layer pipeline parallelism (issues 14, 26): stage plans, schedules, and pipelined runs of the one
trainer that equal the unpipelined run bit for bit (real processes over gloo, Cora, fixed seeds)."""
from __future__ import annotations

import json

import re

import pytest
import torch

from references import load_saved_state, one_thread, reference_run

from gnnscale.config import TrainConfig
from gnnscale.planning.schedules import PipelineError, bubble_fraction, check_pipeline, max_in_flight, plan_stages, schedule
from gnnscale.process.launch import launch_local
from gnnscale.training.metrics import weights_digest
from gnnscale.training.trainer import train_worker


def test_plan_stages_given_and_balanced():
    assert plan_stages(16, 4) == [(0, 4), (4, 8), (8, 12), (12, 16)]
    assert plan_stages(16, 2, stage_layers=[10, 6]) == [(0, 10), (10, 16)]
    # The expensive first layer (the input features are wide) gets a stage of its own.
    assert plan_stages(4, 2, layer_costs=[5, 1, 1, 1]) == [(0, 1), (1, 4)]
    costs = [1, 1, 1, 1, 1, 5]
    bounds = plan_stages(6, 3, layer_costs=costs)
    assert bounds[-1] == (5, 6) and max(sum(costs[a:b]) for a, b in bounds) == 5  # the cheapest possible maximum


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_layers=2, num_stages=3), "--pipeline-stages must be between 1 and the model's 2 layers"),
    (dict(num_layers=4, num_stages=2, stage_layers=[3, 2]), "summing to the model's 4 layers; found [3, 2] (sum 5)"),
    (dict(num_layers=4, num_stages=2, stage_layers=[4, 0]), "2 positive layer counts"),
    (dict(num_layers=4, num_stages=2, stage_layers=[4]), "found [4]"),
])
def test_plan_stages_errors(kwargs, message):
    with pytest.raises(PipelineError) as err:
        plan_stages(**kwargs)
    assert message in str(err.value)


def test_check_pipeline_errors():
    with pytest.raises(PipelineError, match="--workers 3 is not a multiple of --pipeline-stages 2"):
        check_pipeline(2, None, 4, "1f1b", num_layers=3, workers=3)
    with pytest.raises(PipelineError, match="--schedule must be one of gpipe, 1f1b; found 'zb'"):
        check_pipeline(2, None, 4, "zb", num_layers=3, workers=2)
    with pytest.raises(PipelineError, match="--micro-batches must be at least 1; found 0"):
        check_pipeline(2, None, 0, "1f1b", num_layers=3, workers=2)
    assert check_pipeline(2, [1, 2], 4, "1f1b", num_layers=3, workers=4) == [(0, 1), (1, 3)]


@pytest.mark.parametrize("k, m", [(2, 4), (3, 4), (4, 2), (3, 8)])
def test_schedules_hold_what_they_promise(k, m):
    for s in range(k):
        g, f = schedule("gpipe", s, k, m), schedule("1f1b", s, k, m)
        for ops in (g, f):  # each micro-batch once forward, once backward, forward first; both in order
            assert sorted(ops) == sorted([("F", i) for i in range(m)] + [("B", i) for i in range(m)])
            assert [i for op, i in ops if op == "F"] == list(range(m)) == [i for op, i in ops if op == "B"]
        assert max_in_flight(g) == m
        assert max_in_flight(f) == min(k - s, m) <= k
    assert bubble_fraction(4, 12) == pytest.approx(3 / 15)


def _cfg(layers: int, tmp_path, **kw) -> TrainConfig:
    base = dict(epochs=2, max_steps=3, fanouts=(5,) * layers, batch_size=10, hidden=16, lr=0.01, dropout=0.5,
                seed=3, timeout=60.0, device="cpu", eval_every=0, verify=False, progress=False,
                save_model=str(tmp_path / "model.pt"))
    base.update(kw)
    return TrainConfig(**base)


def _run(parts: str, cfg: TrainConfig, workers: int) -> list[dict]:
    return launch_local(train_worker, workers, args=(parts, cfg), threads_per_worker=1)


def _compare(results, ref, cfg: TrainConfig, k: int):
    """Step losses, the saved whole model, its digest and each stage's peak of held micro-batches."""
    losses = results[k - 1]["step_losses"]  # the last stage of pipeline 0
    assert len(losses) == len(ref["losses"][0]) == 6
    assert losses == ref["losses"][0]  # bit-equal: the same ops on the same tensors, one thread each
    state = load_saved_state(cfg.save_model)
    assert set(state) == set(ref["state"])
    for name, value in ref["state"].items():
        assert torch.equal(state[name], value), (name, float((state[name] - value).abs().max()))
    from gnnscale.nn.spec import ModelSpec

    model = ModelSpec.of(cfg, 1433, 7).build()
    model.load_state_dict(ref["state"])
    assert {r["final_weights_sha256"] for r in results} == {weights_digest(model.parameters())}
    for e in results[0]["epochs"]:  # measured peak of held micro-batches: 1F1B min(K - s, M) <= K, GPipe M
        for st in e["pipeline"]:
            m = cfg.micro_batches
            assert st["peak_micro_batches"] == (m if cfg.schedule == "gpipe" else min(k - st["stage"], m))


@pytest.mark.parametrize("k, sched", [(2, "gpipe"), (2, "1f1b"), (3, "gpipe"), (3, "1f1b")])
def test_pipelined_steps_equal_the_unpipelined_run(cora_partition, tmp_path, k, sched):
    """SAGE, 3 layers, dropout 0.5: K stages on K processes, M = 4 sampled micro-batches per step;
    step losses and final weights equal one process accumulating the same micro-batches."""
    parts = cora_partition(1)
    cfg = _cfg(3, tmp_path, pipeline_stages=k, micro_batches=4, schedule=sched)
    results = _run(parts, cfg, k)
    _compare(results, one_thread(reference_run, parts, cfg, 4), cfg, k)
    for e in results[0]["epochs"]:  # stage s -> s + 1, nothing else
        sent = [st["bytes_sent"]["activation"] for st in e["pipeline"]]
        got = [st["bytes_received"]["activation"] for st in e["pipeline"]]
        assert sent[:-1] == got[1:] and sent[-1] == 0 and min(sent[:-1]) > 0
        assert e["bytes_sent_by_category"]["activation"] == sum(sent)  # counted by the communicator too


def test_two_pipelines_of_two_stages_equal_the_single_process_run(cora_partition, tmp_path):
    """D = 2 pipelines x K = 2 stages on 4 processes (Cora in 2 METIS parts; sampling across the
    parts and stage 0's remote input rows over each stage's replica group; gradients averaged
    per stage) equal one process running the whole model over both parts' micro-batches (the
    same draws, keyed by original ids)."""
    parts = cora_partition(2)
    cfg = _cfg(3, tmp_path, eval_every=2, eval_method="layerwise", pipeline_stages=2, micro_batches=3)
    two = _run(parts, cfg, 4)
    ref = one_thread(reference_run, parts, cfg, 3)
    assert [(st["pipeline"], st["stage"]) for st in two[0]["epochs"][0]["pipeline"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for d in (0, 1):
        assert len(ref["losses"][d]) == 6  # 2 epochs x 3 steps (140 train nodes over 2 parts at 30 a step)
        assert two[2 * d + 1]["step_losses"] == ref["losses"][d]  # bit-equal
    state = load_saved_state(cfg.save_model)
    assert set(state) == set(ref["state"])
    for name, value in ref["state"].items():
        assert torch.equal(state[name], value), (name, float((state[name] - value).abs().max()))
    # Each stage averages only its own layers' gradients with its replica: a ring all-reduce of
    # 2 ranks moves each stage's bytes once per step and rank, one model's worth per pipeline.
    n_params = sum(v.numel() for v in ref["state"].values())
    assert sum(e["bytes_sent_by_category"]["gradient"] for e in two[0]["epochs"]) == 6 * 2 * 4 * n_params
    # Evaluation (whole model gathered on each pipeline's stage 0, layer-wise over both parts)
    # equals the reference weights' full-graph accuracy, on every rank.
    from gnnscale.parallel.chunk_graph import load_chunk_graph
    from gnnscale.nn.spec import ModelSpec

    g = load_chunk_graph(parts, verify=False)
    model = ModelSpec.of(cfg, g.feature_dim, g.num_classes).build()
    model.load_state_dict(ref["state"])
    model.eval()
    with torch.no_grad():
        pred = model(g.x, [g.full_block()] * 3).argmax(1)
    for r in two:
        last = r["epochs"][-1]
        for name in ("val", "test"):
            mask = g.masks[name]
            assert last[f"{name}_acc"] == int((pred[mask] == g.y[mask]).sum()) / int(mask.sum()), name


def test_gcnii_with_norm_and_residual_pipelined(cora_partition, tmp_path):
    """GCNII's x0 travels with the activations (forward) and its gradient back; layer norm and
    residuals inside the stages; in-degrees of the whole graph (asked of the owners) normalize
    it as in data-parallel training: still equal to the unpipelined run."""
    parts = cora_partition(1)
    cfg = _cfg(4, tmp_path, layer="gcnii", norm="layer", residual=True, pipeline_stages=2, stage_layers=(1, 3),
               micro_batches=3, schedule="1f1b")
    results = _run(parts, cfg, 2)
    _compare(results, one_thread(reference_run, parts, cfg, 3), cfg, 2)
    assert results[0]["stages"] == [[0, 1], [1, 4]]


def test_a_part_smaller_than_a_step_still_trains(cora_partition, tmp_path):
    """Issue 26's first failure: each Cora part has 70 training nodes, fewer than 4 x 32 seeds. The
    pipeline takes smaller micro-batches (the data-parallel seed schedule), trains, and writes the
    metrics with the same keys as a data-parallel run's."""
    from test_cli import run_cli

    cora2_cli = cora_partition(2)
    m, dp = tmp_path / "m.json", tmp_path / "dp.json"
    r = run_cli("train", "--parts-dir", cora2_cli, "--workers", "4", "--pipeline-stages", "2", "--micro-batches", "4",
                "--batch-size", "32", "--epochs", "2", "--metrics", str(m), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(m.read_text())
    assert all(e["steps"] >= 1 for e in got["epochs"]) and got["epochs"][-1]["loss"] > 0
    assert "final loss nan" not in r.stderr and "done: 2 epochs, 2 pipeline(s) x 2 stages" in r.stderr, r.stderr
    r = run_cli("train", "--parts-dir", cora2_cli, "--workers", "2", "--batch-size", "32", "--epochs", "2",
                "--metrics", str(dp), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    plain = json.loads(dp.read_text())
    assert set(got) == set(plain) and set(got["epochs"][-1]) == set(plain["epochs"][-1])
    assert got["plan"]["mode"] == "layer_pipeline" and plain["plan"]["mode"] == "data_parallel"


def test_cli_trains_a_pipeline_and_rejects_bad_stages(cora_partition):
    from test_cli import assert_clean_error, run_cli

    parts = cora_partition(1)
    r = run_cli("train", "--parts-dir", parts, "--fanouts", "5,5,5", "--pipeline-stages", "2", "--stage-layers", "1,2",
                "--micro-batches", "2", "--schedule", "gpipe", "--epochs", "1", "--max-steps", "2", "--batch-size", "32")
    assert r.returncode == 0, r.stderr
    assert "2 stages, 2 micro-batches per step, gpipe (layers 0-0 1-2)" in r.stderr and "bubble" in r.stderr, r.stderr
    assert "test_acc 0." in r.stderr
    assert_clean_error(run_cli("train", "--parts-dir", parts, "--fanouts", "5,5", "--pipeline-stages", "3"),
                       "--pipeline-stages must be between 1 and the model's 2 layers (a stage runs at least one layer); found 3")
    assert_clean_error(run_cli("train", "--parts-dir", parts, "--fanouts", "5,5,5", "--pipeline-stages", "2",
                               "--stage-layers", "2,2"), "summing to the model's 3 layers; found [2, 2] (sum 4)")
    assert_clean_error(run_cli("train", "--parts-dir", parts, "--fanouts", "5,5", "--pipeline-stages", "2",
                               "--workers", "3"), "--workers 3 is not a multiple of --pipeline-stages 2")
    assert_clean_error(run_cli("train", "--parts-dir", parts, "--fanouts", "5,5", "--pipeline-stages", "2",
                               "--workers", "4"), "--workers 4 does not match the 1 parts")


def test_a_dead_stage_ends_its_neighbour_with_an_error_naming_it(cora_partition, tmp_path):
    """Stage 1 dies after one step: stage 0, waiting for its gradients, ends with a PeerError that
    names stage 1 and its rank (no hang), and the launcher reports the dead worker first."""
    from dist_workers import pipeline_stage_dies

    from gnnscale.errors import PeerError

    cfg = _cfg(3, tmp_path, timeout=20.0, pipeline_stages=2, stage_layers=(1, 2), micro_batches=2, save_model=None)
    with pytest.raises(PeerError) as err:
        launch_local(pipeline_stage_dies, 2, args=(cora_partition(1), cfg, 1, 1), threads_per_worker=1)
    msg = str(err.value)
    assert msg.startswith("worker 1 of 2 failed: exited with code 9"), msg
    # Stage 0 learns of the death either waiting for gradients or sending the next activations
    # (gloo's closed connection, turned into a PeerError by the communicator); both name rank 1.
    stage0 = re.search(r"worker 0: PeerError: rank 0 \(pipeline stage 0\): (.*)", msg).group(1)
    assert stage0.startswith(("no gradients of micro-batch 0 from stage 1 (rank 1)",
                              "could not send activations of micro-batch 0 to stage 1 (rank 1)",
                              "could not send activations of micro-batch 1 to stage 1 (rank 1)")), stage0


def test_the_python_api_trains_both_pipelines(shared_data, tmp_path):
    """Issue 26's third failure: ``gnnscale.train("planetoid:cora", ..., chunks=True,
    pipeline_stages=2)`` failed inside both workers; now it trains, and so does the layer pipeline
    (the dataset cut into a part per pipeline, or into --micro-batches chunks, and cached)."""
    import gnnscale

    root = str(shared_data / "planetoid" / "raw")
    chunks = gnnscale.train("planetoid:cora", root=root, cache_dir=str(tmp_path), chunks=True, pipeline_stages=2,
                            layer="gcnii", num_layers=4, hidden=16, epochs=2, timeout=60.0, progress=False)
    assert chunks["plan"]["mode"] == "chunk_pipeline" and chunks["plan"]["micro_batches"] == 4
    assert len(chunks["epochs"]) == 2 and chunks["test_acc"] is not None and chunks["epochs"][-1]["loss"] > 0
    layers = gnnscale.train("planetoid:cora", root=root, cache_dir=str(tmp_path), pipeline_stages=2, micro_batches=2,
                            fanouts=[5, 5], batch_size=32, hidden=16, epochs=2, timeout=60.0, progress=False)
    assert layers["plan"]["mode"] == "layer_pipeline" and layers["plan"]["world"] == 2
    assert all(e["steps"] > 0 for e in layers["epochs"]) and layers["test_acc"] is not None
