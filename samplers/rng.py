"""Counter-based random numbers for sampling.

A sampled neighborhood must not depend on which worker samples it: the owner of a node
samples it on behalf of a requester and must draw exactly what a single process would.
So the random number used for (node v, draw j) is a pure function of a 64-bit stream key
(seed, epoch, step, hop: never the requesting rank) and of (v's original id, j): a splitmix64
hash, vectorized over int64 tensors (wrap-around multiplication), on CPU or CUDA alike.
"""
from __future__ import annotations

import torch

_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


def _signed(c: int) -> int:
    """Map an unsigned 64-bit constant to the int64 value with the same bits."""
    c &= _MASK64
    return c - (1 << 64) if c >= (1 << 63) else c


_M1_S, _M2_S, _GOLDEN_S = _signed(_M1), _signed(_M2), _signed(_GOLDEN)


def mix64_int(x: int) -> int:
    """splitmix64 finalizer on a Python int (for building stream keys)."""
    x &= _MASK64
    x ^= x >> 30
    x = (x * _M1) & _MASK64
    x ^= x >> 27
    x = (x * _M2) & _MASK64
    x ^= x >> 31
    return x


def stream_key(*parts: int) -> int:
    """A 64-bit key from integers (e.g. seed, epoch, step, 0, hop), as a signed int64."""
    h = 0x6A09E667F3BCC908
    for p in parts:
        h = mix64_int(h ^ ((int(p) + _GOLDEN) & _MASK64))
    return _signed(h)


def _srl(x: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 tensors."""
    return (x >> s) & ((1 << (64 - s)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:
    """splitmix64 finalizer, elementwise on an int64 tensor (returns a new tensor)."""
    x = x ^ _srl(x, 30)
    x = x * _M1_S
    x = x ^ _srl(x, 27)
    x = x * _M2_S
    x = x ^ _srl(x, 31)
    return x


def node_hash(key: "int | torch.Tensor", node_ids: torch.Tensor) -> torch.Tensor:
    """int64 [n]: a per-node 64-bit hash under stream ``key`` (an int or an int64 [n] tensor)."""
    return mix64(node_ids * _GOLDEN_S + key)


def uniform(node_h: torch.Tensor, draw: "int | torch.Tensor") -> torch.Tensor:
    """float64 [n] in [0, 1): draw number ``draw`` for each node whose hash is ``node_h``.

    ``draw`` is an int (the same draw for every node) or an int64 [n] tensor (one draw
    number per entry, e.g. the position of each edge in its node's list); both give the
    same bits for the same (hash, draw).
    """
    if isinstance(draw, torch.Tensor):
        x = mix64(node_h + (draw + 1) * _M2_S)  # int64 multiplication wraps like the constant below
    else:
        x = mix64(node_h + _signed((draw + 1) * _M2))
    return _srl(x, 11).to(torch.float64) * (1.0 / (1 << 53))
