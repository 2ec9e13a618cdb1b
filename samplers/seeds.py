"""How an epoch's seed nodes are cut into batches: one function for the trainer and the replays.

Every rank takes the same number of steps (:func:`epoch_steps`) so that no rank waits in a
collective for a peer that has stopped. The count is what the mean rank needs at
``batch_size`` seeds per step (DistDGL's even split gives every trainer the mean, moving seeds
between parts; here each rank keeps its own): a rank with more training nodes than that takes
somewhat larger batches (near-equal ones), a rank with fewer starts over from its first ids.
No batch ever repeats a seed.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def epoch_steps(counts: Sequence[int], batch_size: int) -> int:
    """Steps per epoch for ranks with ``counts[r]`` training nodes each.

    Enough steps for the mean rank at ``batch_size`` seeds per step; more only where a rank's
    batches would otherwise exceed twice ``batch_size`` (a badly balanced partition).
    """
    if not counts or max(counts) == 0:
        return 0
    mean_steps = math.ceil(sum(counts) / (len(counts) * batch_size))
    return max(mean_steps, math.ceil(max(counts) / (2 * batch_size)))


def cut_batches(ids: torch.Tensor, batch_size: int, steps: int, wrap: bool) -> list[torch.Tensor]:
    """Cut ``ids`` (int64 [n]) into exactly ``steps`` batches of distinct ids.

    More than ``steps * batch_size`` ids: ``steps`` near-equal batches (larger than
    ``batch_size``). ``wrap``: a rank with fewer batches than ``steps`` starts over from its
    first ids (training: every rank keeps stepping); a rank with at most ``batch_size`` ids
    uses all of them in every step. Without ``wrap``, missing batches are empty (evaluation).
    """
    n = ids.numel()
    if n > steps * batch_size:  # more ids than the steps hold at batch_size: near-equal batches
        return list(torch.tensor_split(ids, steps)) if steps else []
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


class SeedSchedule:
    """The seeds of every step of an epoch, for one data-parallel rank or one pipeline.

    Args:
        train_ids: int64 [n] this rank's (pipeline's) training nodes.
        counts: every rank's (pipeline's) number of training nodes, in rank order.
        per_step: seeds per step (the batch size; times M for a pipeline's M micro-batches).
        seed: the run's seed. rank: this rank's (pipeline's) index in ``counts``.
        max_steps: keep the epoch's first steps only (None: all).
        micro: cut every step into this many near-equal micro-batches (fewer when the step has
            fewer seeds); 1: a step is one batch.

    Every rank takes :func:`epoch_steps` steps (the same count everywhere), each of
    :func:`shuffled_batches`' seeds.
    """

    def __init__(self, train_ids: torch.Tensor, counts: Sequence[int], per_step: int, seed: int, rank: int,
                 max_steps: int | None = None, micro: int = 1) -> None:
        self.train_ids, self.per_step, self.seed, self.rank, self.micro = train_ids, int(per_step), seed, rank, micro
        self._cut = epoch_steps(list(counts), self.per_step)
        # max_steps keeps the epoch's first steps (cutting fewer steps would enlarge them)
        self.steps = min(self._cut, max_steps) if max_steps is not None else self._cut

    def step_totals(self, counts: Sequence[int]) -> list[int]:
        """Seeds per step summed over the ranks (pipelines) of ``counts`` (in rank order, this
        schedule's ``per_step``): the same in every epoch, since a batch's size depends on the
        counts only. Data parallelism scales each rank's mean loss by its share of the step's
        seeds, so that DDP's average of the ranks' gradients is the gradient of the mean over
        all of them (one process's, for batches of unequal sizes too)."""
        sizes = [[int(b.numel()) for b in cut_batches(torch.arange(int(n)), self.per_step, self._cut, wrap=True)]
                 for n in counts]
        return [sum(col) for col in zip(*sizes)][: self.steps] if sizes else []

    def epoch(self, epoch: int) -> list:
        """The epoch's steps: seed batches (int64), or with ``micro`` > 1 lists of micro-batches."""
        batches = shuffled_batches(self.train_ids, self.per_step, self.seed, epoch, self.rank, self._cut)[: self.steps]
        if self.micro == 1:
            return batches
        return [list(torch.tensor_split(b, min(self.micro, b.numel()))) if b.numel() else [] for b in batches]

