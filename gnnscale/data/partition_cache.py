"""The partition cache of ``--dataset`` runs: a dataset cut into parts once, reused by later runs.
An in-memory PyG graph (``gnnscale.train(data)``) is cached as a dataset named by its content digest.

The folder is named by the dataset, the method, the part count and a hash of every option that
changes the cut (root, balance, imbalance, seed, method options, ``--edge-to-node``) and of the
absolute location of the input (a relative ``dir:graphs/mine`` is another graph in another
working folder: :func:`~gnnscale.datasets.inputs.input_location`). A folder with a complete
``meta.json`` of the right part count (and the same ``edge_to_node``) is reused while the input's
identity recorded there (``meta["input"]``: each input file's size, modification time and digest,
:func:`~gnnscale.datasets.inputs.input_identity`) still holds; a changed input is cut again into
the same folder, after one line saying what changed. Torch-free until it partitions.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path

from gnnscale.datasets.inputs import identity_changes, input_identity, input_location
from gnnscale.errors import GnnscaleError

log = logging.getLogger("gnnscale")


def cache_folder(dataset: str, parts: int, root: str | None = None, cache_dir: str | None = None,
                 method: str = "metis", seed: int = 0, balance=("nodes", "train"), imbalance: float = 0.05,
                 method_opt=(), link: tuple | None = None, edge_to_node: str | None = None,
                 feature_dtype: str = "float32") -> Path:
    """Where the cut of ``dataset`` into ``parts`` parts with these options is kept (``link``:
    the link split's ``(edge_split, disjoint_train_ratio)``, None without one; ``edge_to_node``:
    ``mean``/``sum`` aggregated in-edge features appended to ``x``, None: not; ``feature_dtype``:
    the stored precision of the rows). A dataset that reads files is keyed on their absolute
    location too (a relative path resolved against the working folder)."""
    base = cache_dir or os.environ.get("GNNSCALE_CACHE") or os.path.join(Path.home(), ".cache", "gnnscale", "partitions")
    key = [dataset, os.path.abspath(root) if root else None, method, sorted(balance), imbalance, seed,
           sorted(map(str, method_opt))]
    key = key if link is None else key + [list(map(str, link))]
    key = key if edge_to_node is None else key + [f"edge_to_node={edge_to_node}"]
    key = key if feature_dtype == "float32" else key + [f"feature_dtype={feature_dtype}"]  # older folders keep their names
    where = input_location(dataset, root)  # None: a generated or in-memory graph
    key = json.dumps(key if where is None else key + [f"input={where[0]}"])
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", dataset)[:60]
    return Path(base) / f"{slug}-{method}-{parts}parts-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def prepare_parts(dataset, parts: int, root: str | None = None, cache_dir: str | None = None,
                  method: str = "metis", seed: int = 0, balance=("nodes", "train"), imbalance: float = 0.05,
                  method_opt=(), link: tuple | None = None, edge_to_node: str | None = None,
                  feature_dtype: str = "float32") -> str:
    """The cached partition of ``dataset`` (a name, or an in-memory PyG graph: :func:`inmemory_name`)
    into ``parts`` parts (made on first use); its folder. ``link``: ``(edge_split or None, disjoint_train_ratio)``: the dataset prepared for link
    prediction (:func:`link_data`). ``edge_to_node``: ``mean``/``sum``: each node's aggregated
    in-edge features appended to ``x`` first (:func:`~gnnscale.datasets.edge_to_node.edge_to_node`,
    recorded as ``meta["edge_to_node"]``). The identity of the files read is recorded as
    ``meta["input"]``; a cached folder whose input changed since is cut again."""
    from gnnscale.partitioning import load_meta

    graph = None
    if not isinstance(dataset, str):  # an in-memory PyG graph: named by its content
        graph, dataset = dataset, inmemory_name(dataset)
    out = cache_folder(dataset, parts, root, cache_dir, method, seed, balance, imbalance, method_opt, link,
                       edge_to_node, feature_dtype)
    if (out / "meta.json").exists():
        try:
            meta = load_meta(out)
            if meta["num_parts"] == parts and meta.get("edge_to_node") == edge_to_node and \
                    meta.get("feature_dtype", "float32") == feature_dtype:
                changes = identity_changes(meta.get("input"), None if graph is not None else
                                           input_identity(dataset, root))
                if not changes:
                    log.info("using cached partition %s", out)
                    return str(out)
                log.info("re-partitioning %s: %s since the cached partition %s was cut", dataset, in_words(changes),
                         out)
        except GnnscaleError:
            pass
    if graph is None:
        from gnnscale.datasets.loader import check_dataset_name

        check_dataset_name(dataset)  # an unknown name or option: its one line
    from gnnscale.partitioning import partition_graph

    if graph is None:
        from gnnscale.datasets import load_dataset

        data = load_dataset(dataset, root=root)
    else:
        from gnnscale.datasets.inmemory import from_pyg

        data = from_pyg(graph)
    if edge_to_node is not None:
        from gnnscale.datasets.edge_to_node import edge_to_node as aggregate

        check_edge_to_node(edge_to_node, link is not None or getattr(data, "link_split", None) is not None)
        data = aggregate(data, edge_to_node)
    if link is not None:
        data = link_data(data, *link, seed=seed)
    partition_graph(data, parts, out, method=method, balance=list(balance), imbalance=imbalance, seed=seed,
                    dataset=dataset if graph is None else data.name, options=dict(method_opt),
                    extra_meta={**edge_to_node_meta(edge_to_node), **({} if graph is not None else
                                                                      input_meta(dataset, root))},
                    feature_dtype=feature_dtype)
    return str(out)


def in_words(changes: list[str], most: int = 3) -> str:
    """What changed in the input, in one phrase (the first ``most`` changes, then a count)."""
    more = len(changes) - most
    return ", ".join(changes[:most]) + (f" and {more} more file(s) changed" if more > 0 else "")


def inmemory_name(graph) -> str:
    """The cache name of an in-memory PyG graph (``Data``, ``HeteroData``, RandomLinkSplit's
    triple): ``inmemory-`` and 16 hex digits of its content digest (every attribute's bytes:
    :func:`~gnnscale.datasets.inmemory.content_digest`), after its checks (one line each)."""
    from gnnscale.datasets.inmemory import check_graph, content_digest

    check_graph(graph)
    return f"inmemory-{content_digest(graph)[:16]}"


def check_edge_to_node(edge_to_node: str | None, link: bool) -> None:
    """Refuse ``--edge-to-node`` with a link split: the aggregate would read the held-out
    validation and test edges' features into the nodes (a leak)."""
    if edge_to_node is not None and link:
        raise GnnscaleError(f"--edge-to-node {edge_to_node} does not apply to a link-prediction split yet: it would "
                            "aggregate the features of the held-out validation and test edges into their nodes; leave "
                            "it out with --task link / --edge-split")


def input_meta(dataset: str, root: str | None) -> dict:
    """What a partition's meta.json records of the files ``dataset`` was read from (``input``:
    :func:`~gnnscale.datasets.inputs.input_identity`, taken after the load, which may have written
    ogb's processed/ cache); nothing for a generated graph."""
    identity = input_identity(dataset, root)
    return {} if identity is None else {"input": identity}


def edge_to_node_meta(edge_to_node: str | None) -> dict:
    """What a partition's meta.json records of ``--edge-to-node`` (nothing without it)."""
    return {} if edge_to_node is None else {"edge_to_node": str(edge_to_node)}


DEFAULT_EDGE_SPLIT = "0.85,0.05,0.10"


def link_data(data, edge_split: str | None, disjoint_train_ratio: float = 0.0, relation: str | None = None,
              seed: int = 0):
    """``data`` prepared for link prediction: an ``ogbl-*`` dataset as it comes (its own split;
    ``edge_split`` must then be None), any other split at random by ``edge_split`` (default
    :data:`DEFAULT_EDGE_SPLIT`) with ``disjoint_train_ratio`` of the training edges held out of
    message passing; a typed graph's split is of one ``relation`` (``--link-relation``). Raises a
    GnnscaleError (one line) for a split that cannot be."""
    from gnnscale.datasets.link_split import parse_edge_split, random_link_split

    name = getattr(data, "name", None) or "the dataset"
    if getattr(data, "link_split", None) is not None:
        if edge_split is not None or disjoint_train_ratio or relation:
            raise GnnscaleError(f"{name} brings its own link split; leave --edge-split, --disjoint-train-ratio and "
                                "--link-relation out")
        return data
    _, val, test = parse_edge_split(edge_split or DEFAULT_EDGE_SPLIT)
    typed = getattr(data, "edge_types", None) is not None
    if typed:
        from gnnscale.datasets.relation_split import random_relation_split

        if not relation:
            names = ", ".join(r for _, r, _ in data.edge_types)
            raise GnnscaleError(f"{name} is a typed graph: name the relation to predict with --link-relation (one of "
                                f"{names})")
        if disjoint_train_ratio:
            raise GnnscaleError("--disjoint-train-ratio does not apply to a typed graph's relation split yet; leave it "
                                "out")
        return random_relation_split(data, relation, val=val, test=test, seed=seed)
    if relation:
        raise GnnscaleError(f"--link-relation {relation} applies to typed graphs, and {name} has one relation; leave "
                            "it out")
    return random_link_split(data, val=val, test=test, seed=seed, disjoint_train_ratio=disjoint_train_ratio)
