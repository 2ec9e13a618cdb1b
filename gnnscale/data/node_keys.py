"""Each node's original id by global id, held by its owner: the keys of the keyed dropout.

Data parallelism keys a node's dropout mask by its original id (:mod:`gnnscale.nn.dropout`), so
that 1, 2 or 4 workers drop the same elements of the same node. A rank holds the original ids
of its own nodes (``part.orig_ids``) and, where it reads them (``--host-graph``), those of the
other parts on its host; the others' are asked of their owners in one exchange of ids and one
of keys per batch (categories ``node_key_request`` and ``node_key``, 8 bytes an id each way),
as :class:`~gnnscale.data.degrees.DegreeStore` asks degrees. A batch's keys are one gather of its
input nodes' (the other blocks' sources are their first rows), no sort.
"""
from __future__ import annotations

from typing import Sequence

import torch

from gnnscale.partitioning.book import PartitionBook
from gnnscale.samplers.block import Block

from gnnscale.data.rows import RowReader


#: the most nodes whose keys a rank copies into one table (8 bytes each: 512 MiB); above it, the
#: reader's per-part gathers (the host's parts stay memory-mapped, shared by the host's ranks)
_TABLE_MAX = 1 << 26


class NodeKeyStore:
    """The original ids of this rank's nodes, and the exchange that answers the others'.

    Args:
        own: int64 [n] original id of this rank's node ``offset + i`` (``part.orig_ids``).
        book: the partition book. comm: the communicator of the stage that asks (every rank of
            its group asks at the same points: :meth:`fetch` is collective).
        host: ``{rank: int64 [n_rank]}`` original ids of other parts read on this host (their
            nodes are never asked of their owners); every rank must hold the same ranks' keys
            or none, so that the exchange's requests agree (``host_complete``: all of them).
    """

    def __init__(self, own: torch.Tensor, book: PartitionBook, comm, host: dict | None = None,
                 host_complete: bool = False) -> None:
        self.own = own.to(torch.int64)
        self.book = book
        self.comm = comm
        self.offset = int(book.offsets[comm.rank])
        self.host = dict(host or {})
        self.host_complete = bool(host_complete)
        # own keys, the host's parts' keys, then the owners (none to ask: one process, or every part here)
        self.reader = RowReader(self.own, book, comm, (), torch.int64, "node_key",
                                owners=not (self.host_complete or comm.world_size == 1))
        self.reader.read_host_parts(self.host, self.host_complete)
        # Every part's keys on this host (one process, or every part read here) and not too many to
        # hold twice: one table by global id, so a batch's keys are one gather (the reader's owner
        # search, claims and two gathers cost ~50x that: 19.6 against 0.4 ms for 248k ids at R-MAT 1M)
        self.table: torch.Tensor | None = None
        world = comm.world_size
        if world > 1 and self.host_complete and len(book.offsets) == world + 1 \
                and int(book.offsets[-1]) <= _TABLE_MAX:
            self.table = torch.cat([self.own if r == comm.rank else torch.as_tensor(self.host[r]).to(torch.int64)
                                    for r in range(world)])

    def fetch(self, ids: torch.Tensor) -> torch.Tensor:
        """int64 [k]: the original id of every id of ``ids`` (int64 [k] global, on the host).
        Collective unless every part is read on this host (``ids`` may be empty)."""
        if self.comm.world_size == 1:  # every node is this rank's: one gather, no owner search
            return self.own.index_select(0, ids - self.offset)
        if self.table is not None:  # every part's keys here: one gather by global id
            return self.table.index_select(0, ids)
        return self.reader.read(ids)

    def block_keys(self, blocks: Sequence[Block]) -> list[torch.Tensor]:
        """Per block, int64 [num_src]: the original ids of its sources (one :meth:`fetch`;
        collective as it is).

        The sampler nests a batch's blocks: each block's sources are the first rows of the
        block before it (model order), so the keys of ``blocks[0]``'s sources (distinct ids)
        give every block's as a prefix, one gather and no sort. Blocks that do not nest (a
        historical block's leaves at its tail) take the keys of their distinct sources."""
        first = blocks[0].src_ids.cpu() if blocks else torch.empty(0, dtype=torch.int64)
        if all(b.num_hist == 0 for b in blocks) and all(
                b.num_src <= first.numel() and torch.equal(b.src_ids.cpu(), first[: b.num_src]) for b in blocks[1:]):
            keys = self.fetch(first)
            return [keys[: b.num_src] for b in blocks]
        ids = torch.cat([b.src_ids.cpu() for b in blocks])
        uniq, inverse = torch.unique(ids, return_inverse=True)
        keys = self.fetch(uniq)[inverse]
        return list(torch.split(keys, [b.num_src for b in blocks]))
