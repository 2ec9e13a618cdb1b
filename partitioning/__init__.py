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

from gnnscale.lazy import lazy_exports

# Public name -> the submodule that defines it. Names load on first use (PEP 562), so that a
# light caller (the launcher of ``gnnscale train`` reads meta.json and checks the hashes of
# the parts through ``manifest``) does not import torch, numba and METIS with the package.
_EXPORTS = {
    "BALANCE_CONSTRAINTS": ".weights",
    "BUILTIN_STRATEGIES": ".strategies",
    "FORMAT_VERSION": ".manifest",
    "LocalPart": ".format",
    "PartitionBook": ".book",
    "ResourceMeter": ".resources",
    "assign_parts": ".api",
    "available_methods": ".api",
    "build_vertex_weights": ".weights",
    "coalesce": ".graph",
    "contiguous_relabel": ".relabel",
    "edge_cut": ".graph",
    "get_partitioner": ".api",
    "integer_edge_weights": ".metis",
    "load_meta": ".manifest",
    "load_part": ".format",
    "metis_partition": ".metis",
    "partition_graph": ".api",
    "partition_metrics": ".metrics",
    "register_partitioner": ".api",
    "stream_partition": ".streaming",
    "summarize": ".format",
    "to_csc": ".graph",
    "to_undirected_csr": ".graph",
    "to_undirected_csr_weighted": ".graph",
    "verify_part": ".manifest",
    "verify_parts": ".manifest",
    "check_folder": ".validate",
    "write_meta": ".format",
    "write_partitions": ".format",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
