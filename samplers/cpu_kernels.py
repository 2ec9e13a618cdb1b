"""CPU sampling kernels compiled with numba: the same draws as the torch kernels, faster.

:mod:`gnnscale.samplers.kernels` holds the reference torch implementation (which also runs on
CUDA tensors). This module computes bit-identical results on CPU tensors with compiled
loops: sampling in parallel over destination nodes (Floyd's algorithm per node, keyed by
the same splitmix64 stream), relabeling in one pass with an id -> slot scatter table instead
of a sort. A test checks both paths give equal tensors.

numba is imported lazily; when it is missing the torch kernels are used.
"""
from __future__ import annotations

import numpy as np
import torch

try:
    import numba as nb

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - numba is a dependency, but stay usable without it
    nb = None
    HAVE_NUMBA = False

_U = np.uint64
_M1 = _U(0xBF58476D1CE4E5B9)
_M2 = _U(0x94D049BB133111EB)
_G = _U(0x9E3779B97F4A7C15)
_INV53 = 1.0 / float(1 << 53)

if HAVE_NUMBA:

    @nb.njit(inline="always", cache=True)
    def _mix64(x):
        x ^= x >> _U(30)
        x *= _M1
        x ^= x >> _U(27)
        x *= _M2
        x ^= x >> _U(31)
        return x

    @nb.njit(inline="always", cache=True)
    def _count_one(indptr, rows, fanout, i):
        d = indptr[rows[i] + 1] - indptr[rows[i]]
        return d if (fanout < 0 or d < fanout) else fanout

    @nb.njit(inline="always", cache=True)
    def _fill_one(indptr, indices, rows, node_keys, keys, fanout, offsets, out, i):
        start = indptr[rows[i]]
        d = indptr[rows[i] + 1] - start
        o = offsets[i]
        if fanout < 0 or d <= fanout:
            for j in range(d):
                out[o + j] = indices[start + j]
            return
        k = fanout
        key = keys[0] if keys.shape[0] == 1 else keys[i]
        h = _mix64(_U(node_keys[i]) * _G + _U(key))
        for j in range(k):  # Floyd's algorithm: a uniform k-subset of 0..d-1
            bound = d - k + j
            x = _mix64(h + _U(j + 1) * _M2)
            u = float(x >> _U(11)) * _INV53
            t = np.int64(u * float(bound + 1))
            if t > bound:
                t = bound
            for q in range(j):
                if out[o + q] == t:
                    t = bound
                    break
            out[o + j] = t
        for a in range(1, k):  # ascending positions (insertion sort of k small values)
            v = out[o + a]
            b = a - 1
            while b >= 0 and out[o + b] > v:
                out[o + b + 1] = out[o + b]
                b -= 1
            out[o + b + 1] = v
        for j in range(k):
            out[o + j] = indices[start + out[o + j]]

    @nb.njit(cache=True, nogil=True)
    def _offsets(counts):
        n = counts.shape[0]
        offsets = np.empty(n + 1, dtype=np.int64)
        offsets[0] = 0
        for i in range(n):
            offsets[i + 1] = offsets[i] + counts[i]
        return offsets

    @nb.njit(parallel=True, cache=True, nogil=True)
    def _sample_parallel(indptr, indices, rows, node_keys, keys, fanout, counts):
        n = rows.shape[0]
        for i in nb.prange(n):
            counts[i] = _count_one(indptr, rows, fanout, i)
        offsets = _offsets(counts)
        out = np.empty(offsets[n], dtype=np.int64)
        for i in nb.prange(n):
            _fill_one(indptr, indices, rows, node_keys, keys, fanout, offsets, out, i)
        return out

    @nb.njit(cache=True, nogil=True)
    def _sample_serial(indptr, indices, rows, node_keys, keys, fanout, counts):
        n = rows.shape[0]
        for i in range(n):
            counts[i] = _count_one(indptr, rows, fanout, i)
        offsets = _offsets(counts)
        out = np.empty(offsets[n], dtype=np.int64)
        for i in range(n):
            _fill_one(indptr, indices, rows, node_keys, keys, fanout, offsets, out, i)
        return out

    @nb.njit(cache=True, nogil=True)
    def _relabel(dst, nbrs, table):
        nd = dst.shape[0]
        m = nbrs.shape[0]
        uniq = np.empty(nd + m, dtype=np.int64)
        local = np.empty(m, dtype=np.int64)
        n = 0
        for i in range(nd):
            table[dst[i]] = n
            uniq[n] = dst[i]
            n += 1
        for i in range(m):
            v = nbrs[i]
            s = table[v]
            if s < 0:
                s = n
                table[v] = n
                uniq[n] = v
                n += 1
            local[i] = s
        for i in range(n):
            table[uniq[i]] = -1
        return uniq[:n].copy(), local


_THREADS = [1]


def match_torch_threads() -> None:
    """Use as many numba threads as torch does (the launcher sets torch's per worker).

    With one thread the serial kernels run and numba's thread pool is never started (its
    idle threads would spin on cores that other workers need).
    """
    _THREADS[0] = max(1, torch.get_num_threads())
    if HAVE_NUMBA and _THREADS[0] > 1:
        nb.set_num_threads(min(_THREADS[0], nb.config.NUMBA_NUM_THREADS))


def usable(*tensors: torch.Tensor) -> bool:
    """True when the compiled kernels can serve these tensors (numba present, all on CPU)."""
    return HAVE_NUMBA and all(t.device.type == "cpu" for t in tensors)


def sample_from_csc(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    rows: torch.Tensor,
    node_keys: torch.Tensor,
    fanout: int,
    key: "int | torch.Tensor",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Compiled twin of :func:`gnnscale.samplers.kernels.sample_from_csc` (same arguments and results)."""
    keys = np.asarray([key], dtype=np.int64) if isinstance(key, int) else key.numpy()
    counts = np.empty(rows.numel(), dtype=np.int64)
    # Small frontiers or one thread: the serial kernel (a parallel region costs more than it saves).
    kernel = _sample_parallel if (_THREADS[0] > 1 and rows.numel() >= 4096) else _sample_serial
    nbrs = kernel(indptr.numpy(), indices.numpy(), rows.numpy(), node_keys.numpy(), keys, int(fanout), counts)
    return torch.from_numpy(counts), torch.from_numpy(nbrs)


class Relabeler:
    """Compiled twin of :func:`gnnscale.samplers.kernels.relabel` with a reusable id -> slot table.

    Args:
        num_nodes: size of the id space (ids must lie in ``[0, num_nodes)``).

    The table (int64 [num_nodes], all -1 between calls) costs 8 bytes per node of the graph
    and turns relabeling into one pass over the ids instead of a sort.
    """

    def __init__(self, num_nodes: int) -> None:
        self.table = np.full(int(num_nodes), -1, dtype=np.int64)

    def __call__(self, dst_ids: torch.Tensor, nbrs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        uniq, local = _relabel(dst_ids.numpy(), nbrs.numpy(), self.table)
        return torch.from_numpy(uniq), torch.from_numpy(local)
