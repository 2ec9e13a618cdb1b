"""Graph partitioning for gnnscale: strategies, quality metrics, the partition book, the format.

Typical use::

    from gnnscale.partitioning import partition_graph, partition_metrics, load_part
    meta = partition_graph(data, 4, "parts/cora-4")       # METIS, balance nodes + train nodes
    meta = partition_graph(data, 4, "parts/f", method="fennel", options={"slack": 0.1})
    meta["edge_cut"], meta["balance"], meta["halo"]          # metrics stored in meta.json
    part = load_part("parts/cora-4", 0)                      # LocalPart, sha256-verified
    owners = part.book.owner(part.indices)                   # which part owns each source

    # a typed Data (docs/typed_graphs.md: node_types, edge_type, x_dict, ...) -> format 2
    meta = partition_graph(hetero, 4, "parts/mag-4")         # METIS balances every node type
    part = load_part("parts/mag-4", 0)
    part.typed.etype, part.typed.x_by_type[0]                # int16 [E_p], float32 [n_p0, F_0]
    ptr = part.relation_indptr()                             # int64 [n_p * R + 1]
    t, per_type = part.typed.book.map_to_per_ntype(part.indices)

    parts = assign_parts(data, 4, method="ldg")              # int64 [N], nothing written
    m = partition_metrics(data, parts, 4, fanouts=[10, 10], batch_size=512)
    m["communication"]["remote_bytes"]                       # bytes fetched in one epoch

Methods: ``metis``, ``random``, ``hash``, ``range``, ``ldg``, ``fennel``, ``kaminpar``, ``kahip``
(the last two optional packages, see :mod:`~gnnscale.partitioning.strategies` and
:mod:`~gnnscale.partitioning.multilevel`), any name added with ``register_partitioner``, or a
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
    "LocalPart": ".part",
    "PartitionBook": ".book",
    "ResourceMeter": ".resources",
    "TYPED_FORMAT_VERSION": ".manifest",
    "TypedPart": ".typed",
    "TypedPartitionBook": ".book",
    "assign_parts": ".api",
    "available_methods": ".api",
    "build_vertex_weights": ".weights",
    "coalesce": ".graph",
    "contiguous_relabel": ".relabel",
    "edge_cut": ".graph",
    "get_partitioner": ".api",
    "integer_edge_weights": ".metis",
    "is_typed": ".typed",
    "load_meta": ".manifest",
    "load_part": ".part",
    "metis_partition": ".metis",
    "partition_graph": ".api",
    "partition_metrics": ".metrics",
    "register_partitioner": ".api",
    "stream_partition": ".streaming",
    "summarize": ".summary",
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
