"""In-degrees by global id, held by the nodes' owners (GCN normalization on sampled blocks).

A rank holds the in-degrees of its own nodes only (``diff(indptr)``, int64 [n]): never a
vector over the whole graph. The degrees of other nodes are asked of their owners in one
exchange of ids and one of degrees, for the ids a computation reads (a mini-batch's input
rows, the halo of layer-wise inference, a refresh's sources), and handed to the model as a
:class:`DegreeLookup` that answers ``lookup[ids]`` like the global vector did.
"""
from __future__ import annotations

import torch

from gnnscale.process.comm import Communicator
from gnnscale.errors import GnnscaleError
from gnnscale.partitioning.book import PartitionBook
from gnnscale.data.rows import RowReader


class DegreeLookup:
    """``lookup[ids]``: in-degrees (int64) of ids among the ``known`` ones it was built with.

    Args:
        ids: int64 [k] global ids (any order, repeats allowed). degrees: int64 [k] theirs.
    """

    def __init__(self, ids: torch.Tensor, degrees: torch.Tensor) -> None:
        order = torch.argsort(ids)
        self.ids = ids[order]
        self.degrees = degrees[order]

    @property
    def device(self) -> torch.device:
        return self.degrees.device

    def to(self, device: torch.device | str) -> "DegreeLookup":
        return DegreeLookup(self.ids.to(device), self.degrees.to(device))

    def __getitem__(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.searchsorted(self.ids, ids).clamp_(max=max(self.ids.numel() - 1, 0))
        if ids.numel() and (self.ids.numel() == 0 or not bool((self.ids[pos] == ids).all())):
            missing = ids[(self.ids[pos] != ids)] if self.ids.numel() else ids
            raise GnnscaleError(f"degrees of ids {missing[:5].tolist()} were not fetched; a degree lookup answers "
                                "only the ids it was built with (a batch's input rows)")
        return self.degrees[pos]


class DegreeStore:
    """This rank's nodes' in-degrees, and the exchange that answers the others'.

    Args:
        indptr: int64 [n + 1] this rank's CSC pointers (in-degree of own node j: the diff).
        book: the partition book. comm: the communicator of the stage that asks (every rank
            of its group asks at the same points: :meth:`fetch` is collective).

    Bytes count as ``degree_request`` (8 per id) and ``degree`` (8 per degree).
    """

    def __init__(self, indptr: torch.Tensor, book: PartitionBook, comm: Communicator) -> None:
        self.own = torch.diff(indptr)
        self.book = book
        self.comm = comm
        self.offset = int(book.offsets[comm.rank])
        self.reader = RowReader(self.own, book, comm, (), torch.int64, "degree")  # own, then the owners

    def fetch(self, ids: torch.Tensor) -> torch.Tensor:
        """int64 [k]: the in-degree of every id of ``ids`` (int64 [k] global, on the host).
        Collective (``ids`` may be empty)."""
        return self.reader.read(ids)

    def lookup(self, ids: torch.Tensor) -> DegreeLookup:
        """A :class:`DegreeLookup` of ``ids`` (collective, as :meth:`fetch`)."""
        return DegreeLookup(ids, self.fetch(ids))
