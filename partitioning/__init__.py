"""Graph partitioning for gnnscale: strategies, quality metrics, the partition book, the format.

Typical use::

    from gnnscale.partitioning import partition_graph, partition_metrics, load_part
    meta = partition_graph(data, 4, "parts/cora-4")       # METIS, balance nodes + train nodes
    meta = partition_graph(data, 4, "parts/f", method="fennel", options={"slack": 0.1})
    meta["edge_cut"], meta["balance"], meta["halo"]          # metrics stored in meta.json
    part = load_part("parts/cora-4", 0)                      # LocalPart, sha256-verified
    owners = part.book.owner(part.indices)                   # which part owns each source

    parts = assign_parts(data, 4, method="ldg")              # int64 [N], nothing written
    m = partition_metrics(data, parts, 4, fanouts=[10, 10], batch_size=512)
    m["communication"]["remote_bytes"]                       # bytes fetched in one epoch

Methods: ``metis``, ``random``, ``hash``, ``range``, ``ldg``, ``fennel`` (see
:mod:`~gnnscale.partitioning.strategies`), any name added with ``register_partitioner``, or a
plug-in ``"module.path:function"``.
"""

from gnnscale.partitioning.api import (
    assign_parts,
    available_methods,
    get_partitioner,
    partition_graph,
    register_partitioner,
)
from gnnscale.partitioning.book import PartitionBook
from gnnscale.partitioning.format import (
    FORMAT_VERSION,
    LocalPart,
    load_meta,
    load_part,
    summarize,
    verify_part,
    write_meta,
    write_partitions,
)
from gnnscale.partitioning.graph import (
    coalesce,
    edge_cut,
    to_csc,
    to_undirected_csr,
    to_undirected_csr_weighted,
)
from gnnscale.partitioning.metis import integer_edge_weights, metis_partition
from gnnscale.partitioning.metrics import partition_metrics
from gnnscale.partitioning.resources import ResourceMeter
from gnnscale.partitioning.strategies import BUILTIN_STRATEGIES
from gnnscale.partitioning.streaming import stream_partition
from gnnscale.partitioning.relabel import contiguous_relabel
from gnnscale.partitioning.weights import BALANCE_CONSTRAINTS, build_vertex_weights

__all__ = [
    "BALANCE_CONSTRAINTS",
    "BUILTIN_STRATEGIES",
    "FORMAT_VERSION",
    "LocalPart",
    "PartitionBook",
    "ResourceMeter",
    "assign_parts",
    "available_methods",
    "build_vertex_weights",
    "coalesce",
    "contiguous_relabel",
    "edge_cut",
    "get_partitioner",
    "integer_edge_weights",
    "load_meta",
    "load_part",
    "metis_partition",
    "partition_graph",
    "partition_metrics",
    "register_partitioner",
    "stream_partition",
    "summarize",
    "to_csc",
    "to_undirected_csr",
    "to_undirected_csr_weighted",
    "verify_part",
    "write_meta",
    "write_partitions",
]
