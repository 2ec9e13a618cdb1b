"""Threads per op on typed graphs (issue 44, item 4c): a typed step runs its small ops on one
thread and gives the worker's threads to the wide products only; a typed run's idle OpenMP
threads sleep. Values, not times: the policy's choices, the thread counts the ops saw, the
environment of the worker (benchmarks/threads_typed.py has the times)."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

import gnnscale
from gnnscale.process.launch import thread_env
from gnnscale.process.threads import (PARALLEL_MIN_FLOPS, backward_threads, intra_op_threads, op_threads,
                                      serial_step, step_budget, threads_for)


def test_threads_for_gives_a_thread_per_parallel_min_flops_up_to_the_budget():
    assert PARALLEL_MIN_FLOPS == 100e6
    assert threads_for(0, 2) == 1
    assert threads_for(1.99e8, 2) == 1  # a per-relation product of a few hundred rows: one thread
    assert threads_for(2e8, 2) == 2
    assert threads_for(1e12, 2) == 2
    assert threads_for(1e12, 1) == 1
    assert threads_for(3.5e8, 8) == 3
    # a DBLP-shaped step's paper encoder (1,500 rows x 4,231 columns -> 64): two threads; a
    # relation's SAGE product (490 rows, 64 -> 64): one
    assert threads_for(2 * 1500 * 4231 * 64, 2) == 2
    assert threads_for(2 * 490 * 64 * 64, 2) == 1


def test_typed_lone_worker_threads_sleep_untyped_lone_worker_keeps_spinning(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert "OMP_WAIT_POLICY" not in thread_env(2, 1)
    assert thread_env(2, 1, typed=True)["OMP_WAIT_POLICY"] == "PASSIVE"
    assert thread_env(1, 2)["OMP_WAIT_POLICY"] == "PASSIVE"
    assert thread_env(2, 1, typed=True)["OMP_NUM_THREADS"] == "2"
    # a policy the user set: a lone worker takes it (a shared machine's PASSIVE; the suite sets it);
    # several workers and typed runs sleep whatever it says
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert thread_env(2, 1)["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert thread_env(2, 1)["OMP_WAIT_POLICY"] == "ACTIVE"
    assert thread_env(1, 2)["OMP_WAIT_POLICY"] == thread_env(2, 1, typed=True)["OMP_WAIT_POLICY"] == "PASSIVE"


def test_serial_step_runs_small_ops_on_one_thread_and_wide_products_on_the_budget():
    from gnnscale.nn.typed_encoder import TypedEncoder
    from gnnscale.samplers.block import TypedInput

    prev = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert op_threads(1e12) is None  # outside a step: nothing changes
        enc = TypedEncoder([4231, 8, 0], [500, 40, 3], 64)
        seen: dict[str, list[int]] = {"wide_fw": [], "wide_bw": [], "small_fw": [], "small_bw": []}
        # forward: seen inside the module's call; backward: a hook after the product's node, registered
        # before backward_threads' own (which then puts the count back)
        for name, lin in (("wide", enc.linears[0]), ("small", enc.linears[1])):
            def fw(m, i, o, name=name):
                seen[f"{name}_fw"].append(torch.get_num_threads())
                o.grad_fn.register_hook(lambda gi, go, name=name: seen[f"{name}_bw"].append(torch.get_num_threads()))
            lin.register_forward_hook(fw)
        node_type = torch.tensor([0] * 400 + [1] * 30 + [2] * 3)
        type_index = torch.cat([torch.arange(400), torch.arange(30), torch.arange(3)])
        x = TypedInput(node_type, type_index, {0: (torch.rand(400, 4231) < 0.002).float(), 1: torch.randn(30, 8)})
        with serial_step():
            assert step_budget() == 2 and torch.get_num_threads() == 1
            out = enc(x)
            in_step = torch.get_num_threads()
            out.square().sum().backward()
            after_backward = torch.get_num_threads()
        assert seen == {"wide_fw": [2], "wide_bw": [2], "small_fw": [1], "small_bw": [1]}
        assert (in_step, after_backward) == (1, 1)
        assert torch.get_num_threads() == 2 and step_budget() is None
        with serial_step(enabled=False):
            assert torch.get_num_threads() == 2 and step_budget() is None
    finally:
        torch.set_num_threads(prev)


def test_intra_op_and_backward_threads_put_the_count_back():
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        w = torch.randn(4, 4, requires_grad=True)
        with intra_op_threads(2):
            assert torch.get_num_threads() == 2
            y = backward_threads(w @ w, 2)
        assert torch.get_num_threads() == 1
        y.sum().backward()
        assert torch.get_num_threads() == 1
        assert backward_threads(torch.ones(2), 2).grad_fn is None  # no node: nothing to do
    finally:
        torch.set_num_threads(prev)


def test_typed_step_small_ops_run_on_one_thread_in_a_two_thread_worker(acm_partition, tmp_path, monkeypatch):
    """A lone worker with --threads 2 on ACM: every per-relation layer's forward and backward, and
    its inference in the evaluation, ran on one thread, with idle OpenMP threads asleep; before the
    fix they ran on 2, spinning."""
    probe = tmp_path / "probe.txt"
    monkeypatch.setenv("GNNSCALE_THREAD_PROBE", str(probe))
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)  # the typed run's own choice, not the suite's
    res = gnnscale.train(parts_dir=acm_partition(1), workers=1, threads=2, layer="rel:thread_probe:ThreadProbe",
                         fanouts=(5, 5), batch_size=32, hidden=16, epochs=1, max_steps=2, eval_every=1,
                         verify=False, progress=False, timeout=60.0, device="cpu")
    assert res["process"]["threads"] == 2  # the worker's budget is still 2
    seen = Counter(tuple(line.split()) for line in probe.read_text().splitlines())
    # each relation with destinations in the block, each layer, each step: forward and backward;
    # the evaluation after the epoch too
    assert set(seen) == {("forward", "1", "PASSIVE"), ("backward", "1", "PASSIVE"), ("inference", "1", "PASSIVE")}
    assert seen[("forward", "1", "PASSIVE")] == seen[("backward", "1", "PASSIVE")] >= 8


def test_serial_step_puts_numba_threads_back():
    """Inside a serial step numba runs on one thread; after it, on as many as before (this thread's
    setting): a step must not leave the loader's or the evaluation's numba kernels on one thread."""
    numba = pytest.importorskip("numba")
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba was started with one thread (NUMBA_NUM_THREADS=1): nothing to put back")
    prev = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        with serial_step():
            assert numba.get_num_threads() == 1
        assert numba.get_num_threads() == 2, f"numba left on {numba.get_num_threads()} thread(s) after the step"
        with serial_step(enabled=False):
            assert numba.get_num_threads() == 2
        numba.set_num_threads(1)  # one thread before: one after
        with serial_step():
            assert numba.get_num_threads() == 1
        assert numba.get_num_threads() == 1
    finally:
        numba.set_num_threads(prev)
