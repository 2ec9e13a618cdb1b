"""Fast block aggregation and dropout: the two hot operations of a sampled GNN step on CPU.

Aggregation
-----------
A block's mean (or weighted-sum) aggregation ``out[v] = sum_{u -> v} w_uv h[u]`` is a sparse
[D, S] matrix times a dense [S, C] one. :func:`block_matmul` does it as a CSR product
(``torch.sparse.mm``) with its own backward, the product by the transposed matrix, built once
per block (:class:`BlockAdjacency`): no [M, C] per-edge message tensor is ever made, in either
direction (PyG's scatter path makes one forward and one backward).

Dropout
-------
``torch.nn.functional.dropout`` on CPU draws its mask with torch's sequential generator
(``rand_like`` alone took 32 ms on [60000, 128] here) and keeps a mask for the backward.
:func:`dropout` hashes (seed, element index) with splitmix64 in a parallel compiled loop:
the forward writes ``x * 1/(1-p)`` or 0 in one pass, the backward recomputes the same mask from
the seed (nothing is stored). The seed is drawn from torch's generator, so
``torch.manual_seed`` still makes runs repeatable. Without numba (or on CUDA) it falls back to
``F.dropout``.
"""
from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor

try:  # numba is a dependency; the fallback keeps the module importable without it
    import numba
    import numpy as np
except ImportError:  # pragma: no cover
    numba = None

__all__ = ["BlockAdjacency", "block_matmul", "dropout"]

# torch warns once that CSR tensors are "beta"; the products used here are long-standing.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta", category=UserWarning)


class BlockAdjacency:
    """A block's [D, S] aggregation matrix in CSR, and its transpose for the backward.

    Args:
        edge_index: int64 [2, M]; row 0 indexes sources (0..S-1), row 1 destinations (0..D-1).
        num_src: S. num_dst: D.
        weight: optional float [M] edge weights; None: mean over each destination's in-edges
            (``1 / in-degree``; a destination without in-edges gets 0).

    Attributes:
        crow, col, val: the CSR of [D, S] (int64 [D+1], int64 [M], float32 [M]); ``crow_t``,
            ``col_t``, ``val_t``: the CSR of its transpose [S, D].

    Products run in a compiled parallel loop over rows (numba; each output row is a weighted
    sum of gathered rows, no atomics) and fall back to ``torch.sparse.mm`` elsewhere.
    """

    def __init__(self, edge_index: Tensor, num_src: int, num_dst: int, weight: Tensor | None = None) -> None:
        src, dst = edge_index[0], edge_index[1]
        m = src.numel()
        if m > 1 and not bool((dst[1:] >= dst[:-1]).all()):
            order = torch.argsort(dst, stable=True)
            src, dst = src[order], dst[order]
            weight = weight[order] if weight is not None else None
        deg = torch.bincount(dst, minlength=num_dst)
        if weight is None:
            weight = (1.0 / deg.clamp(min=1).to(torch.float32))[dst]
        weight = weight.to(torch.float32).contiguous()
        crow = torch.zeros(num_dst + 1, dtype=torch.int64, device=src.device)
        torch.cumsum(deg, 0, out=crow[1:])
        self.shape = (int(num_dst), int(num_src))
        self.compiled = _compiled_ok(src)
        self.crow, self.col, self.val = crow, src.contiguous(), weight
        if self.compiled:  # the transpose by a counting sort, O(M + S)
            t = _transpose(crow.numpy(), self.col.numpy(), weight.numpy(), int(num_src))
            self.crow_t, self.col_t, self.val_t = (torch.from_numpy(a) for a in t)
        else:
            order = torch.argsort(src, stable=True)
            self.crow_t = torch.zeros(num_src + 1, dtype=torch.int64, device=src.device)
            torch.cumsum(torch.bincount(src, minlength=num_src), 0, out=self.crow_t[1:])
            self.col_t, self.val_t = dst[order].contiguous(), weight[order]

    @property
    def matrix(self) -> Tensor:
        """sparse CSR float32 [D, S]."""
        return _csr(self.crow, self.col, self.val, self.shape)

    @property
    def matrix_t(self) -> Tensor:
        """sparse CSR float32 [S, D]: the transpose."""
        return _csr(self.crow_t, self.col_t, self.val_t, (self.shape[1], self.shape[0]))

    def mm(self, h: Tensor, transpose: bool = False) -> Tensor:
        """float32 [D, C] = A @ h (h [S, C]), or [S, C] = A^T @ h (h [D, C]) with ``transpose``."""
        crow, col, val = (self.crow_t, self.col_t, self.val_t) if transpose else (self.crow, self.col, self.val)
        rows = crow.numel() - 1
        if h.shape[0] == 0 or col.numel() == 0:
            return h.new_zeros(rows, h.shape[1])
        if self.compiled and h.dtype == torch.float32 and h.device.type == "cpu":
            h = h.contiguous()
            out = torch.empty(rows, h.shape[1], dtype=torch.float32)
            _spmm(crow.numpy(), col.numpy(), val.numpy(), h.numpy(), out.numpy())
            return out
        return torch.sparse.mm(self.matrix_t if transpose else self.matrix, h)


def _compiled_ok(t: Tensor) -> bool:
    return numba is not None and t.device.type == "cpu"


def _csr(crow: Tensor, col: Tensor, val: Tensor, shape: tuple[int, int]) -> Tensor:
    return torch.sparse_csr_tensor(crow, col, val, size=shape, check_invariants=False)


class _BlockMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: Tensor, adj: BlockAdjacency) -> Tensor:  # type: ignore[override]
        ctx.adj = adj
        return adj.mm(h)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        adj = ctx.adj
        if not ctx.needs_input_grad[0]:
            return None, None
        return adj.mm(grad, transpose=True), None


def block_matmul(adj: BlockAdjacency, h: Tensor) -> Tensor:
    """float32 [D, C] = ``adj.matrix @ h`` for h float32 [S, C], differentiable in ``h``."""
    if h.shape[0] != adj.shape[1]:
        raise ValueError(f"block_matmul: expected h with {adj.shape[1]} rows (the block's sources), "
                         f"found {h.shape[0]}")
    return _BlockMatmul.apply(h.contiguous(), adj)


if numba is not None:

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def _spmm(crow, col, val, h, out):  # pragma: no cover - compiled
        n = crow.shape[0] - 1
        c = h.shape[1]
        for i in numba.prange(n):
            acc = np.zeros(c, np.float32)
            for e in range(crow[i], crow[i + 1]):
                w = val[e]
                j = col[e]
                for k in range(c):
                    acc[k] += w * h[j, k]
            for k in range(c):
                out[i, k] = acc[k]

    @numba.njit(cache=True)
    def _transpose(crow, col, val, ncols):  # pragma: no cover - compiled
        m = col.shape[0]
        n = crow.shape[0] - 1
        ptr = np.zeros(ncols + 1, np.int64)
        for e in range(m):
            ptr[col[e] + 1] += 1
        for j in range(ncols):
            ptr[j + 1] += ptr[j]
        pos = ptr[:-1].copy()
        col_t = np.empty(m, np.int64)
        val_t = np.empty(m, np.float32)
        for i in range(n):  # rows in order: each transposed row lists its columns ascending
            for e in range(crow[i], crow[i + 1]):
                j = col[e]
                p = pos[j]
                col_t[p] = i
                val_t[p] = val[e]
                pos[j] = p + 1
        return ptr, col_t, val_t

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def _mask_scale(x, out, seed, threshold, scale):  # pragma: no cover - compiled
        n, c = x.shape
        for i in numba.prange(n):
            base = np.uint64(i) * np.uint64(c) + seed
            for j in range(c):
                z = (base + np.uint64(j)) * np.uint64(0x9E3779B97F4A7C15)
                z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
                z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
                z = z ^ (z >> np.uint64(31))
                out[i, j] = x[i, j] * scale if (z >> np.uint64(40)) >= threshold else np.float32(0.0)


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:  # type: ignore[override]
        seed = int(torch.randint(0, 1 << 62, (1,)).item())
        args = (np.uint64(seed), np.uint64(int(round(p * (1 << 24)))), np.float32(1.0 / (1.0 - p)))
        ctx.args = args
        x2 = x.detach().contiguous()
        out = torch.empty_like(x2)
        _mask_scale(x2.view(x2.shape[0], -1).numpy(), out.view(out.shape[0], -1).numpy(), *args)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        g = grad.contiguous()
        out = torch.empty_like(g)
        _mask_scale(g.view(g.shape[0], -1).numpy(), out.view(out.shape[0], -1).numpy(), *ctx.args)
        return out, None


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
