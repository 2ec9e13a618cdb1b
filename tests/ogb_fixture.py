"""Tiny offline OGB node-property datasets for tests.

``write_tiny_ogb(root, name)`` writes the raw layout that ``ogb.nodeproppred.NodePropPredDataset``
reads, so that ``NodePropPredDataset(name, root=root)`` (and ``load_dataset(name, root=root)``)
loads it with no network and no interactive prompt:

* ``ROOT/<name with - replaced by _>/RELEASE_v<version>.txt`` (version from ogb's master.csv;
  without it ogb asks on stdin whether to update the dataset),
* csv datasets (ogbn-arxiv, ogbn-products): ``raw/edge.csv.gz``, ``raw/node-feat.csv.gz``,
  ``raw/node-label.csv.gz``, ``raw/num-node-list.csv.gz``, ``raw/num-edge-list.csv.gz`` and each
  "additional node file" of master.csv (``raw/node_year.csv.gz`` for arxiv),
* binary datasets (ogbn-papers100M): ``raw/data.npz`` (``edge_index``, ``num_nodes_list``,
  ``num_edges_list``, ``node_feat``, ``node_year``) and ``raw/node-label.npz`` (``node_label``
  float [N, 1], NaN = unlabelled, like the real papers100M),
* ``split/<split>/{train,valid,test}.csv.gz`` (split name from master.csv: ``time`` for arxiv and
  papers100M, ``sales_ranking`` for products), and an empty ``processed/`` folder.

``write_tiny_ogb_mag(root)`` writes ogbn-mag's heterogeneous raw layout (ogb's
``read_csv_heterograph_raw``, ``read_node_label_hetero``, ``read_nodesplitidx_split_hetero``):
``raw/num-node-dict.csv.gz`` (a header of node types, one row of counts),
``raw/triplet-type-list.csv.gz`` (one ``src,rel,dst`` per line),
``raw/relations/<src>___<rel>___<dst>/{edge,num-edge-list,edge_reltype}.csv.gz``,
``raw/node-feat/paper/{node-feat,node_year}.csv.gz``, ``raw/nodetype-has-label.csv.gz`` and
``raw/node-label/paper/node-label.csv.gz``, ``split/time/nodetype-has-split.csv.gz`` and
``split/time/paper/{train,valid,test}.csv.gz``, ``RELEASE_v2.txt``; the graph comes from
:func:`gnnscale.datasets.generate_synthetic_mag` (without reverse relations, like the real files).

The graph, labels and features come from :func:`gnnscale.datasets.generate_synthetic`
(homophily 0.9, low feature noise), so labels are learnable from features + graph.
Edges are stored like the real datasets: once per undirected edge, in a random direction
for the directed ones (``add_inverse_edge`` False: arxiv, papers100M), canonically for
products (ogb adds the reverse edges itself).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from gnnscale.datasets import generate_synthetic, generate_synthetic_mag
from gnnscale.datasets.typed import relation_edges


def _master() -> dict[str, dict[str, str]]:
    import pandas as pd
    import ogb.nodeproppred

    path = os.path.join(os.path.dirname(ogb.nodeproppred.__file__), "master.csv")
    return pd.read_csv(path, index_col=0, keep_default_na=False).to_dict()


def _write_csv_gz(path: Path, array: np.ndarray, fmt: str) -> None:
    array = np.asarray(array)
    if array.ndim == 1:
        array = array[:, None]
    with gzip.open(path, "wt") as f:
        np.savetxt(f, array, fmt=fmt, delimiter=",")


def write_tiny_ogb(
    root: str | os.PathLike,
    name: str = "ogbn-arxiv",
    num_nodes: int = 200,
    num_features: int = 16,
    num_classes: int = 5,
    seed: int = 0,
) -> str:
    """Write a tiny dataset in OGB's raw layout for ``name`` under ``root``.

    Args:
        root: the OGB root (what is passed as ``root=`` to ogb / load_dataset).
        name: an ogbn name from ogb's master.csv; homogeneous single-task ones
            (ogbn-arxiv, ogbn-products, ogbn-papers100M) are supported.
        num_nodes, num_features, num_classes: sizes; about 6 edges per node.
        seed: seed of everything (graph, features, labels, split).

    Returns:
        The dataset folder ``ROOT/<name with '-' -> '_'>`` as a string.
        For papers100M about 10% of the nodes are unlabelled (NaN) and in no split;
        the labelled nodes are split 60/20/20 at random (train/valid/test).
    """
    meta = _master().get(name)
    if meta is None:
        raise ValueError(f"unknown ogbn name {name!r}")
    if meta["is hetero"] == "True" or int(meta["num tasks"]) != 1:
        raise ValueError(f"{name} is heterogeneous or multi-task; write_tiny_ogb supports single-task homogeneous graphs")
    folder = Path(root) / "_".join(name.split("-"))
    raw = folder / "raw"
    split_dir = folder / "split" / meta["split"]
    for d in (raw, split_dir, folder / "processed"):
        d.mkdir(parents=True, exist_ok=True)
    (folder / f"RELEASE_v{meta['version']}.txt").write_text(f"tiny test copy of {name}\n")

    rng = np.random.default_rng(seed)
    g = generate_synthetic(
        num_nodes=num_nodes,
        avg_degree=min(6.0, (num_nodes - 1) / 2),
        num_classes=num_classes,
        num_features=num_features,
        homophily=0.9,
        feature_noise=0.5,
        seed=seed,
    )
    x = g.x.numpy()
    y = g.y.numpy()
    src, dst = g.edge_index.numpy()
    upper = src < dst
    edges = np.stack([src[upper], dst[upper]])  # each undirected edge once: [2, E]
    if meta["add_inverse_edge"] != "True":
        flip = rng.random(edges.shape[1]) < 0.5
        edges[:, flip] = edges[::-1, flip]
    year = rng.integers(2010, 2021, size=num_nodes)

    labelled = np.ones(num_nodes, dtype=bool)
    if meta["binary"] == "True":  # papers100M: most nodes are unlabelled; keep 90% here
        labelled = rng.random(num_nodes) >= 0.1
    ids = rng.permutation(np.flatnonzero(labelled))
    n_tr, n_va = int(0.6 * ids.size), int(0.2 * ids.size)
    for part, idx in (("train", ids[:n_tr]), ("valid", ids[n_tr : n_tr + n_va]), ("test", ids[n_tr + n_va :])):
        _write_csv_gz(split_dir / f"{part}.csv.gz", np.sort(idx), "%d")

    if meta["binary"] == "True":
        np.savez_compressed(
            raw / "data.npz",
            edge_index=edges.astype(np.int64),
            num_nodes_list=np.array([num_nodes], dtype=np.int64),
            num_edges_list=np.array([edges.shape[1]], dtype=np.int64),
            node_feat=x.astype(np.float32),
            node_year=year[:, None].astype(np.int64),
        )
        label = y.astype(np.float64)[:, None]
        label[~labelled] = np.nan
        np.savez_compressed(raw / "node-label.npz", node_label=label)
    else:
        _write_csv_gz(raw / "edge.csv.gz", edges.T, "%d")
        _write_csv_gz(raw / "node-feat.csv.gz", x, "%.6f")
        _write_csv_gz(raw / "node-label.csv.gz", y, "%d")
        _write_csv_gz(raw / "num-node-list.csv.gz", np.array([num_nodes]), "%d")
        _write_csv_gz(raw / "num-edge-list.csv.gz", np.array([edges.shape[1]]), "%d")
        extra = meta["additional node files"]
        for extra_name in ([] if extra == "None" else extra.split(",")):
            values = year if extra_name == "node_year" else rng.integers(0, 10, size=num_nodes)
            _write_csv_gz(raw / f"{extra_name}.csv.gz", values, "%d")
    return str(folder)


def _write_header_csv_gz(path: Path, header: list[str], row: list) -> None:
    with gzip.open(path, "wt") as f:
        f.write(",".join(header) + "\n" + ",".join(str(v) for v in row) + "\n")


def write_tiny_ogb_mag(
    root: str | os.PathLike,
    num_nodes: int = 3000,
    num_features: int = 16,
    num_classes: int = 5,
    seed: int = 0,
):
    """Write a tiny ogbn-mag in OGB's heterogeneous raw layout under ``root`` (see the module docstring).

    Args:
        root: the OGB root (what is passed as ``root=`` to ogb / load_dataset).
        num_nodes: total nodes of the four types (paper, author, institution, field_of_study in
            ogbn-mag's proportions, :func:`gnnscale.datasets.mag.type_counts`).
        num_features, num_classes, seed: of the generated graph.

    Returns:
        ``(folder, data)``: the dataset folder ``ROOT/ogbn_mag`` and the typed ``Data`` written
        (node types paper, author, institution, field_of_study; the 4 relations of ogbn-mag;
        its train/val/test masks are the stored split).
    """
    meta = _master()["ogbn-mag"]
    data = generate_synthetic_mag(num_nodes=num_nodes, num_features=num_features, num_classes=num_classes,
                                  undirected=False, seed=seed)
    folder = Path(root) / "ogbn_mag"
    raw = folder / "raw"
    split_dir = folder / "split" / meta["split"]
    for d in (raw, split_dir / "paper", folder / "processed", raw / "node-feat" / "paper", raw / "node-label" / "paper"):
        d.mkdir(parents=True, exist_ok=True)
    (folder / f"RELEASE_v{meta['version']}.txt").write_text("tiny test copy of ogbn-mag\n")

    types = sorted(data.node_types)  # ogb lists the types (and the relations) sorted by name
    counts = {t: int(data.type_ptr[i + 1] - data.type_ptr[i]) for i, t in enumerate(data.node_types)}
    _write_header_csv_gz(raw / "num-node-dict.csv.gz", types, [counts[t] for t in types])
    triplets = sorted(data.edge_types)
    with gzip.open(raw / "triplet-type-list.csv.gz", "wt") as f:
        f.write("".join(",".join(et) + "\n" for et in triplets))
    edges = relation_edges(data)
    for i, et in enumerate(triplets):
        d = raw / "relations" / "___".join(et)
        d.mkdir(parents=True, exist_ok=True)
        ei = edges[et].numpy()
        _write_csv_gz(d / "edge.csv.gz", ei.T, "%d")
        _write_csv_gz(d / "num-edge-list.csv.gz", np.array([ei.shape[1]]), "%d")
        _write_csv_gz(d / "edge_reltype.csv.gz", np.full(ei.shape[1], i), "%d")

    p = data.node_types.index("paper")
    lo, hi = int(data.type_ptr[p]), int(data.type_ptr[p + 1])
    rng = np.random.default_rng(seed)
    _write_csv_gz(raw / "node-feat" / "paper" / "node-feat.csv.gz", data.x_dict["paper"].numpy(), "%.6f")
    _write_csv_gz(raw / "node-feat" / "paper" / "node_year.csv.gz", rng.integers(2010, 2020, size=hi - lo), "%d")
    _write_csv_gz(raw / "node-label" / "paper" / "node-label.csv.gz", data.y[lo:hi].numpy(), "%d")
    has = [str(t == "paper") for t in types]
    _write_header_csv_gz(raw / "nodetype-has-label.csv.gz", types, has)
    _write_header_csv_gz(split_dir / "nodetype-has-split.csv.gz", types, has)
    for part, mask in (("train", data.train_mask), ("valid", data.val_mask), ("test", data.test_mask)):
        _write_csv_gz(split_dir / "paper" / f"{part}.csv.gz", np.flatnonzero(mask[lo:hi].numpy()), "%d")
    return str(folder), data


# ogbn-proteins' species (NCBI taxonomy ids, as its raw/node_species.csv.gz stores them)
PROTEIN_SPECIES = (3702, 4932, 6239, 7227, 7955, 9606, 10090, 511145)


def write_tiny_ogbn_proteins(
    root: str | os.PathLike,
    num_nodes: int = 400,
    num_tasks: int = 112,
    num_edge_features: int = 8,
    duplicate_pairs: int = 0,
    seed: int = 0,
) -> str:
    """Write a tiny ogbn-proteins in OGB's raw layout under ``root`` (ogb's ``read_csv_graph_raw``
    with master.csv's proteins row: ``add_inverse_edge`` True, no node features, edge features,
    additional node file ``node_species``, split ``species``).

    Files: ``ROOT/ogbn_proteins/RELEASE_v1.txt``; ``raw/edge.csv.gz`` (each undirected edge once,
    ``u < v``: ogb inserts the reverse edges itself), ``raw/edge-feat.csv.gz`` (float [E, De] in
    [0, 1], 3 decimals like the real association scores), ``raw/node-label.csv.gz`` (int 0/1
    [N, T]), ``raw/node_species.csv.gz`` (one taxonomy id per node), ``raw/num-node-list.csv.gz``,
    ``raw/num-edge-list.csv.gz``, ``split/species/{train,valid,test}.csv.gz`` (the nodes of the
    last species -> test, of the one before -> valid, of the others -> train, like the real
    split by species), an empty ``processed/``.

    The graph comes from :func:`gnnscale.datasets.generate_synthetic` (homophily 0.9, its classes
    = communities): a node's labels follow its community's label profile (each label on with
    probability 0.7 or 0.05), an edge's features its two communities (plus noise), so the labels
    are learnable from the aggregated edge features. ``duplicate_pairs`` > 0 also stores that many
    edges a second time reversed (``v, u``): after ogb's inversion each such pair appears twice in
    each direction (a loader that drops duplicates drops 2 per pair).

    Returns:
        The dataset folder ``ROOT/ogbn_proteins`` as a string.
    """
    meta = _master()["ogbn-proteins"]
    folder = Path(root) / "ogbn_proteins"
    raw = folder / "raw"
    split_dir = folder / "split" / meta["split"]
    for d in (raw, split_dir, folder / "processed"):
        d.mkdir(parents=True, exist_ok=True)
    (folder / f"RELEASE_v{meta['version']}.txt").write_text("tiny test copy of ogbn-proteins\n")

    rng = np.random.default_rng(seed)
    communities = 6
    g = generate_synthetic(num_nodes=num_nodes, avg_degree=min(8.0, (num_nodes - 1) / 2), num_classes=communities,
                           num_features=2, homophily=0.9, feature_noise=0.5, seed=seed)
    community = g.y.numpy()
    src, dst = g.edge_index.numpy()
    upper = src < dst
    edges = np.stack([src[upper], dst[upper]], axis=1)  # [E, 2], each undirected edge once
    if duplicate_pairs:
        pick = rng.choice(edges.shape[0], size=duplicate_pairs, replace=False)
        edges = np.concatenate([edges, edges[pick][:, ::-1]])

    profile = np.where(rng.random((communities, num_tasks)) < 0.3, 0.7, 0.05)
    labels = (rng.random((num_nodes, num_tasks)) < profile[community]).astype(np.int64)
    pair_mean = rng.random((communities, communities, num_edge_features))
    pair_mean = (pair_mean + pair_mean.transpose(1, 0, 2)) / 2  # the same for (u, v) and (v, u)
    feat = pair_mean[community[edges[:, 0]], community[edges[:, 1]]] + 0.1 * rng.standard_normal(
        (edges.shape[0], num_edge_features))
    feat = np.round(np.clip(feat, 0.001, 1.0), 3)

    species = rng.choice(np.array(PROTEIN_SPECIES), size=num_nodes)
    species[:len(PROTEIN_SPECIES)] = PROTEIN_SPECIES  # every species present
    test = np.flatnonzero(species == PROTEIN_SPECIES[-1])
    valid = np.flatnonzero(species == PROTEIN_SPECIES[-2])
    train = np.flatnonzero(~np.isin(species, PROTEIN_SPECIES[-2:]))

    _write_csv_gz(raw / "edge.csv.gz", edges, "%d")
    _write_csv_gz(raw / "edge-feat.csv.gz", feat, "%.3f")
    _write_csv_gz(raw / "node-label.csv.gz", labels, "%d")
    _write_csv_gz(raw / "node_species.csv.gz", species, "%d")
    _write_csv_gz(raw / "num-node-list.csv.gz", np.array([num_nodes]), "%d")
    _write_csv_gz(raw / "num-edge-list.csv.gz", np.array([edges.shape[0]]), "%d")
    for part, idx in (("train", train), ("valid", valid), ("test", test)):
        _write_csv_gz(split_dir / f"{part}.csv.gz", idx, "%d")
    return str(folder)
