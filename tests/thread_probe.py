"""A homogeneous layer that writes down the torch thread count its forward and backward run with
(and the worker's OpenMP wait policy), for tests/test_threads.py: built as ``rel:thread_probe:ThreadProbe``
inside a worker, it appends ``forward N POLICY`` / ``backward N POLICY`` / ``inference N POLICY``
lines to the file named by ``GNNSCALE_THREAD_PROBE``."""
from __future__ import annotations

import os

import torch


def _record(where: str) -> None:
    path = os.environ.get("GNNSCALE_THREAD_PROBE")
    if path:
        with open(path, "a") as f:
            f.write(f"{where} {torch.get_num_threads()} {os.environ.get('OMP_WAIT_POLICY', '-')}\n")


class _Probe(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        _record("backward")
        return grad


class ThreadProbe(torch.nn.Module):
    """Sum of the in-neighbours' rows plus the own row, then a linear: float32 [D, out_dim]."""

    def __init__(self, in_dim: int, out_dim: int, **_) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(in_dim, out_dim)

    def forward(self, x, edge_index, **_):
        x_src, x_dst = x if isinstance(x, tuple) else (x, x)
        if x_src.shape[0] != 4 or edge_index.shape[1] != 3:  # not the layer contract's probe block (at build)
            _record("forward" if torch.is_grad_enabled() else "inference")
        agg = torch.zeros_like(x_dst).index_add_(0, edge_index[1], x_src.index_select(0, edge_index[0]))
        return _Probe.apply(self.lin(agg + x_dst))
