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

    Counters (per call, cumulative in ``self.stats``): ``local_rows``, ``remote_rows``.
    Bytes are counted by ``comm`` under ``feature_request`` (ids) and ``feature`` (rows).
    """

    def __init__(self, part: LocalRows, book: PartitionBook, comm: Communicator, feature_dim: int) -> None:
        self.part = part
        self.book = book
        self.comm = comm
        self.feature_dim = int(feature_dim)
        self.offset = int(book.offsets[comm.rank])
        self.stats = {"local_rows": 0, "remote_rows": 0}

    def fetch(self, ids: torch.Tensor) -> torch.Tensor:
        """float32 [n, F] rows of global ids ``ids`` (int64 [n]), in the order given.

        Collective: every rank must call it the same number of times (``ids`` may be empty).
        """
        rank, P = self.comm.rank, self.comm.world_size
        route = Route.build(self.book.owner(ids), P)
        req = route.split(ids)
        own = req[rank]
        req[rank] = own.new_empty(0)
        got = self.comm.exchange(req, "feature_request")
        served = torch.cat(got)
        rows = self._local(served - self.offset)
        sizes = [g.numel() for g in got]
        reply = list(torch.split(rows, sizes))
        back = self.comm.exchange(reply, "feature")
        back[rank] = self._local(own - self.offset)
        self.stats["local_rows"] += int(own.numel())
        self.stats["remote_rows"] += int(ids.numel() - own.numel())
        return route.merge_rows(back)

    def _local(self, local_idx: torch.Tensor) -> torch.Tensor:
        if local_idx.numel() == 0:
            return torch.empty(0, self.feature_dim, dtype=torch.float32)
        rows = self.part.features(local_idx)
        if rows.shape[1] != self.feature_dim:
            raise GnnscaleError(f"part returned rows of width {rows.shape[1]}, expected {self.feature_dim}")
        return rows
