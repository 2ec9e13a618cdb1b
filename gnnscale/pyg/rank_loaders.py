"""A run's rank loaders: PyG's ``NodeLoader`` / ``LinkLoader`` yielding this rank's share of the
batches one process would make (:class:`RankBatches`), each ``iter`` the next pass with the sampler's
draws keyed by it (:mod:`gnnscale.pyg.run` builds them; its docstring gives the batch rule).
"""
from __future__ import annotations

import faulthandler
import math
from typing import Iterator

import torch
from torch_geometric.data import HeteroData
from torch_geometric.loader import LinkLoader, NodeLoader

from gnnscale.errors import SamplerError
from gnnscale.process.health import Health
from gnnscale.pyg.checks import MaskInputId
from gnnscale.pyg.dropout import BatchKeys, set_batch
from gnnscale.pyg.steps import StepBook


class RankBatches:
    """The index lists of this rank's batches of one pass (a DataLoader ``batch_sampler``).

    Args:
        n: the number of inputs (seeds or seed edges); batch_size, shuffle, drop_last: PyG's.
        seed: the shuffle's generator seed; rank, world_size: this rank's place.

    ``book``: a :class:`~gnnscale.pyg.steps.StepBook` told every pass's batches (the sampler's
    global steps), or None.
    """

    book: StepBook | None = None

    def __init__(self, n: int, batch_size: int, shuffle: bool, drop_last: bool, seed: int, rank: int,
                 world_size: int) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise SamplerError(f"batch_size must be a positive int; found {batch_size!r}. Pass e.g. batch_size=32.")
        self.n, self.batch_size, self.shuffle, self.drop_last = int(n), batch_size, bool(shuffle), bool(drop_last)
        self.rank, self.world = rank, world_size
        self.generator = torch.Generator().manual_seed(int(seed))

    def global_batches(self) -> list[torch.Tensor]:
        """Every batch of the next pass (advances the shuffle's generator)."""
        if not self.shuffle:
            order = torch.arange(self.n)
        else:  # as a DataLoader with shuffle=True and this generator draws in a whole pass: its
            # iterator's base seed, RandomSampler's permutation, then its trailing (empty) slice's
            torch.empty((), dtype=torch.int64).random_(generator=self.generator)
            order = torch.randperm(self.n, generator=self.generator)
            torch.randperm(self.n, generator=self.generator)
        batches = list(torch.split(order, self.batch_size))
        if self.drop_last and batches and batches[-1].numel() < self.batch_size:
            batches.pop()
        return batches

    @property
    def num_batches(self) -> int:
        """Batches of one pass over every rank (without the padding)."""
        return self.n // self.batch_size if self.drop_last else math.ceil(self.n / self.batch_size)

    def __len__(self) -> int:
        return math.ceil(self.num_batches / self.world)

    def is_repeat(self, k: int) -> bool:
        """Whether this rank's ``k``-th batch of a pass is padding (a batch another rank also yields)."""
        return k * self.world + self.rank >= self.num_batches

    def loss_scale(self, k: int) -> float:
        """The factor of this rank's mean loss on its ``k``-th batch of a pass that makes DDP's average
        over the N ranks the mean over the step's seeds, as one process's batch of them: its share of
        the step's seeds times N (1.0 when the step's N batches are equal; 0.0 for a padding repeat).
        Only a pass's short last step needs it; ``loss = loss * loader.batch_sampler.loss_scale(k)``."""
        if self.is_repeat(k):
            return 0.0
        real = [min(self.batch_size, self.n - i * self.batch_size)
                for i in range(k * self.world, min((k + 1) * self.world, self.num_batches))]
        return real[self.rank] * self.world / sum(real)

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.global_batches()
        if self.book is not None:
            self.book.set_pass(batches)
        for k in range(len(self)):
            yield batches[(k * self.world + self.rank) % len(batches)].tolist()


class _RankPasses:
    """Every ``iter`` is the next pass: the sampler's draws keyed by it (and the heartbeat's phase
    names it, so a rank gone silent in a user's loop is named with its pass). Each batch handed out
    is recorded for :class:`gnnscale.pyg.dropout.KeyedDropout` (its ``n_id``, the pass, the step).

    A stall between two batches is shown, not silent: each batch re-arms ``faulthandler``'s timer,
    which prints every thread's stack to stderr each ``_watch`` seconds (twice the run's timeout)
    until the next batch or the pass's end; the process goes on (a long step of the user's own
    is not ended, only shown)."""

    _health: Health | None = None
    _seed: int = 0
    _watch: float = 0.0

    def __iter__(self):
        if self._health is not None:
            self._health.enter(f"{type(self).__name__} pass", self._epoch)
        self._sampler.set_epoch(self._epoch)
        epoch, self._epoch = self._epoch, self._epoch + 1
        return self._keyed(super().__iter__(), epoch)  # type: ignore[misc]

    def _keyed(self, batches, epoch: int):
        try:
            for k, batch in enumerate(batches):  # loop over the pass's batches
                set_batch(BatchKeys(None if isinstance(batch, HeteroData) else batch.n_id, self._seed, epoch, k))
                if self._watch > 0:
                    faulthandler.dump_traceback_later(self._watch, repeat=True)
                yield batch
        finally:
            set_batch(None)
            if self._watch > 0:
                faulthandler.cancel_dump_traceback_later()


class RankNodeLoader(_RankPasses, MaskInputId, NodeLoader):
    """PyG's ``NodeLoader`` yielding this rank's batches (:class:`RankBatches`)."""


class RankLinkLoader(_RankPasses, LinkLoader):
    """PyG's ``LinkLoader`` yielding this rank's batches of seed edges (:class:`RankBatches`)."""
