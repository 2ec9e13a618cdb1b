"""Distributed feature store: owned rows from the local part, the rest from their owners.

A fetch copies each row once on the receiving side: owned and cached rows are gathered
straight into the output by a parallel compiled loop, the owners' replies land in one flat
buffer (:meth:`Communicator.exchange_flat`, no per-rank lists) and are placed with one
``index_copy_``; an owner gathers the rows it serves directly into the buffer it sends.
On a CUDA device, the rows read on the host go into a pinned buffer and cross to the device
with one ``non_blocking`` copy; cached rows are already there.

Ranks on one host may read each other's rows straight from the partition folder
(``--host-features``, :meth:`DistFeatureStore.read_host_parts`): every part's ``x.npy`` is
memory-mapped read-only, so the host's page cache holds one copy, and a fetch gathers the
owners' rows like its own, without asking them. Owners on other hosts still answer through the
communicator; when every rank reads every part from its host, a fetch exchanges nothing.

Rows stored at lower precision (a part's ``feature_dtype`` float16 or bfloat16, see
:mod:`gnnscale.partitioning.feature_dtype`) stay in it through the gathers, the exchange (half
the bytes), the cache and the host reads (moved as 16-bit words), and are cast to float32 at the
end of :meth:`DistFeatureStore.fetch`, on the training device, where they enter the model.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from gnnscale.process.comm import Communicator
from gnnscale.errors import GnnscaleError
from gnnscale.partitioning.book import PartitionBook
from gnnscale.partitioning.feature_dtype import file_dtype, torch_dtype
from gnnscale.data.rows import RowReader


class LocalRows(Protocol):
    """What the store needs of a loaded part (see ``gnnscale.partitioning.LocalPart``).

    A part that also has ``x`` (a float32 [n, F] numpy array or memmap; or float16, or
    bfloat16's bits as uint16, with ``feature_dtype`` naming it) is read by the compiled gather;
    otherwise through ``features``.
    """

    def features(self, local_idx: torch.Tensor) -> torch.Tensor: ...


class DistFeatureStore:
    """Fetch input feature rows by global id: a :class:`~gnnscale.data.rows.RowReader` of the
    part's ``x`` (own part, cache, host's parts, owners), cast to float32 last.

    Args:
        part: this rank's part; ``part.features(local_idx)`` returns float32 [k, F] rows.
        book: the partition book.
        comm: this rank's communicator; remote rows move in one exchange per call.
        feature_dim: F (every rank must agree; it sizes empty replies).
        device: where fetched rows and the cache live (the training device).
        reader: the :class:`~gnnscale.data.rows.RowReader` to fetch through (:meth:`over`: another
            store's, sharing its cache); None: a new one over ``part``.

    Counters (cumulative in ``self.stats``): ``local_rows``, ``remote_rows`` (fetched from
    owners), ``cache_hits`` (remote rows served by the cache, see :meth:`fill_cache`) and
    ``host_rows`` (other parts' rows read from this host's partition folder) and
    ``distinct_rows`` (the distinct ids fetched since the last :meth:`reset_stats`: an epoch's
    byte floor, one byte per node of the graph to mark them).
    Bytes are counted by ``comm`` under ``feature_request`` (ids) and ``feature`` (rows); the
    one-time cache fill under ``cache_fill``.
    """

    def __init__(self, part: LocalRows, book: PartitionBook, comm: Communicator, feature_dim: int,
                 device: torch.device | str = "cpu", reader: RowReader | None = None) -> None:
        self.part = part
        self.book = book
        self.comm = comm
        self.feature_dim = int(feature_dim)
        self.device = torch.device(device)
        self.offset = int(book.offsets[comm.rank])
        # how the rows are stored and moved (float32, float16, bfloat16); fetch returns float32
        stored = getattr(part, "feature_dtype", "float32")
        self.dtype, self._file_dtype = torch_dtype(stored), np.dtype(file_dtype(stored))
        x = getattr(part, "x", None)
        own = x if isinstance(x, np.ndarray) and x.dtype == self._file_dtype and x.ndim == 2 else part
        self.reader = reader or RowReader(own, book, comm, (self.feature_dim,), self.dtype, "feature", self.device,
                                          self._file_dtype)
        self.reader.stats.setdefault("distinct_rows", 0)
        self._seen: torch.Tensor | None = None  # bool [N]: ids fetched since reset_stats (distinct_rows)

    def over(self, comm: Communicator, complete: bool = False) -> "DistFeatureStore":
        """The same part's store asking the owners through ``comm`` (e.g. historical mode's refresh
        group), reading through this store's cache (filled once, by this store); ``complete``: that
        cache holds every remote row it is asked for."""
        return DistFeatureStore(self.part, self.book, comm, self.feature_dim, self.device,
                                reader=self.reader.over(comm, complete))

    @property
    def stats(self) -> dict:
        return self.reader.stats

    @property
    def cache(self):
        """The :class:`~gnnscale.data.feature_cache.FeatureCache` read through (None: none)."""
        return self.reader.cached.cache

    @property
    def complete(self) -> bool:
        """True when every rank's cache holds every remote row it can ask for (historical mode's
        halo) or every rank reads every part on its host: fetch then never communicates."""
        return self.reader.complete

    @property
    def row_bytes(self) -> int:
        """Bytes of one row as stored and moved (``feature_dim`` times 4, or 2 at lower precision)."""
        return self.reader.row_bytes

    def reset_stats(self) -> None:
        self.reader.reset_stats()
        if self._seen is not None:
            self._seen.zero_()

    def _mark(self, ids: torch.Tensor) -> None:
        """Count the ids of ``ids`` (distinct within a call: a batch's input ids) not fetched before
        since :meth:`reset_stats` (``distinct_rows``)."""
        if self._seen is None:
            self._seen = torch.zeros(int(self.book.num_nodes), dtype=torch.bool)
        ids = ids.cpu()
        self.stats["distinct_rows"] += int(ids.numel() - int(self._seen[ids].sum()))
        self._seen[ids] = True

    def read_host_parts(self, parts: dict[int, np.ndarray], complete: bool) -> None:
        """Read the rows of the parts in ``parts`` ({owner rank: float32 [n_owner, F] array or
        read-only memmap of its ``x.npy``}) directly instead of asking their owners.

        ``complete``: every rank reads every other rank's part itself (the same value on every
        rank, e.g. :attr:`gnnscale.data.host_parts.HostRanks.complete`); then :meth:`fetch` is
        no longer collective.
        """
        world, rank = self.comm.world_size, self.comm.rank
        if complete and sorted(parts) != [k for k in range(world) if k != rank]:
            raise GnnscaleError(f"rank {rank}: complete=True needs every other rank's part; found {sorted(parts)} of "
                                f"world size {world}")
        for k, x in parts.items():
            n = int(self.book.offsets[k + 1] - self.book.offsets[k])
            if k == rank or not 0 <= k < world:
                raise GnnscaleError(f"rank {rank}: host part {k} is not another rank's part (world size {world})")
            if x.dtype != self._file_dtype or x.ndim != 2 or x.shape != (n, self.feature_dim):
                raise GnnscaleError(
                    f"rank {rank}: part {k}'s features read on this host are {x.dtype} {tuple(x.shape)}, expected "
                    f"{self._file_dtype} ({n}, {self.feature_dim}) by the partition book; the partition folder is not the "
                    "one the run was started on, or it was rewritten: re-partition, or leave --host-features out")
        self.reader.read_host_parts(parts, complete)

    def fill_cache(self, ids: torch.Tensor, complete: bool = False) -> None:
        """Fetch rows ``ids`` (int64 [K] remote global ids) once and keep them in a FeatureCache
        on this store's device; ``complete``: every remote row this store is asked for is among
        them (historical mode's halo: fetch then never communicates, and a miss is an error).

        Collective (every rank calls it, with its own ids); bytes count as ``cache_fill``.
        """
        self.reader.fill_cache(ids, complete)

    def hold_cache(self, cache, complete: bool = False) -> None:
        """Read through ``cache`` (a FeatureCache of this part's remote rows, on this store's device)."""
        self.reader.hold(cache, complete)

    def fetch(self, ids: torch.Tensor, category: str = "feature") -> torch.Tensor:
        """float32 [n, F] rows of global ids ``ids`` (int64 [n], on the host), in the order
        given, on this store's device.

        Owned rows come from the local part, cached rows from the cache, the rest from their
        owners in one exchange. Collective: every rank must call it the same number of times
        (``ids`` may be empty); not collective when the store is ``complete`` (set on every
        rank or none) or every rank reads every part on its host (:meth:`read_host_parts`).
        Rows stored at lower precision move as stored and are cast to float32 here, last.
        """
        rows = self.reader.read(ids, category)
        if category == "feature":
            self._mark(ids)
        return rows if rows.dtype == torch.float32 else rows.to(torch.float32)
