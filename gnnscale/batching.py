"""How an epoch's seed nodes are cut into batches: one function for the trainer and the replays.

Every rank takes the same number of steps (the maximum over ranks) so that no rank waits in
a collective for a peer that has stopped; a rank with fewer batches starts over from its
first ids, and no batch ever repeats a seed.
"""
from __future__ import annotations

import torch


def cut_batches(ids: torch.Tensor, batch_size: int, steps: int, wrap: bool) -> list[torch.Tensor]:
    """Cut ``ids`` (int64 [n]) into exactly ``steps`` batches of distinct ids.

    ``wrap``: a rank with fewer batches than ``steps`` starts over from its first ids
    (training: every rank keeps stepping); a rank with at most ``batch_size`` ids uses all of
    them in every step. Without ``wrap``, missing batches are empty (evaluation).
    """
    n = ids.numel()
    if not wrap or n == 0:
        return [ids[i * batch_size:(i + 1) * batch_size] for i in range(steps)]
    if n <= batch_size:
        return [ids for _ in range(steps)]
    ar = torch.arange(batch_size)
    return [ids[(i * batch_size + ar) % n] if (i + 1) * batch_size > n else ids[i * batch_size:(i + 1) * batch_size]
            for i in range(steps)]


def shuffled_batches(ids: torch.Tensor, batch_size: int, seed: int, epoch: int, rank: int, steps: int) -> list[torch.Tensor]:
    """The seed batches rank ``rank`` trains in ``epoch``: its ids shuffled, cut into ``steps``."""
    g = torch.Generator().manual_seed(seed * 100003 + epoch * 101 + rank)
    return cut_batches(ids[torch.randperm(ids.numel(), generator=g)], batch_size, steps, wrap=True)
