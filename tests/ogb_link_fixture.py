"""Tiny offline OGB link-property datasets (ogbl-collab, ogbl-citation2, ogbl-ddi) for tests.

``write_tiny_ogbl(root, name)`` writes the raw layout that ``ogb.linkproppred.LinkPropPredDataset``
reads (ogb's ``read_csv_graph_raw`` and ``get_edge_split``), so that ``load_dataset(name, root=root)``
loads it with no network and no interactive prompt:

* ``ROOT/<name with - replaced by _>/RELEASE_v<version>.txt`` (version from ogb's linkproppred
  master.csv; without it ogb asks on stdin whether to update the dataset) and an empty ``processed/``;
* ``raw/edge.csv.gz`` (the **training** edges only, one row ``u,v`` per edge, as in the real
  datasets: OGB's graph object holds the training edges), ``raw/num-node-list.csv.gz``,
  ``raw/num-edge-list.csv.gz``, ``raw/node-feat.csv.gz`` and the "additional node/edge files" of
  master.csv: ``raw/edge_weight.csv.gz`` and ``raw/edge_year.csv.gz`` (one row per raw edge) for
  collab, ``raw/node_year.csv.gz`` for citation2 (ddi: no node features, no additional files);
* ``split/<split>/{train,valid,test}.pt`` (split ``time``; ddi ``target``), ``torch.save`` of dicts:
  collab ``{"edge": int64 [n, 2], "weight": [n], "year": [n]}`` plus ``"edge_neg"`` int64 [m, 2]
  for valid/test (stored as numpy arrays, like the real files; ddi: ``edge``/``edge_neg`` only);
  citation2 ``{"source_node": [n], "target_node": [n]}`` plus ``"target_node_neg"`` int64 [n, K]
  for valid/test (stored as tensors).

The graph comes from :func:`gnnscale.datasets.generate_synthetic`. collab: undirected, its unique
pairs split by a "year" (train <= 2017, valid 2018, test 2019, about 80/10/10), 5% of the training
pairs repeated with another year (collab repeats collaborations; ogb adds the reverse edges
itself); ddi: the same 80/10/10 without years, repeats, weights or features. citation2: every
pair in a random direction; of each node with at least two out-edges, one (the first in a
shuffled order) is held out with probability 1/2, for valid or test (so the train graph never
contains a valid/test edge, in either direction), with
``K`` random negative destinations per valid/test source.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from gnnscale.datasets import generate_synthetic
from ogb_fixture import _write_csv_gz  # OGB's raw csv.gz layout, as the ogbn fixture writes it


def _master() -> dict[str, dict[str, str]]:
    import ogb.linkproppred
    import pandas as pd

    path = os.path.join(os.path.dirname(ogb.linkproppred.__file__), "master.csv")
    return pd.read_csv(path, index_col=0, keep_default_na=False).to_dict()


def _non_edges(rng: np.random.Generator, n: int, m: int, keys: np.ndarray) -> np.ndarray:
    """``m`` random pairs [m, 2] (u != v) that are no edge of ``keys`` (u*n+v, both directions listed)."""
    out = np.empty((0, 2), dtype=np.int64)
    while out.shape[0] < m:
        cand = rng.integers(0, n, size=(2 * m, 2))
        ok = (cand[:, 0] != cand[:, 1]) & ~np.isin(cand[:, 0] * n + cand[:, 1], keys)
        out = np.concatenate([out, cand[ok]])
    return out[:m]


def write_tiny_ogbl(
    root: str | os.PathLike,
    name: str = "ogbl-collab",
    num_nodes: int = 300,
    num_features: int = 16,
    neg_per_source: int = 1000,
    seed: int = 0,
) -> tuple[str, dict]:
    """Write a tiny ``ogbl-collab`` or ``ogbl-citation2`` in OGB's raw layout under ``root``.

    Args:
        root: the OGB root (what is passed as ``root=`` to ogb / load_dataset).
        name: ``"ogbl-collab"``, ``"ogbl-citation2"`` or ``"ogbl-ddi"``.
        num_nodes, num_features: sizes (about 6 edges per node).
        neg_per_source: K, citation2's negatives per valid/test source (1000 like the real data).
        seed: seed of everything.

    Returns:
        ``(folder, split)``: the dataset folder ``ROOT/ogbl_<name>`` and the split written
        (``{"train"|"valid"|"test": {field: int64 numpy array}}``, fields as in the files).
    """
    meta = _master().get(name)
    if name not in ("ogbl-collab", "ogbl-citation2", "ogbl-ddi") or meta is None:
        raise ValueError(f"write_tiny_ogbl supports ogbl-collab, ogbl-citation2 and ogbl-ddi, not {name!r}")
    folder = Path(root) / "_".join(name.split("-"))
    raw, split_dir = folder / "raw", folder / "split" / meta["split"]
    for d in (raw, split_dir, folder / "processed"):
        d.mkdir(parents=True, exist_ok=True)
    (folder / f"RELEASE_v{meta['version']}.txt").write_text(f"tiny test copy of {name}\n")

    rng = np.random.default_rng(seed)
    g = generate_synthetic(num_nodes=num_nodes, avg_degree=6.0, num_classes=4, num_features=num_features,
                           homophily=0.8, seed=seed)
    src, dst = g.edge_index.numpy()
    upper = src < dst
    pairs = np.stack([src[upper], dst[upper]], axis=1)  # [P, 2], each undirected pair once
    all_keys = np.concatenate([pairs[:, 0] * num_nodes + pairs[:, 1], pairs[:, 1] * num_nodes + pairs[:, 0]])
    n = num_nodes

    if name == "ogbl-ddi":
        part_of = rng.choice(3, size=len(pairs), p=[0.8, 0.1, 0.1])
        split = {"train": {"edge": pairs[part_of == 0]}}
        for i, part in ((1, "valid"), (2, "test")):
            pos = pairs[part_of == i]
            split[part] = {"edge": pos, "edge_neg": _non_edges(rng, n, 2 * len(pos), all_keys)}
        raw_edges = split["train"]["edge"]
        for part, d in split.items():
            torch.save({k: np.asarray(v, dtype=np.int64) for k, v in d.items()}, split_dir / f"{part}.pt")
    elif name == "ogbl-collab":
        year = rng.choice([2015, 2016, 2017, 2018, 2019], size=len(pairs), p=[0.3, 0.25, 0.25, 0.1, 0.1])
        parts = {"train": year <= 2017, "valid": year == 2018, "test": year == 2019}
        train_edge, train_year = pairs[parts["train"]], year[parts["train"]]
        rep = rng.random(len(train_edge)) < 0.05  # repeated collaborations, another year
        train_edge = np.concatenate([train_edge, train_edge[rep]])
        train_year = np.concatenate([train_year, np.full(int(rep.sum()), 2017) - (train_year[rep] == 2017)])
        weight = rng.integers(1, 4, size=len(train_edge))
        split = {"train": {"edge": train_edge, "weight": weight, "year": train_year}}
        for part in ("valid", "test"):
            pos = pairs[parts[part]]
            split[part] = {"edge": pos, "weight": np.ones(len(pos), dtype=np.int64),
                           "year": year[parts[part]], "edge_neg": _non_edges(rng, n, 2 * len(pos), all_keys)}
        raw_edges = train_edge
        _write_csv_gz(raw / "edge_weight.csv.gz", weight, "%d")
        _write_csv_gz(raw / "edge_year.csv.gz", train_year, "%d")
        for part, d in split.items():
            torch.save({k: np.asarray(v, dtype=np.int64) for k, v in d.items()}, split_dir / f"{part}.pt")
    else:
        flip = rng.random(len(pairs)) < 0.5
        edges = np.where(flip[:, None], pairs[:, ::-1], pairs)  # directed citations [P, 2]
        order = rng.permutation(len(edges))
        edges = edges[order]
        # one held-out out-edge per source that has >= 2 of them: the first in the shuffled order
        srcs = edges[:, 0]
        first = np.zeros(len(edges), dtype=bool)
        sorted_idx = np.argsort(srcs, kind="stable")
        starts = np.r_[True, srcs[sorted_idx][1:] != srcs[sorted_idx][:-1]]
        first[sorted_idx[starts]] = True
        out_deg = np.bincount(srcs, minlength=n)
        held = first & (out_deg[srcs] >= 2) & (rng.random(len(edges)) < 0.5)
        to_valid = held & (rng.random(len(edges)) < 0.5)
        masks = {"train": ~held, "valid": to_valid, "test": held & ~to_valid}
        split = {}
        for part, m in masks.items():
            split[part] = {"source_node": edges[m, 0].astype(np.int64), "target_node": edges[m, 1].astype(np.int64)}
            if part != "train":
                split[part]["target_node_neg"] = rng.integers(0, n, size=(int(m.sum()), neg_per_source))
        raw_edges = edges[masks["train"]]
        _write_csv_gz(raw / "node_year.csv.gz", rng.integers(2000, 2021, size=n), "%d")
        for part, d in split.items():
            torch.save({k: torch.from_numpy(np.asarray(v, dtype=np.int64)) for k, v in d.items()},
                       split_dir / f"{part}.pt")

    _write_csv_gz(raw / "edge.csv.gz", raw_edges, "%d")
    _write_csv_gz(raw / "num-node-list.csv.gz", np.array([n]), "%d")
    _write_csv_gz(raw / "num-edge-list.csv.gz", np.array([len(raw_edges)]), "%d")
    if meta["has_node_attr"] == "True":
        _write_csv_gz(raw / "node-feat.csv.gz", g.x.numpy(), "%.6f")
    return str(folder), {p: {k: np.asarray(v, dtype=np.int64) for k, v in d.items()} for p, d in split.items()}
