"""Worker body for the distributed partitioning test (importable by spawned processes)."""
from __future__ import annotations

import numpy as np

from gnnscale.dist_partition import partition_distributed
from gnnscale.process.comm import Communicator
from gnnscale.process.groups import init_distributed


def partition_worker(folder: str, num_parts: int, out: str, parts: np.ndarray | None, method: str, undirected: bool,
                     chunk_edges: int) -> dict:
    """Join the group, partition ``folder`` with every rank; return what the rank wrote and its byte counts."""
    info = init_distributed(timeout=60)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    res = partition_distributed(folder, num_parts, out, comm, method=method, parts=parts, undirected=undirected,
                                chunk_edges=chunk_edges)
    return {"rank": info.rank, "parts_written": res["parts_written"], "stats": res["stats"],
            "has_meta": res["meta"] is not None}
