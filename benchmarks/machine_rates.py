"""The machine's rates for a roofline (``roofline.py``, issue 30): matrix products, memory.

**Rates**, measured here with the training's threads: torch's matrix product at each shape
the layers run (forward ``[rows, F_in] x [F_in, F_out]``, weight gradient ``[F_in, rows] x
[rows, F_out]``, input gradient ``[rows, F_out] x [F_out, F_in]``, rows = the median step's),
best of several timings, and with one thread: a bound takes the larger of the T-thread rate and
T x the one-thread rate (T cores do not multiply faster than T times one; on a loaded machine a
2-thread product can fall below one thread's rate); memory bandwidth: a copy of a buffer far
larger than the caches (1 GiB, read + write counted: STREAM's copy convention), best of several.
``epoch.py`` measures them before its runs and again after each repeat and keeps the best.
"""
from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F


def _best_time(fn, min_s: float = 0.03, rounds: int = 5) -> float:
    """Best over ``rounds`` of the mean time of ``fn`` repeated for at least ``min_s``."""
    fn()
    best = math.inf
    for _ in range(rounds):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= min_s:
                break
        best = min(best, dt / n)
    return best


def matmul_rate(kind: str, rows: int, f_in: int, f_out: int, bias: bool, threads: int) -> float:
    """GFLOP/s of torch's product as autograd runs it for a linear of ``rows`` rows:
    ``fwd`` F.linear (addmm with a bias), ``wgrad`` x^T g ([F_in, rows] x [rows, F_out]),
    ``igrad`` g W ([rows, F_out] x [F_out, F_in])."""
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(rows, f_in, generator=g)
        w = torch.randn(f_out, f_in, generator=g)
        b = torch.randn(f_out, generator=g) if bias else None
        gr = torch.randn(rows, f_out, generator=g)
        fn = {"fwd": lambda: F.linear(x, w, b), "wgrad": lambda: x.t().mm(gr), "igrad": lambda: gr.mm(w)}[kind]
        with torch.no_grad():
            t = _best_time(fn)
        return 2.0 * rows * f_in * f_out / t / 1e9
    finally:
        torch.set_num_threads(prev)


def copy_bandwidth(threads: int, mib: int = 1024, rounds: int = 5) -> float:
    """GB/s of a copy of a ``mib`` MiB float32 buffer (read + write bytes: 2 x size per copy),
    best of ``rounds``, with ``threads`` torch threads."""
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        n = mib * 2 ** 20 // 4
        src = torch.ones(n)
        dst = torch.zeros(n)  # both touched: no page faults in the timed copies
        dst.copy_(src)
        best = math.inf
        for _ in range(rounds):
            t0 = time.perf_counter()
            dst.copy_(src)
            best = min(best, time.perf_counter() - t0)
        del src, dst
        return 2.0 * n * 4 / best / 1e9
    finally:
        torch.set_num_threads(prev)


def shape_key(op: dict) -> str:
    """The name of a matrix product's shape, the key of the rates: ``fwd 24099x128x256 +bias``."""
    return f"{op['kind']} {op['rows']}x{op['f_in']}x{op['f_out']}{' +bias' if op['bias'] else ''}"


def measure(c: dict, buffer_mib: int = 1024) -> dict:
    """The machine's rates for counts ``c``: matmul GFLOP/s at every shape rank 0's median step
    runs, with the ranks' ``threads_per_rank`` threads (T) and, when T > 1, with one thread; the
    copy bandwidth per rank and for all ranks together.

    The rate a bound uses (``matmul_GFLOP_per_s``) is the larger of the T-thread rate and T times
    the one-thread rate: T cores cannot multiply faster than T times one, so the bound stays a
    lower bound when a loaded machine leaves the second thread waiting on a busy core (here the
    measured 2-thread products often ran below one thread's rate). ``matmul_GFLOP_per_s_measured``,
    the larger of the two measured rates, gives ``matmul_at_measured_rates_s`` beside it."""
    from gnnscale.process.memory import keep_freed_memory

    heap = keep_freed_memory()  # the workers' heap where torch's huge-page allocation is on (epoch.py sets it)
    t = c["threads_per_rank"]
    shapes, one = {}, {}
    for op in c["counts"][0]["ops"]:
        k = shape_key(op)
        if k not in shapes:
            shapes[k] = matmul_rate(op["kind"], op["rows"], op["f_in"], op["f_out"], op["bias"], t)
            if t > 1:
                one[k] = matmul_rate(op["kind"], op["rows"], op["f_in"], op["f_out"], op["bias"], 1)
    machine_threads = c["ranks"] * t
    bw = copy_bandwidth(t, buffer_mib)
    bw_all = bw if machine_threads == t else copy_bandwidth(machine_threads, buffer_mib)
    return dict(matmul_GFLOP_per_s={k: max(v, t * one.get(k, 0.0)) for k, v in shapes.items()},
                matmul_GFLOP_per_s_measured={k: max(v, one.get(k, 0.0)) for k, v in shapes.items()},
                matmul_GFLOP_per_s_at_threads=shapes, matmul_GFLOP_per_s_one_thread=one or shapes,
                copy_GBps_per_rank=bw, machine_threads=machine_threads, copy_GBps_machine=max(bw_all, bw),
                copy_buffer_MiB=buffer_mib, measurements=1, heap=heap)


def best_rates(a: dict | None, b: dict) -> dict:
    """The better of two measurements, figure by figure (a noisy machine only ever slows a run)."""
    if a is None:
        return b
    best = lambda key: {k: max(v, a[key].get(k, 0.0)) for k, v in b[key].items()}  # noqa: E731
    return dict(a, matmul_GFLOP_per_s=best("matmul_GFLOP_per_s"),
                matmul_GFLOP_per_s_measured=best("matmul_GFLOP_per_s_measured"),
                matmul_GFLOP_per_s_at_threads=best("matmul_GFLOP_per_s_at_threads"),
                matmul_GFLOP_per_s_one_thread=best("matmul_GFLOP_per_s_one_thread"),
                copy_GBps_per_rank=max(a["copy_GBps_per_rank"], b["copy_GBps_per_rank"]),
                copy_GBps_machine=max(a["copy_GBps_machine"], b["copy_GBps_machine"]),
                measurements=a["measurements"] + b["measurements"])
