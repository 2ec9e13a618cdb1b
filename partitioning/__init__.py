"""Graph partitioning for gnnscale: METIS partitioners, the partition book, the on-disk format.

Typical use::

    from gnnscale.partitioning import partition_graph, load_part
    meta = partition_graph(data, 4, "parts/cora-4")       # METIS, balance nodes + train nodes
    part = load_part("parts/cora-4", 0)                      # LocalPart, sha256-verified
    owners = part.book.owner(part.indices)                   # which part owns each source
"""

from gnnscale.partitioning.api import (
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
    write_partitions,
)
from gnnscale.partitioning.graph import coalesce, edge_cut, to_csc, to_undirected_csr
from gnnscale.partitioning.metis import metis_partition
from gnnscale.partitioning.relabel import contiguous_relabel
from gnnscale.partitioning.weights import BALANCE_CONSTRAINTS, build_vertex_weights

__all__ = [
    "BALANCE_CONSTRAINTS",
    "FORMAT_VERSION",
    "LocalPart",
    "PartitionBook",
    "available_methods",
    "build_vertex_weights",
    "coalesce",
    "contiguous_relabel",
    "edge_cut",
    "get_partitioner",
    "load_meta",
    "load_part",
    "metis_partition",
    "partition_graph",
    "register_partitioner",
    "summarize",
    "to_csc",
    "to_undirected_csr",
    "write_partitions",
]
