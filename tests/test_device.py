"""The device path (``--device cpu|cuda|auto``): what a CPU machine can show, and the ``gpu`` tests.

Tests marked ``gpu`` need CUDA and skip without it; ``benchmarks/gpu_check.sh`` runs them on a
GPU machine (``python -m pytest -m gpu``).
"""
from __future__ import annotations

import json

import pytest
import torch

from gnnscale.process.device import DeviceCopier, process_group_backend, resolve_device
from gnnscale.errors import RuntimeSetupError
from gnnscale.process.groups import default_backend

from test_cli import run_cli

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (benchmarks/gpu_check.sh)")


def test_auto_is_cpu_without_cuda_and_cuda_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu", 3, 8) == torch.device("cpu")
    with pytest.raises(RuntimeSetupError, match=r"--device cuda: .*Train on the CPU with --device cpu"):
        resolve_device("cuda")
    with pytest.raises(RuntimeSetupError, match=r"--device must be one of cpu, cuda, auto; found 'gpu'"):
        resolve_device("gpu")


def test_one_worker_per_gpu(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda", 1, 2) == torch.device("cuda", 1)
    assert resolve_device("auto", 0, 1) == torch.device("cuda", 0)
    with pytest.raises(RuntimeSetupError, match=r"3 workers on this machine but 2 GPU\(s\) visible; one worker trains "
                                                r"on one GPU\. Start at most 2 worker\(s\)"):
        resolve_device("cuda", 0, 3)


def test_backends_never_follow_a_visible_gpu_alone(monkeypatch) -> None:
    """A GPU on the machine does not switch the groups to NCCL while the model is on the CPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_backend() == "gloo"
    assert process_group_backend(torch.device("cpu")) == "gloo"
    assert process_group_backend(torch.device("cuda", 0)) == "cpu:gloo,cuda:nccl"


def test_copier_is_a_no_op_on_cpu() -> None:
    c = DeviceCopier(torch.device("cpu"))
    t = torch.arange(5)
    with c.side_stream():
        assert c.move(t) is t
        assert c.record() is None
    c.ready(None, t)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a machine without CUDA")
def test_cli_device_cuda_without_cuda_fails_before_any_work(tmp_path) -> None:
    r = run_cli("train", "--device", "cuda", "--dataset", "synthetic?num_nodes=500", "--epochs", "1",
                "--cache-dir", str(tmp_path), timeout=120)
    assert r.returncode == 2
    assert "gnnscale train: error: --device cuda: this torch build has no CUDA support" in r.stderr
    assert not any(tmp_path.iterdir())  # it stopped before partitioning


@pytest.fixture(scope="module")
def cora1(cora_partition):
    return cora_partition(1)


def _train(parts: str, device: str, tmp_path, **kw) -> dict:
    from gnnscale.training.trainer import TrainConfig, train_worker

    cfg = TrainConfig(epochs=2, fanouts=(10, 5), batch_size=256, hidden=32, device=device, progress=False,
                      metrics=str(tmp_path / f"m-{device}.json"), **kw)
    train_worker(parts, cfg)
    return json.loads((tmp_path / f"m-{device}.json").read_text())


def test_device_cpu_is_the_default_path(cora1, tmp_path) -> None:
    """``--device cpu`` and ``auto`` (no GPU here) train through the same code: equal weights."""
    a = _train(cora1, "cpu", tmp_path)
    b = _train(cora1, "auto", tmp_path)
    assert a["final_weights_sha256"] == b["final_weights_sha256"]
    assert [e["loss"] for e in a["epochs"]] == [e["loss"] for e in b["epochs"]]
    assert a["config"]["device"] == "cpu" and b["config"]["device"] == "auto"
    # start-up by phase, by name: the phases add up to no more than the whole
    phases = a["startup_phase_seconds_max_over_ranks"]
    assert list(phases) == ["DDP and optimizer", "feature cache", "groups and samplers", "halo table fill",
                            "model and halo", "part load", "process group", "stages and tables"]  # sorted names
    assert phases["halo table fill"] == phases["stages and tables"] == 0.0  # not this mode's
    assert all(v >= 0 for v in phases.values()) and sum(phases.values()) <= a["startup_seconds"] + 1e-6


# -- gpu: run by benchmarks/gpu_check.sh on a machine with CUDA --------------------------------------


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("layer", ["sage", "gcn"])
def test_one_cuda_worker_matches_the_cpu_losses(cora1, tmp_path, layer) -> None:
    """1 worker on CUDA against the same run on the CPU: per-epoch losses within 1e-4 and the
    same accuracy (dropout 0: the CPU's hash dropout and CUDA's F.dropout draw different masks)."""
    cpu = _train(cora1, "cpu", tmp_path, dropout=0.0, layer=layer, eval_method="sampled")
    gpu = _train(cora1, "cuda", tmp_path, dropout=0.0, layer=layer, eval_method="sampled")
    for a, b in zip(cpu["epochs"], gpu["epochs"]):
        assert abs(a["loss"] - b["loss"]) < 1e-4, (a["loss"], b["loss"])
    assert abs(cpu["test_acc"] - gpu["test_acc"]) < 0.01


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, needs_cuda])])
@pytest.mark.parametrize("replace", [False, True])
def test_torch_sampling_kernels_draw_what_numba_draws(device, replace) -> None:
    """The torch kernels (on CUDA tensors in the gpu variant) pick exactly the neighbors the numba
    kernels pick on the CPU, and relabel them alike."""
    from gnnscale.samplers.kernels import Kernels

    g = torch.Generator().manual_seed(0)
    n = 5000
    deg = torch.randint(0, 40, (n,), generator=g)
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(deg, 0)])
    indices = torch.randint(0, n, (int(indptr[-1]),), generator=g)
    seeds = torch.randperm(n, generator=g)[:1000]
    ref = Kernels(n, "cpu", "numba")
    other = Kernels(n, device, "torch")
    assert other.name == "torch"
    counts, nbrs = ref.sample(indptr, indices, seeds, seeds, 10, 12345, replace=replace)
    d = torch.device(device)
    counts2, nbrs2 = other.sample(indptr.to(d), indices.to(d), seeds.to(d), seeds.to(d), 10, 12345, replace=replace)
    assert nbrs2.device.type == d.type
    assert torch.equal(counts, counts2.cpu()) and torch.equal(nbrs, nbrs2.cpu())
    src, local = ref.relabel(seeds, nbrs)
    src2, local2 = other.relabel(seeds.to(d), nbrs2)
    assert torch.equal(src, src2.cpu()) and torch.equal(local, local2.cpu())
