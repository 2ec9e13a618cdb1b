"""Grouping ids by owner rank and putting answers back in the caller's order (vectorized)."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Route:
    """How a list of ids splits across owners.

    Attributes:
        order: int64 [n] stable permutation that groups the ids by owner (owner 0 first).
        counts: int64 [P] how many ids each owner gets.
        only: the owner of every id when one owner has them all (then ``order`` is the identity,
            and split and merges hand tensors through without copies), else None.
    """

    order: torch.Tensor
    counts: torch.Tensor
    only: int | None = None  # the owner of every id, when one has them all: nothing moves

    @staticmethod
    def build(owner: torch.Tensor, world_size: int) -> "Route":
        """owner: int64 [n] owner rank of each id."""
        counts = torch.bincount(owner, minlength=world_size)
        n = owner.numel()
        if n and int(counts.max()) == n:  # a one-rank world, or all ids on one owner: no sort, no merge
            return Route(torch.arange(n, device=owner.device), counts, only=int(owner[0]))
        return Route(torch.argsort(owner, stable=True), counts)

    def split(self, values: torch.Tensor) -> list[torch.Tensor]:
        """Per-owner pieces of ``values`` (rows aligned with the routed ids)."""
        if self.only is not None:
            return [values if r == self.only else values[:0] for r in range(self.counts.numel())]
        return list(torch.split(values[self.order], self.counts.tolist()))

    def merge_rows(self, pieces: list[torch.Tensor]) -> torch.Tensor:
        """Inverse of :meth:`split` for one row per id: rows back in the caller's order."""
        if self.only is not None:
            return pieces[self.only]
        grouped = torch.cat(pieces)
        out = torch.empty_like(grouped)
        out[self.order] = grouped
        return out

    def merge_segments(self, counts: list[torch.Tensor], values: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Inverse of :meth:`split` for variable-length answers.

        Args:
            counts: per owner, int64 [counts[r]] the answer length of each of its ids.
            values: per owner, the concatenated answers (rows grouped by id, in order).

        Returns:
            (counts int64 [n], values [sum]) with ids and their segments in the caller's order.
        """
        if self.only is not None:  # the one owner's answers are in the caller's order already
            assert counts[self.only].numel() == self.order.numel()
            return counts[self.only], values[self.only]
        c_grouped = torch.cat(counts)
        v_grouped = torch.cat(values)
        n = c_grouped.numel()
        c_out = torch.empty_like(c_grouped)
        c_out[self.order] = c_grouped
        starts_out = torch.cumsum(c_out, 0) - c_out
        starts_grouped = torch.cumsum(c_grouped, 0) - c_grouped
        total = v_grouped.shape[0]
        within = torch.arange(total, device=v_grouped.device) - torch.repeat_interleave(starts_grouped, c_grouped, output_size=total)
        dest = torch.repeat_interleave(starts_out[self.order], c_grouped, output_size=total) + within
        v_out = torch.empty_like(v_grouped)
        v_out[dest] = v_grouped
        assert n == self.order.numel()
        return c_out, v_out
