"""--early-stop-patience and --head-dropout (issue 54 item 13): a run stops when its validation figure
has not improved in N evaluations, and the best evaluation's weights come back for the final
evaluation and the saved model; --head-dropout drops the input of the model's linear head, and a
stack that ends in a convolution refuses it in one line before any worker."""
from __future__ import annotations

import pytest

import gnnscale
from gnnscale.config import TrainConfig
from gnnscale.errors import GnnscaleError, ModelError
from gnnscale.process.launch import launch_local

BASE = dict(hidden=16, fanouts=(5, 5), batch_size=64, eval_every=1, verify=False, progress=False, timeout=60.0,
            device="cpu", jk="cat", lr=0.05, head_dropout=0.5, seed=1)


def test_early_stop_restores_the_best_evaluations_weights(cora_partition):
    from dist_workers import run_configs

    parts = cora_partition(2)
    cfgs = [TrainConfig(**(BASE | {"epochs": 12, "early_stop_patience": 2})), TrainConfig(**(BASE | {"epochs": 12}))]
    stopped, full = launch_local(run_configs, 2, args=(parts, cfgs))[0]
    early = stopped["early_stop"]
    # measured (seed 1): best at epoch 3, stopped after epoch 5 of 12
    assert early["stopped"] and stopped["epochs"] == early["stopped_after_epoch"] + 1 < 12
    assert stopped["epochs"] == stopped["best"]["epoch"] + 3  # two evaluations without improvement, then stop
    # the same training up to the stop: the best epoch is the plain run's best so far
    assert full["epochs"] == 12 and full["early_stop"] is None
    restored = early["restored"]
    assert restored is not None and restored["epoch"] == stopped["best"]["epoch"]
    # the restored weights, evaluated with that evaluation's draws, give its figures exactly
    assert (restored["val"], restored["test"]) == (stopped["best"]["val"], stopped["best"]["test"])
    assert stopped["digest"] != full["digest"]


def test_head_dropout_needs_a_head():
    with pytest.raises(GnnscaleError, match=r"^--head-dropout drops the input of the model's linear head, found "
                                            r"--layer sage without --jk"):
        gnnscale.train(parts_dir="unused", workers=1, head_dropout=0.5)
    from gnnscale.nn.models import GNN

    with pytest.raises(ModelError, match="head_dropout drops the input of the model's linear head"):
        GNN(8, 16, 3, num_layers=2, layer="gcn", head_dropout=0.5)
    assert GNN(8, 16, 3, num_layers=2, layer="gcnii", head_dropout=0.5).head_dropout == 0.5


def test_early_stop_needs_evaluations(cora_partition):
    with pytest.raises(GnnscaleError, match="--early-stop-patience.*--eval-every"):
        gnnscale.train(parts_dir=cora_partition(2), workers=2, early_stop_patience=3, eval_every=0)
