"""``gnnscale evaluate`` and ``gnnscale predict`` on a typed graph (issue 54 item 3).

Why they differed: a run's evaluation uses its evaluation fan-outs (``--eval-fanouts``, by default
``--fanouts``), so ``gnnscale evaluate``, which reproduces it, draws neighbours, while ``gnnscale predict``
runs every neighbour layer by layer. On ACM after 2 epochs of fan-outs 5,5 (hidden 16, 2 parts) the
two logits differed by up to 0.092 (mean 9.5e-4 over the papers; logits up to 0.38) and 6 test argmaxes
flipped: different neighbourhoods, not float32 summation order. Evaluated layer-wise over every
neighbour (``gnnscale evaluate --eval-method layerwise``) the partition's path gives predict's logits bit
for bit on every paper (the learned subject table permuted back to the partition's order, 2 parts).
"""
from __future__ import annotations

import json

import pytest
import torch

import gnnscale

from test_cli import cli_in_process


@pytest.fixture(scope="module")
def acm_model(acm_partition, tmp_path_factory):
    """A rel:sage model trained 2 epochs on ACM's 2 parts with fan-outs 5,5 (its run evaluates sampled)."""
    model = tmp_path_factory.mktemp("acm_model") / "m.pt"
    r = cli_in_process("train", "--parts-dir", acm_partition(2), "--workers", "2", "--layer", "rel:sage",
                       "--fanouts", "5,5", "--batch-size", "16", "--hidden", "16", "--epochs", "2", "--eval-every", "0",
                       "--lr", "0.01", "--no-progress", "--threads", "1", "--timeout", "120", "--save-model", str(model))
    assert r.returncode == 0, r.stderr[-2000:]
    return str(model)


def _evaluation_logits(parts: str, model: str, method: str | None, like: torch.Tensor) -> tuple[torch.Tensor, dict, bool]:
    from dist_workers import evaluation_logits

    from gnnscale.process.launch import launch_local
    from gnnscale.training.evaluate import evaluate_config
    from gnnscale.training.model_io import read_model_file

    cfg = evaluate_config(read_model_file(model), 120.0, method)
    res = launch_local(evaluation_logits, 2, args=(parts, cfg, model))
    out = torch.full_like(like, float("nan"))
    for r in res:
        out[r["orig_ids"]] = r["logits"]
    return out, res[0]["result"], res[0]["layerwise"]


def test_layerwise_evaluate_gives_predicts_logits_bit_for_bit(acm, acm_partition, acm_model):
    from gnnscale.training.evaluate import sampled_evaluation
    from gnnscale.training.model_io import predict_typed_graph, read_model_file

    parts = acm_partition(2)
    pred = predict_typed_graph(gnnscale.load_model(acm_model), acm)
    papers, test = acm.node_type == 0, acm.test_mask
    assert sampled_evaluation(read_model_file(acm_model)) == [5, 5]  # the run's evaluation draws neighbours

    full, res, layerwise = _evaluation_logits(parts, acm_model, "layerwise", pred)
    assert layerwise
    assert torch.equal(full[papers], pred[papers])  # bit for bit, every paper
    assert torch.equal(full[test].argmax(1), pred[test].argmax(1))
    acc = float((pred[test].argmax(1) == acm.y[test]).float().mean())
    assert res["test_acc"] == pytest.approx(acc, abs=1e-6)
    # the command line gives the same figure
    r = cli_in_process("evaluate", "--model", acm_model, "--parts-dir", parts, "--eval-method", "layerwise", "--json",
                       "--timeout", "120")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["test_acc"] == pytest.approx(acc, abs=1e-6)

    # the run's own (sampled) evaluation is another computation: other neighbourhoods, other logits
    drawn, _, layerwise = _evaluation_logits(parts, acm_model, None, pred)
    assert not layerwise
    seen = papers & ~torch.isnan(drawn).any(1)
    assert int(seen.sum()) == 2060  # the train, val and test papers (60 + 1000 + 1000)
    assert float((drawn[seen] - pred[seen]).abs().max()) > 1e-3
