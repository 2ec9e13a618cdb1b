"""Layer-neighbour sampling (LABOR-0): one keyed uniform per candidate neighbour, shared by every
destination of a hop (the kernels' ``labor`` variant, :func:`labor_positions`)."""
from __future__ import annotations

import torch

from gnnscale.samplers.rng import node_hash, uniform

#: the draw number of LABOR's per-source uniforms (a stream apart from the per-node draws 0 .. fanout - 1)
LABOR_DRAW = 1 << 20


def labor_uniform(key: int | torch.Tensor, source_keys: torch.Tensor) -> torch.Tensor:
    """float64 [m] in [0, 1): LABOR's uniform ``u_t`` of each source (``source_keys`` int64 [m]
    their original ids) under stream ``key`` (the hop's: seed, epoch, step, hop; an int or
    int64 [m]). A function of (key, t) only, so every seed of a hop, on any rank, sees the
    same ``u_t`` of a shared neighbour ``t``."""
    return uniform(node_hash(key, source_keys), LABOR_DRAW)


def labor_positions(start: torch.Tensor, deg: torch.Tensor, fanout: int, key: int | torch.Tensor,
                    source_keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer-neighbour sampling (LABOR-0, Balin and Catalyurek 2023), vectorized over the
    frontier's edges.

    Args:
        start, deg: int64 [n] first CSC edge and in-degree of each destination.
        fanout: expected neighbours per destination (-1: every neighbour).
        key: the hop's stream key, an int or int64 [n] (one per destination, e.g. a relation's).
        source_keys: int64 [E] the original id of the source of every CSC edge.

    Returns:
        counts int64 [n] and edge int64 [counts.sum()] CSC edge ids grouped by destination,
        ascending within one.

    A destination with ``d <= fanout`` keeps every neighbour; one with ``d > fanout`` keeps
    neighbour ``t`` iff ``u_t * d < fanout`` (:func:`labor_uniform`): each neighbour with
    probability ``fanout / d``, independently of the others, so ``fanout`` are kept in
    expectation and, given how many are kept, which ones is a uniform subset (the mean over the
    kept neighbours is the exact mean's unbiased estimate whenever one is kept). ``u_t`` is
    shared by every destination of the hop, so a neighbour with a small ``u_t`` serves them
    all: fewer distinct sources than independent draws of the same fan-out.
    """
    device = deg.device
    n = deg.numel()
    total = int(deg.sum())
    seg = torch.repeat_interleave(torch.arange(n, device=device), deg, output_size=total)
    edge = torch.arange(total, device=device) - torch.repeat_interleave(torch.cumsum(deg, 0) - deg, deg,
                                                                          output_size=total) + start[seg]
    if fanout < 0 or total == 0:
        return deg.clone(), edge
    d = deg[seg]
    big = d > fanout
    if not bool(big.any()):
        return deg.clone(), edge
    k = key[seg[big]] if isinstance(key, torch.Tensor) else key
    u = labor_uniform(k, source_keys[edge[big]])
    keep = torch.ones(total, dtype=torch.bool, device=device)
    keep[big] = u * d[big].to(torch.float64) < float(fanout)
    return torch.bincount(seg[keep], minlength=n), edge[keep]
