"""One value per node asked of its owner: the request/response exchange that the degree and
node-key stores share."""
from __future__ import annotations

import torch

from gnnscale.partitioning.routing import Route


def ask_owners(comm, ids: torch.Tensor, owner: torch.Tensor, need: torch.Tensor, own: torch.Tensor,
               offset: int, out: torch.Tensor, request: str, reply: str) -> torch.Tensor:
    """Fill ``out[need]`` with each owner's ``own`` value of ``ids[need]`` (collective).

    ids: int64 [k] global ids; owner: int64 [k] their owners; need: int64 [m] positions in
    ``ids`` to ask for; own: this rank's values, indexed by global id - ``offset``; out: [k],
    written in place and returned. ``request`` / ``reply`` are the byte categories counted.
    """
    route = Route.build(owner[need], comm.world_size)
    served, served_counts = comm.exchange_flat(ids[need[route.order]], route.counts, request)
    back, _ = comm.exchange_flat(own[served - offset], served_counts, reply)
    out[need[route.order]] = back
    return out
