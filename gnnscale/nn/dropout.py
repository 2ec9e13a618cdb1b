"""Seeded dropout on CPU: the mask is a hash of (seed, element index), never stored.

``torch.nn.functional.dropout`` on CPU draws its mask with torch's sequential generator
(``rand_like`` alone took 32 ms on [60000, 128] here) and keeps a mask for the backward.
:func:`dropout` hashes (seed, element index) with splitmix64 in a parallel compiled loop:
the forward writes ``x * 1/(1-p)`` or 0 in one pass, the backward recomputes the same mask from
the seed (nothing is stored). The seed is drawn from torch's generator, so
``torch.manual_seed`` still makes runs repeatable. Without numba (or on CUDA) it falls back to
``F.dropout``.

:func:`relu_dropout` fuses the ReLU before it (one pass forward, one backward).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

try:  # numba is a dependency; the fallback keeps the module importable without it
    import numba
    import numpy as np
except ImportError:  # pragma: no cover
    numba = None

from gnnscale.nn.sparse_ops import _rows  # [N, ...] tensor -> its [N, -1] numpy view

__all__ = ["dropout", "relu_dropout", "claim_relu_dropout", "relu_dropout_backward_"]

if numba is not None:

    @numba.njit(inline="always", cache=True)
    def _kept(index, threshold):  # pragma: no cover - compiled
        """splitmix64 of (seed + element index): True when the element is kept."""
        z = index * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        return (z >> np.uint64(40)) >= threshold

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def _mask_scale(x, out, seed, threshold, scale):  # pragma: no cover - compiled
        n, c = x.shape
        for i in numba.prange(n):
            base = np.uint64(i) * np.uint64(c) + seed
            for j in range(c):
                out[i, j] = x[i, j] * scale if _kept(base + np.uint64(j), threshold) else np.float32(0.0)

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def _relu_mask_scale(x, out, seed, threshold, scale):  # pragma: no cover - compiled
        """out = relu(x) * mask * scale with _mask_scale's mask."""
        n, c = x.shape
        for i in numba.prange(n):
            base = np.uint64(i) * np.uint64(c) + seed
            for j in range(c):
                v = x[i, j]
                out[i, j] = v * scale if (v > 0 and _kept(base + np.uint64(j), threshold)) else np.float32(0.0)

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def _scale_where_positive(out, grad, res, scale):  # pragma: no cover - compiled
        """res = grad * scale where out > 0, else 0 (the backward of _relu_mask_scale)."""
        n, c = out.shape
        for i in numba.prange(n):
            for j in range(c):
                res[i, j] = grad[i, j] * scale if out[i, j] > 0 else np.float32(0.0)


def _dropout_args(p: float) -> tuple:
    """(seed, keep threshold in 2^-24 steps, scale): the seed drawn from torch's generator."""
    seed = int(torch.randint(0, 1 << 62, (1,)).item())
    return np.uint64(seed), np.uint64(int(round(p * (1 << 24)))), np.float32(1.0 / (1.0 - p))


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:  # type: ignore[override]
        ctx.args = args = _dropout_args(p)
        x2 = x.detach().contiguous()
        out = torch.empty_like(x2)
        _mask_scale(_rows(x2), _rows(out), *args)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        g = grad.contiguous()
        out = torch.empty_like(g)
        _mask_scale(_rows(g), _rows(out), *ctx.args)
        return out, None


class _ReluDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float, sole_consumer: bool) -> Tensor:  # type: ignore[override]
        args = _dropout_args(p)
        ctx.scale = args[2]
        ctx.claimable, ctx.claimed = sole_consumer, False
        x2 = x.detach().contiguous()
        out = torch.empty_like(x2)
        _relu_mask_scale(_rows(x2), _rows(out), *args)
        ctx.save_for_backward(out)  # out > 0 exactly where x > 0 and the element was kept
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        if ctx.claimed:  # the only consumer applied this backward to the gradient it made
            return grad, None, None
        (out,) = ctx.saved_tensors
        g = grad.contiguous()
        res = torch.empty_like(g)
        _scale_where_positive(_rows(out), _rows(g), _rows(res), ctx.scale)
        return res, None, None


def claim_relu_dropout(t: Tensor) -> np.float32 | None:
    """Take over the backward of the :func:`relu_dropout` that made ``t``, where its caller said
    ``t`` has one consumer (``sole_consumer=True``) and the caller of this is that consumer.

    Returns the dropout's scale, or None (``t`` is not such an output, or it was claimed already:
    nothing changes). After a claim the consumer must pass its gradient for ``t`` through
    :func:`relu_dropout_backward_` (in place, on a tensor it owns); the ReLU-dropout's own
    backward then hands that gradient on as it is, so one pass over the rows and one buffer are
    saved, with the same values."""
    node = t.grad_fn
    if (node is None or not isinstance(node, _ReluDropout._backward_cls)
            or not getattr(node, "claimable", False) or node.claimed or t._base is not None):
        return None
    node.claimed = True
    return node.scale


def relu_dropout_backward_(grad: Tensor, out: Tensor, scale: np.float32) -> Tensor:
    """``grad`` float32 [N, C] (contiguous, owned by the caller) times ``scale`` where ``out`` (the
    ReLU-dropout's output, [N, C]) is positive, else 0, in place: the backward of
    :func:`relu_dropout` for a consumer that claimed it (:func:`claim_relu_dropout`)."""
    if not grad.is_contiguous() or grad.shape != out.shape:
        raise ValueError(f"relu_dropout_backward_: expected a contiguous gradient of the output's shape "
                         f"{tuple(out.shape)}, found {tuple(grad.shape)} (contiguous: {grad.is_contiguous()})")
    _scale_where_positive(_rows(out.detach()), _rows(grad), _rows(grad), scale)
    return grad


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Dropout of float32 x [N, ...]: each element kept with probability 1 - p (in steps of
    2^-24) and scaled by 1/(1-p); same contract as ``F.dropout``."""
    if not training or p == 0.0:
        return x
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], found {p}")
    if p == 1.0:
        return x * 0.0
    if numba is None or x.device.type != "cpu" or x.dtype != torch.float32 or x.dim() < 1 or x.numel() == 0:
        return F.dropout(x, p, True)
    return _Dropout.apply(x, float(p))


def relu_dropout(x: Tensor, p: float, training: bool = True, sole_consumer: bool = False) -> Tensor:
    """``dropout(relu(x), p, training)`` in one pass, forward and backward, with the same mask
    and seed stream as :func:`dropout` (so the two orders give equal results); the backward
    reads the output (kept and positive where it is > 0) instead of a stored mask.

    ``sole_consumer``: the caller guarantees that one autograd node reads the output, which may
    then claim the backward (:func:`claim_relu_dropout`; ``BlockSAGEConv`` does)."""
    if not training or p == 0.0:
        return F.relu(x)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], found {p}")
    if p == 1.0 or numba is None or x.device.type != "cpu" or x.dtype != torch.float32 or x.dim() < 1 \
            or x.numel() == 0:
        return dropout(F.relu(x), p, training)
    return _ReluDropout.apply(x, float(p), bool(sole_consumer))
