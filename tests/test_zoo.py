"""Every zoo model and a user MessagePassing layer train distributed (2 workers) on Cora."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch_geometric.nn import MessagePassing

import gnnscale


class MaxSAGE(MessagePassing):
    """A user layer: out[v] = W_self x_v + max over in-neighbors of W_nbr x_u."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__(aggr="max")
        self.lin_self = torch.nn.Linear(in_dim, out_dim)
        self.lin_nbr = torch.nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, x, edge_index):
        x_src, x_dst = x
        h = self.lin_nbr(x_src)
        return self.lin_self(x_dst) + self.propagate(edge_index, x=(h, h[: x_dst.size(0)]))


class NoEdges(torch.nn.Module):
    """Wrong signature: forward(x) only."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(in_dim, out_dim)

    def forward(self, x):
        return self.lin(x)


@pytest.fixture(scope="module")
def cora2(cora_partition):
    return cora_partition(2)


COMMON = dict(batch_size=32, hidden=64, lr=0.01, weight_decay=5e-4, progress=False, eval_method="layerwise")

CASES = {
    "sage": dict(layer="sage", epochs=8, fanouts=[10, 10]),
    "gcn": dict(layer="gcn", epochs=8, fanouts=[10, 10]),
    "gat": dict(layer="gat", epochs=8, fanouts=[10, 10], layer_kwargs={"heads": 4}),
    # GIN at 8 epochs swung 0.65-0.79 over seeds 0-3 with either dropout (torch's or ours), so a
    # 0.70 floor was a coin toss; at 20 epochs seeds 0-3 gave 0.729 / 0.746 / 0.786 / 0.745.
    "gin": dict(layer="gin", epochs=20, fanouts=[10, 10], lr=0.005),
    "gcnii": dict(layer="gcnii", epochs=10, fanouts=[5] * 4, layer_kwargs={"alpha": 0.1, "theta": 0.5}),
    "custom MessagePassing class": dict(layer=MaxSAGE, epochs=8, fanouts=[10, 10]),
    "custom layer by import path": dict(layer="test_zoo:MaxSAGE", epochs=8, fanouts=[10, 10]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_zoo_model_trains_distributed_on_cora(cora2, case):
    opts = COMMON | CASES[case]
    res = gnnscale.train(parts_dir=cora2, workers=2, **opts)
    assert res["test_acc_at_best_val"] > 0.70, (case, res["test_acc_at_best_val"])
    assert all(torch.isfinite(torch.tensor(e["loss"])) for e in res["epochs"])


def test_model_options_norm_residual_jk_train(cora2):
    res = gnnscale.train(parts_dir=cora2, workers=2, **(COMMON | dict(layer="sage", epochs=6, fanouts=[10, 10],
                                                                      norm="layer", residual=True, jk="cat")))
    assert res["test_acc_at_best_val"] > 0.70


def _cli(*args):
    import os
    from pathlib import Path

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent))  # so test_zoo:NoEdges imports
    return subprocess.run([sys.executable, "-m", "gnnscale", "train", *args], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("spec,fragment", [
    ("no_such_module_xyz:Conv", "cannot import module 'no_such_module_xyz'"),
    ("torch.nn:NoSuchConv", "has no attribute 'NoSuchConv'"),
    ("test_zoo:NoEdges", "forward(self, x: tuple[Tensor, Tensor], edge_index: Tensor) -> Tensor"),
])
def test_bad_layer_gives_a_clear_error(cora2, spec, fragment, tmp_path):
    r = _cli("--parts-dir", cora2, "--layer", spec, "--epochs", "1")
    assert r.returncode == 2, r.stderr
    assert fragment in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_zoo_model_with_historical_exchange_and_cache(cora2):
    """A zoo model in historical mode with a feature cache (halo features fetched per step through
    it, not held): trains, never reads a too-old row."""
    res = gnnscale.train(parts_dir=cora2, workers=2, **(COMMON | dict(layer="gat", epochs=8, fanouts=[10, 10],
                                                                      exchange="historical", staleness=4,
                                                                      halo_features="fetch",
                                                                      cache_policy="degree", cache_size="20%")))
    assert res["cache"]["policy"] == "degree"
    assert res["test_acc_at_best_val"] > 0.70
    assert all(0 < e["embedding_age_max"] <= 4 for e in res["epochs"])
    assert res["epochs"][-1]["feature_rows_from_cache"] > 0
