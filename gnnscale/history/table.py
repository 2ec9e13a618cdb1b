"""The one stale-row table: rows of embeddings, the step each row was computed at, and reads
that check every row's age against a staleness bound.

Historical exchange keeps one per hidden layer over the halo (:class:`~gnnscale.history.halo.HaloExchange`);
chunk pipelining one per layer input a stage reads, over every node
(:class:`~gnnscale.parallel.chunk_pipeline.ChunkStage`). Both read through :meth:`StaleRowTable.read`,
so both refuse the same way and count ages the same way (a histogram ``{age: rows read}``).
"""
from __future__ import annotations

import torch

from gnnscale.errors import ExchangeError

NEVER = -(1 << 40)  # the stamp of a row that was never written


class StalenessError(ExchangeError):
    """A read found a row older than the staleness bound, or one never written."""


class StaleRowTable:
    """``rows`` [R, dim] in ``dtype`` (allocated at the first write, zeros) and ``stamps`` int64 [R].

    Args:
        num_rows: R. dim: the row width. bound: the largest age (steps) a read may see.
        dtype: float32, bfloat16 or float16 (reads return float32).
        what: how errors name the table (e.g. ``"rank 0, layer 1"``).
    """

    def __init__(self, num_rows: int, dim: int, bound: int, dtype: torch.dtype = torch.float32,
                 what: str = "table") -> None:
        self.num_rows, self.dim, self.bound, self.dtype, self.what = int(num_rows), int(dim), int(bound), dtype, what
        self.rows = torch.empty(0, self.dim, dtype=dtype)
        self.stamps = torch.full((self.num_rows,), NEVER, dtype=torch.int64)
        self.age_counts: dict[int, int] = {}

    @property
    def nbytes(self) -> int:
        return self.rows.numel() * self.rows.element_size()

    @property
    def reads(self) -> int:
        return sum(self.age_counts.values())

    @property
    def stale_reads(self) -> int:
        """Rows read that an earlier step computed (age > 0)."""
        return sum(n for a, n in self.age_counts.items() if a > 0)

    @property
    def max_age(self) -> int:
        return max(self.age_counts, default=0)

    def _allocate(self) -> None:
        if self.rows.shape[0] != self.num_rows:
            self.rows = torch.zeros(self.num_rows, self.dim, dtype=self.dtype)

    def write(self, at, rows: torch.Tensor, step: int) -> None:
        """Rows ``at`` (a slice or int64 [k] row numbers) hold ``rows`` [k, dim], computed at ``step``."""
        self._allocate()
        self.rows[at] = rows.detach().to(self.dtype)
        self.stamps[at] = step

    def replace(self, rows: torch.Tensor, step: int) -> None:
        """Every row at once (``rows`` [R, dim], kept as given when of the table's dtype), stamped ``step``."""
        self.rows = rows if rows.dtype == self.dtype else rows.to(self.dtype)
        self.stamps.fill_(step)

    def ages(self, slots: torch.Tensor, step: int) -> torch.Tensor:
        """int64 [k]: how many steps old each row would be at ``step``."""
        return step - self.stamps.index_select(0, slots)

    def read(self, slots: torch.Tensor, step: int, ids: torch.Tensor | None = None) -> torch.Tensor:
        """float32 [k, dim]: rows ``slots`` (int64 [k]) as read at ``step``; their ages are counted.

        Args:
            ids: what the rows are called in errors (node ids; default: the slots).

        Raises:
            StalenessError: a row older than the bound, or never written, naming how many and the oldest.
        """
        age = self.ages(slots, step)
        if age.numel():
            worst = int(age.max())
            if worst > self.bound:
                self._refuse(slots, age, step, ids)
            least = int(age.min())
            counts = torch.bincount(age - least)  # ages read, as a histogram (at most bound + 1 of them)
            for a in torch.nonzero(counts).flatten().tolist():
                self.age_counts[least + a] = self.age_counts.get(least + a, 0) + int(counts[a])
        self._allocate()
        rows = self.rows.index_select(0, slots)
        return rows if rows.dtype == torch.float32 else rows.to(torch.float32)

    def _refuse(self, slots: torch.Tensor, age: torch.Tensor, step: int, ids: torch.Tensor | None) -> None:
        never = self.stamps.index_select(0, slots) == NEVER
        old = age > self.bound
        written = age[~never]
        oldest = f"the oldest written one {int(written.max())} steps" if written.numel() else "none written"
        names = (ids if ids is not None else slots)[old][:3].tolist()
        raise StalenessError(
            f"{self.what}, step {step}: {int(old.sum())} of {slots.numel()} rows read are older than the staleness "
            f"bound ({self.bound} steps; {int(never.sum())} never written, {oldest}; e.g. {names}). The rows were "
            "not refreshed in time: raise --staleness, or check that every push and pass ran."
        )

    def reset_counts(self) -> None:
        self.age_counts = {}

    def state(self) -> dict:
        """What a checkpoint keeps: rows, stamps, age histogram."""
        return {"rows": self.rows.clone(), "stamps": self.stamps.clone(), "age_counts": dict(self.age_counts)}

    def load_state(self, state: dict) -> None:
        self.rows, self.stamps = state["rows"].clone(), state["stamps"].clone()
        self.age_counts = dict(state["age_counts"])
