"""The summary of a partition folder for ``gnnscale info``: sizes, quality metrics and cost,
read from meta.json and the file sizes only (no array is loaded)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from gnnscale.partitioning.feature_dtype import meta_feature_dtype
from gnnscale.partitioning.manifest import edge_feature_dim, load_meta, part_dir_name, target_meta
from gnnscale.partitioning.metrics import metrics_from_counts


def summarize(part_dir: str | os.PathLike) -> dict[str, Any]:
    """Sizes, quality metrics and cost of a partition folder, for ``gnnscale info`` (reads
    meta.json and the file sizes only).

    Returns:
        JSON-serializable dict with dataset, method, num_parts, num_nodes, num_edges,
        feature_dim, num_classes, ``target_kind`` (class, binary, multilabel or regression;
        class for folders written before targets had kinds), ``num_outputs``,
        ``edge_feature_dim`` (0: no edge features), ``feature_dtype`` (float32 for folders written before
        it), ``input`` (the identity of the files it was cut from, where recorded:
        :func:`~gnnscale.datasets.inputs.input_identity`), created, the partitioner's settings and cost
        (balance_constraints, imbalance, seed, options, partition_seconds, write_seconds,
        total_seconds, peak_rss_bytes, ...), the quality metrics ``edge_cut`` (int),
        ``edge_cut_fraction``, ``undirected_edges``, ``balance`` {nodes, train, in_edges}
        (max/mean over parts, 1.0 = perfect), ``halo`` (list per part),
        ``replication_factor`` (+ ``replication_factor_per_part``), and ``parts`` (per part:
        part, nodes, in_edges, train, val, test, remote_sources (= halo), bytes on disk).
        Folders written before the metrics were stored get ``balance`` computed from
        ``parts`` and the old ``edge_cut`` dict converted. A typed folder (format 2) adds
        ``typed``: meta.json's ``typed`` entry plus ``relations`` (per relation: name, src,
        dst, edges, cut, cut_fraction) and ``types`` (per node type: name, nodes,
        feature_dim, balance, nodes per part) and ``feature_dims`` ``{node type: F_t}`` (0: a
        type without features, a learned embedding; the folder's ``feature_dim`` is 0).
    """
    root = Path(part_dir)
    meta = load_meta(root)
    parts = []
    for p, size in enumerate(meta.get("parts", [])):
        on_disk = sum(
            (root / rel).stat().st_size
            for rel in meta["files"]
            if rel.startswith(part_dir_name(p) + "/") and (root / rel).is_file()
        )
        parts.append({"part": p, **size, "bytes": on_disk})
    keys = (
        "format_version",
        "dataset",
        "input",
        "method",
        "num_parts",
        "num_nodes",
        "num_edges",
        "feature_dim",
        "num_classes",
        "created",
        "gnnscale_version",
        "balance_constraints",
        "imbalance",
        "seed",
        "options",
        "edge_cut",
        "edge_cut_fraction",
        "undirected_edges",
        "balance",
        "halo",
        "replication_factor",
        "replication_factor_per_part",
        "partition_seconds",
        "write_seconds",
        "total_seconds",
        "partition_peak_rss_bytes",
        "peak_rss_bytes",
        "peak_rss_growth_bytes",
        "peak_rss_exact",
    )
    out = {k: meta[k] for k in keys if k in meta}
    target = target_meta(meta)
    out["target_kind"] = target["kind"]
    if target.get("num_outputs") is not None:
        out["num_outputs"] = int(target["num_outputs"])
    out["edge_feature_dim"] = edge_feature_dim(meta)
    out["feature_dtype"] = meta_feature_dtype(meta)  # float32 for folders written before the key
    cut = out.get("edge_cut")
    if isinstance(cut, dict):  # folders written before edge_cut became an int
        out["edge_cut"] = int(cut.get("count", 0))
        out["edge_cut_fraction"] = float(cut.get("fraction", 0.0))
        out["undirected_edges"] = int(cut.get("undirected_edges", 0))
    if "balance" not in out and parts:
        out["balance"] = metrics_from_counts(
            nodes=[s.get("nodes", 0) for s in parts],
            train=[s.get("train", 0) for s in parts],
            in_edges=[s.get("in_edges", 0) for s in parts],
            halo=[s.get("remote_sources", 0) for s in parts],
            cut=0,
            undirected_edges=0,
        )["balance"]
    if "halo" not in out and parts and all("remote_sources" in s for s in parts):
        out["halo"] = [int(s["remote_sources"]) for s in parts]
    if isinstance(meta.get("temporal"), dict):  # a temporal graph: its events' times (docs/temporal.md)
        out["temporal"] = dict(meta["temporal"])
    if isinstance(meta.get("typed"), dict):
        out["typed"] = typed_summary(meta["typed"])
        # a typed folder keeps its features per node type (feature_dim, 0, is not one of them)
        out["feature_dims"] = {str(row["type"]): row["feature_dim"] for row in out["typed"]["types"]}
    out["path"] = str(root)
    out["parts"] = parts
    return out


def typed_summary(typed: dict[str, Any]) -> dict[str, Any]:
    """meta.json's ``typed`` entry plus a row per relation and per node type (for ``info``).

    Returns:
        The entry's keys, ``relations``: ``[{relation, src, dst, edges, cut, cut_fraction}]``
        (``cut``: stored edges of the relation whose endpoints are in different parts) and
        ``types``: ``[{type, nodes, feature_dim, balance, per_part}]`` (``balance``: max/mean
        over parts of the type's nodes).
    """
    out = dict(typed)
    edges, cut = typed.get("edges_per_relation", []), typed.get("cut_per_relation", [])
    out["relations"] = [
        {"relation": r, "src": s, "dst": d, "edges": int(e), "cut": int(c),
         "cut_fraction": float(c) / float(e) if e else 0.0}
        for (s, r, d), e, c in zip(typed.get("edge_types", []), edges, cut)
    ]
    starts = np.asarray(typed.get("type_starts", []), dtype=np.int64)
    counts = np.diff(starts, axis=1) if starts.ndim == 2 else np.zeros((0, 0), dtype=np.int64)
    out["types"] = [
        {"type": name, "nodes": int(typed["num_nodes_per_type"][t]), "feature_dim": int(typed["feature_dims"][t]),
         "balance": typed["balance_per_type"][t],
         "per_part": counts[:, t].tolist() if counts.shape[1:] and t < counts.shape[1] else []}
        for t, name in enumerate(typed.get("node_types", []))
    ]
    return out
