"""The partition book: which part owns a (relabeled) global node id.

After :func:`gnnscale.partitioning.relabel.contiguous_relabel`, part ``p`` owns the contiguous
range of new ids ``offsets[p] .. offsets[p+1]-1``, so ownership is one ``searchsorted``.
A typed partitioning (format 2) numbers each part's nodes by type: :class:`TypedPartitionBook`
maps new ids to (node type, per-type id) and back, again with one ``searchsorted``.
"""

from __future__ import annotations

import operator

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


def _int_table(value, shape: tuple[int | None, ...], what: str) -> torch.Tensor:
    """``value`` as an int64 tensor of ``shape`` (None: any length), or a PartitionError."""
    t = torch.as_tensor(value)
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.dim() != len(shape) or any(
        s is not None and t.shape[i] != s for i, s in enumerate(shape)
    ):
        want = "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"
        raise PartitionError(
            f"expected {what} as integers of shape {want}, found dtype {t.dtype} and shape "
            f"{list(t.shape)}; take them from meta.json's 'typed' entry"
        )
    return t.to(torch.int64).contiguous()


class TypedPartitionBook:
    """Node types of a typed partitioning (``docs/typed_graphs.md`` section 2).

    Part ``p`` owns new ids ``offsets[p] .. offsets[p+1]-1``; inside it the nodes of type
    ``t`` are ``offsets[p] + type_starts[p][t] .. offsets[p] + type_starts[p][t+1] - 1`` and
    have the per-type new ids ``type_offsets[t][p] .. type_offsets[t][p+1] - 1``. Every id of
    the graph lies in one of the ``P * T`` segments (part, type), in that order, so each
    mapping is one ``searchsorted`` over the segment starts.

    Args:
        offsets: int ``[P+1]``, the parts' new-id ranges (as :class:`PartitionBook`).
        type_starts: int ``[P, T+1]``, per part the local start of each type (row p rises
            from 0 to the part's size).
        type_offsets: int ``[T, P+1]``, per type the per-type new id where each part starts
            (row t rises from 0 to the number of nodes of type t).

    Attributes:
        book: the :class:`PartitionBook` of the new ids.
        type_starts, type_offsets: the int64 tables given.
    """

    def __init__(self, offsets, type_starts, type_offsets) -> None:
        self.book = offsets if isinstance(offsets, PartitionBook) else PartitionBook(offsets)
        num_parts = self.book.num_parts
        ts = _int_table(type_starts, (num_parts, None), "type_starts [P, T+1]")
        if ts.shape[1] < 2:
            raise PartitionError(
                f"expected type_starts of shape [{num_parts}, T+1] with T >= 1, found shape "
                f"{list(ts.shape)}; take them from meta.json's 'typed' entry"
            )
        num_types = ts.shape[1] - 1
        to = _int_table(type_offsets, (num_types, num_parts + 1), "type_offsets [T, P+1]")
        counts = ts[:, 1:] - ts[:, :-1]  # [P, T]
        sizes = self.book.part_sizes()
        if bool((ts[:, 0] != 0).any()) or bool((counts < 0).any()) or not torch.equal(ts[:, -1], sizes):
            raise PartitionError(
                f"expected every row of type_starts to rise from 0 to its part's size "
                f"{sizes.tolist()}, found {ts.tolist()!r:.160}; the partition metadata is corrupt, "
                "re-run `gnnscale partition`"
            )
        if bool((to[:, 0] != 0).any()) or not torch.equal(to[:, 1:] - to[:, :-1], counts.T):
            raise PartitionError(
                f"expected type_offsets[t] to be the running sums of the parts' counts of type t "
                f"{counts.T.tolist()!r:.160}, found {to.tolist()!r:.160}; the partition metadata "
                "is corrupt, re-run `gnnscale partition`"
            )
        self.type_starts: torch.Tensor = ts
        self.type_offsets: torch.Tensor = to
        # Segment (p, t) is p * T + t: its first new id, and what turns a new id in it into
        # its per-type id (per_type = id + shift).
        self._seg_start = (self.book.offsets[:-1, None] + ts[:, :-1]).reshape(-1)
        self._seg_shift = to[:, :-1].T.reshape(-1) - self._seg_start
        self._counts = counts

    @property
    def num_parts(self) -> int:
        """Number of parts P."""
        return self.book.num_parts

    @property
    def num_types(self) -> int:
        """Number of node types T."""
        return int(self.type_offsets.shape[0])

    @property
    def num_nodes(self) -> int:
        """Total number of nodes N."""
        return self.book.num_nodes

    def num_nodes_per_type(self) -> torch.Tensor:
        """int64 ``[T]``: nodes of every type."""
        return self.type_offsets[:, -1].clone()

    def part_type_counts(self) -> torch.Tensor:
        """int64 ``[P, T]``: nodes of type t in part p."""
        return self._counts.clone()

    def _check_type(self, t: int) -> int:
        try:
            t = operator.index(t.item() if isinstance(t, torch.Tensor) and t.numel() == 1 else t)
        except TypeError:
            raise PartitionError(
                f"expected an integer node type in [0, {self.num_types}), found {t!r}; pass the "
                "type's index in node_types"
            ) from None
        if not 0 <= t < self.num_types:
            raise PartitionError(
                f"expected a node type in [0, {self.num_types}), found {t}; this partitioning "
                f"has {self.num_types} node types"
            )
        return t

    def _segments(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(checked int64 ids, their segment p * T + t)."""
        ids = self.book._check_ids(ids)
        starts = self._seg_start.to(ids.device)
        # right=True: among segments starting at the same id (empty ones) the last, which
        # is the one that holds it.
        return ids, torch.searchsorted(starts, ids, right=True) - 1

    def owner(self, ids: torch.Tensor) -> torch.Tensor:
        """int64 ``[...]``: the owning part of every new id (as :meth:`PartitionBook.owner`)."""
        return self.book.owner(ids)

    def ntype(self, ids: torch.Tensor) -> torch.Tensor:
        """int64 ``[...]``: the node type of every new global id (same shape)."""
        _, seg = self._segments(ids)
        return seg % self.num_types

    def map_to_per_ntype(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """New global ids -> ``(ntype, per_type_id)``, both int64 ``[...]`` (same shape);
        ``per_type_id`` is in ``[0, num_nodes_per_type[ntype])``."""
        ids, seg = self._segments(ids)
        return seg % self.num_types, ids + self._seg_shift.to(ids.device)[seg]

    def to_global(self, t: int, per_type_ids: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`map_to_per_ntype` for one type: per-type new ids of type ``t``
        (int ``[...]``) -> new global ids (int64 ``[...]``)."""
        t = self._check_type(t)
        bounds = self.type_offsets[t]
        ids = torch.as_tensor(per_type_ids)
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise PartitionError(f"expected integer per-type ids, found dtype {ids.dtype}")
        ids = ids.to(torch.int64)
        count = int(bounds[-1])
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= count):
            raise PartitionError(
                f"expected per-type ids of type {t} in [0, {count}), found ids in "
                f"[{int(ids.min())}, {int(ids.max())}]; per-type ids count the nodes of one type "
                "(map_to_per_ntype gives them)"
            )
        part = torch.searchsorted(bounds.to(ids.device), ids, right=True) - 1
        seg = part * self.num_types + t
        return ids - self._seg_shift.to(ids.device)[seg]

    def type_book(self, t: int) -> PartitionBook:
        """The :class:`PartitionBook` of the per-type ids of type ``t`` (``type_offsets[t]``):
        which part owns a row of a per-type table."""
        return PartitionBook(self.type_offsets[self._check_type(t)])

    def __repr__(self) -> str:
        return (
            f"TypedPartitionBook(num_parts={self.num_parts}, num_types={self.num_types}, "
            f"num_nodes={self.num_nodes})"
        )
