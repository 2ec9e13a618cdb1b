"""Keyed dropout masks are statistically torch's (issue 54 item 3b): each element dropped with rate p,
independently across nodes, columns, layers, steps, epochs and runs.

The engine's masks (``gnnscale.nn.dropout``, keyed by (seed, epoch, step, layer) and the row's original
id, the compiled kernel training runs) and the PyG loops' (``gnnscale.pyg.dropout.KeyedDropout``, keyed
by (seed, pass, step, call) and ``n_id``) are drawn for 2048 nodes x 64 columns at fixed keys (so the
test is deterministic). For each mask: the drop rate within 5 standard deviations of a binomial(n, p).
For each pair of masks that must be independent (neighbouring node ids, neighbouring columns, layers 1
and 2, steps 2 and 3, epochs 3 and 4, seeds 0 and 1): the share of elements on which they agree
within 5 standard deviations of p^2 + (1-p)^2, and their correlation within 5 / sqrt(n). torch's own
masks (``torch.rand >= p``) pass the same bounds. A key left out (the step, say) makes two masks
equal: agreement 1.
"""
from __future__ import annotations

import math

import pytest
import torch

from gnnscale.nn.dropout import dropout, layer_seed
from gnnscale.parallel.stage import rng_key

ROWS, COLS = 2048, 64
KEYS = torch.arange(1000, 1000 + ROWS, dtype=torch.int64)  # original node ids


def _check_rate(mask: torch.Tensor, p: float) -> None:
    n = mask.numel()
    dropped = float((~mask).float().mean())
    assert abs(dropped - p) <= 5 * math.sqrt(p * (1 - p) / n), (dropped, p)


def _check_independent(a: torch.Tensor, b: torch.Tensor, p: float, what: str) -> None:
    a, b = a.reshape(-1), b.reshape(-1)
    n = a.numel()
    q = p * p + (1 - p) * (1 - p)
    agree = float((a == b).float().mean())
    assert abs(agree - q) <= 5 * math.sqrt(q * (1 - q) / n), (what, agree, q)
    x, y = a.double() - a.double().mean(), b.double() - b.double().mean()
    r = float((x * y).sum() / torch.sqrt((x * x).sum() * (y * y).sum()))
    assert abs(r) <= 5 / math.sqrt(n), (what, r)


def _pairs(mask) -> dict:
    """{what: (mask a, mask b)} of masks that must be independent; ``mask(seed, epoch, step, layer)``
    -> bool [ROWS, COLS] (True: kept)."""
    m = mask(0, 3, 2, 1)
    return {"nodes": (m[:-1], m[1:]), "columns": (m[:, :-1], m[:, 1:]),
            "layers": (m, mask(0, 3, 2, 2)), "steps": (m, mask(0, 3, 3, 1)),
            "epochs": (m, mask(0, 4, 2, 1)), "seeds": (m, mask(1, 3, 2, 1))}


def _engine_mask(p: float):
    ones = torch.ones(ROWS, COLS)

    def mask(seed, epoch, step, layer):
        return dropout(ones, p, True, KEYS, layer_seed(rng_key(seed, epoch, step, 0), layer)) != 0

    return mask


def _pyg_mask(p: float):
    from gnnscale.pyg.dropout import BatchKeys, KeyedDropout, set_batch

    drop = KeyedDropout(p).train()
    ones = torch.ones(ROWS, COLS)

    def mask(seed, epoch, step, layer):  # pass = epoch, call = layer - 1
        keys = BatchKeys(n_id=KEYS, seed=seed, pass_=epoch, step=step, calls=layer - 1)
        set_batch(keys)
        try:
            return drop(ones) != 0
        finally:
            set_batch(None)

    return mask


def _torch_mask(p: float):
    def mask(seed, epoch, step, layer):
        g = torch.Generator().manual_seed(((seed * 1000 + epoch) * 1000 + step) * 10 + layer)
        return torch.rand(ROWS, COLS, generator=g) >= p

    return mask


@pytest.mark.parametrize("p", [0.5, 0.2])
@pytest.mark.parametrize("kind", ["engine", "pyg", "torch"])
def test_keyed_masks_drop_at_rate_p_independently(kind, p):
    mask = {"engine": _engine_mask, "pyg": _pyg_mask, "torch": _torch_mask}[kind](p)
    for what, (a, b) in _pairs(mask).items():
        _check_rate(a, p)
        _check_rate(b, p)
        _check_independent(a, b, p, what)
