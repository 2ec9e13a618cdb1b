"""Layer pipeline parallelism (issue 14): stage plans, schedules, and pipelined steps that equal
the unpipelined run (real processes over gloo, Cora, fixed seeds)."""
from __future__ import annotations

import pytest
import torch

from gnnscale.config import TrainConfig
from gnnscale.process.launch import launch_local
from gnnscale.parallel.layer_pipeline import PipelineConfig, pipeline_worker, reference_run
from gnnscale.parallel.schedules import PipelineError, bubble_fraction, check_pipeline, max_in_flight, plan_stages, schedule


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


def _cfg(layers: int, **kw) -> TrainConfig:
    base = dict(epochs=2, max_steps=3, fanouts=(5,) * layers, batch_size=10, hidden=16, lr=0.01, dropout=0.5,
                seed=3, timeout=60.0, device="cpu", eval_every=0)
    base.update(kw)
    return TrainConfig(**base)


def _reference(parts: str, cfg: TrainConfig, micro: int) -> dict:
    """The unpipelined run in this process with one thread, as each worker has (threads_per_worker=1):
    matrix products then sum in the same order, so the pipelined run must equal it bit for bit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return reference_run(parts, cfg, micro)
    finally:
        torch.set_num_threads(threads)


def _compare(results, ref, pipe: PipelineConfig):
    losses = results[-1]["losses"]
    assert len(losses) == len(ref["losses"][0]) == 6
    assert losses == ref["losses"][0]  # bit-equal: the same ops on the same tensors, one thread each
    merged = {}
    for r in results:
        assert not set(merged) & set(r["state"])  # each parameter lives on exactly one stage
        merged.update(r["state"])
    assert set(merged) == set(ref["state"])
    for name, value in ref["state"].items():
        assert torch.equal(merged[name], value), (name, float((merged[name] - value).abs().max()))
    for r in results:  # measured peak of held micro-batches: 1F1B min(K - s, M) <= K, GPipe M
        s, k, m = r["stage"], pipe.stages, pipe.micro_batches
        want = m if pipe.schedule == "gpipe" else min(k - s, m)
        assert {st["peak_micro_batches"] for st in r["steps"]} == {want}


@pytest.mark.parametrize("k, sched", [(2, "gpipe"), (2, "1f1b"), (3, "gpipe"), (3, "1f1b")])
def test_pipelined_steps_equal_the_unpipelined_run(cora_partition, k, sched):
    """SAGE, 3 layers, dropout 0.5: K stages on K processes, M = 4 sampled micro-batches per step;
    step losses and final weights equal one process accumulating the same micro-batches."""
    parts = cora_partition(1)
    cfg, pipe = _cfg(3), PipelineConfig(stages=k, micro_batches=4, schedule=sched)
    results = launch_local(pipeline_worker, k, args=(parts, cfg, pipe), threads_per_worker=1)
    _compare(results, _reference(parts, cfg, pipe.micro_batches), pipe)
    sent = [sum(st["bytes_sent"]["activation"] for st in r["steps"]) for r in results]
    got = [sum(st["bytes_received"]["activation"] for st in r["steps"]) for r in results]
    assert sent[:-1] == got[1:] and sent[-1] == 0 and min(sent[:-1]) > 0  # stage s -> s+1, nothing else


def test_two_pipelines_of_two_stages_equal_the_single_process_run(cora_partition):
    """D = 2 pipelines x K = 2 stages on 4 processes (Cora in 2 METIS parts; sampling across the
    parts and stage 0's remote input rows over each stage's replica group; gradients averaged
    per stage) equal one process running the whole model over both parts' micro-batches (the
    same draws, keyed by original ids) and D = 2 data-parallel workers (K = 1)."""
    parts = cora_partition(2)
    cfg = _cfg(3, eval_every=2)
    two = launch_local(pipeline_worker, 4, args=(parts, cfg, PipelineConfig(stages=2, micro_batches=3)),
                       threads_per_worker=1)
    one = launch_local(pipeline_worker, 2, args=(parts, cfg, PipelineConfig(stages=1, micro_batches=3)),
                       threads_per_worker=1)
    ref = _reference(parts, cfg, 3)
    assert [(r["pipeline"], r["stage"]) for r in two] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for d in (0, 1):
        assert len(ref["losses"][d]) == 6  # 2 epochs x 3 steps (140 train nodes over 2 parts at 30 a step)
        assert two[2 * d + 1]["losses"] == ref["losses"][d] == one[d]["losses"]  # bit-equal
        merged = {**two[2 * d]["state"], **two[2 * d + 1]["state"]}
        assert set(merged) == set(ref["state"])
        for name, value in ref["state"].items():
            assert torch.equal(merged[name], value), (name, float((merged[name] - value).abs().max()))
            assert torch.equal(one[d]["state"][name], value), name
    # Each stage averages only its own layers' gradients with its replica: together one model's worth.
    n_params = sum(v.numel() for v in one[0]["state"].values())
    assert two[0]["gradient_bytes"] + two[1]["gradient_bytes"] == one[0]["gradient_bytes"] == 6 * 4 * n_params
    # Evaluation (whole model gathered on each pipeline's stage 0, layer-wise over both parts)
    # equals the reference weights' full-graph accuracy.
    from gnnscale.parallel.chunk_pipeline import build_model, load_chunk_graph

    g = load_chunk_graph(parts, verify=False)
    model = build_model(cfg, g, 3)
    model.load_state_dict(ref["state"])
    model.eval()
    with torch.no_grad():
        pred = model(g.x, [g.full_block()] * 3).argmax(1)
    for r in (two[0], two[2], one[0], one[1]):
        acc = r["accuracy"][-1]
        for name, mask in g.masks.items():
            assert acc[name] == int((pred[mask] == g.y[mask]).sum()) / int(mask.sum()), name
    assert two[1]["accuracy"] == [] and two[3]["accuracy"] == []  # stage 1 ranks only send their weights


def test_gcnii_with_norm_and_residual_pipelined(cora_partition):
    """GCNII's x0 travels with the activations (forward) and its gradient back; layer norm and
    residuals inside the stages: still equal to the unpipelined run."""
    parts = cora_partition(1)
    cfg = _cfg(4, layer="gcnii", norm="layer", residual=True)
    pipe = PipelineConfig(stages=2, stage_layers=[1, 3], micro_batches=3, schedule="1f1b")
    results = launch_local(pipeline_worker, 2, args=(parts, cfg, pipe), threads_per_worker=1)
    _compare(results, _reference(parts, cfg, pipe.micro_batches), pipe)
    assert [r["layers"] for r in results] == [(0, 1), (1, 4)]


def test_cli_trains_a_pipeline_and_rejects_bad_stages(cora_partition):
    from test_cli import assert_clean_error, run_cli

    parts = cora_partition(1)
    r = run_cli("train", "--parts-dir", parts, "--fanouts", "5,5,5", "--pipeline-stages", "2", "--stage-layers", "1,2",
                "--micro-batches", "2", "--schedule", "gpipe", "--epochs", "1", "--max-steps", "2", "--batch-size", "32")
    assert r.returncode == 0, r.stderr
    assert "over 2 stages (layers 0-0 1-2)" in r.stderr and "bubble" in r.stderr, r.stderr
    assert "evaluation (whole model, layer-wise, full graph)" in r.stderr and "test_acc 0." in r.stderr
    assert_clean_error(run_cli("train", "--parts-dir", parts, "--fanouts", "5,5", "--pipeline-stages", "3"),
                       "--pipeline-stages must be between 1 and the model's 2 layers (a stage runs at least one layer); found 3")
    assert_clean_error(run_cli("train", "--parts-dir", parts, "--fanouts", "5,5,5", "--pipeline-stages", "2",
                               "--stage-layers", "2,2"), "summing to the model's 3 layers; found [2, 2] (sum 4)")
    assert_clean_error(run_cli("train", "--parts-dir", parts, "--fanouts", "5,5", "--pipeline-stages", "2",
                               "--workers", "3"), "--workers 3 does not match the 1 parts")


def test_a_dead_stage_ends_its_neighbour_with_an_error_naming_it(cora_partition):
    """Stage 1 dies after one step: stage 0, waiting for its gradients, ends with a PeerError that
    names stage 1 and its rank (no hang), and the launcher reports the dead worker first."""
    from dist_workers import pipeline_stage_dies

    from gnnscale.errors import PeerError

    cfg = _cfg(3, timeout=20.0)
    pipe = PipelineConfig(stages=2, stage_layers=[1, 2], micro_batches=2)
    with pytest.raises(PeerError) as err:
        launch_local(pipeline_stage_dies, 2, args=(cora_partition(1), cfg, pipe, 1, 1), threads_per_worker=1)
    msg = str(err.value)
    assert msg.startswith("worker 1 of 2 failed: exited with code 9"), msg
    assert "worker 0: PeerError: rank 0 (pipeline stage 0): no gradients of micro-batch 0 from stage 1 (rank 1)" in msg
