"""Cross-partition embedding exchange: halo tables of historical embeddings.

In ``historical`` mode a worker expands only the nodes it owns. A remote node reached at
depth d < L is a leaf: its layer-(L-d) embedding comes from this worker's halo table of that
layer instead of its own subtree (GNNAutoScale's historical embeddings, PipeGCN's stale
boundary features, made distributed). The halo is the set of remote in-neighbors of owned
nodes; there is one table per hidden layer, [H, hidden] in the exchange dtype (float32 by
default; bfloat16 or float16 halve the tables and the embedding bytes).

Keeping tables fresh:

- **fill**: one distributed layer-wise inference pass (:mod:`gnnscale.training.inference`) computes
  every owned node's embeddings and :meth:`HaloExchange.exchange_layer` ships each layer's
  boundary rows to the workers that hold them as halo;
- **push**: after every training step the owner sends the embeddings of its boundary nodes
  that the step computed and that it has not sent in the last P steps (one all_to_all on
  the exchange's own process group), in a background thread overlapped with the next step;
  rows arrive before the step after it;
- **staleness bound** S (steps): every step the owner also recomputes a round-robin slice of
  its boundary nodes (:meth:`refresh_seeds`), layer by layer from a one-hop sample of their
  in-neighbors: raw features for layer 1, then the previous layer's historical rows (its own
  history for owned neighbors, the halo tables for remote ones; GNNAutoScale's update rule),
  see :func:`gnnscale.training.inference.refresh_embeddings`. So every boundary row is recomputed
  at least every R steps. With R + P <= S (P = S // 2, R = S - P), a row is
  pushed at least every S - 1 steps and, with the one-step delay of overlapped pushes, no
  embedding older than S steps is ever read; :meth:`lookup` checks it. A larger S means
  fewer bytes (each row at most once per P steps) and less refresh work (1/R of the
  boundary per step).

Modes: ``exact`` (sampling crosses partitions), ``historical``, ``local`` (cross-partition
edges dropped).
"""
from __future__ import annotations

import logging
import math
import threading
from typing import Sequence

import torch

from gnnscale.config import check_staleness
from gnnscale.errors import ExchangeError, PeerError
from gnnscale.history.table import NEVER, StaleRowTable
from gnnscale.partitioning.book import PartitionBook
from gnnscale.partitioning.routing import Route
from gnnscale.process.comm import Communicator

log = logging.getLogger(__name__)


class HaloExchange:
    """One rank's halo tables and the exchange that fills them.

    Args:
        indptr, indices: this rank's CSC (int64 [n + 1], int64 [E] global in-neighbor ids).
        book: the partition book. comm: a communicator on the exchange's own process group.
        dims: width of each table: the hidden sizes of layers 1..L-1 (empty for L = 1).
        staleness: the bound S in steps (>= 2).
        dtype: dtype of the tables and of the exchanged rows (float32, bfloat16, float16).

    Attributes:
        halo_ids: int64 [H] sorted global ids of the remote in-neighbors of owned nodes.
        send_ids: per peer, int64 [k_p] own global ids that peer holds as halo (sorted).
        boundary: int64 [B] own global ids held by at least one peer (sorted).
        indices: the CSC's in-neighbors as given (kept, not copied: a memory-mapped part's
            edges stay mapped); :meth:`local_slice` numbers a slice of them locally.
        tables: per hidden layer l = 1..L-1, a :class:`~gnnscale.history.table.StaleRowTable`
            [H, dims[l-1]] (rows aligned with ``halo_ids``, each stamped with the step whose
            computation produced it).
    """

    def __init__(
        self,
        indptr: torch.Tensor,
        indices: torch.Tensor,
        book: PartitionBook,
        comm: Communicator,
        dims: Sequence[int],
        staleness: int = 4,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if dtype not in (torch.float32, torch.bfloat16, torch.float16):
            raise ExchangeError(f"embedding dtype must be float32, bfloat16 or float16; found {dtype}")
        self.dtype = dtype
        self.key_width = 8 // dtype.itemsize  # an int64 (layer, id) key as values of the exchange dtype
        self.book = book
        self.comm = comm
        self.rank, self.world = comm.rank, comm.world_size
        self.offset = int(book.offsets[self.rank])
        self.num_owned = int(indptr.numel() - 1)
        self.dims = [int(d) for d in dims]
        self.staleness = check_staleness(staleness)
        self.indices = indices
        self.halo_ids = _remote_ids(indices, self.offset, self.offset + self.num_owned)
        # Tell every owner which of its nodes this rank holds as halo (once, at start-up).
        route = Route.build(book.owner(self.halo_ids), self.world)
        self.halo_route = route
        got = comm.exchange(route.split(self.halo_ids), "control")
        got[self.rank] = self.halo_ids.new_empty(0)
        self.send_ids = [torch.sort(g).values for g in got]
        self.needed_by = torch.zeros(self.num_owned, self.world, dtype=torch.bool)
        for p, ids in enumerate(self.send_ids):  # loop over peers (a handful)
            self.needed_by[ids - self.offset, p] = True
        self.boundary = torch.nonzero(self.needed_by.any(1)).flatten() + self.offset
        # Rows are allocated at the first write (the fill), so that start-up holds no zero tables.
        self.tables = [StaleRowTable(self.num_halo, d, self.staleness, dtype, what=f"rank {self.rank}, layer-{l} halo "
                                     "embeddings") for l, d in enumerate(self.dims, start=1)]
        # The owned nodes' own history per hidden layer [n, d] (inputs of the refresh).
        self.own_tables = [torch.empty(0, d, dtype=dtype) for d in self.dims]
        self.push_interval = self.staleness // 2
        self.refresh_period = self.staleness - self.push_interval
        # Owner side: the step each own row (per hidden layer) was last sent to its holders.
        self.last_push = torch.full((len(self.dims), self.num_owned), NEVER, dtype=torch.int64)
        self._pending: threading.Thread | None = None
        self._result: dict = {}
        self.reset_stats()

    # -- sizes and statistics ------------------------------------------------------------
    @property
    def num_halo(self) -> int:
        return int(self.halo_ids.numel())

    @property
    def table_bytes(self) -> int:
        """Memory of the tables: halo rows x sum of hidden sizes x bytes per value."""
        return self.num_halo * sum(self.dims) * self.dtype.itemsize

    def reset_stats(self) -> None:
        self.stats = {"rows_pushed": 0, "rows_received": 0}
        for t in self.tables:
            t.reset_counts()

    def age_counts(self) -> dict[int, int]:
        """{age: rows read} over every table since the last reset: rows used, mean, min and max ages."""
        out: dict[int, int] = {}
        for t in self.tables:
            for a, n in t.age_counts.items():
                out[a] = out.get(a, 0) + n
        return out

    # -- reading -------------------------------------------------------------------------
    def local_slice(self, start: int, stop: int) -> torch.Tensor:
        """int64 [stop - start]: in-neighbors ``indices[start:stop]`` in local numbering, own
        node j -> j - offset, halo node ``halo_ids[k]`` -> n + k (layer-wise inference gathers
        with it slice by slice, so no second copy of the part's edges is ever held)."""
        ids = self.indices[start:stop]
        local = ids - self.offset
        remote = (local < 0) | (local >= self.num_owned)
        local[remote] = self.num_owned + torch.searchsorted(self.halo_ids, ids[remote])
        return local

    def slots(self, ids: torch.Tensor) -> torch.Tensor:
        """int64 [k]: table row of each halo id (int64 [k]); an id outside the halo is an error."""
        slot = torch.searchsorted(self.halo_ids, ids)
        ok = slot < self.num_halo
        ok[ok.clone()] = self.halo_ids[slot[ok]] == ids[ok]
        if not bool(ok.all()):
            bad = ids[~ok][:5].tolist()
            raise ExchangeError(f"rank {self.rank}: ids {bad} are not halo nodes of this part (remote "
                                "in-neighbors of owned nodes); historical leaves must be halo nodes")
        return slot

    def lookup(self, layer: int, ids: torch.Tensor, step: int) -> torch.Tensor:
        """float32 [k, dims[layer-1]]: layer-``layer`` embeddings of halo ids (int64 [k]) at ``step``.

        Raises:
            StalenessError: a row older than the staleness bound (or never written).
        """
        return self.tables[layer - 1].read(self.slots(ids), step, ids=ids)

    def history(self, layer: int, ids: torch.Tensor) -> torch.Tensor:
        """float32 [k, d]: the latest layer-``layer`` rows of any ids (owned: own history; else halo table).

        No staleness accounting (the refresh reads it); every id must be owned or a halo node.
        """
        own = self.book.owner(ids) == self.rank
        out = torch.empty(ids.numel(), self.dims[layer - 1], dtype=torch.float32)
        out[own] = self.own_tables[layer - 1][ids[own] - self.offset].to(torch.float32)
        out[~own] = self.tables[layer - 1].rows[self.slots(ids[~own])].to(torch.float32)
        return out

    def ages(self, layer: int, ids: torch.Tensor, step: int) -> torch.Tensor:
        """int64 [k]: how many steps old each id's layer-``layer`` row would be at ``step``."""
        return self.tables[layer - 1].ages(self.slots(ids), step)

    # -- writing -------------------------------------------------------------------------
    def refresh_seeds(self, step: int) -> torch.Tensor:
        """int64 [<= ceil(B / R)]: the boundary nodes to recompute at ``step`` (round robin).

        Every boundary node is in the slice of one step in every R consecutive steps.
        """
        period = self.refresh_period
        b = self.boundary.numel()
        if b == 0 or not self.dims:
            return self.boundary[:0]
        chunk = math.ceil(b / period)
        k = step % period
        return self.boundary[k * chunk:(k + 1) * chunk]

    def _payload(self, step: int, ids: Sequence[torch.Tensor], rows: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Per peer, [k, w + d] rows in the exchange dtype: (layer, id) packed in an int64 viewed as
        w = 8 / itemsize values, then the row.

        Only rows not sent in the last P steps go; their send step is recorded.
        """
        n_total = self.book.num_nodes
        out = [[] for _ in range(self.world)]
        d = self.dims[0]
        for layer, (ids_l, rows_l) in enumerate(zip(ids, rows), start=1):  # loop over layers
            own = ids_l - self.offset
            due = (step - self.last_push[layer - 1, own]) >= self.push_interval
            ids_l, rows_l, own = ids_l[due], rows_l[due], own[due]
            mask = self.needed_by[own]  # [k, P]
            self.last_push[layer - 1, own[mask.any(1)]] = step
            key = ((layer - 1) * n_total + ids_l).view(self.dtype).reshape(ids_l.numel(), self.key_width)
            packed = torch.cat([key, rows_l.to(self.dtype)], 1)
            for p in range(self.world):  # loop over peers
                if p != self.rank:
                    out[p].append(packed[mask[:, p]])
        return [torch.cat(o) if o else torch.empty(0, self.key_width + d, dtype=self.dtype) for o in out]

    def _apply(self, received: list[torch.Tensor], step: int) -> None:
        got = torch.cat(received)
        if got.shape[0] == 0:
            return
        w = self.key_width
        key = got[:, :w].contiguous().view(torch.int64).flatten()
        layer0 = key // self.book.num_nodes
        ids = key % self.book.num_nodes
        self.stats["rows_received"] += int(got.shape[0])
        for l in range(len(self.dims)):  # loop over layers
            m = layer0 == l
            if bool(m.any()):
                self.tables[l].write(self.slots(ids[m]), got[m, w:], step)

    def push(self, step: int, ids: Sequence[torch.Tensor], rows: Sequence[torch.Tensor], overlap: bool = True) -> None:
        """Send the boundary rows a step computed to the peers holding them as halo.

        Args:
            step: the global step that computed the rows (their stamp).
            ids: per hidden layer l = 1..L-1, int64 [k_l] own global ids.
            rows: per hidden layer, float32 [k_l, dims[l-1]] their embeddings (detached).
            overlap: run the exchange in a background thread; its rows are written into the
                tables at the next :meth:`push` or :meth:`drain` (so they serve step + 2 on).

        Collective on this exchange's group: every rank pushes once per step.
        """
        if not self.dims:
            return
        for l, (ids_l, rows_l) in enumerate(zip(ids, rows)):  # loop over layers: keep the own history
            if self.own_tables[l].shape[0] == self.num_owned:
                self.own_tables[l][ids_l - self.offset] = rows_l.to(self.dtype)
        payload = self._payload(step, ids, rows)
        self.stats["rows_pushed"] += sum(int(p.shape[0]) for p in payload)
        self.drain()
        if not overlap:
            self._apply(self.comm.exchange(payload, "embedding"), step)
            return

        health = self.comm.health

        def run() -> None:
            try:
                if health is not None:
                    health.enter("embedding push", step=step)
                self._result["rows"] = self.comm.exchange(payload, "embedding")
            except BaseException as err:  # noqa: BLE001 - re-raised by drain
                self._result["error"] = err
            finally:
                if health is not None:
                    health.leave()

        self._result = {"step": step}
        self._pending = threading.Thread(target=run, name="gnnscale-embedding-push", daemon=True)
        self._pending.start()

    def drain(self) -> None:
        """Wait for the push in flight (if any) and write its rows into the tables."""
        if self._pending is None:
            return
        bound = self.comm.wait_bound()
        self._pending.join(bound)
        if self._pending.is_alive():  # its exchange has a timeout: this is a backstop
            raise PeerError(f"rank {self.rank}: the embedding push of step {self._result.get('step')} did not "
                            f"finish within {bound:.0f} s; raise --timeout if peers are merely slow")
        self._pending = None
        res, self._result = self._result, {}
        if "error" in res:
            raise res["error"]
        self._apply(res["rows"], res["step"])

    def exchange_layer(self, layer: int, h_own: torch.Tensor, step: int) -> torch.Tensor:
        """Ship every boundary row of layer ``layer`` (h_own float32 [n, d]) and fill that table.

        Returns the table, [H, d] in the exchange dtype (aligned with ``halo_ids``); rows are
        stamped ``step``.
        Collective (one exchange, category ``embedding``).
        """
        sizes = torch.tensor([ids.numel() for ids in self.send_ids], dtype=torch.int64)
        flat = h_own[torch.cat(self.send_ids) - self.offset].to(self.dtype)
        out, _ = self.comm.exchange_flat(flat, sizes, "embedding")
        del flat
        # Received in owner order, each owner's rows in the order this rank listed them.
        rows = torch.empty(self.num_halo, h_own.shape[1], dtype=self.dtype)
        rows[self.halo_route.order] = out
        if layer <= len(self.dims):
            self.tables[layer - 1].replace(rows, step)
            self.own_tables[layer - 1] = h_own.to(self.dtype)
            self.last_push[layer - 1] = step
        return rows


def _remote_ids(indices: torch.Tensor, lo: int, hi: int, slice_edges: int = 1 << 22) -> torch.Tensor:
    """int64 [H] sorted unique ids of ``indices`` outside ``[lo, hi)``, read in slices of
    ``slice_edges`` so that start-up holds the halo and one slice, never a copy of the edges."""
    found = [torch.empty(0, dtype=torch.int64)]
    for a in range(0, indices.numel(), slice_edges):  # loop over slices of millions of edges
        sl = indices[a:a + slice_edges]
        found.append(torch.unique(sl[(sl < lo) | (sl >= hi)]))
        if len(found) > 8:
            found = [torch.unique(torch.cat(found))]
    return torch.unique(torch.cat(found))
