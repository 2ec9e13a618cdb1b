"""Distributed feature store: owned rows from the local part, the rest from their owners."""
from __future__ import annotations

from typing import Protocol

import torch

from gnnscale.comm import Communicator
from gnnscale.errors import GnnscaleError
from gnnscale.partitioning.book import PartitionBook
from gnnscale.routing import Route


class LocalRows(Protocol):
    """What the store needs of a loaded part (see ``gnnscale.partitioning.LocalPart``)."""

    def features(self, local_idx: torch.Tensor) -> torch.Tensor: ...


class DistFeatureStore:
    """Fetch input feature rows by global id.

    Args:
        part: this rank's part; ``part.features(local_idx)`` returns float32 [k, F] rows.
        book: the partition book.
        comm: this rank's communicator; remote rows move in one exchange per call.
        feature_dim: F (every rank must agree; it sizes empty replies).

    Counters (cumulative in ``self.stats``): ``local_rows``, ``remote_rows`` (fetched from
    owners) and ``cache_hits`` (remote rows served by the cache, see :meth:`fill_cache`).
    Bytes are counted by ``comm`` under ``feature_request`` (ids) and ``feature`` (rows); the
    one-time cache fill under ``cache_fill``.
    """

    def __init__(self, part: LocalRows, book: PartitionBook, comm: Communicator, feature_dim: int) -> None:
        self.part = part
        self.book = book
        self.comm = comm
        self.feature_dim = int(feature_dim)
        self.offset = int(book.offsets[comm.rank])
        self.cache = None
        # True when every rank's cache holds every remote row it can ask for (historical mode's
        # halo): fetch then never communicates, and a miss is an error instead of a request.
        self.complete = False
        self.stats = {"local_rows": 0, "remote_rows": 0, "cache_hits": 0}

    def reset_stats(self) -> None:
        for k in self.stats:
            self.stats[k] = 0

    def fill_cache(self, ids: torch.Tensor, device: torch.device | str = "cpu") -> None:
        """Fetch rows ``ids`` (int64 [K] remote global ids) once and keep them in a FeatureCache.

        Collective (every rank calls it, with its own ids); bytes count as ``cache_fill``.
        """
        from gnnscale.feature_cache import FeatureCache

        self.cache = None
        rows = self.fetch(ids, category="cache_fill")
        self.cache = FeatureCache(ids, rows, device)
        self.reset_stats()

    def fetch(self, ids: torch.Tensor, category: str = "feature") -> torch.Tensor:
        """float32 [n, F] rows of global ids ``ids`` (int64 [n]), in the order given.

        Owned rows come from the local part, cached rows from the cache, the rest from their
        owners in one exchange. Collective: every rank must call it the same number of times
        (``ids`` may be empty); not collective when the store is ``complete`` (set on every
        rank or none).
        """
        rank, P = self.comm.rank, self.comm.world_size
        n = ids.numel()
        out = torch.empty(n, self.feature_dim, dtype=torch.float32)
        owner = self.book.owner(ids)
        mine = owner == rank
        out[mine] = self._local(ids[mine] - self.offset)
        need = ~mine
        if self.cache is not None and self.cache.num_rows:
            remote_pos = torch.nonzero(need).flatten()
            hit, rows = self.cache.lookup(ids[remote_pos])
            out[remote_pos[hit]] = rows.to(out.device)
            need[remote_pos[hit]] = False
            self.stats["cache_hits"] += int(hit.sum())
        need_pos = torch.nonzero(need).flatten()
        self.stats["local_rows"] += int(mine.sum())
        if self.complete:
            if need_pos.numel():
                raise GnnscaleError(
                    f"rank {rank}: feature rows of ids {ids[need_pos][:5].tolist()} are neither owned nor held, but "
                    "this store was marked complete (every remote row it can be asked for is cached); "
                    "only halo nodes may be read in historical mode")
            return out
        route = Route.build(owner[need_pos], P)
        req = route.split(ids[need_pos])
        got = self.comm.exchange(req, category + "_request")
        served = torch.cat(got)
        rows = self._local(served - self.offset)
        back = self.comm.exchange(list(torch.split(rows, [g.numel() for g in got])), category)
        back[rank] = rows.new_empty(0, self.feature_dim)
        if need_pos.numel():
            out[need_pos] = route.merge_rows(back)
        self.stats["remote_rows"] += int(need_pos.numel())
        return out

    def _local(self, local_idx: torch.Tensor) -> torch.Tensor:
        if local_idx.numel() == 0:
            return torch.empty(0, self.feature_dim, dtype=torch.float32)
        rows = self.part.features(local_idx)
        if rows.shape[1] != self.feature_dim:
            raise GnnscaleError(f"part returned rows of width {rows.shape[1]}, expected {self.feature_dim}")
        return rows
