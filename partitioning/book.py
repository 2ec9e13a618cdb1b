"""The partition book: which part owns a (relabeled) global node id.

After :func:`gnnscale.partitioning.relabel.contiguous_relabel`, part ``p`` owns the contiguous
range of new ids ``offsets[p] .. offsets[p+1]-1``, so ownership is one ``searchsorted``.
"""

from __future__ import annotations

import torch

from gnnscale.errors import PartitionError


class PartitionBook:
    """Maps global (new) node ids to their owning part and part-local index.

    Args:
        offsets: int64 ``[P+1]``, ``offsets[0] == 0``, non-decreasing; part ``p`` owns new ids
            ``offsets[p] .. offsets[p+1]-1`` (a part may be empty).
    """

    def __init__(self, offsets: torch.Tensor | list[int]) -> None:
        off = torch.as_tensor(offsets)
        if off.dim() != 1 or off.numel() < 2:
            raise PartitionError(
                f"expected offsets of shape [P+1] with P >= 1, found shape {tuple(off.shape)}; "
                "offsets come from contiguous_relabel or meta.json"
            )
        if off.dtype.is_floating_point or off.dtype == torch.bool:
            raise PartitionError(
                f"expected integer offsets, found dtype {off.dtype}; pass a LongTensor"
            )
        off = off.to(torch.int64).contiguous()
        if int(off[0]) != 0:
            raise PartitionError(
                f"expected offsets[0] == 0, found {int(off[0])}; offsets must start at 0"
            )
        steps = off[1:] - off[:-1]
        if bool((steps < 0).any()):
            bad = int(torch.nonzero(steps < 0)[0, 0])
            raise PartitionError(
                f"expected non-decreasing offsets, found offsets[{bad}]={int(off[bad])} > "
                f"offsets[{bad + 1}]={int(off[bad + 1])}; the partition metadata is corrupt, "
                "re-run `gnnscale partition`"
            )
        self.offsets: torch.Tensor = off

    @property
    def num_parts(self) -> int:
        """Number of parts P."""
        return self.offsets.numel() - 1

    @property
    def num_nodes(self) -> int:
        """Total number of nodes N (= offsets[-1])."""
        return int(self.offsets[-1])

    def _check_part(self, part: int) -> int:
        part = int(part)
        if not 0 <= part < self.num_parts:
            raise PartitionError(
                f"expected a part id in [0, {self.num_parts}), found {part}; "
                f"this partitioning has {self.num_parts} parts"
            )
        return part

    def part_range(self, part: int) -> tuple[int, int]:
        """``(start, stop)``: the new ids owned by ``part`` are ``start .. stop-1``."""
        part = self._check_part(part)
        return int(self.offsets[part]), int(self.offsets[part + 1])

    def part_size(self, part: int) -> int:
        """Number of nodes owned by ``part``."""
        start, stop = self.part_range(part)
        return stop - start

    def part_sizes(self) -> torch.Tensor:
        """int64 ``[P]``: number of nodes of every part."""
        return self.offsets[1:] - self.offsets[:-1]

    def _check_ids(self, ids: torch.Tensor, start: int = 0, stop: int | None = None, hint: str | None = None) -> torch.Tensor:
        """int64 ids, checked to be integers in ``[start, stop)`` (default: all global ids)."""
        stop = self.num_nodes if stop is None else stop
        ids = torch.as_tensor(ids)
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise PartitionError(f"expected integer node ids, found dtype {ids.dtype}")
        ids = ids.to(torch.int64)
        if ids.numel():
            lo, hi = int(ids.min()), int(ids.max())
            if lo < start or hi >= stop:
                raise PartitionError(
                    f"expected {hint or 'global node ids'} in [{start}, {stop}), found ids in [{lo}, {hi}]; "
                    + ("split the ids by owner(ids) first" if hint else
                       "ids must be the relabeled (new) ids of this partitioning")
                )
        return ids

    def owner(self, ids: torch.Tensor) -> torch.Tensor:
        """Owning part of every id.

        Args:
            ids: int64 ``[...]`` new global ids.

        Returns:
            int64 ``[...]`` part ids (same shape).
        """
        ids = self._check_ids(ids)
        offsets = self.offsets.to(ids.device)
        return torch.searchsorted(offsets, ids, right=True) - 1

    def to_local(self, ids: torch.Tensor, part: int) -> torch.Tensor:
        """Part-local index (``id - offsets[part]``) of ids that ``part`` owns.

        Args:
            ids: int64 ``[...]`` new global ids, all owned by ``part``.
            part: the owning part.

        Returns:
            int64 ``[...]`` local indices in ``[0, part_size(part))``.
        """
        start, stop = self.part_range(part)
        return self._check_ids(ids, start, stop, hint=f"ids owned by part {part}, i.e.") - start

    def to_global(self, local_ids: torch.Tensor, part: int) -> torch.Tensor:
        """Inverse of :meth:`to_local`: ``local_ids + offsets[part]`` (int64 ``[...]``)."""
        start, _ = self.part_range(part)
        return torch.as_tensor(local_ids).to(torch.int64) + start

    def __repr__(self) -> str:
        return f"PartitionBook(num_parts={self.num_parts}, num_nodes={self.num_nodes})"
