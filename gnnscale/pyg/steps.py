"""The global steps of a pass: one process's batch, cut among N processes.

With N processes at ``batch_size=b`` (:class:`gnnscale.pyg.rank_loaders.RankBatches`), step ``k``
trains the pass's batches ``kN .. kN + N - 1`` (rank r takes batch ``kN + r``): their inputs, in
rank order, are one process's batch ``k`` at ``batch_size=N b`` (same ``seed``, same shuffle). A
:class:`StepBook` tells the sampler which step a batch belongs to, so that its draws are that
one-process batch's (:meth:`gnnscale.pyg.sampler.GnnscaleSampler.sample`): keyed by the step's
first input position (the one-process batch's ``input_id[0]``), and with the other ranks' inputs
of the step known (which hop reaches a node first, the step's negatives).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Step:
    """The global step of one rank's batch.

    Attributes:
        key: the draws' step number: the ``input_id`` of the step's first input (batch ``kN``'s first).
        positions: int64 [S] every input position of the step, in rank order.
        offset: how many of ``positions`` come before this batch's (the lower ranks' inputs).
        size: this batch's inputs (``positions[offset:offset + size]``).
    """

    key: int
    positions: torch.Tensor
    offset: int
    size: int

    def others(self) -> torch.Tensor:
        """int64 [S - size]: the step's input positions of the other ranks."""
        return torch.cat([self.positions[:self.offset], self.positions[self.offset + self.size:]])


class StepBook:
    """Which global step each batch of the current pass belongs to.

    Args:
        world_size: N, the processes that share a step.
        inputs: the loader's inputs by position: int64 [n] seed node ids, or int64 [2, n] seed
            pairs (a link loader's ``edge_label_index``).
        input_id: int64 [n] the ``input_id`` PyG gives the sampler for each position (its
            ``input_data.input_id``: the node ids of a mask), or None (the positions themselves).
    """

    times: torch.Tensor | None = None  # a temporal link loader's positives' times by position (gnnscale.pyg.run_temporal)

    def __init__(self, world_size: int, inputs: torch.Tensor, input_id: torch.Tensor | None = None) -> None:
        self.world = int(world_size)
        self.inputs = inputs
        self.input_id = input_id
        self._batches: list[torch.Tensor] = []
        self._ids: torch.Tensor | None = None  # int64 [n'] sorted input ids of the pass
        self._batch_of: torch.Tensor | None = None  # int64 [n'] their batches

    def set_pass(self, batches: list[torch.Tensor]) -> None:
        """The pass's batches (every rank's, in order: :meth:`RankBatches.global_batches`)."""
        self._batches = batches
        if not batches:
            self._ids = self._batch_of = None
            return
        pos = torch.cat(batches)
        ids = pos if self.input_id is None else self.input_id[pos]
        sizes = torch.tensor([b.numel() for b in batches], dtype=torch.int64)
        self._ids, order = torch.sort(ids)
        self._batch_of = torch.repeat_interleave(torch.arange(len(batches)), sizes)[order]

    def step(self, input_id: torch.Tensor | None) -> Step | None:
        """The step of the batch whose input positions are ``input_id`` (int64 [b]); None when that
        step is the batch alone (one process, or a last step of one batch) or the batch is not one
        of this pass's."""
        if self._ids is None or input_id is None or input_id.numel() == 0 or self.world == 1:
            return None
        at = int(torch.searchsorted(self._ids, input_id[:1]).clamp(max=self._ids.numel() - 1))
        if int(self._ids[at]) != int(input_id[0]):
            return None
        i = int(self._batch_of[at])
        k = i // self.world
        group = self._batches[k * self.world:(k + 1) * self.world]
        if len(group) == 1:
            return None
        j = i - k * self.world
        offset = sum(int(b.numel()) for b in group[:j])
        first = group[0][:1] if self.input_id is None else self.input_id[group[0][:1]]
        return Step(key=int(first), positions=torch.cat(group), offset=offset, size=int(group[j].numel()))
