"""Seeded dropout on CPU: the mask is a hash of (seed, element index), never stored.

``torch.nn.functional.dropout`` on CPU draws its mask with torch's sequential generator
(``rand_like`` alone took 32 ms on [60000, 128] here) and keeps a mask for the backward.
:func:`dropout` hashes (seed, element index) with splitmix64 in a parallel compiled loop:
the forward writes ``x * 1/(1-p)`` or 0 in one pass, the backward recomputes the same mask from
the seed (nothing is stored). The seed is drawn from torch's generator, so
``torch.manual_seed`` still makes runs repeatable. Without numba (or on CUDA) it falls back to
``F.dropout``.

:func:`relu_dropout` fuses the ReLU before it (one pass forward, one backward).

Keyed masks (``keys`` and ``seed`` given): the mask of element (row i, column j) is a hash of
(``seed``, ``keys[i]``, j) instead of (drawn seed, i, j). Data parallelism keys each row by its
node's original id and the seed by (run seed, epoch, step, layer) (:func:`layer_seed`), so a
node's mask does not depend on which rank holds it or where in the batch its row is: 1, 2 or 4
workers drop the same elements (:func:`keyed_mask` is the same mask in tensor code, for CUDA and
for checks).
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

__all__ = ["dropout", "relu_dropout", "claim_relu_dropout", "relu_dropout_backward_", "layer_seed", "keyed_mask"]

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
    def _mask_scale_keyed(x, out, keys, seed, threshold, scale):  # pragma: no cover - compiled
        """_mask_scale with row i's index base keys[i] * c + seed (keys: int64 [n])."""
        n, c = x.shape
        for i in numba.prange(n):
            base = np.uint64(keys[i]) * np.uint64(c) + seed
            for j in range(c):
                out[i, j] = x[i, j] * scale if _kept(base + np.uint64(j), threshold) else np.float32(0.0)

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def _relu_mask_scale_keyed(x, out, keys, seed, threshold, scale):  # pragma: no cover - compiled
        """_relu_mask_scale with _mask_scale_keyed's mask."""
        n, c = x.shape
        for i in numba.prange(n):
            base = np.uint64(keys[i]) * np.uint64(c) + seed
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


_SEED_TAG = 0x44524F50  # "DROP": keeps the masks' seeds apart from the samplers' streams


def layer_seed(rng_key: int, layer: int) -> int:
    """The keyed masks' seed of layer ``layer`` (0: the encoder's input) under a step's ``rng_key``
    (:func:`gnnscale.parallel.stage.rng_key`): a 63-bit int, the same in every process."""
    from gnnscale.samplers.rng import stream_key

    return stream_key(int(rng_key), int(layer), _SEED_TAG) & ((1 << 63) - 1)


def keyed_mask(keys: Tensor, cols: int, seed: int, p: float) -> Tensor:
    """bool [n, cols]: the elements the keyed dropout keeps (rows keyed by ``keys``, int64 [n]),
    in tensor code (any device): the mask the compiled kernels apply."""
    from gnnscale.samplers.rng import _signed, _srl, mix64

    threshold = int(round(p * (1 << 24)))
    index = keys.to(torch.int64).unsqueeze(1) * int(cols) + _signed(int(seed)) \
        + torch.arange(int(cols), dtype=torch.int64, device=keys.device)
    z = mix64(index * _signed(0x9E3779B97F4A7C15))
    return _srl(z, 40) >= threshold


def _dropout_args(p: float, seed: int | None = None) -> tuple:
    """(seed, keep threshold in 2^-24 steps, scale): the seed given, or drawn from torch's generator."""
    if seed is None:
        seed = int(torch.randint(0, 1 << 62, (1,)).item())
    return np.uint64(seed), np.uint64(int(round(p * (1 << 24)))), np.float32(1.0 / (1.0 - p))


def _row_keys(keys: Tensor | None, x: Tensor) -> "np.ndarray | None":
    """``keys`` as a contiguous int64 numpy [N] for the rows of ``x`` [N, ...] (None: unkeyed)."""
    if keys is None:
        return None
    if keys.dim() != 1 or keys.numel() != x.shape[0]:
        raise ValueError(f"dropout: expected one key per row of the input ({x.shape[0]}), found keys of shape "
                         f"{tuple(keys.shape)}")
    return keys.detach().to("cpu", torch.int64).contiguous().numpy()


def _apply_mask(x: np.ndarray, out: np.ndarray, keys, args: tuple, relu: bool) -> None:
    if keys is None:
        (_relu_mask_scale if relu else _mask_scale)(x, out, *args)
    else:
        (_relu_mask_scale_keyed if relu else _mask_scale_keyed)(x, out, keys, *args)


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float, keys: Tensor | None, seed: int | None) -> Tensor:  # type: ignore[override]
        ctx.args = args = _dropout_args(p, seed)
        ctx.keys = k = _row_keys(keys, x)
        x2 = x.detach().contiguous()
        out = torch.empty_like(x2)
        _apply_mask(_rows(x2), _rows(out), k, args, relu=False)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        g = grad.contiguous()
        out = torch.empty_like(g)
        _apply_mask(_rows(g), _rows(out), ctx.keys, ctx.args, relu=False)
        return out, None, None, None


class _ReluDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float, sole_consumer: bool, keys: Tensor | None,  # type: ignore[override]
                seed: int | None) -> Tensor:
        args = _dropout_args(p, seed)
        ctx.scale = args[2]
        ctx.claimable, ctx.claimed = sole_consumer, False
        x2 = x.detach().contiguous()
        out = torch.empty_like(x2)
        _apply_mask(_rows(x2), _rows(out), _row_keys(keys, x), args, relu=True)
        ctx.save_for_backward(out)  # out > 0 exactly where x > 0 and the element was kept
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        if ctx.claimed:  # the only consumer applied this backward to the gradient it made
            return grad, None, None, None, None
        (out,) = ctx.saved_tensors
        g = grad.contiguous()
        res = torch.empty_like(g)
        _scale_where_positive(_rows(out), _rows(g), _rows(res), ctx.scale)
        return res, None, None, None, None


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


def _check_keyed(keys: Tensor | None, seed: int | None) -> None:
    if (keys is None) != (seed is None):
        raise ValueError("dropout: keyed masks need both keys (one per row) and seed; found only "
                         + ("keys" if seed is None else "seed"))


def dropout(x: Tensor, p: float, training: bool = True, keys: Tensor | None = None,
            seed: int | None = None) -> Tensor:
    """Dropout of float32 x [N, ...]: each element kept with probability 1 - p (in steps of
    2^-24) and scaled by 1/(1-p); same contract as ``F.dropout``.

    ``keys`` int64 [N] and ``seed`` (int, :func:`layer_seed`): the mask of row i is keyed by
    ``keys[i]`` and ``seed`` (the same rows keyed alike give the same mask in any batch, order
    or process) instead of a seed drawn from torch's generator and the row's position."""
    _check_keyed(keys, seed)
    if not training or p == 0.0:
        return x
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], found {p}")
    if p == 1.0:
        return x * 0.0
    if x.dim() < 1 or x.numel() == 0:
        return F.dropout(x, p, True) if keys is None else x
    if numba is None or x.device.type != "cpu" or x.dtype != torch.float32:
        if keys is None:
            return F.dropout(x, p, True)
        _row_keys(keys, x)
        cols = x[0].numel()
        mask = keyed_mask(keys.to(x.device), cols, seed, p).reshape(x.shape)
        return x * mask.to(x.dtype) * (1.0 / (1.0 - p))
    return _Dropout.apply(x, float(p), keys, seed)


def relu_dropout(x: Tensor, p: float, training: bool = True, sole_consumer: bool = False,
                 keys: Tensor | None = None, seed: int | None = None) -> Tensor:
    """``dropout(relu(x), p, training, keys, seed)`` in one pass, forward and backward, with the
    same mask and seed stream as :func:`dropout` (so the two orders give equal results); the
    backward reads the output (kept and positive where it is > 0) instead of a stored mask.

    ``sole_consumer``: the caller guarantees that one autograd node reads the output, which may
    then claim the backward (:func:`claim_relu_dropout`; ``BlockSAGEConv`` does)."""
    _check_keyed(keys, seed)
    if not training or p == 0.0:
        return F.relu(x)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], found {p}")
    if p == 1.0 or numba is None or x.device.type != "cpu" or x.dtype != torch.float32 or x.dim() < 1 \
            or x.numel() == 0:
        return dropout(F.relu(x), p, training, keys, seed)
    return _ReluDropout.apply(x, float(p), bool(sole_consumer), keys, seed)
