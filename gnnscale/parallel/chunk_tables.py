"""A chunk stage's stale state: its tables of layer inputs read historically, and the gradients of
those reads on their way to the rows' own chunks.

- :class:`StageTables`: for each layer input i a stage reads, one
  :class:`~gnnscale.history.table.StaleRowTable` over every node (float32 [N, dims[i]]): a
  chunk's halo rows of layer i are read there, from this pass if the halo's chunk has already
  passed layer i - 1, else from the previous pass; every read checks the rows' ages.
- :class:`HaloGradients`: d loss / d (halo rows) of each reader chunk, kept whole, summed into
  the owner chunk's gradient when it runs backward (PipeGCN's stale feature gradients).
"""
from __future__ import annotations

from typing import Sequence

import torch

from gnnscale.history.table import StaleRowTable, StalenessError
from gnnscale.nn.sparse_ops import add_rows_


class StageTables:
    """One :class:`StaleRowTable` [N, dims[i]] per layer input i in ``layers``, bounded by ``bound`` steps."""

    def __init__(self, layers: Sequence[int], num_nodes: int, dims: Sequence[int], bound: int,
                 what: str = "chunk stage") -> None:
        self.tables = {i: StaleRowTable(num_nodes, dims[i], bound, what=f"{what}, layer-{i} table") for i in layers}
        self.bound = int(bound)

    @property
    def rows(self) -> dict:
        """The layer inputs this stage reads (``i in tables.rows``)."""
        return self.tables

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tables.values())

    @property
    def reads(self) -> int:
        return sum(t.reads for t in self.tables.values())

    @property
    def stale_reads(self) -> int:
        return sum(t.stale_reads for t in self.tables.values())

    @property
    def max_age(self) -> int:
        return max((t.max_age for t in self.tables.values()), default=0)

    def write(self, i: int, lo: int, hi: int, rows: torch.Tensor, step: int) -> None:
        """Rows ``[lo, hi)`` of layer i's table, computed at ``step``."""
        self.tables[i].write(slice(lo, hi), rows, step)

    def read(self, i: int, ids: torch.Tensor, step: int) -> torch.Tensor:
        """float32 [len(ids), dims[i]] rows of layer i at ``step`` (ages checked, see StaleRowTable.read)."""
        return self.tables[i].read(ids, step)

    def reset_counts(self) -> None:
        for t in self.tables.values():
            t.reset_counts()

    def state(self) -> dict:
        return {i: t.state() for i, t in self.tables.items()}

    def load_state(self, state: dict) -> None:
        for i, t in self.tables.items():
            t.load_state(state[i])


class HaloGradients:
    """The gradients of a stage's halo reads, passed on to the rows' own chunks (PipeGCN's stale
    feature gradients): without them, every edge between two chunks would carry no gradient.

    A reader chunk's backward hands in d loss / d h^i of its whole halo (:meth:`add`; kept as
    it is, one tensor per reader and layer, no scatter). An owner chunk's backward takes the
    pieces of every reader's latest gradient that fall in its rows (:meth:`take`): those of the
    chunks whose backward ran before its own in this pass, and the others' from the pass
    before (one step old). Chunks run backward in the same order every pass, so each piece is
    taken exactly once before its reader replaces it. Every piece's age is checked against the
    staleness bound.

    Args:
        layers: the layer inputs i this stage reads from tables.
        offsets: int64 [C + 1] chunk bounds. halos: per chunk, its sorted halo ids (int64).
    """

    def __init__(self, layers: Sequence[int], offsets: torch.Tensor, halos: Sequence[torch.Tensor],
                 bound: int) -> None:
        self.offsets = [int(v) for v in offsets]
        self.bound = int(bound)
        # Halo ids are sorted and chunks own contiguous ids, so each reader's halo is one run
        # per owner: reader c's rows for owner o are [cut[c][o], cut[c][o + 1]).
        self.cut = [torch.searchsorted(h, offsets).tolist() for h in halos]
        self.local = []  # each halo id as a row of its owner chunk
        for h in halos:
            owner = torch.searchsorted(offsets, h, right=True) - 1
            self.local.append(h - offsets[owner])
        self.waiting: dict[int, dict[int, tuple[int, torch.Tensor]]] = {i: {} for i in layers}
        self.rows_taken = 0  # gradient rows added into an owner's gradient
        self.stale_rows = 0  # of them, rows from the pass before
        self.max_age = 0

    @property
    def nbytes(self) -> int:
        return sum(g.numel() * g.element_size() for w in self.waiting.values() for _, g in w.values())

    def reset_counts(self) -> None:
        self.rows_taken = self.stale_rows = self.max_age = 0

    def state(self) -> dict:
        """The waiting gradients (a checkpoint resumes with them)."""
        return {i: {r: (when, g.clone()) for r, (when, g) in w.items()} for i, w in self.waiting.items()}

    def load_state(self, state: dict) -> None:
        self.waiting = {i: {r: (when, g.clone()) for r, (when, g) in w.items()} for i, w in state.items()}

    def add(self, i: int, reader: int, grad: torch.Tensor, step: int) -> None:
        """Reader chunk's float32 [halo, dims[i]] gradient of its halo rows of layer i at ``step``."""
        self.waiting[i][reader] = (step, grad.detach().clone())

    def take(self, i: int, owner: int, step: int) -> torch.Tensor | None:
        """The halo gradients waiting for owner chunk's rows of layer i, summed: float32
        [its nodes, dims[i]]; None where none waits.

        Raises:
            StalenessError: a waiting gradient older than the bound.
        """
        out = None
        for reader, (when, grad) in self.waiting[i].items():
            a, b = self.cut[reader][owner], self.cut[reader][owner + 1]
            if a == b:
                continue
            age = step - when
            if age > self.bound:
                raise StalenessError(
                    f"step {step}, layer {i}: chunk {owner}'s halo gradients from chunk {reader} are {age} steps old, "
                    f"beyond the staleness bound ({self.bound} steps): a chunk's backward was skipped."
                )
            if out is None:
                out = torch.zeros(self.offsets[owner + 1] - self.offsets[owner], grad.shape[1], dtype=grad.dtype)
            add_rows_(out, self.local[reader][a:b], grad[a:b])  # one pass per reader, no concatenation
            self.rows_taken += b - a
            self.stale_rows += (b - a) if age > 0 else 0
            self.max_age = max(self.max_age, age)
        return out


class HaloTap(torch.autograd.Function):
    """Identity on a chunk's halo rows whose backward hands their gradient to ``callback``
    (and nowhere else: no ``.grad`` is accumulated for the rows)."""

    @staticmethod
    def forward(ctx, root: torch.Tensor, rows: torch.Tensor, callback) -> torch.Tensor:  # type: ignore[override]
        ctx.callback = callback
        return rows.view_as(rows)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        ctx.callback(grad)
        return None, None, None


# What puts a tap in the autograd graph (a tensor that requires grad; it never receives one).
TAP_ROOT = torch.empty(0, requires_grad=True)
