"""Intra-op threads chosen per op: a typed graph's step runs its many small ops on one thread,
and only the ops whose work pays for a parallel region take the worker's threads.

Why (issue 44, item 4c): a typed model's step is hundreds of small ops (per relation and per
node type: gathers of a few hundred rows, their ``index_add_`` backward, whose radix sort opens
OpenMP regions at any size, small matrix products, numba kernels over a few thousand edges).
With 2 threads each of them opens a parallel region; on a machine where another process runs,
a region's second thread is often off the core, and the region waits for it (the default
OpenMP wait policy also spins the idle thread, taking the core from the thread that has work).
Measured on a DBLP-shaped graph (26k nodes, 80 seeds, full neighbourhoods, 1 worker, another
process busy): compute per epoch 2.8 s with 2 threads against 0.21 s with 1, ACM 5.6 s
against 0.28 s (``benchmarks/threads_typed.py``; after the fix 0.08 s against 0.17 s, 0.26 s
against 0.35 s). One thread has no region to wait for; the wide products of
the typed encoder (rows of thousands of bag-of-words columns) still gain from a second thread.

So inside :func:`serial_step` torch and numba run on one thread, and the worker's thread count
becomes the *budget* of the ops that ask for it: :func:`op_threads` gives an op of ``flops``
floating-point operations ``threads_for(flops, budget)`` threads (1 below
:data:`PARALLEL_MIN_FLOPS` per thread), :func:`intra_op_threads` runs its forward with them and
:func:`backward_threads` its backward node. Outside a serial step nothing changes.

A typed run's workers also let their idle OpenMP threads sleep (``OMP_WAIT_POLICY=PASSIVE``,
:func:`gnnscale.process.launch.thread_env`): with few regions left per step, waking a thread
costs little, while a spinning one costs a whole region's time on a loaded machine.

Thread counts are per calling thread (OpenMP's and numba's settings are), so a serial step on
the training thread leaves the loader's prefetch thread as it was; the autograd engine runs a
CPU backward on the thread that calls it, so a step's backward is serial too.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import torch

# An op takes one more thread for each PARALLEL_MIN_FLOPS of its work: about 2 ms of one core
# (50 GFLOP/s), far above the cost of waking a sleeping thread (10-50 us), and above a loaded
# machine's wait for a thread that is off its core (a few ms on a 2-core machine).
PARALLEL_MIN_FLOPS = 100e6

_state = threading.local()


def threads_for(flops: float, budget: int) -> int:
    """Threads for one op of ``flops`` floating-point operations given ``budget`` threads: one
    per :data:`PARALLEL_MIN_FLOPS` of work, at least 1, at most ``budget``."""
    return max(1, min(int(budget), int(flops // PARALLEL_MIN_FLOPS)))


def step_budget() -> int | None:
    """The thread budget of the serial step this thread is in (None outside one)."""
    return getattr(_state, "budget", None)


def op_threads(flops: float) -> int | None:
    """Threads for an op of ``flops`` inside a serial step (:func:`threads_for` of the step's
    budget), or None outside one (the op runs with the thread's count, as before)."""
    budget = step_budget()
    return None if budget is None else threads_for(flops, budget)


def _set_numba_threads(n: int) -> None:
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


def _numba_threads() -> int | None:
    try:
        import numba
    except ImportError:  # pragma: no cover
        return None
    return numba.get_num_threads()


@contextlib.contextmanager
def intra_op_threads(n: int | None) -> Iterator[None]:
    """Run the block's torch ops with ``n`` intra-op threads (this thread's setting; put back
    after). None: leave the count as it is."""
    prev = torch.get_num_threads()
    if n is None or n == prev:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def backward_threads(out: torch.Tensor, n: int | None) -> torch.Tensor:
    """Run the backward of the op that made ``out`` (its ``grad_fn`` node) with ``n`` torch
    threads: a pre-hook sets them, a hook after the node puts the count back. None, or ``out``
    without a ``grad_fn``: nothing. Returns ``out``."""
    node = out.grad_fn
    if n is None or node is None:
        return out
    saved: list[int] = []

    def before(grad_outputs):
        saved.append(torch.get_num_threads())
        if saved[-1] != n:
            torch.set_num_threads(n)

    def after(grad_inputs, grad_outputs):
        if saved:
            prev = saved.pop()
            if prev != n:
                torch.set_num_threads(prev)

    node.register_prehook(before)
    node.register_hook(after)
    return out


@contextlib.contextmanager
def serial_step(enabled: bool = True) -> Iterator[None]:
    """Run the block (a step's forward, backward and optimizer) on one torch and numba thread;
    the thread's count before it becomes the budget of :func:`op_threads`. Nested: the outer
    budget stays. ``enabled`` False: nothing changes."""
    if not enabled or step_budget() is not None:
        yield
        return
    torch_prev, numba_prev = torch.get_num_threads(), _numba_threads()
    _state.budget = torch_prev
    if torch_prev != 1:
        torch.set_num_threads(1)
    if numba_prev not in (None, 1):
        _set_numba_threads(1)
    try:
        yield
    finally:
        _state.budget = None
        if torch.get_num_threads() != torch_prev:
            torch.set_num_threads(torch_prev)
        if numba_prev not in (None, 1):
            _set_numba_threads(numba_prev)
